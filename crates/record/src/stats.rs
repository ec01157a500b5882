//! Per-worker statistics. Each worker thread owns one `Stats` and records
//! into it without locks; the engine swaps it out at every interval and the
//! collector merges the pieces off the hot path.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::hist::{new_histogram, record, record_n, Micros};

/// How many distinct error messages are kept; the rest are only counted.
pub const MAX_ERROR_SAMPLES: usize = 10;

#[derive(Debug, Clone)]
pub struct OpStats {
    pub count: u64,
    pub errors: u64,
    /// What the operations carried (documents indexed, points written, rows
    /// polled), as the script counted them; 0 for kinds that carry none.
    pub items: u64,
    /// Time the operation itself took.
    pub latency: Micros,
}

impl OpStats {
    fn new() -> Self {
        OpStats {
            count: 0,
            errors: 0,
            items: 0,
            latency: new_histogram(),
        }
    }
}

/// One session group's events, in a run of several (queries beside
/// indexing), kept apart from the others': each group has its own rate,
/// so its latency from the intended start means something only alone.
#[derive(Debug, Clone)]
pub struct GroupEvents {
    pub events: u64,
    /// Events that started more than [`LATE_AFTER`] after their intended
    /// start.
    pub late: u64,
    /// Events due under the group's rate but never sent.
    pub dropped: u64,
    pub response: Micros,
    pub service: Micros,
    pub lag: Micros,
}

impl GroupEvents {
    fn new() -> GroupEvents {
        GroupEvents {
            events: 0,
            late: 0,
            dropped: 0,
            response: new_histogram(),
            service: new_histogram(),
            lag: new_histogram(),
        }
    }
}

/// A distinct error message and how often it was seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorSample {
    pub class: String,
    pub message: String,
    pub count: u64,
}

#[derive(Debug, Clone)]
pub struct Stats {
    /// Events (transactions, or single requests) completed.
    pub events: u64,
    /// Events abandoned on a connection error.
    pub failed_events: u64,
    /// Retryable errors: the event was rolled back and run again.
    pub retries: u64,
    pub reconnects: u64,
    /// Events that started more than [`LATE_AFTER`] after their intended start.
    pub late: u64,
    /// Events due under the schedule but never sent.
    pub dropped: u64,
    /// Event response time: from the intended start when rate-limited.
    pub response: Micros,
    /// Event service time: from the actual start.
    pub service: Micros,
    /// How far behind schedule events started (rate-limited runs only).
    pub lag: Micros,
    /// Indexed by the workload's operation kinds.
    pub ops: Vec<OpStats>,
    /// Connects made inside events, under a connection policy that opens
    /// new connections during the run: not the workload's operations, so
    /// not in [`Stats::ops_total`].
    pub connects: OpStats,
    pub error_samples: Vec<ErrorSample>,
    /// Errors seen beyond the distinct messages kept.
    pub unsampled_errors: u64,
    /// Reads that found their key, and reads that did not.
    pub hits: u64,
    pub misses: u64,
    /// Counts a script keeps by name (HTTP responses by status class),
    /// in the order first counted. Entries stay across [`Stats::reset`],
    /// zeroed, so counting a known name never allocates.
    pub counters: Vec<Counter>,
    /// Levels a script samples by name (a stream group's lag), in the
    /// order first set: like [`Stats::counters`], entries stay across
    /// [`Stats::reset`], unset.
    pub gauges: Vec<Gauge>,
    /// Each session group's events, in a run of several; empty otherwise.
    pub groups: Vec<GroupEvents>,
}

/// One named count, e.g. `2xx` responses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counter {
    pub name: String,
    pub count: u64,
}

/// One named level, e.g. a consumer group's lag: the highest value set
/// in the interval (merged stats keep the highest of theirs), `None` when
/// none was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gauge {
    pub name: String,
    pub value: Option<u64>,
}

/// A start later than this after the intended start counts as late.
pub const LATE_AFTER: Duration = Duration::from_millis(1);

impl Stats {
    pub fn new(op_kinds: usize) -> Stats {
        Stats {
            events: 0,
            failed_events: 0,
            retries: 0,
            reconnects: 0,
            late: 0,
            dropped: 0,
            response: new_histogram(),
            service: new_histogram(),
            lag: new_histogram(),
            ops: (0..op_kinds).map(|_| OpStats::new()).collect(),
            connects: OpStats::new(),
            error_samples: Vec::new(),
            unsampled_errors: 0,
            hits: 0,
            misses: 0,
            counters: Vec::new(),
            gauges: Vec::new(),
            groups: Vec::new(),
        }
    }

