//! The `stream` run's sessions: producers (the first session group, at
//! `--produce-rate`) and consumers (closed loop), and the check after the
//! run.

use crate::origin::{origin, Padded};
use loadcell_core::clock::wall_ns;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use loadcell_core::stream::{ChannelPosition, PollOutcome, StreamConn, StreamRow};
use loadcell_core::DriverError;
use loadcell_engine::{Category, Ctx, OpSpec, Script, SessionInfo};
use loadcell_record::details::{Flow, StreamCompleteness};
use loadcell_record::result::Verification;

use super::order::{OrderChecker, Verdict};
use super::rows::{mix, RowMaker};
use super::{channels_of, Mode, StreamOptions};
use crate::failures::Failures;

/// The operation kinds, by index.
const PRODUCE: usize = 0;
const POLL: usize = 1;
const COMMIT: usize = 2;
const END_TO_END: usize = 3;

/// The class of a row the server did not store.
pub const ROW_FAILED: &str = "row failed";

/// When rows flowed, on the wall clock: the earliest and the latest
/// moment noted, once per poll or batch, by any session.
#[derive(Debug)]
struct Span {
    first_ns: AtomicI64,
    last_ns: AtomicI64,
}

impl Default for Span {
    fn default() -> Span {
        Span {
            first_ns: AtomicI64::new(i64::MAX),
            last_ns: AtomicI64::new(i64::MIN),
        }
    }
}

impl Span {
    fn note(&self, first_ns: i64, last_ns: i64) {
        self.first_ns.fetch_min(first_ns, Ordering::Relaxed);
        self.last_ns.fetch_max(last_ns, Ordering::Relaxed);
    }

    /// `rows` over the span, once it spans some time.
    fn flow(&self, rows: u64) -> Option<Flow> {
        let (first, last) = (
            self.first_ns.load(Ordering::Relaxed),
            self.last_ns.load(Ordering::Relaxed),
        );
        (last > first).then_some(())?;
        Flow::of(rows, (last - first) as f64 / 1e9)
    }
}

/// What the run's rows became, across sessions: one add per request.
#[derive(Debug, Default)]
pub(super) struct Tally {
    produced: AtomicU64,
    consumed: AtomicU64,
    /// Rows of this run's own received again by any of its consumers.
    redelivered: AtomicU64,
    duplicates: AtomicU64,
    gaps: AtomicU64,
    reorders: AtomicU64,
    untimed: AtomicU64,
    undecodable: AtomicU64,
    /// Rows the run's consumers went past that had been deleted from the
    /// stream before the group read them ([`PollOutcome::vanished`]):
    /// missing, though the group's position is past them now.
    vanished: AtomicU64,
    /// Time the run's consumers spent in polls that brought rows.
    poll_ns: AtomicU64,
    /// The highest lag sampled during the run, and how many samples.
    lag_max: AtomicU64,
    lag_samples: AtomicU64,
    /// Rows the stream held when the run was checked.
    held_before: AtomicU64,
    /// From the first poll that brought rows to the last.
    consumed_span: Span,
    /// From the first batch sent to the last acknowledged.
    produced_span: Span,
}

pub struct StreamScript {
    ops: [OpSpec; 4],
    opts: StreamOptions,
    seed: u64,
    origin: u64,
    coordinated: bool,
    /// A consumer gets every row of its channels: a jump in a channel is
    /// a gap. Not so on a server without a coordinator when `--group`
    /// was given, since other processes may share the channels.
    exclusive: bool,
    /// The next sequence number of each channel (one producer each).
    seqs: Box<[AtomicU64]>,
    /// One past the highest row of this run's own that any consumer of
    /// this process received, in each channel: a row below it came before.
    /// Padded: each channel is polled by its own consumer.
    received_upto: Box<[Padded]>,
    tally: Tally,
}

pub enum StreamSession {
    Producer(Producer),
    Consumer(Consumer),
}

pub struct Producer {
    owned: Vec<u32>,
    maker: RowMaker,
    failures: Failures,
}

pub struct Consumer {
    receiver: Receiver,
    /// When the group's lag is due to be sampled next: one consumer
    /// session of the process samples it, once per report interval.
    lag_due: Option<Instant>,
    /// This poll's end-to-end latencies, recorded after it.
    end_to_end_ns: Vec<u64>,
}

