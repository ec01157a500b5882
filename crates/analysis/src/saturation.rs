//! What ran out where throughput stopped scaling: the client's CPU, the
//! host's, the server process's or a disk, judged from the figures sampled
//! during a run against explicit thresholds — or nothing measured, which
//! leaves a limit inside the server (a lock, a queue, a concurrency cap).

use serde::{Deserialize, Serialize};

/// A process or device counts as saturated at this share of its capacity.
pub const SATURATED: f64 = 0.9;

/// The host's CPU counts as the system's limit only when loadcell and the
/// server account for at least this share of its busy time; otherwise
/// other processes kept it busy.
pub const OWN_SHARE_OF_HOST: f64 = 0.5;

/// What a run's resource samples averaged to over its measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ResourceFigures {
    /// loadcell's own CPU, in percent of one core.
    pub client_cpu_pct: f64,
    /// Cores loadcell's worker threads can use: one each, at most the host's.
    pub client_cores: usize,
    /// Busy CPU of the whole host, in percent of one core.
    pub host_cpu_pct: f64,
    pub host_cpus: usize,
    /// The server process's CPU, in percent of one core, when it runs on
    /// this host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_pct: Option<f64>,
    /// The CPU of the machine the server runs on, in percent of that
    /// machine (a cluster's busiest node's), when the server says so in
    /// its own counters: what shows a server on another host saturated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_host_cpu_pct: Option<f64>,
    /// Bytes received plus sent per second, all interfaces.
    pub net_bytes_per_s: f64,
    /// Share of time the busiest disk had I/O in flight, percent.
    pub disk_busy_pct: f64,
    /// Bytes the host's disks read and wrote per second.
    #[serde(default)]
    pub disk_bytes_per_s: f64,
    /// Bytes the server process read from and wrote to storage per second,
    /// when it runs on this host and its I/O can be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_disk_bytes_per_s: Option<f64>,
    /// Share of time the busiest disk of the machine the server runs on had
    /// I/O in flight, percent, when that machine is scraped
    /// (`--server-metrics` with node_exporter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_host_disk_busy_pct: Option<f64>,
}

impl ResourceFigures {
    /// The mean of several runs' figures (a point's repeats); the server's
    /// CPU only when every run measured it.
    pub fn mean(all: &[ResourceFigures]) -> Option<ResourceFigures> {
        let first = all.first()?;
        let n = all.len() as f64;
        let avg = |f: fn(&ResourceFigures) -> f64| all.iter().map(f).sum::<f64>() / n;
        let server: Option<Vec<f64>> = all.iter().map(|f| f.server_cpu_pct).collect();
        let server_host: Option<Vec<f64>> = all.iter().map(|f| f.server_host_cpu_pct).collect();
        let server_disk: Option<Vec<f64>> = all.iter().map(|f| f.server_disk_bytes_per_s).collect();
        let server_host_disk: Option<Vec<f64>> =
            all.iter().map(|f| f.server_host_disk_busy_pct).collect();
        Some(ResourceFigures {
            client_cpu_pct: avg(|f| f.client_cpu_pct),
            client_cores: first.client_cores,
            host_cpu_pct: avg(|f| f.host_cpu_pct),
            host_cpus: first.host_cpus,
            server_cpu_pct: server.map(|s| s.iter().sum::<f64>() / n),
            server_host_cpu_pct: server_host.map(|s| s.iter().sum::<f64>() / n),
            net_bytes_per_s: avg(|f| f.net_bytes_per_s),
            disk_busy_pct: avg(|f| f.disk_busy_pct),
            disk_bytes_per_s: avg(|f| f.disk_bytes_per_s),
            server_disk_bytes_per_s: server_disk.map(|s| s.iter().sum::<f64>() / n),
            server_host_disk_busy_pct: server_host_disk.map(|s| s.iter().sum::<f64>() / n),
        })
    }

