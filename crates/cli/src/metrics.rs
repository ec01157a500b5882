//! `--metrics-addr`: serves the run's cumulative counters and histograms
//! as Prometheus text at `/metrics` while it runs.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::anyhow;

/// The latest exposition text, replaced at every interval.
#[derive(Clone, Default)]
pub struct Exposition(Arc<Mutex<String>>);

impl Exposition {
    pub fn set(&self, text: String) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = text;
    }

    fn get(&self) -> String {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The server this process runs, if any: a sweep's steps are runs of one
/// process, and each serves its numbers through the same server in turn.
static SERVING: Mutex<Option<(SocketAddr, Exposition)>> = Mutex::new(None);

/// Starts the server on its own thread, or reuses the one this process
/// already runs at `addr`; it lives until the process exits. Binding fails
/// before any load is sent.
pub fn serve(addr: SocketAddr) -> anyhow::Result<Exposition> {
    let mut serving = SERVING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((at, exposition)) = &*serving {
        if *at == addr {
            exposition.set(String::new());
            return Ok(exposition.clone());
        }
    }
    let server = tiny_http::Server::http(addr)
        .map_err(|e| anyhow!("cannot serve metrics on {addr}: {e} (is the port in use?)"))?;
    let exposition = Exposition::default();
    let shared = exposition.clone();
    std::thread::Builder::new()
        .name("loadcell-metrics".into())
        .spawn(move || {
            let content_type = tiny_http::Header::from_bytes(
                &b"Content-Type"[..],
                &b"text/plain; version=0.0.4; charset=utf-8"[..],
            )
            .expect("static header is valid");
            for request in server.incoming_requests() {
                let response = if request.url() == "/metrics" {
                    tiny_http::Response::from_string(shared.get()).with_header(content_type.clone())
                } else {
                    tiny_http::Response::from_string("not found: try /metrics\n")
                        .with_status_code(404)
                };
                let _ = request.respond(response);
            }
        })?;
    *serving = Some((addr, exposition.clone()));
    Ok(exposition)
}
