//! Resource samples taken beside the numbers at every interval: the
//! client's own CPU and memory, the host's CPU, load, network and disk,
//! the server process's CPU and memory when it runs on this host, and the
//! server's own counters. Linux `/proc` only; elsewhere fields stay empty.

use std::collections::BTreeMap;
use std::time::Instant;

use loadcell_analysis::saturation::{saturated, ResourceFigures};
use loadcell_core::driver::SERVER_HOST_CPU_PCT;

use crate::remote::RemoteSample;
use serde::{Deserialize, Serialize};

/// One sample. CPU figures are in percent of one core; rates per second.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceSample {
    /// Seconds from the start of measurement (negative during warm-up).
    pub t_s: f64,
    pub client_cpu_pct: f64,
    pub client_rss_bytes: u64,
    /// Busy share of all the host's cores, in percent of one core (so up to
    /// 100 × cores).
    pub host_cpu_pct: f64,
    pub host_cpus: usize,
    pub load_1m: f64,
    pub net_rx_bytes_per_s: f64,
    pub net_tx_bytes_per_s: f64,
    pub disk_read_bytes_per_s: f64,
    pub disk_write_bytes_per_s: f64,
    /// Share of time the busiest disk had I/O in flight, percent.
    pub disk_busy_pct: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_rss_bytes: Option<u64>,
    /// Bytes the server process read from and wrote to storage per second
    /// (`/proc/PID/io`), when it runs on this host and may be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_disk_bytes_per_s: Option<f64>,
    /// The server's own counters (gauges as read; `*_total` counters as
    /// rates per second, renamed `*_per_s`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub server: BTreeMap<String, f64>,
    /// The hosts scraped with `--server-metrics`, each one's newest scrape
    /// of the interval (a host whose scrape failed is missing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remote: Vec<RemoteSample>,
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

/// CPU ticks (user + system) and resident bytes of one process.
fn process_stat(pid: u32) -> Option<(u64, u64)> {
    let stat = read(&format!("/proc/{pid}/stat"));
    // The command name may contain spaces: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    let rss_pages: u64 = f.get(21)?.parse().ok()?;
    Some((utime + stime, rss_pages * page_size()))
}

/// (busy, total) jiffies over all CPUs.
fn host_cpu() -> Option<(u64, u64)> {
    let stat = read("/proc/stat");
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let v: Vec<u64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4).unwrap_or(&0);
    Some((total - idle, total))
}

/// (rx, tx) bytes summed over all interfaces, loopback included: load
/// tests here often run over loopback.
fn net_bytes() -> (u64, u64) {
    read("/proc/net/dev")
        .lines()
        .skip(2)
        .filter_map(|l| {
            let (_, rest) = l.split_once(':')?;
            let f: Vec<u64> = rest
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            Some((*f.first()?, *f.get(8)?))
        })
        .fold((0, 0), |(r, t), (a, b)| (r + a, t + b))
}

/// (sectors read, sectors written, max io_ticks ms) over whole disks.
fn disk_stats() -> (u64, u64, Vec<(String, u64)>) {
    let mut read_s = 0;
    let mut write_s = 0;
    let mut ticks = Vec::new();
    for l in read("/proc/diskstats").lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 14 {
            continue;
        }
        let name = f[2];
        // Whole devices only: partitions would count twice.
        let is_disk = std::path::Path::new(&format!("/sys/block/{name}")).exists()
            && !name.starts_with("loop")
            && !name.starts_with("ram");
        if !is_disk {
            continue;
        }
        read_s += f[5].parse::<u64>().unwrap_or(0);
        write_s += f[9].parse::<u64>().unwrap_or(0);
        ticks.push((name.to_string(), f[12].parse::<u64>().unwrap_or(0)));
    }
    (read_s, write_s, ticks)
}

