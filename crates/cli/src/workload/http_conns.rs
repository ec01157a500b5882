//! The connection workloads' options (`http-cps`, `http-conns`), on top of
//! the `http` workload's request options, and what they make of the run:
//! the connection policy for `http-cps`, the held sessions for
//! `http-conns`.

use std::num::NonZeroU64;
use std::time::Duration;

use clap::Args;
use loadcell_core::Family;
use loadcell_engine::{ConnectionPolicy, Hold};
use loadcell_workloads::http_conns::{ConnectionTest, HttpConnectionsWorkload};
use loadcell_workloads::workload::Workload;

use super::http::HttpArgs;
use super::{CliFamily, Entry, FamilySpec, RunShape, WorkloadArgs};

/// How connections are churned (`http-cps`) or held (`http-conns`).
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "HTTP connection workload options (http-cps, http-conns)")]
pub struct HttpConnsArgs {
    /// http-cps: requests sent on each new connection before it is closed (default 1).
    #[arg(long, value_name = "N")]
    pub requests_per_connection: Option<NonZeroU64>,
    /// http-conns: connections to open and hold (default 1000).
    #[arg(long, value_name = "N", value_parser = crate::values::positive_usize)]
    pub connections: Option<usize>,
    /// http-conns: new connections per second while ramping up (default 1000).
    #[arg(long, value_name = "CONN/S", value_parser = crate::values::positive_f64)]
    pub ramp_rate: Option<f64>,
    /// http-conns: time between keep-alive requests on each held connection (default 1s).
    #[arg(long, value_name = "DURATION", value_parser = crate::values::positive_duration)]
    pub keepalive_interval: Option<Duration>,
}

impl CliFamily for HttpConnsArgs {
    const WHAT: &'static str = "an HTTP connection workload option";
    type Spec = HttpConnectionsWorkload;

    fn catalog() -> Vec<Entry> {
        vec![
            (
                "http-cps",
                &[Family::HTTP],
                "new connections per second: a new TCP (and TLS) connection every --requests-per-connection requests; connect and TLS handshake timed as their own operations",
            ),
            (
                "http-conns",
                &[Family::HTTP],
                "concurrent connections: --connections opened at --ramp-rate and held with a request every --keepalive-interval; how many the target held and when it began to refuse",
            ),
        ]
    }

    /// The request is the HTTP workload's.
    fn takes_also() -> &'static [&'static str] {
        &[HttpArgs::WHAT]
    }

    /// `http-cps` or `http-conns`, with the request options.
    fn resolve(
        name: &str,
        all: &WorkloadArgs,
        _given: &[String],
    ) -> Result<HttpConnectionsWorkload, String> {
        let a = &all.http_conns;
        let test = if name == "http-cps" { cps(a)? } else { hold(a)? };
        // A session's request generator starts again on every connection,
        // so a file's weighted draws and parameters would repeat.
        if all.http.request_file.is_some() {
            return Err(format!(
                "{name} sends one request (--method, --path, --header, --body); \
                 --request-file is for the http workload"
            ));
        }
        Ok(HttpConnectionsWorkload {
            opts: super::http::options(&all.http)?,
            test,
        })
    }
}

fn cps(a: &HttpConnsArgs) -> Result<ConnectionTest, String> {
    if let Some(flag) = given_hold_flag(a) {
        return Err(format!(
            "{flag} is for http-conns (held connections); http-cps takes --requests-per-connection"
        ));
    }
    Ok(ConnectionTest::Cps {
        requests_per_connection: a.requests_per_connection.unwrap_or(NonZeroU64::MIN),
    })
}

fn hold(a: &HttpConnsArgs) -> Result<ConnectionTest, String> {
    if a.requests_per_connection.is_some() {
        return Err(
            "--requests-per-connection is for http-cps; http-conns holds its connections"
                .to_string(),
        );
    }
    Ok(ConnectionTest::Hold {
        connections: a.connections.unwrap_or(1000),
        ramp_rate: a.ramp_rate.unwrap_or(1000.0),
        keepalive: a.keepalive_interval.unwrap_or(Duration::from_secs(1)),
    })
}

fn given_hold_flag(a: &HttpConnsArgs) -> Option<&'static str> {
    [
        (a.connections.is_some(), "--connections"),
        (a.ramp_rate.is_some(), "--ramp-rate"),
        (a.keepalive_interval.is_some(), "--keepalive-interval"),
    ]
    .into_iter()
    .find_map(|(given, flag)| given.then_some(flag))
}

