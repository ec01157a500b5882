//! One process's exact share of a run spread over several (`--shard I/N`),
//! as k6's execution segments split theirs: its part of the sessions of
//! every group, of each group's rate and of the event limit, with the
//! sessions numbered among all shards' so that workloads splitting keys
//! by session (`SessionInfo::index` of `count`) split them by shard ×
//! session. The parts of N shards are disjoint and add up to the whole.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use crate::spec::{RateSpec, RunSpec};

/// Shard `index` (0-based, as Kubernetes' `JOB_COMPLETION_INDEX`) of
/// `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    pub fn new(index: usize, count: usize) -> Result<Shard, String> {
        if count == 0 {
            return Err(format!(
                "shard {index}/0: a run is split over at least 1 shard"
            ));
        }
        if index >= count {
            return Err(format!(
                "shard {index}/{count}: shards are numbered from 0 to {} (0-based, as \
                 JOB_COMPLETION_INDEX)",
                count - 1
            ));
        }
        Ok(Shard { index, count })
    }

    /// This shard's part of `total` things numbered `0..total`: the N
    /// parts are consecutive, disjoint, cover them all and differ in
    /// length by at most one.
    pub fn range(self, total: u64) -> Range<u64> {
        let cut = |i: usize| (total as u128 * i as u128 / self.count as u128) as u64;
        cut(self.index)..cut(self.index + 1)
    }

    /// This shard's part of a rate: the whole's N-th.
    pub fn rate(self, whole: f64) -> f64 {
        whole / self.count as f64
    }

    /// This shard's part of `spec`, the whole run: its sessions of each
    /// group (numbered among all shards'), each group's rate, the event
    /// limit. Refused when a shard would be left without a session or an
    /// event, naming what to raise.
    pub fn of(self, spec: &RunSpec) -> Result<RunSpec, String> {
        let mut part = spec.clone();
        let n = self.count;
        let first_sessions = spec.threads * spec.clients;
        if first_sessions < n {
            return Err(format!(
                "--threads {} x --clients {} = {first_sessions} sessions cannot be split over {n} \
                 shards, each of which needs one: give --clients {} or more",
                spec.threads,
                spec.clients,
                n.div_ceil(spec.threads)
            ));
        }
        let (threads, clients, first) = self.first_group(spec.threads, spec.clients);
        (part.threads, part.clients) = (threads, clients);
        let mut spans = vec![SessionSpan {
            first,
            total: first_sessions,
        }];
        if let Some(groups) = &mut part.groups {
            for g in &mut groups.others {
                if g.sessions < n {
                    return Err(format!(
                        "the {} group's {} sessions cannot be split over {n} shards, each of \
                         which needs one: give {n} or more",
                        g.name, g.sessions
                    ));
                }
                let r = self.range(g.sessions as u64);
                spans.push(SessionSpan {
                    first: r.start as usize,
                    total: g.sessions,
                });
                g.sessions = (r.end - r.start) as usize;
                g.rate = g.rate.map(|r| self.rate_spec(r));
            }
        }
        part.rate = spec.rate.map(|r| self.rate_spec(r));
        // Its share of a shaped rate: with `phase`, the events i, i + N, …
        // of the whole shape, as with a fixed rate. Shaped sessions are
        // numbered among all shards', so each shard runs those of its own
        // that the whole shape has running, and together they run it.
        if let Some(s) = &mut part.stages {
            if s.of == crate::shape::StageTarget::Rate {
                s.shape = s.shape.scaled(self.rate(1.0));
            }
        }
        if let Some(events) = spec.events {
            if events < n as u64 {
                return Err(format!(
                    "--events {events} cannot be split over {n} shards, each of which needs \
                     one: give --events {n} or more"
                ));
            }
            let r = self.range(events);
            part.events = Some(r.end - r.start);
        }
        let first_group_sessions = (0..n)
            .map(|j| {
                let (threads, clients, _) =
                    Shard { index: j, count: n }.first_group(spec.threads, spec.clients);
                threads * clients
            })
            .collect();
        part.shard = Some(ShardPlace {
            shard: self,
            spans,
            first_group_sessions,
        });
        Ok(part)
    }

    /// This shard's part of the first group's `threads × clients`
    /// sessions: its threads, its clients per thread, and its first
    /// session's number among all shards'. Whole threads per shard where
    /// there are enough, so each keeps its clients; else sessions one per
    /// thread.
    fn first_group(self, threads: usize, clients: usize) -> (usize, usize, usize) {
        if threads >= self.count {
            let r = self.range(threads as u64);
            (
                (r.end - r.start) as usize,
                clients,
                r.start as usize * clients,
            )
        } else {
            let r = self.range((threads * clients) as u64);
            ((r.end - r.start) as usize, 1, r.start as usize)
        }
    }

    fn rate_spec(self, whole: RateSpec) -> RateSpec {
        RateSpec {
            per_sec: self.rate(whole.per_sec),
            ..whole
        }
    }

    /// Where this shard's uniform arrivals fall between the whole run's,
    /// in gaps of its own rate: shard i of N sends the whole schedule's
    /// events i, i + N, i + 2N…, so together the shards send it exactly.
    pub fn phase(self) -> f64 {
        self.index as f64 / self.count as f64
    }
}