fn load_1m() -> f64 {
    read("/proc/loadavg")
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// The previous readings, to turn counters into rates.
/// Bytes a process read from and wrote to storage (not the page cache's
/// hits): `read_bytes` + `write_bytes` of `/proc/PID/io`, readable for our
/// own user's processes or as root.
fn process_storage_bytes(pid: u32) -> Option<u64> {
    let io = read(&format!("/proc/{pid}/io"));
    let field = |name: &str| -> Option<u64> {
        io.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
    };
    Some(field("read_bytes:")? + field("write_bytes:")?)
}

struct Previous {
    at: Instant,
    client_ticks: u64,
    server_ticks: Option<u64>,
    server_storage: Option<u64>,
    host: Option<(u64, u64)>,
    net: (u64, u64),
    disk: (u64, u64, Vec<(String, u64)>),
    server: BTreeMap<String, f64>,
}

/// Takes samples; keeps the last readings to compute rates.
pub struct Sampler {
    server_pid: Option<u32>,
    ticks_per_s: f64,
    cpus: usize,
    prev: Previous,
}

impl Sampler {
    pub fn new(server_pid: Option<u32>) -> Sampler {
        let me = std::process::id();
        Sampler {
            server_pid,
            ticks_per_s: clock_ticks(),
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            prev: Previous {
                at: Instant::now(),
                client_ticks: process_stat(me).map_or(0, |s| s.0),
                server_ticks: server_pid.and_then(process_stat).map(|s| s.0),
                server_storage: server_pid.and_then(process_storage_bytes),
                host: host_cpu(),
                net: net_bytes(),
                disk: disk_stats(),
                server: BTreeMap::new(),
            },
        }
    }

    /// Takes a sample; `server` holds the driver's counters just read.
    pub fn sample(&mut self, t_s: f64, server: Vec<(String, f64)>) -> ResourceSample {
        let now = Instant::now();
        let secs = now.duration_since(self.prev.at).as_secs_f64().max(1e-6);
        let per_s = |a: u64, b: u64| a.saturating_sub(b) as f64 / secs;
        let (client_ticks, client_rss) = process_stat(std::process::id()).unwrap_or((0, 0));
        let server_stat = self.server_pid.and_then(process_stat);
        let server_storage = self.server_pid.and_then(process_storage_bytes);
        let host = host_cpu();
        let net = net_bytes();
        let disk = disk_stats();
        let host_cpu_pct = match (host, self.prev.host) {
            (Some((busy, total)), Some((pb, pt))) if total > pt => {
                100.0 * self.cpus as f64 * busy.saturating_sub(pb) as f64 / (total - pt) as f64
            }
            _ => 0.0,
        };
        let disk_busy_pct = disk
            .2
            .iter()
            .filter_map(|(name, t)| {
                let (_, pt) = self.prev.disk.2.iter().find(|(n, _)| n == name)?;
                Some(100.0 * t.saturating_sub(*pt) as f64 / 1000.0 / secs)
            })
            .fold(0.0, f64::max)
            .min(100.0);
        let mut counters = BTreeMap::new();
        let mut raw = BTreeMap::new();
        for (name, value) in server {
            if let Some(base) = name.strip_suffix("_total") {
                if let Some(prev) = self.prev.server.get(&name) {
                    counters.insert(format!("{base}_per_s"), ((value - prev) / secs).max(0.0));
                }
            } else {
                counters.insert(name.clone(), value);
            }
            raw.insert(name, value);
        }
        let sample = ResourceSample {
            t_s,
            client_cpu_pct: 100.0 * per_s(client_ticks, self.prev.client_ticks) / self.ticks_per_s,
            client_rss_bytes: client_rss,
            host_cpu_pct,
            host_cpus: self.cpus,
            load_1m: load_1m(),
            net_rx_bytes_per_s: per_s(net.0, self.prev.net.0),
            net_tx_bytes_per_s: per_s(net.1, self.prev.net.1),
            disk_read_bytes_per_s: per_s(disk.0, self.prev.disk.0) * 512.0,
            disk_write_bytes_per_s: per_s(disk.1, self.prev.disk.1) * 512.0,
            disk_busy_pct,
            server_cpu_pct: match (server_stat, self.prev.server_ticks) {
                (Some((t, _)), Some(p)) => Some(100.0 * per_s(t, p) / self.ticks_per_s),
                _ => None,
            },
            server_rss_bytes: server_stat.map(|s| s.1),
            server_disk_bytes_per_s: match (server_storage, self.prev.server_storage) {
                (Some(b), Some(p)) => Some(per_s(b, p)),
                _ => None,
            },
            server: counters,
            remote: Vec::new(),
        };
        self.prev = Previous {
            at: now,
            client_ticks,
            server_ticks: server_stat.map(|s| s.0),
            server_storage,
            host,
            net,
            disk,
            server: raw,
        };
        sample
    }
}

/// Whether a process with this PID runs on this host (and we can see it).
pub fn process_exists(pid: u32) -> bool {
    process_stat(pid).is_some()
}

/// The process listening on TCP `port` on this host, if we can see it:
/// the listening socket's inode from /proc/net/tcp{,6}, then the process
/// holding that inode.
pub fn find_listener(port: u16) -> Option<u32> {
    let hex_port = format!("{port:04X}");
    let inodes: Vec<String> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .flat_map(|p| {
            read(p)
                .lines()
                .skip(1)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let local_port = f.get(1)?.rsplit(':').next()?;
            // State 0A is LISTEN.
            (local_port == hex_port && *f.get(3)? == "0A")
                .then(|| f.get(9).map(|s| s.to_string()))?
        })
        .collect();
    if inodes.is_empty() {
        return None;
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(target) = std::fs::read_link(fd.path()) {
                if wanted.iter().any(|w| target.as_os_str() == w.as_str()) {
                    return Some(pid);
                }
            }
        }
    }
    None
}