/// What a consumer found in the rows it received.
#[derive(Debug, Default, Clone, Copy)]
struct Found {
    duplicates: u64,
    gaps: u64,
    reorders: u64,
    /// Rows of a channel beyond the stream's.
    strays: u64,
    /// Rows this process had received before (see
    /// [`StreamScript::received_before`]).
    redelivered: u64,
}

/// Checks each row received and notes what it found; the message of each
/// gap or reorder is kept for the error samples.
#[derive(Debug)]
struct Receiver {
    checker: OrderChecker,
    found: Found,
    problems: Vec<(&'static str, String)>,
}

impl Receiver {
    fn new(channels: u32, exclusive: bool) -> Receiver {
        Receiver {
            checker: OrderChecker::new(channels, exclusive),
            found: Found::default(),
            problems: Vec::new(),
        }
    }

    /// Checks `row`; `again` says this process received it before.
    fn row(&mut self, row: &StreamRow<'_>, again: bool) {
        self.found.redelivered += u64::from(again);
        let (channel, seq) = (row.channel, row.seq);
        match self.checker.check(channel, row.origin, seq) {
            Verdict::First | Verdict::Next | Verdict::Skipped { .. } => {}
            Verdict::Duplicate => self.found.duplicates += 1,
            Verdict::NoSuchChannel => self.found.strays += 1,
            Verdict::Reorder => {
                self.found.reorders += 1;
                self.problems.push((
                    "reorder",
                    format!("channel {channel}: row {seq} came after later rows"),
                ));
            }
            Verdict::Gap { missing } => {
                self.found.gaps += 1;
                self.problems.push((
                    "gap",
                    format!("channel {channel}: {missing} rows missing before row {seq}"),
                ));
            }
        }
    }

    /// The rows of this poll came after a reassignment: what they said of
    /// order is void, and order is checked afresh from here.
    fn reassigned(&mut self, before: Found) {
        self.checker.reset();
        self.found = Found {
            strays: self.found.strays,
            redelivered: self.found.redelivered,
            ..before
        };
        self.problems.clear();
    }
}

impl StreamScript {
    pub(super) fn new(opts: &StreamOptions, seed: u64, coordinated: bool) -> StreamScript {
        StreamScript {
            ops: [
                OpSpec {
                    name: "produce",
                    category: Category::Write,
                },
                OpSpec {
                    name: "poll",
                    category: Category::Read,
                },
                OpSpec {
                    name: "commit",
                    category: Category::Other,
                },
                OpSpec {
                    name: "end_to_end",
                    category: Category::Read,
                },
            ],
            opts: opts.clone(),
            seed,
            origin: origin(seed),
            coordinated,
            exclusive: coordinated || !opts.group_given,
            seqs: (0..opts.partitions).map(|_| AtomicU64::new(0)).collect(),
            received_upto: (0..opts.partitions).map(|_| Padded::default()).collect(),
            tally: Tally::default(),
        }
    }

    pub(super) fn set_held_before(&self, rows: u64) {
        self.tally.held_before.store(rows, Ordering::Relaxed);
    }

    /// Whether `row` came to this process before: at-least-once delivery
    /// repeats rows whose channel moved to another consumer before their
    /// position was committed. Rows of other runs are never taken for
    /// repeats (their numbers are their producers').
    fn received_before(&self, row: &StreamRow<'_>) -> bool {
        row.origin == self.origin
            && self
                .received_upto
                .get(row.channel as usize)
                .is_some_and(|upto| upto.0.fetch_max(row.seq + 1, Ordering::Relaxed) > row.seq)
    }

    /// This process's consumers' names start so: unique per run.
    fn consumer_name(&self, what: impl std::fmt::Display) -> String {
        format!("loadcell-{:016x}-{what}", self.origin)
    }

    fn produces_in(&self, group: usize) -> bool {
        self.opts.mode != Mode::Consume && group == 0
    }