/// `I/N`, as `--shard` takes it.
impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Shard, String> {
        let parsed = s
            .split_once('/')
            .and_then(|(i, n)| Some((i.trim().parse().ok()?, n.trim().parse().ok()?)));
        match parsed {
            Some((index, count)) => Shard::new(index, count),
            None => Err(format!(
                "'{s}' is not a shard: give I/N, shard I (0-based) of N, e.g. 0/3"
            )),
        }
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// A session group's sessions as this shard runs them: the first one's
/// number among all shards' sessions of the group, and how many all
/// shards run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionSpan {
    pub first: usize,
    pub total: usize,
}

/// A sharded run's place among the shards: `spans[g]` for group g.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardPlace {
    pub shard: Shard,
    pub spans: Vec<SessionSpan>,
    /// How many sessions of the first group each shard runs.
    pub first_group_sessions: Vec<usize>,
}

impl ShardPlace {
    /// Under `--session-stages`, when the first group's session `index`
    /// (among all shards') runs: the shards' sessions take turns, the
    /// first of each shard, then the second of each…, so that every shard
    /// carries its share of a ramp, not the first shard all of its start.
    pub fn wake_rank(&self, index: usize) -> usize {
        let mine = self.shard.index;
        let local = index - self.spans[0].first;
        let sizes = &self.first_group_sessions;
        let earlier_turns: usize = sizes.iter().map(|&size| size.min(local)).sum();
        let earlier_this_turn = sizes[..mine].iter().filter(|&&size| size > local).count();
        earlier_turns + earlier_this_turn
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Arrival, SessionGroup, SessionGroups};

    fn whole(threads: usize, clients: usize, rate: Option<f64>, events: Option<u64>) -> RunSpec {
        let mut spec = crate::schedule::tests::spec(
            rate.map(|per_sec| RateSpec {
                per_sec,
                arrival: Arrival::Uniform,
                tick: None,
            }),
            None,
            events,
        );
        (spec.threads, spec.clients) = (threads, clients);
        spec
    }

    fn shards(n: usize) -> impl Iterator<Item = Shard> {
        (0..n).map(move |i| Shard::new(i, n).unwrap())
    }

    #[test]
    fn shards_take_turns_waking_their_sessions() {
        for (sessions, n) in [(5, 2), (7, 3), (12, 4), (3, 3)] {
            let spec = whole(sessions, 1, None, None);
            let mut ranks: Vec<(usize, usize)> = Vec::new();
            for shard in shards(n) {
                let part = shard.of(&spec).unwrap();
                let place = part.shard.as_ref().unwrap();
                for k in 0..part.sessions() {
                    let index = part.place(k).index;
                    ranks.push((place.wake_rank(index), shard.index));
                }
            }
            ranks.sort_unstable();
            // Every rank once: the whole shape's sessions, none left out.
            let order: Vec<usize> = ranks.iter().map(|r| r.0).collect();
            assert_eq!(
                order,
                (0..sessions).collect::<Vec<_>>(),
                "{sessions} over {n}"
            );
            // The first n to wake are one per shard.
            let first: std::collections::BTreeSet<usize> = ranks[..n].iter().map(|r| r.1).collect();
            assert_eq!(first.len(), n, "{ranks:?}");
        }
    }