/// What the measured samples (warm-up left out) averaged to, each weighted
/// by the time it covers (a run's last sample covers only its tail), or
/// `None` without any. `client_cores` is how many worker threads the
/// client ran (each can use at most one core).
pub fn figures(samples: &[ResourceSample], client_cores: usize) -> Option<ResourceFigures> {
    let measured: Vec<&ResourceSample> = samples.iter().filter(|s| s.t_s > 0.0).collect();
    let mut since = 0.0;
    let weights: Vec<f64> = measured
        .iter()
        .map(|s| {
            let w = s.t_s - since;
            since = s.t_s;
            w
        })
        .collect();
    let total: f64 = weights.iter().sum();
    if total <= 0.0 {
        return None;
    }
    let avg = |f: &dyn Fn(&ResourceSample) -> f64| {
        measured
            .iter()
            .zip(&weights)
            .map(|(s, w)| f(s) * w)
            .sum::<f64>()
            / total
    };
    let server_measured = measured.iter().all(|s| s.server_cpu_pct.is_some());
    // The server's own word on its machine, or else the busiest host
    // scraped with --server-metrics.
    let server_host = |s: &ResourceSample| {
        s.server.get(SERVER_HOST_CPU_PCT).copied().or_else(|| {
            s.remote
                .iter()
                .filter_map(RemoteSample::machine_cpu_pct)
                .reduce(f64::max)
        })
    };
    let server_host_disk = |s: &ResourceSample| {
        s.remote
            .iter()
            .filter_map(|r| r.disk_busy_pct)
            .reduce(f64::max)
    };
    let server_host_disk_measured = measured.iter().all(|s| server_host_disk(s).is_some());
    let server_host_measured = measured.iter().all(|s| server_host(s).is_some());
    let server_disk_measured = measured.iter().all(|s| s.server_disk_bytes_per_s.is_some());
    Some(ResourceFigures {
        client_cpu_pct: avg(&|s| s.client_cpu_pct),
        client_cores,
        host_cpu_pct: avg(&|s| s.host_cpu_pct),
        host_cpus: measured[0].host_cpus,
        server_cpu_pct: server_measured.then(|| avg(&|s| s.server_cpu_pct.unwrap_or(0.0))),
        server_host_cpu_pct: server_host_measured.then(|| avg(&|s| server_host(s).unwrap_or(0.0))),
        net_bytes_per_s: avg(&|s| s.net_rx_bytes_per_s + s.net_tx_bytes_per_s),
        disk_busy_pct: avg(&|s| s.disk_busy_pct),
        disk_bytes_per_s: avg(&|s| s.disk_read_bytes_per_s + s.disk_write_bytes_per_s),
        server_disk_bytes_per_s: server_disk_measured
            .then(|| avg(&|s| s.server_disk_bytes_per_s.unwrap_or(0.0))),
        server_host_disk_busy_pct: server_host_disk_measured
            .then(|| avg(&|s| server_host_disk(s).unwrap_or(0.0))),
    })
}