    async fn produce<C: StreamConn>(
        &self,
        conn: &mut C,
        session: &mut Producer,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let Producer {
            owned,
            maker,
            failures,
        } = session;
        let produced_ns = wall_ns();
        for _ in 0..self.opts.batch {
            let made = maker.next_row();
            let channel = owned[(made.hash % owned.len() as u64) as usize];
            let row = StreamRow {
                channel,
                seq: self.seqs[channel as usize].fetch_add(1, Ordering::Relaxed),
                produced_ns,
                origin: self.origin,
                keys: made.keys,
                payload: made.payload,
            };
            conn.queue_row(&self.opts.stream, &row);
        }
        let outcome = ctx
            .op(PRODUCE, conn.produce(&mut |reason| failures.note(reason)))
            .await?;
        let stored = outcome.rows - outcome.failed;
        self.tally.produced.fetch_add(stored, Ordering::Relaxed);
        if stored > 0 {
            self.tally.produced_span.note(produced_ns, wall_ns());
        }
        ctx.items(PRODUCE, stored);
        failures.record(ctx, PRODUCE, |_| ROW_FAILED);
        Ok(())
    }

    async fn consume<C: StreamConn>(
        &self,
        conn: &mut C,
        session: &mut Consumer,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let Consumer {
            receiver,
            lag_due,
            end_to_end_ns,
        } = session;
        let before = receiver.found;
        let origin = self.origin;
        let mut received_ns = 0;
        let mut untimed = 0;
        let started = Instant::now();
        let mut on_row = |row: StreamRow<'_>| {
            // One clock reading per poll: its rows arrived together.
            if received_ns == 0 {
                received_ns = wall_ns();
            }
            receiver.row(&row, self.received_before(&row));
            if row.origin == origin {
                end_to_end_ns.push(received_ns.saturating_sub(row.produced_ns).max(0) as u64);
            } else {
                untimed += 1;
            }
        };
        let polled = conn.poll(self.opts.poll_max, self.opts.poll_wait, &mut on_row);
        let outcome = ctx.op(POLL, polled).await?;
        let t = &self.tally;
        // A poll that waited in vain says nothing of how fast rows come.
        if outcome.rows > 0 {
            t.poll_ns
                .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
            t.consumed_span.note(received_ns, received_ns);
        }
        if outcome.reassigned {
            receiver.reassigned(before);
        }
        for ns in end_to_end_ns.drain(..) {
            ctx.record(END_TO_END, Duration::from_nanos(ns), true);
        }
        ctx.items(POLL, outcome.rows);
        self.count(ctx, &outcome, untimed, before, receiver);
        if outcome.rows + outcome.undecodable > 0 {
            ctx.op(COMMIT, conn.commit()).await?;
        }
        match lag_due {
            Some(due) if started >= *due => {
                *due = started + self.opts.lag_every;
                self.sample_lag(conn, ctx).await
            }
            _ => Ok(()),
        }
    }