    /// Stats for a run of `groups` session groups (none kept apart for 1).
    pub fn with_groups(op_kinds: usize, groups: usize) -> Stats {
        Stats {
            groups: if groups > 1 {
                (0..groups).map(|_| GroupEvents::new()).collect()
            } else {
                Vec::new()
            },
            ..Stats::new(op_kinds)
        }
    }

    /// Empty stats of the same shape (operation kinds, groups).
    pub fn empty_like(&self) -> Stats {
        Stats::with_groups(self.ops.len(), self.groups.len())
    }

    /// Empties these stats for reuse, keeping their shape. Histograms are
    /// large (1 µs to 1 h at 3 digits is about 180 KB each), so the engine
    /// recycles stats instead of allocating and zeroing new ones every
    /// interval; only histograms that hold something are cleared.
    pub fn reset(&mut self) {
        self.events = 0;
        self.failed_events = 0;
        self.retries = 0;
        self.reconnects = 0;
        self.late = 0;
        self.dropped = 0;
        for h in [&mut self.response, &mut self.service, &mut self.lag] {
            clear(h);
        }
        for op in self.ops.iter_mut().chain([&mut self.connects]) {
            op.count = 0;
            op.errors = 0;
            op.items = 0;
            clear(&mut op.latency);
        }
        self.error_samples.clear();
        self.unsampled_errors = 0;
        self.hits = 0;
        self.misses = 0;
        for c in &mut self.counters {
            c.count = 0;
        }
        for g in &mut self.gauges {
            g.value = None;
        }
        for g in &mut self.groups {
            g.events = 0;
            g.late = 0;
            g.dropped = 0;
            for h in [&mut g.response, &mut g.service, &mut g.lag] {
                clear(h);
            }
        }
    }

    #[inline]
    pub fn record_op(&mut self, kind: usize, took: Duration, ok: bool) {
        self.record_ops(kind, took, 1, u64::from(!ok));
    }

    #[inline]
    pub fn record_connect(&mut self, took: Duration, ok: bool) {
        let connects = &mut self.connects;
        connects.count += 1;
        connects.errors += u64::from(!ok);
        record(&mut connects.latency, took);
    }

    /// Records `count` operations of one kind that took the same time,
    /// `errors` of them failed, in one histogram step.
    #[inline]
    pub fn record_ops(&mut self, kind: usize, took: Duration, count: u64, errors: u64) {
        let op = &mut self.ops[kind];
        op.count += count;
        op.errors += errors;
        record_n(&mut op.latency, took, count);
    }

    /// Records a completed event. `lag` is `Some` for rate-limited runs.
    #[inline]
    pub fn record_event(&mut self, response: Duration, service: Duration, lag: Option<Duration>) {
        self.events += 1;
        record(&mut self.response, response);
        record(&mut self.service, service);
        if let Some(lag) = lag {
            record(&mut self.lag, lag);
            if lag > LATE_AFTER {
                self.late += 1;
            }
        }
    }

    /// Records a completed event of session group `group` apart, in a run
    /// of several (with [`Stats::record_event`], which counts it among
    /// all).
    #[inline]
    pub fn record_group_event(
        &mut self,
        group: usize,
        response: Duration,
        service: Duration,
        lag: Option<Duration>,
    ) {
        let g = &mut self.groups[group];
        g.events += 1;
        record(&mut g.response, response);
        record(&mut g.service, service);
        if let Some(lag) = lag {
            record(&mut g.lag, lag);
            g.late += u64::from(lag > LATE_AFTER);
        }
    }

    /// Keeps a bounded sample of distinct error messages.
    pub fn sample_error(&mut self, class: &str, message: &str) {
        self.add_error_sample(class, message, 1);
    }

    fn add_error_sample(&mut self, class: &str, message: &str, count: u64) {
        if let Some(s) = self
            .error_samples
            .iter_mut()
            .find(|s| s.class == class && s.message == message)
        {
            s.count += count;
        } else if self.error_samples.len() < MAX_ERROR_SAMPLES {
            self.error_samples.push(ErrorSample {
                class: class.to_string(),
                message: message.to_string(),
                count,
            });
        } else {
            self.unsampled_errors += count;
        }
    }

    /// Adds `n` to the counter `name`: a short scan of a few names, and
    /// an allocation only the first time a name is counted.
    #[inline]
    pub fn count(&mut self, name: &str, n: u64) {
        match self.counters.iter_mut().find(|c| c.name == name) {
            Some(c) => c.count += n,
            None => self.counters.push(Counter {
                name: name.to_string(),
                count: n,
            }),
        }
    }

    /// Sets the gauge `name` to `value`, keeping the interval's highest.
    pub fn gauge(&mut self, name: &str, value: u64) {
        match self.gauges.iter_mut().find(|g| g.name == name) {
            Some(g) => g.value = g.value.max(Some(value)),
            None => self.gauges.push(Gauge {
                name: name.to_string(),
                value: Some(value),
            }),
        }
    }