/// Makes the run's options what the workload needs, or says in one line
/// why they cannot be: `http-cps` sets the connection policy; `http-conns`
/// runs one session per connection and refuses `--rate`, and raises the
/// open-file limit to its hard limit for them.
impl FamilySpec for HttpConnectionsWorkload {
    fn workload(&self) -> &dyn Workload {
        self
    }

    /// The workload decides when connections open and close: `http-cps`
    /// a new one every so many requests, `http-conns` one held per session.
    fn fit_run(&mut self, run: &mut RunShape) -> Result<(), String> {
        if run.connection_policy != ConnectionPolicy::Persistent {
            return Err(format!(
                "{} decides when connections open and close; leave out --connection-policy",
                self.name()
            ));
        }
        match self.test {
            ConnectionTest::Cps {
                requests_per_connection,
            } => {
                run.connection_policy = match requests_per_connection.get() {
                    1 => ConnectionPolicy::NewPerEvent,
                    _ => ConnectionPolicy::NewEvery(requests_per_connection),
                };
                Ok(())
            }
            ConnectionTest::Hold { connections, .. } => {
                if run.rate.is_some() {
                    return Err(
                        "--rate does not apply to http-conns: each held connection sends \
                         a request every --keepalive-interval; leave --rate out"
                            .to_string(),
                    );
                }
                if run.threads * run.clients != 1 {
                    return Err("http-conns runs one session per held connection: give \
                         --connections, not --threads or --clients"
                        .to_string());
                }
                check_fd_limit(connections, &format!("--connections {connections}"), raise_fd_limit())?;
                run.clients = connections;
                Ok(())
            }
        }
    }

    /// The held sessions of an `http-conns` run; each keep-alive request
    /// (or connect) not done within the connect timeout fails as timed out.
    fn hold(&self, run: &RunShape) -> Option<Hold> {
        match self.test {
            ConnectionTest::Hold {
                ramp_rate,
                keepalive,
                ..
            } => Some(Hold {
                ramp_rate,
                every: keepalive,
                timeout: run.connect_timeout,
            }),
            ConnectionTest::Cps { .. } => None,
        }
    }
}

crate::launch::runs_on!(HttpConnectionsWorkload: http);

/// Descriptors the process needs besides its connections (stdio, result
/// files, the runtime's own, the monitoring connection).
const SPARE_FDS: u64 = 64;

/// Raises the soft limit on open files to the hard one; the limit now.
pub(super) fn raise_fd_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write `limit`.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                ..limit
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    limit.rlim_cur
}

/// More connections than open files allowed is the client's limit: said
/// before any load rather than found as EMFILE halfway through.
pub(super) fn check_fd_limit(connections: usize, asked: &str, limit: u64) -> Result<(), String> {
    if connections as u64 + SPARE_FDS > limit {
        return Err(format!(
            "{asked} needs {connections} connections, as many file descriptors, but this \
             process may open {limit} (`ulimit -Hn`): a client-side limit; raise the hard limit \
             or spread the connections over several loadcell processes"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_workload_refuses_the_others_options() {
        let a = HttpConnsArgs {
            connections: Some(10),
            ..HttpConnsArgs::default()
        };
        let err = cps(&a).unwrap_err();
        assert!(err.starts_with("--connections is for http-conns"), "{err}");
        let a = HttpConnsArgs {
            requests_per_connection: NonZeroU64::new(5),
            ..HttpConnsArgs::default()
        };
        assert!(hold(&a).unwrap_err().contains("is for http-cps"));
        assert_eq!(
            cps(&a).unwrap(),
            ConnectionTest::Cps {
                requests_per_connection: NonZeroU64::new(5).unwrap()
            }
        );
    }

    #[test]
    fn a_request_file_is_refused_since_its_draws_would_restart_per_connection() {
        let mut all = WorkloadArgs::defaults();
        all.http.request_file = Some("requests.toml".into());
        for name in ["http-cps", "http-conns"] {
            let err = HttpConnsArgs::resolve(name, &all, &[]).unwrap_err();
            assert!(
                err.contains("--request-file is for the http workload"),
                "{err}"
            );
        }
    }

    #[test]
    fn more_connections_than_descriptors_is_named_as_the_clients_limit() {
        let err = check_fd_limit(20_000, "--connections 20000", 20_000).unwrap_err();
        assert!(err.contains("a client-side limit"), "{err}");
        assert!(!err.contains('\n'));
        assert!(check_fd_limit(10_000, "--connections 10000", 20_000).is_ok());
        assert!(raise_fd_limit() >= 1024);
    }
}
