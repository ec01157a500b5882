//! Work done just before a worker thread waits for I/O. A driver may defer
//! sends until then, so that requests its sessions made in one pass go out
//! in one system call; it must then only defer on threads whose runtime
//! calls [`before_park`] (the engine's workers enable it).

use std::cell::Cell;
use std::sync::OnceLock;

static HOOK: OnceLock<fn()> = OnceLock::new();

thread_local! {
    static ENABLED: Cell<bool> = const { Cell::new(false) };
}

/// The calling thread's runtime runs [`before_park`] whenever it is about
/// to wait.
pub fn enable_on_this_thread() {
    ENABLED.with(|e| e.set(true));
}

/// Whether work may be left for [`before_park`] on this thread.
#[inline]
pub fn enabled_here() -> bool {
    ENABLED.with(Cell::get)
}

/// Registers the hook; there is one (the first registration wins, later
/// calls with the same function are no-ops).
pub fn register(hook: fn()) {
    let _ = HOOK.set(hook);
}

/// Runs the registered hook, if any.
pub fn before_park() {
    if let Some(hook) = HOOK.get() {
        hook();
    }
}

/// What a worker's runtime does before it waits for I/O: the hook, then,
/// where the thread defers its reads, a sleep until its next tick (see
/// [`crate::receipt`]).
pub fn before_wait() {
    before_park();
    crate::receipt::sleep_until_next_tick();
}