/// Each scraped host's figures averaged over the measured samples (every
/// sample that holds the host counting once), in the order first seen.
pub fn remote_means(samples: &[ResourceSample]) -> Vec<RemoteSample> {
    let mut means: Vec<(RemoteSample, u32)> = Vec::new();
    for r in samples
        .iter()
        .filter(|s| s.t_s > 0.0)
        .flat_map(|s| &s.remote)
    {
        match means.iter_mut().find(|(m, _)| m.host == r.host) {
            Some((mean, n)) => {
                let seen = f64::from(*n);
                mean.absorb(r.clone(), &|a, b| match (a, b) {
                    (Some(a), Some(b)) => Some((a * seen + b) / (seen + 1.0)),
                    (a, b) => a.or(b),
                });
                *n += 1;
            }
            None => means.push((r.clone(), 1)),
        }
    }
    means.into_iter().map(|(m, _)| m).collect()
}

/// Names the resource that ran out, in plain words with its figure, by
/// the thresholds of [`loadcell_analysis::saturation`], or nothing when
/// none reached them.
pub fn diagnose(samples: &[ResourceSample], client_cores: usize) -> Option<String> {
    let f = figures(samples, client_cores)?;
    let ran_out = saturated(&f).map(|r| r.describe(&f));
    match (ran_out, dropped(samples)) {
        (Some(r), Some(d)) => Some(format!("{r}; {d}")),
        (r, d) => r.or(d),
    }
}