    /// Records the group's lag as this interval's gauge.
    async fn sample_lag<C: StreamConn>(
        &self,
        conn: &mut C,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        let lag = conn.lag(&self.opts.stream, &self.opts.group).await?;
        ctx.gauge(C::LAG_UNIT.gauge(), lag);
        let t = &self.tally;
        t.lag_max.fetch_max(lag, Ordering::Relaxed);
        t.lag_samples.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Adds a poll's findings to the run's counters and the tally.
    fn count(
        &self,
        ctx: &mut Ctx,
        outcome: &PollOutcome,
        untimed: u64,
        before: Found,
        receiver: &mut Receiver,
    ) {
        let found = receiver.found;
        let t = &self.tally;
        let undecodable = outcome.undecodable + found.strays - before.strays;
        for (name, n, total) in [
            (
                "duplicates",
                found.duplicates - before.duplicates,
                &t.duplicates,
            ),
            ("gaps", found.gaps - before.gaps, &t.gaps),
            ("reorders", found.reorders - before.reorders, &t.reorders),
            ("undecodable", undecodable, &t.undecodable),
            ("vanished", outcome.vanished, &t.vanished),
            ("untimed_rows", untimed, &t.untimed),
            (
                "redelivered",
                found.redelivered - before.redelivered,
                &t.redelivered,
            ),
        ] {
            if n > 0 {
                ctx.count(name, n);
                total.fetch_add(n, Ordering::Relaxed);
            }
        }
        t.consumed.fetch_add(outcome.rows, Ordering::Relaxed);
        for (class, message) in receiver.problems.drain(..) {
            ctx.failed(POLL, class, &message);
        }
    }

    /// After the run: consumes what the group has not acknowledged until
    /// nothing is left or `--drain-timeout` passes, then compares what
    /// was produced, consumed and acknowledged.
    pub(super) async fn verify<C: StreamConn>(
        &self,
        conn: &mut C,
    ) -> Result<Verification, DriverError> {
        let o = &self.opts;
        let t = &self.tally;
        let poll_ns = t.poll_ns.load(Ordering::Relaxed);
        let run_consumed = t.consumed.load(Ordering::Relaxed);
        let poll_us_per_1000_rows =
            (run_consumed > 0).then(|| poll_ns as f64 / run_consumed as f64);
        if !o.mode.consumes() {
            let held: u64 = conn
                .positions(&o.stream, &o.group)
                .await?
                .iter()
                .map(|p| p.end)
                .sum();
            return Ok(self.produced_verification(held));
        }
        let (drained, lag_at_end, positions) = self.drain(conn).await?;
        // Rows the consumers went past are owed and missing as those the
        // positions still count are.
        let passed = t.vanished.load(Ordering::Relaxed);
        let end: u64 = positions.iter().map(|p| p.end).sum::<u64>() + passed;
        let committed: u64 = positions.iter().map(|p| p.committed).sum();
        let missing: u64 = positions.iter().map(ChannelPosition::lag).sum::<u64>() + passed;
        let vanished: u64 = positions.iter().map(|p| p.vanished).sum::<u64>() + passed;
        let found = drained.found;
        let lag_max =
            (t.lag_samples.load(Ordering::Relaxed) > 0).then(|| t.lag_max.load(Ordering::Relaxed));
        let completeness = StreamCompleteness {
            produced: t.produced.load(Ordering::Relaxed),
            consumed: t.consumed.load(Ordering::Relaxed),
            missing,
            lag_at_end,
            duplicated: t.duplicates.load(Ordering::Relaxed) + found.duplicates,
            redelivered: t.redelivered.load(Ordering::Relaxed) + found.redelivered,
            gaps: t.gaps.load(Ordering::Relaxed) + found.gaps,
            reorders: t.reorders.load(Ordering::Relaxed) + found.reorders,
            untimed: t.untimed.load(Ordering::Relaxed),
            poll_us_per_1000_rows,
            lag_max,
            lag_unit: lag_max.map(|_| C::LAG_UNIT.as_str().to_string()),
            consume_flow: t.consumed_span.flow(run_consumed),
            produce_flow: t.produced_span.flow(t.produced.load(Ordering::Relaxed)),
        };
        let c = &completeness;
        let mut how = format!(
            "rows the group '{}' acknowledged against the rows the stream '{}' owes it, after \
             draining what was left for up to {}; this run produced {} and consumed {} \
             ({} in the drain)",
            o.group,
            o.stream,
            format_args!("{:.1}s", o.drain_timeout.as_secs_f64()),
            c.produced,
            c.consumed,
            c.consumed - run_consumed
        );
        if vanished > 0 {
            how += &format!(
                "; {vanished} of the missing rows were deleted from the stream before the group \
                 read them"
            );
        }
        if c.redelivered > 0 {
            how += &format!(
                "; {} of the rows consumed came again after a rebalance (at-least-once)",
                c.redelivered
            );
        }
        if !self.exclusive {
            how += "; other processes may share the group's channels, so a jump in a channel \
                    is not a gap: the group's acknowledgements, from every member, must add up \
                    to every row";
        }
        for (_, problem) in drained.problems.iter().take(3) {
            how += &format!("; {problem}");
        }
        let ok = missing == 0 && c.gaps == 0 && c.reorders == 0;
        let mut verification = Verification::new(end, committed, ok, how);
        verification.details.insert(&completeness);
        Ok(verification)
    }

    /// Produce-only: the rows the stream gained against those produced.
    fn produced_verification(&self, held: u64) -> Verification {
        let t = &self.tally;
        let produced = t.produced.load(Ordering::Relaxed);
        let added = held.saturating_sub(t.held_before.load(Ordering::Relaxed));
        let rows = StreamCompleteness {
            produced,
            consumed: 0,
            missing: produced.saturating_sub(added),
            lag_at_end: 0,
            duplicated: 0,
            redelivered: 0,
            gaps: 0,
            reorders: 0,
            untimed: 0,
            poll_us_per_1000_rows: None,
            lag_max: None,
            lag_unit: None,
            consume_flow: None,
            produce_flow: t.produced_span.flow(produced),
        };
        let mut verification = Verification::new(
            produced,
            added,
            added >= produced,
            format!(
                "rows the stream '{}' gained during the run against the rows its producers had \
                 acknowledged (other processes producing into it add to what it gained)",
                self.opts.stream
            ),
        );
        verification.details.insert(&rows);
        verification
    }

    /// Polls as one consumer of every channel until the group has
    /// acknowledged every row it can still get or `--drain-timeout`
    /// passes: what it found,
    /// the rows unacknowledged when it began, and the positions at its end.
    async fn drain<C: StreamConn>(
        &self,
        conn: &mut C,
    ) -> Result<(Receiver, u64, Vec<ChannelPosition>), DriverError> {
        let o = &self.opts;
        let all = o.share(0, 1);
        let name = self.consumer_name("drain");
        conn.subscribe(
            &o.stream,
            &o.group,
            &name,
            channels_of(self.coordinated, &all),
        )
        .await?;
        let mut receiver = Receiver::new(o.partitions, self.exclusive);
        let deadline = Instant::now() + o.drain_timeout;
        let mut lag_at_end = None;
        loop {
            let positions = conn.positions(&o.stream, &o.group).await?;
            let lag_at_end =
                *lag_at_end.get_or_insert(positions.iter().map(ChannelPosition::lag).sum());
            let awaited: u64 = positions.iter().map(ChannelPosition::awaited).sum();
            if awaited == 0 || Instant::now() >= deadline {
                conn.leave().await?;
                return Ok((receiver, lag_at_end, positions));
            }
            loop {
                let before = receiver.found;
                let outcome = conn
                    .poll(o.poll_max, o.poll_wait, &mut |row| {
                        receiver.row(&row, self.received_before(&row))
                    })
                    .await?;
                if outcome.reassigned {
                    receiver.reassigned(before);
                }
                let t = &self.tally;
                t.consumed.fetch_add(outcome.rows, Ordering::Relaxed);
                t.undecodable
                    .fetch_add(outcome.undecodable, Ordering::Relaxed);
                t.vanished.fetch_add(outcome.vanished, Ordering::Relaxed);
                let any = outcome.rows + outcome.undecodable > 0;
                if any {
                    conn.commit().await?;
                }
                if !any || Instant::now() >= deadline {
                    break;
                }
            }
        }
    }
}

impl<C: StreamConn> Script<C> for StreamScript {
    type Session = StreamSession;

