//! The connection workloads of a load balancer's spec (its three limits:
//! concurrent connections, new connections per second, requests per
//! second), on the `http` workload's request:
//!
//! - `http-cps`: a new TCP (and TLS) connection for every request, or
//!   every N (`--requests-per-connection`), through the engine's
//!   connection policy, so that each connect is timed as the operation
//!   `connect`, and connects and requests per second are both reported.
//!   The last request on a connection says `Connection: close`, so that
//!   the server closes first and keeps the TIME_WAIT, as with wrk's
//!   `-H 'Connection: close'` and ab without `-k`: the client's ephemeral
//!   ports are not used up by its own closed connections.
//! - `http-conns`: up to N connections opened on a ramp and held, each
//!   sent a keep-alive request every T (the engine's `RunSpec::hold`), to
//!   find how many the target holds and when it starts to refuse.
//!
//! Both record the TLS handshake of each new `https://` connection as the
//! operation `tls_handshake` (part of `connect`'s time, which covers TCP
//! and TLS).

use std::collections::BTreeMap;
use std::num::NonZeroU64;
use std::time::Duration;

use loadcell_core::family::HttpFamily;
use loadcell_core::http::HttpConn;
use loadcell_core::{DriverError, DriverInfo, Family};
use loadcell_engine::{Category, Ctx, OpSpec, Script, SessionInfo};
use serde_json::{json, Value};

use crate::http::{HttpOptions, HttpScript, HttpSession, HttpWorkload};
use crate::workload::{Lifecycle, Workload};

/// Which of a load balancer's connection limits a run measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ConnectionTest {
    /// New connections per second: a new connection every N requests.
    Cps { requests_per_connection: NonZeroU64 },
    /// Concurrent connections: `connections` opened at `ramp_rate` per
    /// second and held, with a request on each every `keepalive`.
    Hold {
        connections: usize,
        ramp_rate: f64,
        keepalive: Duration,
    },
}

#[derive(Debug, Clone)]
pub struct HttpConnectionsWorkload {
    pub opts: HttpOptions,
    pub test: ConnectionTest,
}

impl Workload for HttpConnectionsWorkload {
    fn name(&self) -> &'static str {
        match self.test {
            ConnectionTest::Cps { .. } => "http-cps",
            ConnectionTest::Hold { .. } => "http-conns",
        }
    }

    fn families(&self) -> &'static [Family] {
        &[Family::HTTP]
    }

    fn options(&self) -> BTreeMap<String, Value> {
        let mut map = HttpWorkload {
            opts: self.opts.clone(),
        }
        .options();
        match self.test {
            ConnectionTest::Cps {
                requests_per_connection,
            } => {
                map.insert(
                    "requests_per_connection".into(),
                    json!(requests_per_connection),
                );
            }
            ConnectionTest::Hold {
                connections,
                ramp_rate,
                keepalive,
            } => {
                map.insert("connections".into(), json!(connections));
                map.insert("ramp_rate".into(), json!(ramp_rate));
                map.insert(
                    "keepalive_interval_s".into(),
                    json!(keepalive.as_secs_f64()),
                );
            }
        }
        map
    }
}

/// The operation kind of a new connection's TLS handshake.
const TLS_HANDSHAKE: usize = 1;

/// The `http` workload's request, sent with `Connection: close` when it is
/// the last on its connection, and each new connection's TLS handshake
/// recorded.
pub struct ConnectionScript {
    ops: [OpSpec; 2],
    request: HttpScript,
    /// The same request saying `Connection: close`.
    last_request: HttpScript,
    requests_per_connection: Option<u64>,
}

impl ConnectionScript {
    pub fn new(opts: &HttpOptions, test: ConnectionTest) -> ConnectionScript {
        let request = HttpScript::new(opts);
        let mut closing = opts.clone();
        for request in &mut closing.requests {
            request
                .headers
                .push(("Connection".to_string(), "close".to_string()));
        }
        ConnectionScript {
            ops: [
                request.request_op(),
                OpSpec {
                    name: "tls_handshake",
                    category: Category::Other,
                },
            ],
            request,
            last_request: HttpScript::new(&closing),
            requests_per_connection: match test {
                ConnectionTest::Cps {
                    requests_per_connection,
                } => Some(requests_per_connection.get()),
                ConnectionTest::Hold { .. } => None,
            },
        }
    }
}

impl<C: HttpConn> Script<C> for ConnectionScript {
    /// Requests sent on the session's current connection, and the request
    /// generator's state (the same for the closing request, which differs
    /// only by a header).
    type Session = (u64, HttpSession);

    fn ops(&self) -> &[OpSpec] {
        &self.ops
    }

    fn transactional(&self) -> bool {
        false
    }

    /// Called on every new connection: its count starts again.
    async fn open(
        &self,
        conn: &mut C,
        session: SessionInfo,
    ) -> Result<(u64, HttpSession), DriverError> {
        Ok((0, Script::<C>::open(&self.request, conn, session).await?))
    }

    async fn event(
        &self,
        conn: &mut C,
        (sent, session): &mut (u64, HttpSession),
        ctx: &mut Ctx,
    ) -> Result<(), DriverError> {
        if let Some(took) = conn.take_tls_handshake() {
            ctx.record(TLS_HANDSHAKE, took, true);
        }
        *sent += 1;
        let script = match self.requests_per_connection {
            Some(n) if *sent == n => &self.last_request,
            _ => &self.request,
        };
        Script::<C>::event(script, conn, session, ctx).await
    }
}

impl<C: HttpConn> Lifecycle<C, HttpFamily> for HttpConnectionsWorkload {
    type Script = ConnectionScript;

    fn script(&self, _seed: u64, _driver: &DriverInfo) -> ConnectionScript {
        ConnectionScript::new(&self.opts, self.test)
    }
}
