//! A slow server shared by every test of one binary (OpenSearch,
//! Elasticsearch, Kafka, RabbitMQ), kept by
//! [`super::keeper`]: stopped (its process group killed, its temp dir
//! removed) when the binary exits, and killed by the kernel (parent-death
//! signal) if the binary is killed.

use std::fs;
use std::path::PathBuf;
use std::process::Child;
use std::sync::Mutex;

use std::thread::sleep;
use std::time::{Duration, Instant};

use super::keeper::Kept;
use super::{excerpt, signal_group, tail, Start};

/// A running server shared by the tests of one binary.
#[derive(Debug)]
pub struct SharedServer {
    /// `http://127.0.0.1:P` (search servers), `kafka://127.0.0.1:P`.
    pub url: String,
    pub port: u16,
    /// PID of the server (the JVM, the Erlang VM).
    pub pid: u32,
    /// The process group killed with it: the server's own, or that of a
    /// helper it needs (RabbitMQ's epmd) which it joined.
    pub(crate) group: u32,
    /// The server's stdout and stderr (its log).
    pub log_path: PathBuf,
    pub(crate) dir: PathBuf,
    pub(crate) child: Mutex<Option<Child>>,
    /// Helpers in its process group, waited for once it is killed.
    pub(crate) helpers: Mutex<Vec<Child>>,
}

impl SharedServer {
    /// The last `lines` lines of the server log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log_path, lines)
    }

    /// Kills the server at once (a crash, for tests of a server lost
    /// mid-run); the test binary's exit still reaps it and removes its dir.
    /// Other tests of the binary lose it too: such a test needs a binary
    /// of its own.
    pub fn kill(&self) {
        signal_group(self.group, libc::SIGKILL);
    }

    /// Polls `ready` every 200 ms until it says yes, or says why not: the
    /// server exited (its ports taken when its log holds `port_taken`), or
    /// it was not `state` ("green", "answering metadata") within `timeout`.
    pub(crate) fn wait_until(
        &self,
        state: &str,
        timeout: Duration,
        port_taken: &str,
        ready: impl Fn(&SharedServer) -> bool,
    ) -> Result<(), Start> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.exited() {
                let log = excerpt(&self.log_path, 30);
                return Err(if log.contains(port_taken) {
                    Start::PortInUse(log)
                } else {
                    Start::Failed(format!(
                        "exited ({status}) before it was {state}; tail of {}:\n{log}",
                        self.log_path.display()
                    ))
                });
            }
            if ready(self) {
                return Ok(());
            }
            if start.elapsed() > timeout {
                return Err(Start::Failed(format!(
                    "(pid {}) not {state} on 127.0.0.1:{} after {timeout:?}; tail of {}:\n{}",
                    self.pid,
                    self.port,
                    self.log_path.display(),
                    excerpt(&self.log_path, 30)
                )));
            }
            sleep(Duration::from_millis(200));
        }
    }

    /// The exit status, once the process has ended.
    pub(crate) fn exited(&self) -> Option<std::process::ExitStatus> {
        self.child
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }
}

impl Kept for SharedServer {
    /// Kills the process group, waits for the server and its helpers and
    /// removes the temp dir.
    fn stop(&self) {
        let Some(mut child) = self.child.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return;
        };
        signal_group(self.group, libc::SIGKILL);
        let _ = child.wait();
        for mut helper in self
            .helpers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = helper.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}
