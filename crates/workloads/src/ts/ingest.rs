//! `ts-ingest`'s script, and the check after it.
//!
//! Series are cut into groups of consecutive indices, at least one per
//! session; a request is one or more rounds of one group (a point of each
//! of its series, per measurement, per round). A session leases a group
//! for the request (an atomic flag, not a lock: a group that is busy is
//! skipped), so no two sessions ever write one series at once and each
//! series' points go out in time order, as Prometheus requires. A group's round count is
//! all `verify` needs to know what each of its series was sent.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use loadcell_core::ts::{Series, StoredPoints, TimeRange, TsConn};
use loadcell_core::DriverError;
use loadcell_engine::{Category, Ctx, OpSpec, Script, SessionInfo};
use loadcell_record::result::Verification;
use rand::rngs::SmallRng;
use rand::SeedableRng;

use super::series::{SeriesSpace, Values};
use super::{Timing, TsOptions};
use crate::search::Failures;

/// One millisecond: the finest precision every protocol keeps
/// (Prometheus's), so real-time points of a series are at least this far
/// apart.
const MS: i64 = 1_000_000;

/// How the series are cut into requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Series per group.
    pub group_size: u64,
    pub groups: u64,
    /// Rounds of a group per request.
    pub rounds_per_request: u64,
}

impl Layout {
    /// Groups of up to `points_per_request / measurements` series, and no
    /// more than a `sessions`th of them, so that every session has a group
    /// to write while there are as many series as sessions. A group
    /// smaller than a request gets several rounds per request, so requests
    /// still carry about `points_per_request` points.
    pub fn new(series: u64, measurements: u64, points_per_request: u64, sessions: u64) -> Layout {
        let per_request = points_per_request / measurements;
        let group_size = per_request
            .min(series.div_ceil(sessions.max(1)))
            .clamp(1, series);
        Layout {
            group_size,
            groups: series.div_ceil(group_size),
            rounds_per_request: (points_per_request / (group_size * measurements)).max(1),
        }
    }

    /// Requests that write `points_per_series` points to every series.
    pub fn requests(&self, points_per_series: u64) -> u64 {
        self.groups * points_per_series.div_ceil(self.rounds_per_request)
    }
}

/// A group's state, shared by the sessions.
#[derive(Debug, Default)]
struct Group {
    busy: AtomicBool,
    /// Rounds sent: each of the group's series was sent this many points.
    rounds: AtomicU64,
    /// Real time: the timestamp of the last round sent.
    last_ns: AtomicI64,
}

/// A group leased for one request; dropping it (the request done, failed
/// or cancelled) frees the group.
pub(super) struct Lease<'a> {
    group: &'a Group,
    index: u64,
    rounds: std::ops::Range<u64>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        self.group.busy.store(false, Ordering::Release);
    }
}

pub(super) enum Claim<'a> {
    Lease(Lease<'a>),
    /// Every group with rounds left is being written by another session.
    Wait,
    /// Every series has all its points (back-fill).
    Done,
}

/// What the run's points became, across sessions: one add per request.
#[derive(Debug, Default)]
pub(super) struct Tally {
    /// Series of the first measurement the database held before the run.
    before: AtomicU64,
    pub(super) sent: AtomicU64,
    pub(super) answered: AtomicU64,
    pub(super) failed: AtomicU64,
}

pub struct IngestScript {
    ops: [OpSpec; 1],
    pub(super) space: SeriesSpace,
    /// Each measurement's first field's number, for [`Values`].
    first_fields: Vec<u64>,
    values: Values,
    /// The run's seed: values' and the spot checks' sample's.
    seed: u64,
    layout: Layout,
    /// Back-fill: points per series, and the first one's timestamp.
    points_per_series: Option<u64>,
    start_ns: i64,
    interval_ns: i64,
    groups: Box<[Group]>,
    /// Where the next claim starts looking: requests go round the groups.
    next: AtomicU64,
    pub(super) tally: Tally,
}

