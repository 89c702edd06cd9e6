//! A process-wide interruption request, checked by every simulation loop.
//!
//! A front end (the Python binding installs a SIGINT handler for the duration
//! of a run) calls [`request`]; the engines poll [`requested`] once per event
//! (one relaxed atomic load) and stop with their `Interrupted` error. The flag
//! is cleared by [`clear`] before a run starts.

use std::sync::atomic::{AtomicBool, Ordering};

static FLAG: AtomicBool = AtomicBool::new(false);

/// Asks every running simulation to stop. Async-signal-safe (one atomic store).
pub fn request() {
    FLAG.store(true, Ordering::Relaxed);
}

/// Whether an interruption was requested since the last [`clear`].
#[inline]
pub fn requested() -> bool {
    FLAG.load(Ordering::Relaxed)
}

/// Forgets a previous request (called before a run starts).
pub fn clear() {
    FLAG.store(false, Ordering::Relaxed);
}
