//! `ts-ingest`'s script, and the check after it.
//!
//! Series are cut into groups of consecutive indices, at least one per
//! session; a request is one or more rounds of one group (a point of each
//! of its series, per measurement, per round). A session leases a group
//! for the request (an atomic flag, not a lock: a group that is busy is
//! skipped), so no two sessions ever write one series at once and each
//! series' points go out in time order, as Prometheus requires. A group's round count is
//! all `verify` needs to know what each of its series was sent.

use loadcell_core::clock::wall_ns;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use loadcell_core::ts::{Series, StoredPoints, TimeRange, TsConn};
use loadcell_core::DriverError;
use loadcell_engine::{Category, Ctx, OpSpec, Script, SessionInfo};
use loadcell_record::result::Verification;
use rand::rngs::SmallRng;
use rand::SeedableRng;

use super::series::{SeriesSpace, Values};
use super::{Timing, TsOptions};
use crate::failures::Failures;

/// One millisecond: the finest precision every protocol keeps
/// (Prometheus's), so real-time points of a series are at least this far
/// apart.
const MS: i64 = 1_000_000;

/// The longest a real-time run waits, after its load, for the clock to
/// pass the timestamps it ran ahead to.
const CATCH_UP_MAX: Duration = Duration::from_secs(10);

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
            Timing::RealTime => (None, wall_ns() / MS * MS),
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
        let at = (wall_ns() / MS * MS).max(group.last_ns.load(Ordering::Relaxed) + MS);
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

/// One series spot-checked: what it was sent.
struct Spot {
    series: u64,
    points: u64,
    /// The sum of the first field's values sent, and the last one.
    sum: f64,
    last_value: f64,
}

impl Spot {
    /// How `stored` falls short of what was sent, if it does.
    fn shortfall(&self, stored: Option<StoredPoints>) -> Option<String> {
        let Some(s) = stored else {
            return Some(format!("0 of {} points", self.points));
        };
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(1.0);
        if s.count != self.points {
            Some(format!("{} of {} points", s.count, self.points))
        } else if !close(s.sum, self.sum) {
            // As many points, other values: some are another run's.
            Some(format!(
                "{} points summing {} where those sent sum {}",
                s.count, s.sum, self.sum
            ))
        } else if !close(s.last_value, self.last_value) {
            Some(format!(
                "{} points, the last {} where {} was sent",
                s.count, s.last_value, self.last_value
            ))
        } else {
            None
        }
    }
}