/// A session's reused tag buffer and failed points.
pub struct IngestSession {
    tags: Vec<u8>,
    failures: Failures,
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// The class of a failed point's error.
pub const POINT_FAILED: &str = "point failed";
/// The counter of points written over a transport that acknowledges none
/// (TCP): sent, not known stored, until the check after the run.
pub const UNACKNOWLEDGED: &str = "points_unacknowledged";

impl IngestScript {
    pub(super) fn new(opts: &TsOptions, seed: u64) -> IngestScript {
        let space = opts.space.clone();
        let layout = opts.layout();
        let (points_per_series, start_ns) = match opts.timing {
            Timing::BackFill { start_ns, .. } => (opts.points_per_series(), start_ns),
            // Real-time points are all later than this.
            Timing::RealTime => (None, now_ns() / MS * MS),
        };
        IngestScript {
            ops: [OpSpec {
                name: "write",
                category: Category::Write,
            }],
            first_fields: (0..space.measurements.len())
                .map(|m| space.first_field(m))
                .collect(),
            space,
            values: Values::new(seed),
            seed,
            layout,
            points_per_series,
            start_ns,
            interval_ns: opts.interval_ns,
            groups: (0..layout.groups).map(|_| Group::default()).collect(),
            next: AtomicU64::new(0),
            tally: Tally::default(),
        }
    }

    pub(super) fn set_before(&self, series: u64) {
        self.tally.before.store(series, Ordering::Relaxed);
    }

    fn rounds_left(&self, sent: u64) -> u64 {
        self.points_per_series
            .map_or(u64::MAX, |p| p.saturating_sub(sent))
    }

    /// Leases the next group with rounds left that no session is writing.
    pub(super) fn claim(&self) -> Claim<'_> {
        let count = self.layout.groups;
        let start = self.next.fetch_add(1, Ordering::Relaxed) % count;
        let mut busy = false;
        for i in 0..count {
            let index = (start + i) % count;
            let group = &self.groups[index as usize];
            if self.rounds_left(group.rounds.load(Ordering::Relaxed)) == 0 {
                continue;
            }
            if group
                .busy
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                busy = true;
                continue;
            }
            let first = group.rounds.load(Ordering::Relaxed);
            let rounds = self.rounds_left(first).min(self.layout.rounds_per_request);
            let lease = Lease {
                group,
                index,
                rounds: first..first + rounds,
            };
            if rounds > 0 {
                group.rounds.store(first + rounds, Ordering::Relaxed);
                return Claim::Lease(lease);
            }
        }
        if busy {
            Claim::Wait
        } else {
            Claim::Done
        }
    }

    /// The series of group `index`.
    fn series_of(&self, index: u64) -> std::ops::Range<u64> {
        let size = self.layout.group_size;
        index * size..((index + 1) * size).min(self.space.series)
    }

    /// Round `round`'s timestamp: back-fill's, or now (after the group's
    /// last round, in real time).
    fn timestamp(&self, group: &Group, round: u64) -> i64 {
        if self.points_per_series.is_some() {
            return self.start_ns + round as i64 * self.interval_ns;
        }
        let at = (now_ns() / MS * MS).max(group.last_ns.load(Ordering::Relaxed) + MS);
        group.last_ns.store(at, Ordering::Relaxed);
        at
    }

    /// Puts the lease's points into the connection's request; returns how many.
    pub(super) fn build<C: TsConn>(&self, conn: &mut C, lease: &Lease, tags: &mut [u8]) -> u64 {
        let space = &self.space;
        let mut points = 0;
        for round in lease.rounds.clone() {
            let at = self.timestamp(lease.group, round);
            for series in self.series_of(lease.index) {
                space.write_tags(series, tags);
                let values = self.values.point(series, round);
                for (m, first) in space.measurements.iter().zip(&self.first_fields) {
                    conn.point(&m.name);
                    for t in 0..space.tag_count() {
                        conn.tag(space.tag_key(t), space.tag_value(tags, t));
                    }
                    for tag in &m.tags {
                        conn.tag(&tag.key, tag.value(series));
                    }
                    for (f, field) in (*first..).zip(&m.fields) {
                        conn.field(field, values.field(f));
                    }
                    conn.end_point(at);
                    points += 1;
                }
            }
        }
        points
    }
}

impl<C: TsConn> Script<C> for IngestScript {
    type Session = IngestSession;