/// What the server said it dropped in the measured samples: each of its
/// counters named `…_dropped_total` that rose (a broker's full queues, a
/// database's rejected points), as a mean rate. Its own count, whatever
/// the client saw.
fn dropped(samples: &[ResourceSample]) -> Option<String> {
    let measured: Vec<&ResourceSample> = samples.iter().filter(|s| s.t_s > 0.0).collect();
    let mut rates: BTreeMap<&str, f64> = BTreeMap::new();
    for s in &measured {
        for (name, v) in s
            .server
            .iter()
            .filter(|(n, _)| n.ends_with("_dropped_per_s"))
        {
            *rates.entry(name.trim_end_matches("_per_s")).or_default() += v / measured.len() as f64;
        }
    }
    let rose: Vec<String> = rates
        .into_iter()
        .filter(|(_, rate)| *rate > 0.0)
        .map(|(name, rate)| format!("{name} {rate:.1}/s"))
        .collect();
    (!rose.is_empty()).then(|| format!("the server counted what it dropped: {}", rose.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_read_this_process_and_host() {
        let mut s = Sampler::new(Some(std::process::id()));
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let sample = s.sample(
            1.0,
            vec![("commands_total".into(), 100.0), ("threads".into(), 3.0)],
        );
        assert!(sample.client_rss_bytes > 0);
        assert!(sample.server_cpu_pct.is_some());
        // The "server" is this process: its storage I/O can be read.
        assert!(sample.server_disk_bytes_per_s.is_some());
        assert!(sample.host_cpus >= 1);
        assert_eq!(sample.server.get("threads"), Some(&3.0));
        assert!(
            !sample.server.contains_key("commands_per_s"),
            "no rate without a previous reading"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
        let next = s.sample(2.0, vec![("commands_total".into(), 150.0)]);
        assert!(next.server["commands_per_s"] > 0.0);
    }

    #[test]
    fn finds_the_listener_of_a_port() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert_eq!(find_listener(port), Some(std::process::id()));
    }

    fn at(t: f64, client: f64, host: f64, server: Option<f64>) -> ResourceSample {
        ResourceSample {
            t_s: t,
            client_cpu_pct: client,
            host_cpu_pct: host,
            host_cpus: 2,
            server_cpu_pct: server,
            ..ResourceSample::default()
        }
    }

    #[test]
    fn what_the_server_dropped_is_named_by_its_own_counter() {
        let with = |t: f64, dropped: f64| ResourceSample {
            server: BTreeMap::from([
                ("mosquitto_publish_dropped_per_s".to_string(), dropped),
                ("mosquitto_publish_sent_per_s".to_string(), 900.0),
            ]),
            ..at(t, 10.0, 20.0, Some(10.0))
        };
        let samples = vec![with(-1.0, 500.0), with(1.0, 0.0), with(2.0, 250.0)];
        assert_eq!(
            diagnose(&samples, 1).unwrap(),
            "the server counted what it dropped: mosquitto_publish_dropped 125.0/s"
        );
        assert_eq!(
            diagnose(&samples[..2], 1),
            None,
            "warm-up drops and zeros say nothing"
        );
    }

    #[test]
    fn diagnosis_names_the_saturated_resource() {
        let client = vec![
            at(1.0, 99.0, 150.0, Some(40.0)),
            at(2.0, 98.0, 150.0, Some(40.0)),
        ];
        assert!(diagnose(&client, 1).unwrap().starts_with("client CPU"));
        let server = vec![at(1.0, 30.0, 130.0, Some(97.0))];
        assert!(diagnose(&server, 4).unwrap().starts_with("server CPU"));
        let host = vec![at(1.0, 60.0, 195.0, Some(120.0))];
        assert!(diagnose(&host, 4).unwrap().starts_with("host CPU"));
        let idle = vec![at(1.0, 10.0, 30.0, Some(20.0))];
        assert_eq!(diagnose(&idle, 4), None);
        // A cluster elsewhere, reporting its busiest node's machine busy
        // in every sample.
        let remote: Vec<ResourceSample> = [97.0, 95.0]
            .into_iter()
            .enumerate()
            .map(|(i, busy)| ResourceSample {
                server: BTreeMap::from([(SERVER_HOST_CPU_PCT.to_string(), busy)]),
                ..at(i as f64 + 1.0, 10.0, 30.0, None)
            })
            .collect();
        assert_eq!(figures(&remote, 4).unwrap().server_host_cpu_pct, Some(96.0));
        assert!(diagnose(&remote, 4)
            .unwrap()
            .starts_with("server's host CPU: the server reported its machine 96% busy"));
        let unreported = [remote[0].clone(), at(2.0, 10.0, 30.0, None)];
        assert_eq!(figures(&unreported, 4).unwrap().server_host_cpu_pct, None);
        assert_eq!(
            diagnose(&[at(-1.0, 100.0, 200.0, None)], 1),
            None,
            "warm-up is ignored"
        );
    }

    #[test]
    fn a_scraped_host_is_judged_as_the_servers_machine() {
        let scraped = |t: f64, cpu: f64, disk: f64| ResourceSample {
            remote: vec![RemoteSample {
                host: "db1:9100".into(),
                cpu_pct: Some(cpu),
                cpus: Some(2),
                disk_busy_pct: Some(disk),
                ..RemoteSample::default()
            }],
            ..at(t, 10.0, 30.0, None)
        };
        let busy = [scraped(1.0, 190.0, 10.0), scraped(2.0, 194.0, 20.0)];
        let f = figures(&busy, 4).unwrap();
        assert_eq!(f.server_host_cpu_pct, Some(96.0));
        assert_eq!(f.server_host_disk_busy_pct, Some(15.0));
        assert!(diagnose(&busy, 4)
            .unwrap()
            .starts_with("server's host CPU: the server reported its machine 96% busy"));
        let disk = [scraped(1.0, 20.0, 99.0), scraped(2.0, 20.0, 95.0)];
        assert!(diagnose(&disk, 4)
            .unwrap()
            .starts_with("server's host disk: its busiest disk had I/O in flight 97%"));
        let means = remote_means(&[scraped(-1.0, 0.0, 0.0), disk[0].clone(), disk[1].clone()]);
        assert_eq!(means.len(), 1, "warm-up left out, one host");
        assert_eq!(
            (means[0].cpu_pct, means[0].disk_busy_pct),
            (Some(20.0), Some(97.0))
        );
    }

    #[test]
    fn figures_weigh_each_sample_by_the_time_it_covers() {
        // Two full seconds at 80%, then a 2 ms tail that read nothing.
        let samples = vec![
            at(-1.0, 100.0, 200.0, Some(90.0)),
            at(1.0, 80.0, 120.0, Some(40.0)),
            at(2.0, 80.0, 120.0, Some(40.0)),
            at(2.002, 0.0, 0.0, Some(0.0)),
        ];
        let f = figures(&samples, 1).unwrap();
        assert!((f.client_cpu_pct - 80.0 * 2.0 / 2.002).abs() < 1e-9);
        assert!((f.server_cpu_pct.unwrap() - 40.0 * 2.0 / 2.002).abs() < 1e-9);
        assert_eq!((f.client_cores, f.host_cpus), (1, 2));
        assert!(figures(&samples[..1], 1).is_none(), "warm-up only");
    }
}