    /// The gauges set, by name.
    pub fn gauges_map(&self) -> Option<std::collections::BTreeMap<String, u64>> {
        let map: std::collections::BTreeMap<String, u64> = self
            .gauges
            .iter()
            .filter_map(|g| Some((g.name.clone(), g.value?)))
            .collect();
        (!map.is_empty()).then_some(map)
    }

    /// The counters that counted something, by name.
    pub fn counters_map(&self) -> Option<std::collections::BTreeMap<String, u64>> {
        let map: std::collections::BTreeMap<String, u64> = self
            .counters
            .iter()
            .filter(|c| c.count > 0)
            .map(|c| (c.name.clone(), c.count))
            .collect();
        (!map.is_empty()).then_some(map)
    }

    /// Counts `n` items carried by an operation of kind `kind`.
    #[inline]
    pub fn add_items(&mut self, kind: usize, n: u64) {
        self.ops[kind].items += n;
    }

    pub fn items_total(&self) -> u64 {
        self.ops.iter().map(|o| o.items).sum()
    }

    pub fn ops_total(&self) -> u64 {
        self.ops.iter().map(|o| o.count).sum()
    }

    pub fn op_errors_total(&self) -> u64 {
        self.ops.iter().map(|o| o.errors).sum()
    }

    pub fn merge(&mut self, other: &Stats) {
        self.events += other.events;
        self.failed_events += other.failed_events;
        self.retries += other.retries;
        self.reconnects += other.reconnects;
        self.late += other.late;
        self.dropped += other.dropped;
        add(&mut self.response, &other.response);
        add(&mut self.service, &other.service);
        add(&mut self.lag, &other.lag);
        if self.ops.len() < other.ops.len() {
            self.ops.resize_with(other.ops.len(), OpStats::new);
        }
        let kinds = self.ops.iter_mut().zip(&other.ops);
        for (mine, theirs) in kinds.chain([(&mut self.connects, &other.connects)]) {
            mine.count += theirs.count;
            mine.errors += theirs.errors;
            mine.items += theirs.items;
            add(&mut mine.latency, &theirs.latency);
        }
        for s in &other.error_samples {
            self.add_error_sample(&s.class, &s.message, s.count);
        }
        self.unsampled_errors += other.unsampled_errors;
        self.hits += other.hits;
        self.misses += other.misses;
        for c in other.counters.iter().filter(|c| c.count > 0) {
            self.count(&c.name, c.count);
        }
        for g in &other.gauges {
            if let Some(value) = g.value {
                self.gauge(&g.name, value);
            }
        }
        if self.groups.len() < other.groups.len() {
            self.groups
                .resize_with(other.groups.len(), GroupEvents::new);
        }
        for (mine, theirs) in self.groups.iter_mut().zip(&other.groups) {
            mine.events += theirs.events;
            mine.late += theirs.late;
            mine.dropped += theirs.dropped;
            add(&mut mine.response, &theirs.response);
            add(&mut mine.service, &theirs.service);
            add(&mut mine.lag, &theirs.lag);
        }
    }
}

/// Adds `from` into `to`. Adding walks every bucket, so empty histograms
/// (operation kinds a workload did not use, `lag` in closed loop) are skipped.
fn add(to: &mut Micros, from: &Micros) {
    if !from.is_empty() {
        // Same bounds on both sides, so adding cannot fail.
        let _ = to.add(from);
    }
}

