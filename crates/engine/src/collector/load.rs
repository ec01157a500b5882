//! What the worker threads did, interval by interval and over the run
//! ([`CpuMeter`], [`RunLoad`]), and what that says: a saturated client,
//! events that started late and whose delay it was ([`Saturation`]), why a
//! rate was missed ([`missed_rate_cause`]).

use std::time::Duration;

use loadcell_record::Stats;

use super::intake::Pending;

/// A worker above this share of a core is saturated...
const HOT_WORKER: f64 = 0.90;
/// ...when it stays there for this many intervals in a row.
const HOT_INTERVALS: usize = 3;
/// Events starting this late (the p99 of an interval's schedule lag) are
/// worth a warning that says whose delay it was.
const LAG_FLOOR: Duration = Duration::from_millis(100);
/// A run whose every session waited on the server for at least this share
/// of it missed its rate because of the server.
const SERVER_BOUND: f64 = 0.5;

/// What one worker thread did over an interval (or the run), as shares of
/// its length.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct WorkerLoad {
    /// On a CPU.
    pub cpu: f64,
    /// Ready to run but waiting for a CPU (`None` where the kernel does not
    /// say).
    pub run_delay: Option<f64>,
    /// Every one of its sessions waiting on the server at once.
    pub all_waiting: f64,
}

impl WorkerLoad {
    /// Running, or wanting to: a thread busy all the time could not have
    /// sent anything sooner, whether its own work or other processes on
    /// the host kept it so.
    fn busy(&self) -> f64 {
        (self.cpu + self.run_delay.unwrap_or(0.0)).min(1.0)
    }

    /// "97% of {what} (61% on a CPU, 36% waiting for one)".
    fn busy_text(&self, what: &str) -> String {
        match self.run_delay {
            Some(d) if d >= 0.01 => format!(
                "{:.0}% of {what} ({:.0}% on a CPU, {:.0}% waiting for one)",
                100.0 * self.busy(),
                100.0 * self.cpu,
                100.0 * d
            ),
            _ => format!("{:.0}% of {what} on a CPU", 100.0 * self.busy()),
        }
    }
}

/// The busiest worker thread and what it did.
fn busiest(loads: &[WorkerLoad]) -> Option<(usize, WorkerLoad)> {
    loads
        .iter()
        .copied()
        .enumerate()
        .max_by(|a, b| a.1.busy().total_cmp(&b.1.busy()))
}

/// An interval as the saturation checks see it.
pub(super) struct Watched<'a> {
    pub loads: &'a [WorkerLoad],
    pub duration: Duration,
    /// From the start of the run to the interval's end.
    pub elapsed: Duration,
    pub stats: &'a Stats,
    pub rate: Option<f64>,
    pub sessions: usize,
}

/// Watches intervals for a saturated client, and for events that start
/// late, saying whose delay it was: the client's, when a worker thread was
/// busy all along (it could not send them sooner), or the server's, when
/// every session was waiting on it (none was free to send them: a free
/// session sends an overdue event at once). Each kind of warning is
/// raised once.
#[derive(Default)]
pub(super) struct Saturation {
    hot_streak: Vec<usize>,
    hot_warned: bool,
    /// Per worker, how long all its sessions waited in the last interval,
    /// and how long that interval was.
    last_waited: Vec<Duration>,
    last_duration: Duration,
    client_lag_warned: bool,
    server_lag_warned: bool,
    other_lag_warned: bool,
}