    #[test]
    fn ranges_are_disjoint_and_cover_the_whole_for_awkward_counts() {
        for n in [1, 2, 3, 7, 13, 64] {
            for total in [n as u64, 10, 100, 1001, u64::MAX / 3] {
                let parts: Vec<_> = shards(n).map(|s| s.range(total)).collect();
                assert_eq!(parts[0].start, 0);
                assert_eq!(parts[n - 1].end, total);
                for w in parts.windows(2) {
                    assert_eq!(w[0].end, w[1].start);
                }
                let lens: Vec<u64> = parts.iter().map(|r| r.end - r.start).collect();
                let (min, max) = (lens.iter().min().unwrap(), lens.iter().max().unwrap());
                assert!(max - min <= 1, "{n} of {total}: {lens:?}");
            }
        }
    }

    #[test]
    fn sessions_rates_and_events_add_up_to_the_whole_run() {
        for (threads, clients, n) in [(8, 25, 3), (2, 5, 3), (1, 7, 7), (5, 1, 2), (3, 3, 4)] {
            let spec = whole(threads, clients, Some(1000.0), Some(1_000_003));
            let parts: Vec<RunSpec> = shards(n).map(|s| s.of(&spec).unwrap()).collect();
            let sessions: usize = parts.iter().map(RunSpec::sessions).sum();
            assert_eq!(sessions, threads * clients, "{threads}x{clients} over {n}");
            let events: u64 = parts.iter().map(|p| p.events.unwrap()).sum();
            assert_eq!(events, 1_000_003);
            let rate: f64 = parts.iter().map(|p| p.rate.unwrap().per_sec).sum();
            assert!((rate - 1000.0).abs() < 1e-9, "{rate}");
            // Global session numbers: consecutive, from 0 to the whole's.
            let mut next = 0;
            for p in &parts {
                let span = p.shard.as_ref().unwrap().spans[0];
                assert_eq!((span.first, span.total), (next, threads * clients));
                next += p.sessions();
            }
        }
        // Enough threads: each shard keeps whole threads of --clients.
        let part = Shard::new(1, 3)
            .unwrap()
            .of(&whole(8, 25, None, None))
            .unwrap();
        assert_eq!((part.threads, part.clients), (3, 25));
    }

    #[test]
    fn other_groups_are_split_too() {
        let mut spec = whole(4, 1, None, None);
        spec.groups = Some(SessionGroups {
            first: "bulk",
            others: vec![SessionGroup {
                name: "query",
                sessions: 5,
                rate: Some(RateSpec {
                    per_sec: 90.0,
                    arrival: Arrival::Poisson,
                    tick: None,
                }),
            }],
        });
        let parts: Vec<RunSpec> = shards(2).map(|s| s.of(&spec).unwrap()).collect();
        let query = |p: &RunSpec| p.groups.as_ref().unwrap().others[0].clone();
        assert_eq!(query(&parts[0]).sessions + query(&parts[1]).sessions, 5);
        assert_eq!(query(&parts[1]).rate.unwrap().per_sec, 45.0);
        assert_eq!(
            parts[1].shard.as_ref().unwrap().spans[1],
            SessionSpan { first: 2, total: 5 }
        );
        assert_eq!(parts[1].place(4).index, 2 + 2);
    }

    #[test]
    fn a_shard_left_without_sessions_or_events_is_refused_with_the_fix() {
        let e = Shard::new(0, 3)
            .unwrap()
            .of(&whole(1, 2, None, None))
            .unwrap_err();
        assert_eq!(
            e,
            "--threads 1 x --clients 2 = 2 sessions cannot be split over 3 shards, each of which \
             needs one: give --clients 3 or more"
        );
        let e = Shard::new(0, 3)
            .unwrap()
            .of(&whole(3, 1, None, Some(2)))
            .unwrap_err();
        assert!(
            e.starts_with("--events 2 cannot be split over 3 shards"),
            "{e}"
        );
    }

    #[test]
    fn shards_parse_zero_based_and_bad_ones_say_why() {
        assert_eq!("2/3".parse::<Shard>(), Ok(Shard { index: 2, count: 3 }));
        assert_eq!(Shard::new(2, 3).unwrap().to_string(), "2/3");
        for (bad, why) in [
            ("3/3", "numbered from 0 to 2"),
            ("0/0", "at least 1 shard"),
            ("1", "not a shard"),
            ("a/2", "not a shard"),
        ] {
            let e = bad.parse::<Shard>().unwrap_err();
            assert!(e.contains(why) && !e.contains('\n'), "{bad}: {e}");
        }
    }
}