/// What the check after the run found.
struct Found {
    /// Series with a point in the run's time range.
    series: u64,
    /// Each spot-checked series short of what it was sent, and how.
    short: Vec<(u64, String)>,
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
                let value = |round| self.values.point(series, round).field(0);
                Spot {
                    series,
                    points,
                    sum: (0..points).map(value).sum(),
                    last_value: value(points - 1),
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
                end_ns: wall_ns() + 60_000 * MS,
            },
        }
    }

    /// The series' measurement and first tag (one value per series), for
    /// messages: `cpu{hostname=…}`.
    fn describe(&self, series: u64, tags: &mut [u8]) -> String {
        self.space.write_tags(series, tags);
        let m = &self.space.measurements[0].name;
        match self.space.tags(tags).next() {
            Some((key, value)) => format!("{m}{{{key}={value}}}"),
            None => m.clone(),
        }
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
        let ahead = self.catch_up().await;
        let deadline = Instant::now() + timeout;
        let spots = self.spots(sample);
        loop {
            let v = match self.check(conn, &spots).await {
                Ok(found) => self.verification(Ok(found), spots.len(), C::ACKNOWLEDGED),
                Err(e) if C::ACKNOWLEDGED => return Err(e),
                // Unacknowledged points may not be there yet (QuestDB
                // makes a table's columns when it commits their lines),
                // and are unproven while the check cannot be made: looked
                // at again until the deadline, then failed, not skipped.
                Err(e) => self.verification(Err(e), spots.len(), false),
            };
            if v.ok || Instant::now() >= deadline {
                return Ok(match ahead {
                    Some(note) => v.noting(&note),
                    None => v,
                });
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// In real time, a series gets a point a millisecond at most (the
    /// stores keep milliseconds), so a group written faster runs its
    /// timestamps ahead of the clock. A later run against the store would
    /// find those points in its own time range and fail its check: the
    /// run waits, up to [`CATCH_UP_MAX`], for the clock to pass them.
    /// Says how far ahead they ran, if they did.
    async fn catch_up(&self) -> Option<String> {
        if self.points_per_series.is_some() {
            return None;
        }
        let newest = self
            .groups
            .iter()
            .map(|g| g.last_ns.load(Ordering::Relaxed))
            .max()?;
        let ahead = Duration::from_nanos(u64::try_from(newest + MS - wall_ns()).ok()?);
        tokio::time::sleep(ahead.min(CATCH_UP_MAX)).await;
        Some(if ahead <= CATCH_UP_MAX {
            format!(
                "the run's timestamps ran {:.1} s ahead of the clock (over one point a millisecond \
                 per series): it waited for the clock to pass them, so that a later run's time \
                 range holds none",
                ahead.as_secs_f64()
            )
        } else {
            format!(
                "the run's timestamps ran {:.0} s ahead of the clock (over one point a millisecond \
                 per series; waited {} s): a run against this store in the next {:.0} s would find \
                 these points in its time range",
                ahead.as_secs_f64(),
                CATCH_UP_MAX.as_secs(),
                (ahead - CATCH_UP_MAX).as_secs_f64()
            )
        })
    }

    /// The series with a point in the run's time range (what was there
    /// before does not count), and the spot-checked series that fall
    /// short of what they were sent.
    async fn check<C: TsConn>(&self, conn: &mut C, spots: &[Spot]) -> Result<Found, DriverError> {
        let m = &self.space.measurements[0];
        let field = &m.fields[0];
        let range = self.written_range();
        let series = conn.series_count(&m.name, field, Some(range)).await?;
        let mut tags = self.space.tag_buffer();
        let mut short = Vec::new();
        for spot in spots {
            self.space.write_tags(spot.series, &mut tags);
            let pairs: Vec<(&str, &str)> = self.space.tags(&tags).collect();
            let of = Series {
                measurement: &m.name,
                tags: &pairs,
            };
            let stored = conn.stored_points(of, field, range).await?;
            if let Some(how) = spot.shortfall(stored) {
                short.push((spot.series, how));
            }
        }
        Ok(Found { series, short })
    }

    /// The verification: what fell short first, then how it was checked.
    fn verification(
        &self,
        found: Result<Found, DriverError>,
        checked: usize,
        acknowledged: bool,
    ) -> Verification {
        let t = &self.tally;
        let sent = t.sent.load(Ordering::Relaxed);
        let failed = t.failed.load(Ordering::Relaxed);
        let in_doubt = sent - t.answered.load(Ordering::Relaxed);
        let written = self.written().count() as u64;
        let m = &self.space.measurements[0];
        let mut causes = Vec::new();
        if failed > 0 {
            causes.push(format!("{failed} points failed"));
        }
        if in_doubt > 0 {
            causes.push(format!("{in_doubt} points were in requests never answered"));
        }
        let series = match &found {
            Ok(f) => f.series,
            Err(e) => {
                causes.push(format!("the check could not be made: {e}"));
                0
            }
        };
        if found.is_ok() && series < written {
            causes.push(format!(
                "{} of the {written} series written missing from the run's time range",
                written - series
            ));
        }
        if let Ok(Found { short, .. }) = &found {
            if !short.is_empty() {
                let mut tags = self.space.tag_buffer();
                let named: Vec<String> = short
                    .iter()
                    .take(3)
                    .map(|(s, how)| format!("{} {how}", self.describe(*s, &mut tags)))
                    .collect();
                let mut cause = format!(
                    "{} of {checked} spot-checked series short: {}",
                    short.len(),
                    named.join(", ")
                );
                if short.len() > 3 {
                    cause += &format!(" and {} more", short.len() - 3);
                }
                causes.push(cause);
            }
        }
        let mut how = format!(
            "series of '{}' with a point in the run's time range counted by the database, \
             against the {written} the run wrote; {checked} random series read back (their \
             points' count, sum and last value of field {})",
            m.name, m.fields[0]
        );
        if series > written {
            how += &format!(
                "; {} more series in that time range than the run wrote: an earlier run's or \
                 another writer's",
                series - written
            );
        }
        if !acknowledged {
            how += &format!(
                "; the {sent} points went over a transport that acknowledges none: this check is \
                 their only proof"
            );
        }
        let ok = causes.is_empty();
        if !ok {
            how = format!("{}; checked: {how}", causes.join("; "));
        }
        Verification::new(written, series, ok, how)
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
