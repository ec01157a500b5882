//! Resource samples, one at the end of each interval ([`Sampling`]): the
//! client's and host's CPU and memory, the server process's when it runs
//! here, the server's own counters read over a connection of their own,
//! and the newest scrapes of `--server-metrics`.

use std::time::Duration;

use loadcell_core::Driver;
use loadcell_record::coarse::MAX_POINTS;
use loadcell_record::remote::Readings;
use loadcell_record::resources::{ResourceSample, Sampler};
use loadcell_record::spill::Spilled;

use super::Observer;

/// How long a server-counter query may take before the sample goes
/// without it.
const COUNTER_TIMEOUT: Duration = Duration::from_secs(1);

pub(super) struct Sampling<C> {
    sampler: Sampler,
    samples: Spilled<ResourceSample>,
    sampled: bool,
    /// A connection of its own for server counters; without one, samples
    /// simply go without them.
    monitor: Option<C>,
}

impl<C> Sampling<C> {
    pub(super) fn new(server_pid: Option<u32>, monitor: Option<C>) -> Sampling<C> {
        Sampling {
            sampler: Sampler::new(server_pid),
            samples: Spilled::new(MAX_POINTS),
            sampled: false,
            monitor,
        }
    }

    /// Samples after an interval `duration` long that ended `t_s` from the
    /// measurement's start (negative in warm-up), unless it is a run's
    /// stub (see [`covers`]).
    pub(super) async fn after_interval<D>(
        &mut self,
        driver: &D,
        t_s: f64,
        duration: Duration,
        interval: Duration,
        server_metrics: Option<&Readings>,
        observer: &mut dyn Observer,
    ) where
        D: Driver<Conn = C>,
    {
        let counters = self.server_counters(driver).await;
        if !covers(duration, interval, self.sampled) {
            return;
        }
        self.sampled = true;
        let mut sample = self.sampler.sample(t_s, counters);
        if let Some(readings) = server_metrics {
            sample.remote = readings.take();
        }
        observer.resources(&sample);
        self.samples.push(sample);
    }

    async fn server_counters<D>(&mut self, driver: &D) -> Vec<(String, f64)>
    where
        D: Driver<Conn = C>,
    {
        let Some(conn) = &mut self.monitor else {
            return Vec::new();
        };
        match tokio::time::timeout(COUNTER_TIMEOUT, driver.server_counters(conn)).await {
            Ok(Ok(counters)) => counters,
            Ok(Err(_)) | Err(_) => {
                // A broken or slow monitor is dropped, not retried.
                self.monitor = None;
                Vec::new()
            }
        }
    }

    /// Every sample taken, at most [`MAX_POINTS`] (averaged in pairs beyond).
    pub(super) fn into_samples(self) -> Vec<ResourceSample> {
        self.samples.into_vec()
    }
}

/// Whether an interval `duration` long gets a sample of its own. The stub
/// of an interval that ends a run (events answered after the deadline)
/// spans a few ms: CPU counted in 10 ms ticks reads 0% or 600% there, and
/// would skew the averages. Judged by the interval's own length, not by
/// the time since the last sample, which a slow counter read before it
/// moves (a whole interval's sample, and its counter rates, were lost).
/// The first interval is always sampled.
fn covers(duration: Duration, interval: Duration, sampled: bool) -> bool {
    duration * 2 >= interval || !sampled
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stub_interval_gets_no_sample_of_its_own() {
        let iv = Duration::from_secs(1);
        assert!(covers(iv, iv, true));
        assert!(covers(iv / 2, iv, true), "half an interval is sampled");
        assert!(!covers(Duration::from_millis(4), iv, true), "a run's stub");
        assert!(
            covers(Duration::from_millis(4), iv, false),
            "the first is always sampled"
        );
    }
}