    /// Whether the server's own storage I/O keeps the busy disk busy: a
    /// disk the server does not use (another process's, or this host's
    /// when the server runs elsewhere) is not its limit.
    fn disk_busy_with_server(&self) -> bool {
        self.server_disk_bytes_per_s
            .is_some_and(|b| b > 0.0 && b >= OWN_SHARE_OF_HOST * self.disk_bytes_per_s)
    }

    fn client_capacity(&self) -> f64 {
        100.0 * self.client_cores.min(self.host_cpus).max(1) as f64
    }

    fn host_capacity(&self) -> f64 {
        100.0 * self.host_cpus.max(1) as f64
    }

    /// Whether other processes kept the host's CPU saturated.
    fn host_busy_with_others(&self) -> bool {
        self.host_cpu_pct >= SATURATED * self.host_capacity() && !self.host_busy_with_us()
    }

    fn host_busy_with_us(&self) -> bool {
        let ours = self.client_cpu_pct + self.server_cpu_pct.unwrap_or(0.0);
        ours >= OWN_SHARE_OF_HOST * self.host_cpu_pct
    }

    /// The figures beside the one named, e.g. "server CPU 40%, host CPU
    /// 150% of 200%, network 12 MB/s".
    fn context(&self, named: Option<Resource>) -> String {
        let mut parts = Vec::new();
        if named != Some(Resource::ClientCpu) {
            parts.push(format!(
                "client CPU {:.0}% of {:.0}%",
                self.client_cpu_pct,
                self.client_capacity()
            ));
        }
        if let (Some(s), false) = (self.server_cpu_pct, named == Some(Resource::ServerCpu)) {
            parts.push(format!("server CPU {s:.0}%"));
        }
        if let (Some(s), false) = (
            self.server_host_cpu_pct,
            named == Some(Resource::ServerHostCpu),
        ) {
            parts.push(format!("server's host CPU {s:.0}%"));
        }
        if named != Some(Resource::HostCpu) {
            parts.push(format!(
                "host CPU {:.0}% of {:.0}%",
                self.host_cpu_pct,
                self.host_capacity()
            ));
        }
        if let (Some(d), false) = (
            self.server_host_disk_busy_pct,
            named == Some(Resource::ServerHostDisk),
        ) {
            parts.push(format!("server's host disk busy {d:.0}%"));
        }
        parts.push(format!("network {}", bytes_per_s(self.net_bytes_per_s)));
        if named != Some(Resource::Disk) && self.disk_busy_pct > 0.0 {
            parts.push(format!("disk busy {:.0}%", self.disk_busy_pct));
        }
        parts.join(", ")
    }
}

fn bytes_per_s(b: f64) -> String {
    if b >= 1e6 {
        format!("{:.1} MB/s", b / 1e6)
    } else {
        format!("{:.0} kB/s", b / 1e3)
    }
}

/// A resource with a known capacity that the samples measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resource {
    /// loadcell's worker threads used (nearly) every core they can.
    ClientCpu,
    /// The host's cores, shared by client and server, were (nearly) all busy.
    HostCpu,
    /// The server process used (nearly) a whole core: the limit of a
    /// single-threaded server such as Redis.
    ServerCpu,
    /// The machine a server on another host runs on (a cluster's busiest
    /// node) had (nearly) all its CPU busy, as the server reported.
    ServerHostCpu,
    /// The busiest disk had I/O in flight (nearly) all the time.
    Disk,
    /// The busiest disk of the machine a server on another host runs on
    /// had I/O in flight (nearly) all the time, as its node_exporter said.
    ServerHostDisk,
}

