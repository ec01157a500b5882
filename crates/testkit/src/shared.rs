//! Servers shared by the tests of one binary (the JVM ones: search
//! servers, HBase), which take seconds to start and hundreds of megabytes:
//! started at the first call, handed to every later caller, stopped when
//! the binary exits, and killed by the kernel if the binary is killed.

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::{mpsc, Mutex, OnceLock};

/// A server that can be stopped for good (its processes killed, its temp
/// dir removed).
pub(crate) trait Stoppable: Send + Sync + 'static {
    fn stop(&self);
}

/// Where a test binary keeps one kind of shared server: the started one,
/// or why it could not start.
pub(crate) type Slot<T> = OnceLock<Result<T, String>>;

/// The server in `slot`, started by `start` at the first call.
pub(crate) fn shared<T: Stoppable>(
    slot: &'static Slot<T>,
    name: &str,
    start: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<&'static T, String> {
    slot.get_or_init(|| {
        let started = start_on_keeper_thread(name, start)?;
        stop_at_exit(slot);
        Ok(started)
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Runs `start` on a thread that never ends: the parent-death signal
/// fires when the thread that spawned the child exits, which for a test's
/// own thread would be the end of that test.
fn start_on_keeper_thread<T: Send + 'static>(
    name: &str,
    start: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
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

/// A slot whose server, if started, is stopped at exit.
trait StopAtExit: Sync {
    fn stop_if_started(&self);
}

impl<T: Stoppable> StopAtExit for Slot<T> {
    fn stop_if_started(&self) {
        if let Some(Ok(server)) = self.get() {
            server.stop();
        }
    }
}

/// Registers, once per slot, an exit handler that stops its server:
/// statics are never dropped.
fn stop_at_exit<T: Stoppable>(slot: &'static Slot<T>) {
    static SLOTS: Mutex<Vec<&'static dyn StopAtExit>> = Mutex::new(Vec::new());
    extern "C" fn stop_all() {
        let slots = SLOTS.lock().unwrap_or_else(|e| e.into_inner());
        for slot in slots.iter() {
            slot.stop_if_started();
        }
    }
    let mut slots = SLOTS.lock().unwrap_or_else(|e| e.into_inner());
    if slots.is_empty() {
        // SAFETY: registers a plain function; it runs at exit(3).
        unsafe {
            libc::atexit(stop_all);
        }
    }
    slots.push(slot);
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