impl Saturation {
    pub(super) fn check(&mut self, at: &Watched<'_>) -> Vec<String> {
        let mut warnings = Vec::new();
        self.hot_streak.resize(at.loads.len(), 0);
        for (w, (load, streak)) in at.loads.iter().zip(&mut self.hot_streak).enumerate() {
            *streak = if load.busy() >= HOT_WORKER {
                *streak + 1
            } else {
                0
            };
            if *streak >= HOT_INTERVALS && !self.hot_warned {
                self.hot_warned = true;
                warnings.push(format!(
                    "the client is saturated: worker thread {w} was busy {} for {HOT_INTERVALS} intervals in a row, \
                     so these numbers may measure loadcell rather than the server; add --threads (if cores are free) or run the client on another machine",
                    load.busy_text("the time")
                ));
            }
        }
        // A stall that straddles a cut shows its late events in the
        // interval after it: the wait is looked for over both.
        let waited_now: Vec<Duration> = at
            .loads
            .iter()
            .map(|l| at.duration.mul_f64(l.all_waiting))
            .collect();
        self.last_waited.resize(waited_now.len(), Duration::ZERO);
        let waited = waited_now
            .iter()
            .zip(&self.last_waited)
            .map(|(now, last)| *now + *last)
            .min()
            .unwrap_or_default();
        self.last_waited = waited_now;
        let over = at.duration + std::mem::replace(&mut self.last_duration, at.duration);
        if let (Some(_), false) = (at.rate, at.stats.lag.is_empty()) {
            let lag = Duration::from_micros(at.stats.lag.value_at_quantile(0.99));
            if let Some(warning) = self.late_starts(at, lag, waited, over) {
                warnings.push(warning);
            }
        }
        warnings
    }

    /// A warning for events that started `lag` late (p99), if they did
    /// and none was raised for this cause; `waited` is how long every
    /// session was waiting on the server, `over` the last two intervals.
    fn late_starts(
        &mut self,
        at: &Watched<'_>,
        lag: Duration,
        waited: Duration,
        over: Duration,
    ) -> Option<String> {
        if lag <= LAG_FLOOR {
            return None;
        }
        let (w, load) = busiest(at.loads)?;
        let late = format!(
            "events started up to {:.0} ms behind schedule (p99 of the interval ending at {:.1} s)",
            lag.as_secs_f64() * 1000.0,
            at.elapsed.as_secs_f64()
        );
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        if load.busy() >= HOT_WORKER {
            if std::mem::replace(&mut self.client_lag_warned, true) {
                return None;
            }
            return Some(format!(
                "{late} because the client is saturated: worker thread {w} was busy {}, \
                 so it could not send events as they came due; add --threads (if cores are free) or run the client \
                 on another machine. Latency from the intended start is still reported truthfully",
                load.busy_text("that interval")
            ));
        }
        if waited >= lag.min(at.duration) / 2 {
            if std::mem::replace(&mut self.server_lag_warned, true) {
                return None;
            }
            return Some(format!(
                "{late} because every session was waiting on the server: all {} had a request in flight, unanswered, \
                 for {:.0} ms of the last {:.1} s, so events came due with no session free to send them, and queued. \
                 Not the client: no worker thread was busy more than {:.0}% of the interval. The wait counts in \
                 latency, which runs from each event's intended start",
                at.sessions,
                ms(waited),
                over.as_secs_f64(),
                100.0 * load.busy()
            ));
        }
        if std::mem::replace(&mut self.other_lag_warned, true) {
            return None;
        }
        Some(format!(
            "{late}, though no worker thread was busy more than {:.0}% of the interval and the sessions were all \
             waiting on the server for only {:.0} ms of the last {:.1} s: the client's threads woke late (is the \
             host overloaded?)",
            100.0 * load.busy(),
            ms(waited),
            over.as_secs_f64()
        ))
    }
}

/// What each worker thread did over the measured intervals.
#[derive(Default)]
pub(super) struct RunLoad {
    duration: Duration,
    cpu: Vec<Duration>,
    run_delay: Vec<Option<Duration>>,
    all_waiting: Vec<Duration>,
}

impl RunLoad {
    pub(super) fn add(
        &mut self,
        duration: Duration,
        cpu: &[Duration],
        run_delay: &[Option<Duration>],
        all_waiting: &[Duration],
    ) {
        let n = cpu.len();
        self.cpu.resize(n, Duration::ZERO);
        self.run_delay.resize(n, Some(Duration::ZERO));
        self.all_waiting.resize(n, Duration::ZERO);
        self.duration += duration;
        for w in 0..n {
            self.cpu[w] += cpu[w];
            self.run_delay[w] = self.run_delay[w].zip(run_delay[w]).map(|(a, b)| a + b);
            self.all_waiting[w] += all_waiting[w];
        }
    }

    pub(super) fn shares(&self) -> Vec<WorkerLoad> {
        let secs = self.duration.as_secs_f64();
        let share = |d: Duration| {
            if secs > 0.0 {
                d.as_secs_f64() / secs
            } else {
                0.0
            }
        };
        (0..self.cpu.len())
            .map(|w| WorkerLoad {
                cpu: share(self.cpu[w]),
                run_delay: self.run_delay[w].map(share),
                all_waiting: share(self.all_waiting[w]),
            })
            .collect()
    }
}