/// The resource at or above [`SATURATED`] of its capacity, if any. Checked
/// in this order because each can cause the next to look idle: a saturated
/// client offers the server less load, and a saturated host slows both.
pub fn saturated(f: &ResourceFigures) -> Option<Resource> {
    if f.client_cpu_pct >= SATURATED * f.client_capacity() {
        Some(Resource::ClientCpu)
    } else if f.host_cpu_pct >= SATURATED * f.host_capacity() && f.host_busy_with_us() {
        Some(Resource::HostCpu)
    } else if f.server_cpu_pct.is_some_and(|s| s >= SATURATED * 100.0) {
        Some(Resource::ServerCpu)
    } else if f.server_cpu_pct.is_none()
        && f.server_host_cpu_pct
            .is_some_and(|s| s >= SATURATED * 100.0)
    {
        // Only for a server elsewhere: on this host, the host's CPU
        // (above) says more, and tells whose processes used it.
        Some(Resource::ServerHostCpu)
    } else if f.disk_busy_pct >= SATURATED * 100.0 && f.disk_busy_with_server() {
        Some(Resource::Disk)
    } else if f.server_cpu_pct.is_none()
        && f.server_host_disk_busy_pct
            .is_some_and(|d| d >= SATURATED * 100.0)
    {
        Some(Resource::ServerHostDisk)
    } else {
        None
    }
}

impl Resource {
    /// Plain words with the figure, e.g. "client CPU: loadcell used 98% of
    /// the 100% its 1 worker thread can use (server CPU 40%, ...)".
    pub fn describe(self, f: &ResourceFigures) -> String {
        let what = match self {
            Resource::ClientCpu => format!(
                "client CPU: loadcell used {:.0}% of the {:.0}% its worker threads can use",
                f.client_cpu_pct,
                f.client_capacity()
            ),
            Resource::HostCpu => format!(
                "host CPU: {:.0}% of {:.0}% in use; client and server share these cores",
                f.host_cpu_pct,
                f.host_capacity()
            ),
            Resource::ServerCpu => format!(
                "server CPU: the server process used {:.0}% of a core",
                f.server_cpu_pct.unwrap_or(0.0)
            ),
            Resource::ServerHostCpu => format!(
                "server's host CPU: the server reported its machine {:.0}% busy",
                f.server_host_cpu_pct.unwrap_or(0.0)
            ),
            Resource::Disk => format!(
                "disk: the busiest disk had I/O in flight {:.0}% of the time, the server \
                 reading and writing {:.1} MB/s of its {:.1} MB/s",
                f.disk_busy_pct,
                f.server_disk_bytes_per_s.unwrap_or(0.0) / 1e6,
                f.disk_bytes_per_s / 1e6
            ),
            Resource::ServerHostDisk => format!(
                "server's host disk: its busiest disk had I/O in flight {:.0}% of the time",
                f.server_host_disk_busy_pct.unwrap_or(0.0)
            ),
        };
        format!("{what} ({})", f.context(Some(self)))
    }
}

/// What ran out where throughput saturated, as a sweep file stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bottleneck {
    /// The swept value whose figures are named: the knee, or the step past
    /// it when only there a resource reached its threshold.
    pub at: f64,
    /// `null`: nothing measured reached its threshold.
    pub resource: Option<Resource>,
    pub figures: ResourceFigures,
}

impl Bottleneck {
    /// Judges the knee's figures, then those of the step past it (the load
    /// that bought nothing, where a resource that ran out is fullest).
    pub fn at_knee(knee: (f64, &ResourceFigures), past: Option<(f64, &ResourceFigures)>) -> Self {
        let judged = std::iter::once(knee)
            .chain(past)
            .find_map(|(at, f)| saturated(f).map(|r| (at, r, f)));
        match judged {
            Some((at, r, f)) => Bottleneck {
                at,
                resource: Some(r),
                figures: *f,
            },
            None => {
                let (at, f) = past.unwrap_or(knee);
                Bottleneck {
                    at,
                    resource: None,
                    figures: *f,
                }
            }
        }
    }