    fn ops(&self) -> &[OpSpec] {
        &self.ops
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, _conn: &mut C, _: SessionInfo) -> Result<IngestSession, DriverError> {
        Ok(IngestSession {
            tags: self.space.tag_buffer(),
            failures: Failures::default(),
        })
    }

    async fn event(
        &self,
        conn: &mut C,
        session: &mut IngestSession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let lease = loop {
            match self.claim() {
                Claim::Lease(lease) => break lease,
                // Past the last point (warm-up events take requests too).
                Claim::Done => return Ok(()),
                // Fewer groups left than sessions: one frees when its request is answered.
                Claim::Wait => tokio::time::sleep(Duration::from_millis(1)).await,
            }
        };
        let IngestSession { tags, failures } = session;
        let points = self.build(conn, &lease, tags);
        let t = &self.tally;
        t.sent.fetch_add(points, Ordering::Relaxed);
        let outcome = ctx
            .op(0, conn.write(&mut |reason| failures.note(reason)))
            .await
            .map_err(with_size_hint)?;
        drop(lease);
        t.answered.fetch_add(outcome.points, Ordering::Relaxed);
        t.failed.fetch_add(outcome.failed, Ordering::Relaxed);
        ctx.items(0, outcome.points.saturating_sub(outcome.failed));
        if !C::ACKNOWLEDGED {
            ctx.count(UNACKNOWLEDGED, outcome.points);
        }
        failures.record(ctx, 0, |_| POINT_FAILED);
        Ok(())
    }
}

/// A request the server found too large (HTTP 413: a `max-body-size`
/// below the default loadcell sizes requests for) names the way out.
fn with_size_hint(e: DriverError) -> DriverError {
    if e.message.contains("HTTP 413") {
        DriverError::fatal(format!(
            "{e}: the server takes smaller requests; lower --points-per-request"
        ))
    } else {
        e
    }
}

/// One series spot-checked: what it was sent, and what the database holds.
struct Spot {
    series: u64,
    points: u64,
    last_value: f64,
}