/// Why a run did not reach its rate, and what to do about it.
pub(super) fn missed_rate_cause(loads: &[WorkerLoad], sessions: usize) -> String {
    let waiting = loads
        .iter()
        .map(|l| l.all_waiting)
        .min_by(f64::total_cmp)
        .unwrap_or(0.0);
    match busiest(loads) {
        Some((w, load)) if load.busy() >= HOT_WORKER => format!(
            "The client is saturated: worker thread {w} was busy {}; add --threads (if cores are free) or run \
             the client on another machine, or lower --rate",
            load.busy_text("the run")
        ),
        Some((_, load)) if waiting >= SERVER_BOUND => format!(
            "Every session was waiting on the server: all {sessions} had a request in flight, unanswered, {:.0}% of \
             the run, while no worker thread was busy more than {:.0}% of it; add --clients if the server has \
             capacity to spare, or lower --rate",
            100.0 * waiting,
            100.0 * load.busy()
        ),
        _ => "The client or the server is saturated: add --threads or --clients, or lower --rate".to_string(),
    }
}

/// Turns the workers' cumulative CPU and run-queue delay, read at each of
/// their cuts, into what each did over one interval.
pub(super) struct CpuMeter {
    last_cpu: Vec<Duration>,
    last_run_delay: Vec<Option<Duration>>,
    /// Share of a core each worker used in the last interval, as shown live.
    pub worker_cpu: Vec<f64>,
}

/// What the workers did over one interval.
pub(super) struct IntervalLoad {
    pub loads: Vec<WorkerLoad>,
    pub cpu_used: Vec<Duration>,
    pub delay_used: Vec<Option<Duration>>,
}

impl CpuMeter {
    pub(super) fn new(workers: usize) -> CpuMeter {
        CpuMeter {
            last_cpu: vec![Duration::ZERO; workers],
            last_run_delay: vec![Some(Duration::ZERO); workers],
            worker_cpu: vec![0.0; workers],
        }
    }

