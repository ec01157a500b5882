//! Facts about the machine a run happened on, and the client's own CPU use.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    pub hostname: String,
    pub os: String,
    pub kernel: String,
    pub arch: String,
    pub cpu_model: String,
    pub cpus: usize,
    pub memory_bytes: u64,
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// This machine's name.
pub fn hostname() -> String {
    read("/proc/sys/kernel/hostname").trim().to_string()
}

impl HostInfo {
    pub fn collect() -> HostInfo {
        let cpuinfo = read("/proc/cpuinfo");
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|rest| rest.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default();
        let memory_bytes = read("/proc/meminfo")
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
            .unwrap_or(0);
        let os = read("/etc/os-release")
            .lines()
            .find_map(|l| l.strip_prefix("PRETTY_NAME="))
            .map(|v| v.trim_matches('"').to_string())
            .unwrap_or_else(|| std::env::consts::OS.to_string());
        HostInfo {
            hostname: hostname(),
            os,
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            arch: std::env::consts::ARCH.to_string(),
            cpu_model,
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            memory_bytes,
        }
    }
}

/// CPU seconds this process has used, user and system.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuTime {
    pub user_s: f64,
    pub sys_s: f64,
}

impl CpuTime {
    pub fn of_process() -> CpuTime {
        CpuTime::of(libc::RUSAGE_SELF)
    }

    /// The CPU of this process's children that have been waited for (fio).
    pub fn of_children() -> CpuTime {
        CpuTime::of(libc::RUSAGE_CHILDREN)
    }

    fn of(who: libc::c_int) -> CpuTime {
        // SAFETY: getrusage only writes into the struct we pass.
        let usage = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            libc::getrusage(who, &mut usage);
            usage
        };
        let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        CpuTime {
            user_s: secs(usage.ru_utime),
            sys_s: secs(usage.ru_stime),
        }
    }

    pub fn since(self, earlier: CpuTime) -> CpuTime {
        CpuTime {
            user_s: self.user_s - earlier.user_s,
            sys_s: self.sys_s - earlier.sys_s,
        }
    }

    pub fn total_s(self) -> f64 {
        self.user_s + self.sys_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_facts_are_read() {
        let h = HostInfo::collect();
        assert!(h.cpus >= 1);
        assert!(h.memory_bytes > 0);
        assert!(!h.kernel.is_empty());
    }

    #[test]
    fn cpu_time_grows_with_work() {
        let before = CpuTime::of_process();
        let mut x = 0u64;
        for i in 0..30_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let used = CpuTime::of_process().since(before);
        assert!(used.total_s() > 0.0, "{used:?}");
    }
}