/// Zeroes a histogram that holds something (zeroing walks every bucket).
fn clear(h: &mut Micros) {
    if !h.is_empty() {
        h.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_groups_are_kept_apart_merged_and_emptied() {
        let ms = Duration::from_millis;
        assert!(
            Stats::with_groups(1, 1).groups.is_empty(),
            "one group: the run's"
        );
        let mut a = Stats::with_groups(1, 2);
        a.record_event(ms(5), ms(1), Some(ms(4)));
        a.record_group_event(1, ms(5), ms(1), Some(ms(4)));
        let mut b = a.empty_like();
        assert_eq!((b.ops.len(), b.groups.len()), (1, 2));
        b.record_event(ms(2), ms(2), None);
        b.record_group_event(0, ms(2), ms(2), None);
        a.merge(&b);
        let [first, second] = &a.groups[..] else {
            panic!("two groups")
        };
        assert_eq!((first.events, second.events, a.events), (1, 1, 2));
        assert_eq!((first.late, second.late), (0, 1));
        assert_eq!((first.lag.len(), second.lag.len()), (0, 1));
        assert_eq!(second.response.max(), 5003);
        a.reset();
        assert!(a
            .groups
            .iter()
            .all(|g| g.events == 0 && g.response.is_empty()));
    }

    #[test]
    fn merge_adds_counts_and_histograms() {
        let mut a = Stats::new(2);
        let mut b = Stats::new(2);
        a.record_op(0, Duration::from_millis(1), true);
        b.record_op(0, Duration::from_millis(3), false);
        b.record_op(1, Duration::from_millis(5), true);
        a.add_items(1, 40);
        b.add_items(1, 2);
        a.record_connect(Duration::from_millis(2), true);
        b.record_connect(Duration::from_millis(8), false);
        a.record_event(Duration::from_millis(4), Duration::from_millis(2), None);
        b.record_event(
            Duration::from_millis(9),
            Duration::from_millis(2),
            Some(Duration::from_millis(7)),
        );
        a.merge(&b);
        assert_eq!(a.ops_total(), 3);
        assert_eq!(a.op_errors_total(), 1);
        assert_eq!(a.events, 2);
        assert_eq!(a.late, 1);
        assert_eq!(a.response.len(), 2);
        assert_eq!(a.lag.len(), 1);
        assert_eq!(a.ops[1].latency.len(), 1);
        assert_eq!((a.ops[0].items, a.ops[1].items), (0, 42));
        assert_eq!(a.items_total(), 42);
        assert_eq!((a.connects.count, a.connects.errors), (2, 1));
        assert_eq!(a.connects.latency.len(), 2);
    }

    #[test]
    fn named_counters_merge_by_name_and_survive_reset_zeroed() {
        let mut a = Stats::new(1);
        let mut b = Stats::new(1);
        a.count("2xx", 3);
        b.count("5xx", 1);
        b.count("2xx", 2);
        a.merge(&b);
        let map = a.counters_map().unwrap();
        assert_eq!(map.get("2xx"), Some(&5));
        assert_eq!(map.get("5xx"), Some(&1));
        a.reset();
        assert_eq!(a.counters.len(), 2, "names are kept for the next interval");
        assert_eq!(a.counters_map(), None, "a zero count is not reported");
    }

    #[test]
    fn gauges_keep_the_highest_value_set_and_are_unset_by_reset() {
        let mut a = Stats::new(1);
        let mut b = Stats::new(1);
        a.gauge("lag_rows", 30);
        a.gauge("lag_rows", 10);
        b.gauge("lag_rows", 20);
        b.gauge("other", 0);
        a.merge(&b);
        let map = a.gauges_map().unwrap();
        assert_eq!(map.get("lag_rows"), Some(&30));
        assert_eq!(map.get("other"), Some(&0), "a zero level is a level");
        a.reset();
        assert_eq!(a.gauges.len(), 2, "names are kept for the next interval");
        assert_eq!(a.gauges_map(), None, "nothing set in the new interval");
    }

    #[test]
    fn reset_leaves_empty_stats_of_the_same_shape() {
        let mut a = Stats::new(3);
        a.record_op(2, Duration::from_micros(10), false);
        a.add_items(2, 9);
        a.record_connect(Duration::from_millis(1), false);
        a.record_event(
            Duration::from_millis(4),
            Duration::from_millis(2),
            Some(Duration::from_millis(3)),
        );
        a.sample_error("fatal", "boom");
        (a.failed_events, a.retries, a.reconnects, a.dropped) = (1, 2, 3, 4);
        (a.unsampled_errors, a.hits, a.misses) = (5, 6, 7);
        a.reset();
        // Every field, histograms included, as in new stats: a field
        // added to `Stats` but not to `reset` fails here.
        assert_eq!(format!("{a:?}"), format!("{:?}", Stats::new(3)));
        // Reused stats record and merge like new ones.
        a.record_op(2, Duration::from_micros(20), true);
        let mut b = Stats::new(3);
        b.merge(&a);
        assert_eq!(b.ops[2].latency.max(), 20);
        assert_eq!(b.ops[2].latency.len(), 1);
    }

    #[test]
    fn error_samples_are_bounded_and_merged() {
        let mut a = Stats::new(0);
        for i in 0..(MAX_ERROR_SAMPLES + 5) {
            a.sample_error("fatal", &format!("error {i}"));
        }
        a.sample_error("fatal", "error 0");
        assert_eq!(a.error_samples.len(), MAX_ERROR_SAMPLES);
        assert_eq!(a.unsampled_errors, 5);
        assert_eq!(a.error_samples[0].count, 2);

        let mut b = Stats::new(0);
        b.sample_error("retryable", "deadlock");
        b.sample_error("retryable", "deadlock");
        let mut c = Stats::new(0);
        c.merge(&b);
        c.merge(&b);
        assert_eq!(
            c.error_samples,
            vec![ErrorSample {
                class: "retryable".into(),
                message: "deadlock".into(),
                count: 4
            }]
        );
    }
}
