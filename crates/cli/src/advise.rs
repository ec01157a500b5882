//! `loadcell advise`: gathers the facts — the server's settings and status
//! through its driver, and a run's figures from its result — and hands
//! them to `loadcell_analysis::advise`, whose rules decide.

use std::collections::BTreeMap;
use std::time::UNIX_EPOCH;

use anyhow::{anyhow, bail};
use loadcell_analysis::advise::{advise, ErrorKinds, Facts, RunFacts, Server};
use loadcell_core::{Driver, DriverInfo, ServerInfo, ServerSettings, Target};
use loadcell_drivers::{Family, Visitor};
use loadcell_record::result::RunResult;

use crate::args::AdviseArgs;
use crate::launch::{block_on, connect_error};

pub fn run(args: &AdviseArgs) -> anyhow::Result<i32> {
    let advice = gather(args)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&advice.json)?);
    } else {
        print!("{}", advice.text);
    }
    Ok(0)
}

/// The advice for one server, as `advise` prints it and as JSON.
pub struct Advice {
    pub text: String,
    pub json: serde_json::Value,
}

/// Reads the server (and the run's result, when given) and asks the rules.
pub fn gather(args: &AdviseArgs) -> anyhow::Result<Advice> {
    let target = Target::parse(&args.target)?;
    let run = match &args.result {
        Some(path) => Some(RunResult::read_from(path).map_err(|e| anyhow!(e))?),
        None => None,
    };
    let gather = Gather {
        timeout: args.connect_timeout,
    };
    let (info, read) = loadcell_drivers::open(&target, &[Family::SQL, Family::KV], gather)??;
    let Some(server) = Server::of_product(&info.product) else {
        bail!(
            "advise has rules for MySQL, MariaDB, PostgreSQL and Redis; {} is {}",
            target.redacted(),
            info.product
        );
    };
    let facts = Facts {
        server,
        settings: read.settings,
        status: read.status,
        server_cores: args.server_cores.or_else(|| local_cores(&target)),
        run: run.as_ref().map(run_facts),
    };
    let advice = advise(&facts);
    let mut about = format!("{} {} at {}", info.product, info.version, target.redacted());
    if let (Some(path), Some(r)) = (&args.result, &facts.run) {
        about += &format!(
            ", with the run {} ({}, {} sessions, {:.0} s)",
            path.display(),
            r.workload,
            r.sessions,
            r.duration_s
        );
    }
    Ok(Advice {
        text: loadcell_report::advise::text(&about, &advice),
        json: serde_json::json!({
            "server": info,
            "target": target.redacted(),
            "result": args.result,
            "advice": advice,
        }),
    })
}

/// Connects to the target with its driver and reads what the rules need.
struct Gather {
    timeout: std::time::Duration,
}

type Gathered = anyhow::Result<(ServerInfo, ServerSettings)>;

impl Gather {
    /// Reads a driver of any family: its server's settings (the family,
    /// `F`, changes nothing of that).
    #[allow(clippy::extra_unused_type_parameters)]
    fn drive<D: Driver, F>(self, _info: &'static DriverInfo, driver: D) -> Gathered {
        let endpoint = driver.endpoint();
        block_on(async {
            let (mut conn, info) = loadcell_engine::connect_once(&driver, self.timeout)
                .await
                .map_err(|e| connect_error(&endpoint, e))?;
            let settings = tokio::time::timeout(self.timeout, driver.server_settings(&mut conn))
                .await
                .map_err(|_| {
                    anyhow!(
                        "{endpoint} did not return its settings within {:?}",
                        self.timeout
                    )
                })?
                .map_err(|e| anyhow!("reading the settings of {endpoint}: {e}"))?;
            Ok((info, settings))
        })
    }
}

/// `open` only hands it SQL and key-value drivers (`advise` names those
/// families), and each reads the same way.
impl Visitor for Gather {
    type Output = Gathered;
    loadcell_drivers::visit_family!(sql => drive);
    loadcell_drivers::visit_family!(kv => drive);
}

/// This machine's cores when the target is on a loopback address.
fn local_cores(target: &Target) -> Option<usize> {
    let local = matches!(
        target.url().host_str(),
        Some("127.0.0.1" | "localhost" | "[::1]" | "::1")
    );
    local.then(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// What the rules weigh of a run's result.
fn run_facts(r: &RunResult) -> RunFacts {
    let mut errors = ErrorKinds::default();
    for e in &r.error_samples {
        errors.add(&e.class, &e.message, e.count);
    }
    let mut server_peaks: BTreeMap<String, f64> = BTreeMap::new();
    for sample in &r.resources.samples {
        for (name, &value) in &sample.server {
            let peak = server_peaks.entry(name.clone()).or_insert(value);
            *peak = peak.max(value);
        }
    }
    let mut server_deltas: BTreeMap<String, f64> = BTreeMap::new();
    let mut previous_t = None;
    for sample in &r.resources.samples {
        let secs = sample.t_s - previous_t.unwrap_or(sample.t_s - r.config.report_interval_s);
        previous_t = Some(sample.t_s);
        for (name, &rate) in &sample.server {
            if let Some(counter) = name.strip_suffix("_per_s") {
                *server_deltas.entry(counter.to_string()).or_default() += rate * secs;
            }
        }
    }
    let unix = |t: &str| {
        humantime::parse_rfc3339(t)
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_secs_f64())
    };
    let sessions = match &r.summary.groups {
        Some(groups) => groups.iter().map(|g| g.sessions).sum(),
        None => r.config.threads * r.config.clients_per_thread,
    };
    RunFacts {
        workload: r.config.workload.clone(),
        sessions,
        duration_s: r.summary.duration_s,
        ops: r.summary.ops,
        write_ops: r
            .ops
            .values()
            .filter(|o| o.category == "write")
            .map(|o| o.count)
            .sum(),
        insert_ops: r
            .ops
            .iter()
            .filter(|(kind, _)| kind.contains("insert"))
            .map(|(_, o)| o.count)
            .sum(),
        errors,
        reconnects: r.summary.reconnects,
        slowest_ms: r.ops.values().map(|o| o.latency_ms.max).fold(0.0, f64::max),
        server_peaks,
        server_deltas,
        server_cpu_peak_pct: r
            .resources
            .samples
            .iter()
            .filter_map(|s| s.server_cpu_pct)
            .reduce(f64::max),
        window: unix(&r.started_at).zip(unix(&r.ended_at)),
    }
}