    /// Plain words; `place` names where, e.g. "8 clients per thread".
    pub fn sentence(&self, place: &str) -> String {
        let f = &self.figures;
        match self.resource {
            Some(r) => format!("saturated at {place}: {}", r.describe(f)),
            None => {
                let others = if f.host_busy_with_others() {
                    "; other processes kept the host's CPU busy"
                } else {
                    ""
                };
                format!(
                    "nothing measured saturated at {place} ({}){others}: the limit is inside \
                     the server (a lock, a queue, a concurrency cap)",
                    f.context(None)
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(client: f64, cores: usize, host: f64, server: Option<f64>) -> ResourceFigures {
        ResourceFigures {
            client_cpu_pct: client,
            client_cores: cores,
            host_cpu_pct: host,
            host_cpus: 2,
            server_cpu_pct: server,
            server_host_cpu_pct: None,
            net_bytes_per_s: 118e6,
            disk_busy_pct: 0.0,
            disk_bytes_per_s: 0.0,
            server_disk_bytes_per_s: None,
            server_host_disk_busy_pct: None,
        }
    }

    #[test]
    fn a_client_at_its_one_core_is_saturated() {
        let f = figures(97.0, 1, 160.0, Some(60.0));
        assert_eq!(saturated(&f), Some(Resource::ClientCpu));
        assert_eq!(
            Resource::ClientCpu.describe(&f),
            "client CPU: loadcell used 97% of the 100% its worker threads can use \
             (server CPU 60%, host CPU 160% of 200%, network 118.0 MB/s)"
        );
        // The same CPU over two worker threads is half their capacity.
        assert_eq!(saturated(&figures(97.0, 2, 160.0, Some(60.0))), None);
        // More worker threads than cores: the cores are the capacity.
        assert_eq!(
            saturated(&figures(185.0, 8, 190.0, None)),
            Some(Resource::ClientCpu)
        );
    }

    #[test]
    fn a_busy_host_counts_only_when_client_and_server_keep_it_busy() {
        let shared = figures(80.0, 2, 190.0, Some(95.0));
        assert_eq!(saturated(&shared), Some(Resource::HostCpu));
        assert!(Resource::HostCpu
            .describe(&shared)
            .starts_with("host CPU: 190% of 200% in use; client and server share"));
        // The lead's CI kept the host busy; loadcell used 4%.
        let others = figures(4.0, 1, 190.0, None);
        assert_eq!(saturated(&others), None);
        let b = Bottleneck::at_knee((4.0, &others), None);
        assert_eq!(
            b.sentence("4 clients per thread"),
            "nothing measured saturated at 4 clients per thread (client CPU 4% of 100%, \
             host CPU 190% of 200%, network 118.0 MB/s); other processes kept the host's CPU \
             busy: the limit is inside the server (a lock, a queue, a concurrency cap)"
        );
    }

    #[test]
    fn a_server_at_one_core_and_a_busy_disk_are_saturated() {
        assert_eq!(
            saturated(&figures(40.0, 2, 140.0, Some(98.0))),
            Some(Resource::ServerCpu)
        );
        let disk = ResourceFigures {
            disk_busy_pct: 95.0,
            disk_bytes_per_s: 80e6,
            server_disk_bytes_per_s: Some(75e6),
            ..figures(10.0, 2, 30.0, Some(20.0))
        };
        assert_eq!(saturated(&disk), Some(Resource::Disk));
        assert!(Resource::Disk.describe(&disk).starts_with(
            "disk: the busiest disk had I/O in flight 95% of the time, the server \
             reading and writing 75.0 MB/s of its 80.0 MB/s ("
        ));
        // A disk kept busy by other processes, or one the server (in
        // process, or on another host) cannot be seen using, is not its
        // limit.
        for server_disk in [Some(1e6), Some(0.0), None] {
            let others = ResourceFigures {
                server_disk_bytes_per_s: server_disk,
                ..disk
            };
            assert_eq!(saturated(&others), None, "{server_disk:?}");
        }
        assert_eq!(saturated(&figures(10.0, 2, 30.0, Some(89.0))), None);
    }

    #[test]
    fn a_busy_machine_under_a_server_elsewhere_is_named_from_its_counters() {
        let remote = ResourceFigures {
            server_host_cpu_pct: Some(96.0),
            ..figures(30.0, 2, 40.0, None)
        };
        assert_eq!(saturated(&remote), Some(Resource::ServerHostCpu));
        assert_eq!(
            Resource::ServerHostCpu.describe(&remote),
            "server's host CPU: the server reported its machine 96% busy \
             (client CPU 30% of 200%, host CPU 40% of 200%, network 118.0 MB/s)"
        );
        let calm = ResourceFigures {
            server_host_cpu_pct: Some(60.0),
            ..remote
        };
        assert_eq!(saturated(&calm), None);
        assert!(Resource::ClientCpu
            .describe(&calm)
            .contains("server's host CPU 60%"));
        // On this host, the host's own figures judge it, not the server's
        // word: whose processes kept it busy is known here.
        let local = ResourceFigures {
            server_host_cpu_pct: Some(96.0),
            ..figures(4.0, 2, 190.0, Some(20.0))
        };
        assert_eq!(saturated(&local), None);
    }

    #[test]
    fn a_busy_disk_under_a_server_elsewhere_is_named_from_its_scrapes() {
        let remote = ResourceFigures {
            server_host_disk_busy_pct: Some(97.0),
            server_host_cpu_pct: Some(30.0),
            ..figures(30.0, 2, 40.0, None)
        };
        assert_eq!(saturated(&remote), Some(Resource::ServerHostDisk));
        assert_eq!(
            Resource::ServerHostDisk.describe(&remote),
            "server's host disk: its busiest disk had I/O in flight 97% of the time \
             (client CPU 30% of 200%, server's host CPU 30%, host CPU 40% of 200%, \
             network 118.0 MB/s)"
        );
        let calm = ResourceFigures {
            server_host_disk_busy_pct: Some(50.0),
            ..remote
        };
        assert_eq!(saturated(&calm), None);
        assert!(Bottleneck::at_knee((1.0, &calm), None)
            .sentence("1 client")
            .contains("server's host disk busy 50%"));
        let mean = ResourceFigures::mean(&[remote, calm]).unwrap();
        assert_eq!(mean.server_host_disk_busy_pct, Some(73.5));
    }

    #[test]
    fn the_step_past_the_knee_is_judged_when_the_knee_is_below_threshold() {
        let knee = figures(85.0, 1, 120.0, Some(50.0));
        let past = figures(99.0, 1, 150.0, Some(55.0));
        let b = Bottleneck::at_knee((4.0, &knee), Some((8.0, &past)));
        assert_eq!((b.at, b.resource), (8.0, Some(Resource::ClientCpu)));
        assert!(b
            .sentence("8 clients per thread")
            .starts_with("saturated at 8 clients per thread: client CPU: loadcell used 99%"));
        // Neither qualifies: the figures past the knee, the higher load.
        let idle = figures(10.0, 1, 30.0, None);
        let b = Bottleneck::at_knee((4.0, &idle), Some((8.0, &idle)));
        assert_eq!((b.at, b.resource), (8.0, None));
    }

    #[test]
    fn repeats_average_and_keep_the_server_only_when_all_measured_it() {
        let a = figures(90.0, 1, 100.0, Some(50.0));
        let b = figures(100.0, 1, 120.0, Some(70.0));
        let m = ResourceFigures::mean(&[a, b]).unwrap();
        assert_eq!((m.client_cpu_pct, m.server_cpu_pct), (95.0, Some(60.0)));
        let m = ResourceFigures::mean(&[a, figures(100.0, 1, 120.0, None)]).unwrap();
        assert_eq!(m.server_cpu_pct, None);
        assert!(ResourceFigures::mean(&[]).is_none());
    }
}