    /// What each worker did over interval `p`, `duration` long.
    pub(super) fn measure(&mut self, p: &Pending, duration: Duration) -> IntervalLoad {
        let workers = self.last_cpu.len();
        let share = |d: Duration| {
            if duration.is_zero() {
                0.0
            } else {
                d.as_secs_f64() / duration.as_secs_f64()
            }
        };
        let mut cpu_used = vec![Duration::ZERO; workers];
        let mut delay_used = vec![None; workers];
        let mut loads = Vec::with_capacity(workers);
        for w in 0..workers {
            match p.cpu[w] {
                Some(c) => {
                    cpu_used[w] = c.saturating_sub(self.last_cpu[w]);
                    self.last_cpu[w] = c;
                    delay_used[w] = p.run_delay[w]
                        .zip(self.last_run_delay[w])
                        .map(|(now, last)| now.saturating_sub(last));
                    self.last_run_delay[w] = p.run_delay[w];
                }
                // A worker that has finished did nothing more.
                None => delay_used[w] = Some(Duration::ZERO),
            }
            self.worker_cpu[w] = share(cpu_used[w]);
            loads.push(WorkerLoad {
                cpu: self.worker_cpu[w],
                run_delay: delay_used[w].map(share),
                // Cut when the worker got to it, a little after the
                // interval's end at times.
                all_waiting: share(p.all_waiting[w]).min(1.0),
            });
        }
        IntervalLoad {
            loads,
            cpu_used,
            delay_used,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn load(cpu: f64, run_delay: f64, all_waiting: f64) -> WorkerLoad {
        WorkerLoad {
            cpu,
            run_delay: Some(run_delay),
            all_waiting,
        }
    }

    /// Checks one 1 s interval ending at `at` s.
    fn check(
        s: &mut Saturation,
        loads: &[WorkerLoad],
        stats: &Stats,
        rate: Option<f64>,
        at: u64,
    ) -> Vec<String> {
        s.check(&Watched {
            loads,
            duration: SECOND,
            elapsed: SECOND * at as u32,
            stats,
            rate,
            sessions: 10,
        })
    }

    fn cpu_only(s: &mut Saturation, cpu: &[f64]) -> Vec<String> {
        let loads: Vec<WorkerLoad> = cpu.iter().map(|&c| load(c, 0.0, 0.0)).collect();
        check(s, &loads, &Stats::new(0), None, 1)
    }

    /// Stats whose events started `ms` late.
    fn lagged(ms: u64) -> Stats {
        let mut st = Stats::new(0);
        for _ in 0..100 {
            st.record_event(
                Duration::from_millis(ms + 1),
                Duration::from_millis(1),
                Some(Duration::from_millis(ms)),
            );
        }
        st
    }

    #[test]
    fn a_worker_hot_for_three_intervals_raises_one_warning() {
        let mut s = Saturation::default();
        assert!(cpu_only(&mut s, &[0.95, 0.2]).is_empty());
        assert!(cpu_only(&mut s, &[0.97, 0.2]).is_empty());
        let w = cpu_only(&mut s, &[0.99, 0.2]);
        assert_eq!(w.len(), 1);
        assert!(
            w[0].contains("worker thread 0 was busy 99% of the time on a CPU for 3 intervals"),
            "{}",
            w[0]
        );
        assert!(cpu_only(&mut s, &[0.99, 0.99]).is_empty(), "raised once");
    }

    #[test]
    fn a_worker_kept_from_a_cpu_is_as_saturated_as_one_on_it() {
        let mut s = Saturation::default();
        let starved = [load(0.55, 0.42, 0.0)];
        let stats = Stats::new(0);
        assert!(check(&mut s, &starved, &stats, None, 1).is_empty());
        assert!(check(&mut s, &starved, &stats, None, 2).is_empty());
        let w = check(&mut s, &starved, &stats, None, 3);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("was busy 97% of the time (55% on a CPU, 42% waiting for one)"),
            "{}",
            w[0]
        );
    }

    #[test]
    fn a_dip_resets_the_streak() {
        let mut s = Saturation::default();
        for cpu in [0.95, 0.95, 0.5, 0.95, 0.95] {
            assert!(cpu_only(&mut s, &[cpu]).is_empty());
        }
    }

    #[test]
    fn late_starts_while_every_session_waits_are_the_servers() {
        let mut s = Saturation::default();
        // A 500 ms stall: the worker idles, all sessions waiting on it.
        let w = check(
            &mut s,
            &[load(0.1, 0.02, 0.5)],
            &lagged(480),
            Some(2000.0),
            3,
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("480 ms behind schedule")
                && w[0].contains("ending at 3.0 s")
                && w[0].contains("because every session was waiting on the server")
                && w[0].contains(
                    "all 10 had a request in flight, unanswered, for 500 ms of the last 1.0 s"
                )
                && w[0].contains("no worker thread was busy more than 12%"),
            "{}",
            w[0]
        );
        assert!(!w[0].contains("client is saturated"), "{}", w[0]);
        // Raised once.
        assert!(check(
            &mut s,
            &[load(0.1, 0.0, 0.6)],
            &lagged(500),
            Some(2000.0),
            4
        )
        .is_empty());
    }

    #[test]
    fn a_stall_straddling_a_cut_is_found_over_both_intervals() {
        let mut s = Saturation::default();
        // 300 ms of waiting at the end of one interval, 200 ms at the
        // start of the next, where the late events finish.
        assert!(check(&mut s, &[load(0.1, 0.0, 0.3)], &lagged(0), Some(2000.0), 1).is_empty());
        let w = check(
            &mut s,
            &[load(0.1, 0.0, 0.2)],
            &lagged(450),
            Some(2000.0),
            2,
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("for 500 ms of the last 2.0 s"), "{}", w[0]);
    }

    #[test]
    fn late_starts_on_a_busy_worker_are_the_clients() {
        let mut s = Saturation::default();
        // On a CPU half the time, waiting for one the rest: a host shared
        // with other work. The worker never idled.
        let w = check(
            &mut s,
            &[load(0.3, 0.0, 0.0), load(0.55, 0.43, 0.9)],
            &lagged(800),
            Some(1e6),
            2,
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("because the client is saturated: worker thread 1 was busy 98% of that interval (55% on a CPU, 43% waiting for one)"),
            "{}",
            w[0]
        );
        assert!(!w[0].contains("waiting on the server"), "{}", w[0]);
    }

    #[test]
    fn late_starts_with_free_sessions_and_idle_workers_blame_neither() {
        let mut s = Saturation::default();
        let w = check(
            &mut s,
            &[load(0.2, 0.1, 0.01)],
            &lagged(300),
            Some(100.0),
            5,
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("the client's threads woke late"), "{}", w[0]);
        assert!(
            !w[0].contains("client is saturated") && !w[0].contains("because every session"),
            "{}",
            w[0]
        );
    }

    #[test]
    fn lag_is_looked_at_in_open_loop_only_and_above_the_floor() {
        let mut s = Saturation::default();
        let idle = [load(0.1, 0.0, 0.0)];
        assert!(check(&mut s, &idle, &lagged(5000), None, 1).is_empty());
        assert!(check(&mut s, &idle, &lagged(90), Some(1000.0), 2).is_empty());
    }

    #[test]
    fn a_missed_rate_names_its_cause() {
        let client = missed_rate_cause(&[load(0.6, 0.35, 0.9)], 1);
        assert!(
            client.starts_with("The client is saturated: worker thread 0 was busy 95% of the run"),
            "{client}"
        );
        let server = missed_rate_cause(&[load(0.2, 0.0, 0.8), load(0.3, 0.0, 0.7)], 4);
        assert!(
            server.starts_with("Every session was waiting on the server: all 4 had a request in flight, unanswered, 70% of the run")
                && server.contains("no worker thread was busy more than 30%"),
            "{server}"
        );
        let neither = missed_rate_cause(&[load(0.5, 0.0, 0.2)], 4);
        assert!(neither.starts_with("The client or the server"), "{neither}");
        let nothing = missed_rate_cause(&[], 4);
        assert!(nothing.starts_with("The client or the server"), "{nothing}");
    }

    fn pending(cpu: &[Option<u64>], delay: &[Option<u64>], waiting: &[u64]) -> Pending {
        let ms = Duration::from_millis;
        let mut p = Pending::new(&Stats::new(0), cpu.len());
        p.cpu = cpu.iter().map(|c| c.map(ms)).collect();
        p.run_delay = delay.iter().map(|d| d.map(ms)).collect();
        p.all_waiting = waiting.iter().map(|&w| ms(w)).collect();
        p
    }

    #[test]
    fn the_meter_takes_each_interval_from_the_cumulative_counts() {
        let mut meter = CpuMeter::new(2);
        let first = meter.measure(
            &pending(&[Some(300), Some(100)], &[Some(50), None], &[0, 500]),
            SECOND,
        );
        assert_eq!(first.loads[0], load(0.3, 0.05, 0.0));
        assert_eq!(
            first.loads[1],
            WorkerLoad {
                cpu: 0.1,
                run_delay: None,
                all_waiting: 0.5
            }
        );
        // Cumulative: the second interval is what grew since the first.
        let second = meter.measure(
            &pending(&[Some(1200), Some(100)], &[Some(150), None], &[0, 2000]),
            SECOND,
        );
        assert_eq!(
            second.cpu_used,
            vec![Duration::from_millis(900), Duration::ZERO]
        );
        assert_eq!(meter.worker_cpu, vec![0.9, 0.0]);
        assert_eq!(second.loads[0].run_delay, Some(0.1));
        // Waiting measured a little past the cut never exceeds the interval.
        assert_eq!(second.loads[1].all_waiting, 1.0);
    }

    #[test]
    fn a_finished_worker_did_nothing_more() {
        let mut meter = CpuMeter::new(1);
        meter.measure(&pending(&[Some(400)], &[Some(10)], &[0]), SECOND);
        let after = meter.measure(&pending(&[None], &[None], &[0]), SECOND);
        assert_eq!(after.cpu_used, vec![Duration::ZERO]);
        assert_eq!(after.delay_used, vec![Some(Duration::ZERO)]);
        assert_eq!(after.loads[0], load(0.0, 0.0, 0.0));
    }

    #[test]
    fn a_zero_length_interval_has_no_shares() {
        let mut meter = CpuMeter::new(1);
        let stub = meter.measure(&pending(&[Some(5)], &[Some(1)], &[1]), Duration::ZERO);
        assert_eq!(stub.loads[0], load(0.0, 0.0, 0.0));
    }
}
