//! The boundary every call into the Rust core crosses.
//!
//! [`run_guarded`] runs a closure without the GIL and:
//! - installs a SIGINT handler for the duration of the call that asks the
//!   engines to stop ([`cosched::des::interrupt`]; the engines poll it once per
//!   event), chained with Python's own handler, so Ctrl-C stops any run within a
//!   fraction of a second and Python raises `KeyboardInterrupt` as usual;
//! - catches a panic of the core (a bug) and raises it as `RuntimeError`
//!   ("internal error: ..."), never as `pyo3_runtime.PanicException`; the panic
//!   message is kept by a panic hook instead of being printed.

use cosched::des::interrupt;
use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError};
use pyo3::prelude::*;
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// The message and location of the last panic on this thread.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Replaces the default panic hook (which prints to stderr) by one that keeps
/// the message for [`run_guarded`]. Called once, when the module is imported.
pub fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
                (*s).to_string()
            } else if let Some(s) = info.payload().downcast_ref::<String>() {
                s.clone()
            } else {
                "panic".to_string()
            };
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{msg}{at}")));
        }));
    });
}

/// The Python exception of a panic caught at the boundary.
pub fn internal_error(what: &str) -> PyErr {
    PyRuntimeError::new_err(format!(
        "internal error (a bug in cosched; please report it with the input): {what}"
    ))
}

/// Runs `f` with the GIL released, interruptible by SIGINT, with panics turned
/// into `RuntimeError`. `f`'s own errors are converted by `to_py`; an
/// interrupted run raises `KeyboardInterrupt`.
pub fn run_guarded<T: Send, E: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> Result<T, E> + Send,
    is_interrupted: impl Fn(&E) -> bool,
    to_py: impl FnOnce(E) -> PyErr,
) -> PyResult<T> {
    interrupt::clear();
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    let hook = unsafe {
        signal_hook::low_level::register(signal_hook::consts::SIGINT, interrupt::request)
    }
    .ok();
    let r = py.detach(|| catch_unwind(AssertUnwindSafe(f)));
    if let Some(id) = hook {
        signal_hook::low_level::unregister(id);
    }
    match r {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) if is_interrupted(&e) || interrupt::requested() => {
            // Python's handler saw the signal too: this raises its KeyboardInterrupt.
            py.check_signals()?;
            Err(PyKeyboardInterrupt::new_err("interrupted"))
        }
        Ok(Err(e)) => Err(to_py(e)),
        Err(_) => {
            let what = LAST_PANIC
                .with(|p| p.borrow_mut().take())
                .unwrap_or_else(|| "panic".into());
            Err(internal_error(&what))
        }
    }
}