impl IngestScript {
    /// Series that were sent at least one point.
    fn written(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.layout.groups)
            .filter(|&g| self.groups[g as usize].rounds.load(Ordering::Relaxed) > 0)
            .flat_map(|g| self.series_of(g))
    }

    /// `sample` distinct series drawn from those written, by the run's seed.
    fn spots(&self, sample: u64) -> Vec<Spot> {
        let written: Vec<u64> = self.written().collect();
        if written.is_empty() {
            return Vec::new();
        }
        let mut rng = SmallRng::seed_from_u64(self.seed);
        let amount = (sample as usize).min(written.len());
        rand::seq::index::sample(&mut rng, written.len(), amount)
            .into_iter()
            .map(|i| {
                let series = written[i];
                let group = &self.groups[(series / self.layout.group_size) as usize];
                let points = group.rounds.load(Ordering::Relaxed);
                Spot {
                    series,
                    points,
                    last_value: self.values.point(series, points - 1).field(0),
                }
            })
            .collect()
    }

    /// Where the run's points are in time.
    fn written_range(&self) -> TimeRange {
        match self.points_per_series {
            Some(p) => TimeRange {
                start_ns: self.start_ns,
                end_ns: self.start_ns + p as i64 * self.interval_ns,
            },
            None => TimeRange {
                start_ns: self.start_ns,
                end_ns: now_ns() + 60_000 * MS,
            },
        }
    }

    /// The series' name as line protocol writes it, for messages.
    fn describe(&self, series: u64, tags: &mut [u8]) -> String {
        self.space.write_tags(series, tags);
        let mut name = self.space.measurements[0].name.clone();
        for (k, v) in self.space.tags(tags) {
            name += &format!(",{k}={v}");
        }
        name
    }

    /// Counts the series, and spot-checks `sample` of them, until they
    /// match what was sent or `timeout` passes (databases ingest
    /// asynchronously).
    pub(super) async fn verify<C: TsConn>(
        &self,
        conn: &mut C,
        sample: u64,
        timeout: Duration,
    ) -> Result<Verification, DriverError> {
        let deadline = Instant::now() + timeout;
        let spots = self.spots(sample);
        loop {
            let v = match self.check(conn, &spots).await {
                Ok((found, problems)) => {
                    self.verification(found, spots.len(), problems, C::ACKNOWLEDGED)
                }
                Err(e) if C::ACKNOWLEDGED => return Err(e),
                // Unacknowledged points may not be there yet (QuestDB
                // makes a table's columns when it commits their lines),
                // and are unproven while the check cannot be made: looked
                // at again until the deadline, then failed, not skipped.
                Err(e) => self.verification(
                    0,
                    spots.len(),
                    vec![format!("the check could not be made: {e}")],
                    false,
                ),
            };
            if v.ok || Instant::now() >= deadline {
                return Ok(v);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The series count, and what the spot checks found wrong.
    async fn check<C: TsConn>(
        &self,
        conn: &mut C,
        spots: &[Spot],
    ) -> Result<(u64, Vec<String>), DriverError> {
        let m = &self.space.measurements[0];
        let field = &m.fields[0];
        let found = conn.series_count(&m.name, field).await?;
        let range = self.written_range();
        let mut tags = self.space.tag_buffer();
        let mut problems = Vec::new();
        for spot in spots {
            self.space.write_tags(spot.series, &mut tags);
            let pairs: Vec<(&str, &str)> = self.space.tags(&tags).collect();
            let series = Series {
                measurement: &m.name,
                tags: &pairs,
            };
            let stored = conn.stored_points(series, field, range).await?;
            let expected = (spot.points, spot.last_value);
            let matches = stored.is_some_and(|s: StoredPoints| {
                s.count == spot.points && (s.last_value - spot.last_value).abs() < 1e-9
            });
            if !matches {
                let held = stored.map_or("no points".to_string(), |s| {
                    format!("{} points, the last {}", s.count, s.last_value)
                });
                problems.push(format!(
                    "series {} field {field}: sent {} points, the last {}; the database holds {held}",
                    self.describe(spot.series, &mut tags),
                    expected.0,
                    expected.1
                ));
            }
        }
        Ok((found, problems))
    }

    fn verification(
        &self,
        found: u64,
        checked: usize,
        problems: Vec<String>,
        acknowledged: bool,
    ) -> Verification {
        let t = &self.tally;
        let before = t.before.load(Ordering::Relaxed);
        let failed = t.failed.load(Ordering::Relaxed);
        let in_doubt = t.sent.load(Ordering::Relaxed) - t.answered.load(Ordering::Relaxed);
        let written = self.written().count() as u64;
        let m = &self.space.measurements[0];
        let mut how = format!(
            "series of '{}' counted by the database after the run, against the {written} the \
             run wrote (it held {before} before); {checked} random series spot-checked: their \
             points' count and last value of field {}",
            m.name, m.fields[0]
        );
        if !acknowledged {
            how += &format!(
                "; the {} points went over a transport that acknowledges none: this check is \
                 their only proof",
                t.sent.load(Ordering::Relaxed)
            );
        }
        if failed > 0 || in_doubt > 0 {
            how +=
                &format!("; {failed} points failed and {in_doubt} were in requests never answered");
        }
        let failing = problems.len();
        for problem in problems.iter().take(3) {
            how += &format!("; {problem}");
        }
        if failing > 3 {
            how += &format!("; and {} more series", failing - 3);
        }
        Verification {
            expected: written,
            found,
            ok: failing == 0
                && failed == 0
                && in_doubt == 0
                && (written..=before + written).contains(&found),
            how,
            stream: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use loadcell_core::ErrorClass;

    use super::*;

    #[test]
    fn a_request_too_large_says_to_send_fewer_points() {
        let e = with_size_hint(DriverError::fatal("h:8086 answered HTTP 413: too large"));
        assert_eq!(e.class, ErrorClass::Fatal);
        assert!(e.message.ends_with("lower --points-per-request"), "{e}");
        let other = with_size_hint(DriverError::retryable("h:8086 is overloaded (HTTP 503)"));
        assert_eq!(other.class, ErrorClass::Retryable);
        assert!(!other.message.contains("--points-per-request"));
    }
}
