//! Servers shared by every test of one binary: JVMs (the search servers,
//! Kafka) that take seconds to start and half a gigabyte of heap, so the
//! first caller starts one and every later caller gets the same one (tests
//! on it use an index or topic of their own).
//!
//! The server lives as long as the test binary: it is stopped (its
//! process group killed, its temp dir removed) when the binary exits, and
//! the kernel kills it (parent-death signal) if the binary is killed.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::{mpsc, Mutex, OnceLock};

use super::{signal_group, tail};

/// A running server shared by the tests of one binary.
#[derive(Debug)]
pub struct SharedServer {
    /// `http://127.0.0.1:P` (search servers), `kafka://127.0.0.1:P`.
    pub url: String,
    pub port: u16,
    /// PID of the JVM, the leader of its process group.
    pub pid: u32,
    /// The server's stdout and stderr (its log).
    pub log_path: PathBuf,
    pub(crate) dir: PathBuf,
    pub(crate) child: Mutex<Option<Child>>,
}

/// Where a binary keeps its shared server of one kind.
pub(crate) type Slot = OnceLock<Result<SharedServer, String>>;

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
        signal_group(self.pid, libc::SIGKILL);
    }

    /// The exit status, once the process has ended.
    pub(crate) fn exited(&self) -> Option<std::process::ExitStatus> {
        self.child
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Kills the process group, waits for the JVM and removes the temp dir.
    pub(crate) fn stop(&self) {
        let Some(mut child) = self.child.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return;
        };
        signal_group(self.pid, libc::SIGKILL);
        let _ = child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The server in `slot`, started by `start` at the first call.
pub(crate) fn shared(
    slot: &'static Slot,
    name: &'static str,
    start: impl FnOnce() -> Result<SharedServer, String> + Send + 'static,
) -> Result<&'static SharedServer, String> {
    slot.get_or_init(|| {
        let started = start_on_keeper_thread(name, start)?;
        stop_at_exit(slot);
        Ok(started)
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Makes `cmd` start in a process group of its own (killed as one) that
/// the kernel kills when the thread that spawns it ends.
pub(crate) fn die_with_parent(cmd: &mut Command) {
    cmd.process_group(0);
    // SAFETY: prctl and getppid are async-signal-safe. They run after any
    // change of user (which would clear the signal), and the signal stays
    // set across a script's exec of the JVM.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The keeper thread never ends, but the process may be exiting.
            if libc::getppid() == 1 {
                return Err(std::io::Error::other("the test binary is exiting"));
            }
            Ok(())
        });
    }
}

/// Starts the server from a thread that never ends: the parent-death
/// signal fires when the thread that spawned the child exits, which for a
/// test's own thread would be the end of that test.
fn start_on_keeper_thread(
    name: &'static str,
    start: impl FnOnce() -> Result<SharedServer, String> + Send + 'static,
) -> Result<SharedServer, String> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name(format!("{name}-keeper"))
        .spawn(move || {
            let _ = tx.send(start());
            loop {
                std::thread::park();
            }
        })
        .map_err(|e| format!("spawn the {name} keeper thread: {e}"))?;
    rx.recv()
        .map_err(|_| format!("the {name} keeper thread died"))?
}

/// Registers, once per server, an exit handler that stops it: statics are
/// never dropped.
fn stop_at_exit(slot: &'static Slot) {
    static SERVERS: Mutex<Vec<&'static Slot>> = Mutex::new(Vec::new());
    extern "C" fn stop_all() {
        let servers = SERVERS.lock().unwrap_or_else(|e| e.into_inner());
        for s in servers.iter() {
            if let Some(Ok(s)) = s.get() {
                s.stop();
            }
        }
    }
    let mut servers = SERVERS.lock().unwrap_or_else(|e| e.into_inner());
    if servers.is_empty() {
        // SAFETY: registers a plain function; it runs at exit(3).
        unsafe {
            libc::atexit(stop_all);
        }
    }
    servers.push(slot);
}