    fn ops(&self) -> &[OpSpec] {
        &self.ops
    }

    fn transactional(&self) -> bool {
        false
    }

    async fn open(&self, conn: &mut C, info: SessionInfo) -> Result<StreamSession, DriverError> {
        let o = &self.opts;
        if self.produces_in(info.group) {
            return Ok(StreamSession::Producer(Producer {
                owned: o.share(info.index, info.count),
                maker: RowMaker::new(mix(self.seed ^ info.index as u64), o.row_size),
                failures: Failures::default(),
            }));
        }
        let share = o.share(info.index, info.count);
        let name = self.consumer_name(info.index);
        conn.subscribe(
            &o.stream,
            &o.group,
            &name,
            channels_of(self.coordinated, &share),
        )
        .await?;
        Ok(StreamSession::Consumer(Consumer {
            receiver: Receiver::new(o.partitions, self.exclusive),
            lag_due: (info.index == 0).then(Instant::now),
            end_to_end_ns: Vec::with_capacity(o.poll_max),
        }))
    }

    async fn event(
        &self,
        conn: &mut C,
        session: &mut StreamSession,
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        match session {
            StreamSession::Producer(p) => self.produce(conn, p, ctx).await,
            StreamSession::Consumer(c) => self.consume(conn, c, ctx).await,
        }
    }

    /// A consumer's last event committed what it polled; leaving makes
    /// sure the server heard it. A failure leaves the rows to be read
    /// again, which the next reader counts as duplicates.
    async fn close(&self, conn: &mut C, session: &mut StreamSession) {
        if let StreamSession::Consumer(_) = session {
            let _ = conn.leave().await;
        }
    }
}
