//! `ts-query`'s script: TSBS's question shapes, asked of series drawn from
//! the space `ts-ingest` writes, over ranges within the data written.

use std::time::SystemTime;

use loadcell_core::ts::{Series, TimeRange, TsConn, TsQuery};
use loadcell_core::DriverError;
use loadcell_engine::{Category, Ctx, OpSpec, Script, SessionInfo};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::series::SeriesSpace;
use super::{Timing, TsOptions};
use crate::distribution::{Distribution, RandParams, RandType};

/// Most tags a series may have: a query's tags are a slice of a stack
/// array, not a vector per query.
pub const MAX_TAGS: usize = 32;

const HOUR_NS: i64 = 3_600_000_000_000;
const MINUTE_NS: i64 = 60_000_000_000;

/// The questions, named as `--queries` takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryKind {
    /// The last point of a series' field.
    LastPoint,
    /// A series' field's mean over an hour by minute (TSBS's
    /// single-groupby-1-1-1 shape).
    RangeMean,
    /// A field's mean over an hour for each value of a tag, across every
    /// series (TSBS's groupby shapes).
    GroupBy,
}

impl QueryKind {
    pub const NAMES: &'static str = "last-point, range-mean, group-by";

    pub fn parse(name: &str) -> Option<QueryKind> {
        Some(match name {
            "last-point" => QueryKind::LastPoint,
            "range-mean" => QueryKind::RangeMean,
            "group-by" => QueryKind::GroupBy,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            QueryKind::LastPoint => "last-point",
            QueryKind::RangeMean => "range-mean",
            QueryKind::GroupBy => "group-by",
        }
    }
}

pub struct QueryScript {
    /// One operation per kind asked, each timed apart (TSBS reports per
    /// query type).
    ops: Vec<OpSpec>,
    kinds: Vec<QueryKind>,
    space: SeriesSpace,
    series: Distribution,
    /// Back-fill: where the points are; `None`: the last hour.
    written: Option<TimeRange>,
}

/// A session's generator and tag buffer.
pub struct QuerySession {
    rng: SmallRng,
    tags: Vec<u8>,
}

impl QueryScript {
    pub(super) fn new(
        opts: &TsOptions,
        kinds: &[QueryKind],
        distribution: RandType,
    ) -> QueryScript {
        QueryScript {
            ops: kinds
                .iter()
                .map(|k| OpSpec {
                    name: k.as_str(),
                    category: Category::Read,
                })
                .collect(),
            kinds: kinds.to_vec(),
            space: opts.space.clone(),
            series: Distribution::new(
                distribution,
                RandParams::default(),
                0,
                opts.space.series - 1,
            ),
            written: match opts.timing {
                Timing::BackFill { start_ns, end_ns } => Some(TimeRange { start_ns, end_ns }),
                Timing::RealTime => None,
            },
        }
    }

    /// An hour (or all there is, if less) at a random place in the data.
    pub(super) fn window(&self, rng: &mut SmallRng) -> TimeRange {
        let data = self.written.unwrap_or_else(|| {
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as i64);
            TimeRange {
                start_ns: now - HOUR_NS,
                end_ns: now,
            }
        });
        let span = data.end_ns - data.start_ns;
        if span <= HOUR_NS {
            return data;
        }
        let start_ns = data.start_ns + rng.random_range(0..=span - HOUR_NS);
        TimeRange {
            start_ns,
            end_ns: start_ns + HOUR_NS,
        }
    }
}

impl<C: TsConn> Script<C> for QueryScript {
    type Session = QuerySession;

    fn ops(&self) -> &[OpSpec] {
        &self.ops
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, _conn: &mut C, session: SessionInfo) -> Result<QuerySession, DriverError> {
        Ok(QuerySession {
            rng: SmallRng::seed_from_u64(session.seed),
            tags: self.space.tag_buffer(),
        })
    }

    async fn event(
        &self,
        conn: &mut C,
        session: &mut QuerySession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let QuerySession { rng, tags } = session;
        let kind = rng.random_range(0..self.kinds.len());
        let space = &self.space;
        space.write_tags(self.series.sample(rng), tags);
        let mut pairs = [("", ""); MAX_TAGS];
        for (pair, tag) in pairs.iter_mut().zip(space.tags(tags)) {
            *pair = tag;
        }
        let measurement = &space.measurements[0];
        let series = Series {
            measurement: &measurement.name,
            tags: &pairs[..space.tag_count()],
        };
        let field = &measurement.fields[0];
        let query = match self.kinds[kind] {
            QueryKind::LastPoint => TsQuery::LastPoint { series, field },
            QueryKind::RangeMean => TsQuery::RangeMean {
                series,
                field,
                range: self.window(rng),
                step_ns: MINUTE_NS,
            },
            QueryKind::GroupBy => TsQuery::GroupBy {
                measurement: &measurement.name,
                field,
                tag: space.tag_key(space.group_tag()),
                range: self.window(rng),
            },
        };
        let rows = ctx.op(kind, conn.query(&query)).await?;
        ctx.items(kind, rows);
        if rows == 0 {
            ctx.count("no_rows", 1);
        }
        Ok(())
    }
}
