//! Servers shared by every test of a binary (JVM servers: seconds to
//! start, half a gigabyte or more each): started at the first call from a
//! thread that never ends, and stopped when the binary exits.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

/// A server kept for the whole test binary.
pub(crate) trait Kept: Send + Sync + 'static {
    /// Kills it, waits for it and removes its files.
    fn stop(&self);
}

/// The server in `cell`, started by `start` at the first call; every
/// later caller gets the same one, or the same error.
pub(crate) fn shared<S: Kept>(
    cell: &'static OnceLock<Result<S, String>>,
    name: &'static str,
    start: fn() -> Result<S, String>,
) -> Result<&'static S, String> {
    cell.get_or_init(|| {
        let started = start_on_keeper_thread(name, start)?;
        stop_at_exit(move || {
            if let Some(Ok(server)) = cell.get() {
                server.stop();
            }
        });
        Ok(started)
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Starts the server from a thread that never ends: the parent-death
/// signal fires when the thread that spawned the child exits, which for a
/// test's own thread would be the end of that test.
fn start_on_keeper_thread<S: Kept>(
    name: &'static str,
    start: fn() -> Result<S, String>,
) -> Result<S, String> {
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

/// Registers `stop` to run at exit: statics are never dropped.
fn stop_at_exit(stop: impl Fn() + Send + 'static) {
    type Stop = Box<dyn Fn() + Send>;
    static STOPS: Mutex<Vec<Stop>> = Mutex::new(Vec::new());
    extern "C" fn stop_all() {
        for stop in STOPS.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            stop();
        }
    }
    let mut stops = STOPS.lock().unwrap_or_else(|e| e.into_inner());
    if stops.is_empty() {
        // SAFETY: registers a plain function; it runs at exit(3).
        unsafe {
            libc::atexit(stop_all);
        }
    }
    stops.push(Box::new(stop));
}

/// Makes the process `cmd` starts die with the thread that spawns it (a
/// keeper thread, so with the test binary).
pub(crate) fn die_with_parent(cmd: &mut Command) {
    // SAFETY: prctl and getppid are async-signal-safe. They run after a
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

/// Starts `cmd` in `dir` with its output in `DIR/what.log`, dying with
/// the test binary (from a keeper thread, see [`die_with_parent`]).
pub(crate) fn spawn_kept(mut cmd: Command, dir: &Path, what: &str) -> Result<Child, String> {
    let log_path = dir.join(format!("{what}.log"));
    let log =
        fs::File::create(&log_path).map_err(|e| format!("create {}: {e}", log_path.display()))?;
    let log2 = log
        .try_clone()
        .map_err(|e| format!("dup {}: {e}", log_path.display()))?;
    cmd.current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log2));
    die_with_parent(&mut cmd);
    cmd.spawn()
        .map_err(|e| format!("could not start {what} ({:?}): {e}", cmd.get_program()))
}
