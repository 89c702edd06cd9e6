//! A cluster policy written in Python (`python:module:Class[...]`), hosted by the engine.
//!
//! The engine calls [`ClusterPolicy::on_events`] once per batch of events; this
//! adapter converts the batch to Python values, calls the object's
//! `on_events(now_s, events, free_procs, total_procs)` with the GIL held, and
//! converts the returned decisions (protocol: `coscheduling.pypolicy`). The first
//! failure (an exception raised by the policy, `SystemExit` included, or a
//! malformed decision) is kept as a `coscheduling.pypolicy.PolicyError` (a
//! `RuntimeError`) naming the policy, the instant, the event batch, the
//! exception with the file and line that raised it, or the bad decision, with
//! the policy's exception as its `__cause__`; the policy then decides nothing
//! more, and the binding raises it after the run. `KeyboardInterrupt` is kept as
//! it is. An exception raised by the optional `dump()` (called for the engine's
//! stall report) becomes that report's text, with its file and line.
//!
//! At process level ([`PyAdmission`]) a fresh policy object is built for the
//! run by a Python factory and hosted as the admission through the adapter
//! `cosched::policies::process::hosted` (nodes as its processors, MPL 1); the
//! first failure stops the run at once (the engine gets an admission error),
//! and the binding raises the kept exception instead of the engine's error.

use cosched::contract::admission::{
    AdmissionControl, AdmissionError, AdmissionEvent, AdmissionPolicy,
};
use cosched::des::SimTime;
use cosched::engine::{ClusterPolicy, ClusterView, Decision, Event};
use cosched::model::JobId;
use cosched::policies::process::hosted::Hosted;
use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use std::sync::{Arc, Mutex, PoisonError};

/// Where a Python policy keeps its first error, shared with the binding that
/// raises it after the run.
pub type Failure = Arc<Mutex<Option<PyErr>>>;

pub struct PyPolicy {
    obj: Py<PyAny>,
    name: String,
    /// The first Python error, re-raised after the run.
    error: Failure,
}

impl PyPolicy {
    pub fn new(obj: Py<PyAny>, name: String) -> Self {
        Self::reporting_to(obj, name, Failure::default())
    }

    /// A policy that keeps its first error in `error`.
    pub fn reporting_to(obj: Py<PyAny>, name: String, error: Failure) -> Self {
        Self { obj, name, error }
    }

    /// The first Python error of the run, if any (taken).
    pub fn take_error(&self) -> Option<PyErr> {
        take(&self.error)
    }

    fn failed(&self) -> bool {
        self.error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    fn call(
        &self,
        py: Python<'_>,
        events: &[Event],
        view: &dyn ClusterView,
        out: &mut Vec<Decision>,
    ) -> PyResult<()> {
        let evs = PyList::empty(py);
        for e in events {
            match *e {
                Event::Submitted(id) => {
                    let j = view.job(id);
                    evs.append((
                        "submitted",
                        id.0,
                        j.procs,
                        j.estimate.as_secs_f64(),
                        j.submit.as_secs_f64(),
                    ))?;
                }
                Event::Completed(id) => evs.append(("completed", id.0))?,
                Event::Killed(id) => evs.append(("killed", id.0))?,
                Event::Timer => evs.append(("timer",))?,
            }
        }
        let now = view.now();
        // Every failure names the policy, the instant and the event batch.
        let batch = || {
            let r = evs.repr().map(|r| r.to_string()).unwrap_or_default();
            if r.chars().count() > 400 {
                format!("{}...]", r.chars().take(400).collect::<String>())
            } else {
                r
            }
        };
        let fail = |what: String, cause: Option<PyErr>| -> PyErr {
            if let Some(c) = &cause {
                if c.is_instance_of::<PyKeyboardInterrupt>(py) {
                    return cause.unwrap();
                }
            }
            let e = policy_error(
                py,
                format!(
                    "policy {} failed at t={now} on the events {}: {what}",
                    self.name,
                    batch()
                ),
            );
            e.set_cause(py, cause);
            e
        };
        let res = self
            .obj
            .call_method1(
                py,
                "on_events",
                (
                    now.as_secs_f64(),
                    &evs,
                    view.free_procs(),
                    view.total_procs(),
                ),
            )
            .map_err(|e| {
                let what = format!("on_events raised {}", raised(py, &e));
                fail(what, Some(e))
            })?;
        let decisions = res.bind(py).try_iter().map_err(|e| {
            fail(
                format!(
                    "on_events must return an iterable of decisions, got {}",
                    short_repr(res.bind(py))
                ),
                Some(e),
            )
        })?;
        for item in decisions {
            let item = item.map_err(|e| {
                let what = format!("iterating the decisions raised {}", raised(py, &e));
                fail(what, Some(e))
            })?;
            let shown = short_repr(&item);
            let malformed = |why: &str| {
                fail(
                    format!(
                        "malformed decision {shown}: {why}; valid: (\"start\", job), (\"start_on\", job, [proc, ...]), (\"reject\", job), (\"wake_at\", t_s)"
                    ),
                    None,
                )
            };
            let Ok(t) = item.cast_into::<PyTuple>() else {
                return Err(malformed("not a tuple"));
            };
            out.push(parse_decision(&t, &malformed)?);
        }
        Ok(())
    }
}

/// One decision tuple as an engine [`Decision`]; `malformed(why)` builds the error.
fn parse_decision(t: &Bound<'_, PyTuple>, malformed: &dyn Fn(&str) -> PyErr) -> PyResult<Decision> {
    let kind: String = t
        .get_item(0)
        .and_then(|k| k.extract())
        .map_err(|_| malformed("the first item must be the decision's name"))?;
    let job = || -> Result<JobId, PyErr> {
        t.get_item(1)
            .and_then(|j| j.extract::<u32>())
            .map(JobId)
            .map_err(|_| malformed("the job must be a job number (an int >= 0) from the events"))
    };
    let exact_len = |n: usize| {
        if t.len() == n {
            Ok(())
        } else {
            Err(malformed(&format!("expected {n} items, got {}", t.len())))
        }
    };
    match kind.as_str() {
        "start" => {
            exact_len(2)?;
            Ok(Decision::Start(job()?))
        }
        "start_on" => {
            exact_len(3)?;
            let procs = t
                .get_item(2)
                .and_then(|p| p.extract::<Vec<u32>>())
                .map_err(|_| malformed("the processors must be a list of ints >= 0"))?;
            Ok(Decision::StartOn(job()?, procs))
        }
        "reject" => {
            exact_len(2)?;
            Ok(Decision::Reject(job()?))
        }
        "wake_at" => {
            exact_len(2)?;
            let at: f64 = t
                .get_item(1)
                .and_then(|a| a.extract())
                .map_err(|_| malformed("the time must be a number of seconds"))?;
            let at = SimTime::try_from_secs_f64(at)
                .ok()
                .filter(|t| *t >= SimTime::ZERO)
                .ok_or_else(|| {
                    malformed("the time must be finite, >= 0 and within the supported range")
                })?;
            Ok(Decision::WakeAt(at))
        }
        _ => Err(malformed("unknown decision name")),
    }
}

/// `TypeName: message` of a Python exception (`SystemExit: 3` for `sys.exit(3)`).
fn describe(py: Python<'_>, e: &PyErr) -> String {
    let ty = e
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "exception".into());
    let v = e.value(py).str().map(|s| s.to_string()).unwrap_or_default();
    if v.is_empty() {
        ty
    } else {
        format!("{ty}: {v}")
    }
}

/// `TypeName: message (FILE:LINE)`: [`describe`] and the line that raised the
/// exception (the innermost frame of its traceback), as `coscheduling.pypolicy`
/// names a module's or constructor's exception.
fn raised(py: Python<'_>, e: &PyErr) -> String {
    format!("{}{}", describe(py, e), location(py, e).unwrap_or_default())
}

/// ` (FILE:LINE)` of the innermost frame of `e`'s traceback, if it has one.
fn location(py: Python<'_>, e: &PyErr) -> Option<String> {
    let tb = e.traceback(py)?;
    let frames = py
        .import("traceback")
        .and_then(|m| m.call_method1("extract_tb", (tb,)))
        .ok()?;
    let last = frames.get_item(-1).ok()?;
    let file: String = last.getattr("filename").and_then(|f| f.extract()).ok()?;
    let line: u32 = last.getattr("lineno").and_then(|l| l.extract()).ok()?;
    Some(format!(" ({file}:{line})"))
}

/// A `coscheduling.pypolicy.PolicyError` (a `RuntimeError` the command line
/// reports as the user's error, exit code 2) with message `msg`; a plain
/// `RuntimeError` if that class cannot be imported.
fn policy_error(py: Python<'_>, msg: String) -> PyErr {
    let made = py
        .import("coscheduling.pypolicy")
        .and_then(|m| m.getattr("PolicyError"))
        .and_then(|c| c.call1((msg.clone(),)));
    match made {
        Ok(v) if v.is_instance_of::<PyRuntimeError>() => PyErr::from_value(v),
        _ => PyRuntimeError::new_err(msg),
    }
}

/// `repr(obj)`, shortened to 200 characters.
fn short_repr(obj: &Bound<'_, PyAny>) -> String {
    let r = obj
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "<unprintable>".into());
    if r.chars().count() > 200 {
        format!("{}...", r.chars().take(200).collect::<String>())
    } else {
        r
    }
}

impl ClusterPolicy for PyPolicy {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn on_events(&mut self, events: &[Event], view: &dyn ClusterView, out: &mut Vec<Decision>) {
        if self.failed() {
            return;
        }
        if let Err(e) = Python::attach(|py| self.call(py, events, view, out)) {
            out.clear();
            *self.error.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
        }
    }

    /// The object's `dump()`, if it has one; an exception it raises (or a
    /// value that is not a string) is described instead, with its file and line.
    fn dump(&self) -> String {
        Python::attach(|py| {
            let obj = self.obj.bind(py);
            if !obj.hasattr("dump").unwrap_or(false) {
                return String::new();
            }
            match obj.call_method0("dump").and_then(|r| r.extract::<String>()) {
                Ok(s) => s,
                Err(e) => format!("policy {}: dump() raised {}", self.name, raised(py, &e)),
            }
        })
    }
}

/// The error kept in `f`, if any (taken).
pub fn take(f: &Failure) -> Option<PyErr> {
    f.lock().unwrap_or_else(PoisonError::into_inner).take()
}

/// A Python cluster policy as a process-level admission policy: a fresh object
/// from the factory, hosted by [`Hosted`]; stops the run at its first failure.
pub struct PyAdmission {
    name: String,
    /// `None` when the factory failed (its error is in `error`).
    hosted: Option<Hosted>,
    error: Failure,
}

impl PyAdmission {
    /// Calls `factory()` (with the GIL) for a fresh policy object named `name`,
    /// hosted with the runtime estimates `estimates`; its errors go to `error`.
    pub fn new(factory: &Py<PyAny>, name: &str, estimates: Vec<SimTime>, error: Failure) -> Self {
        let built = Python::attach(|py| {
            factory.call0(py).map_err(|e| {
                let err = policy_error(
                    py,
                    // The factory (`coscheduling.pypolicy.load`) names the user's line itself.
                    format!("policy {name} could not be built: {}", describe(py, &e)),
                );
                err.set_cause(py, Some(e));
                err
            })
        });
        let hosted = match built {
            Ok(obj) => {
                let p = PyPolicy::reporting_to(obj, name.to_string(), error.clone());
                Some(Hosted::new(Box::new(p), estimates))
            }
            Err(e) => {
                *error.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
                None
            }
        };
        Self {
            name: name.to_string(),
            hosted,
            error,
        }
    }

    fn stop(&self) -> AdmissionError {
        AdmissionError::Policy(format!(
            "{} failed (its Python exception is raised instead)",
            self.name
        ))
    }
}

impl AdmissionPolicy for PyAdmission {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn on_events(
        &mut self,
        events: &[AdmissionEvent],
        ctl: &mut dyn AdmissionControl,
    ) -> Result<(), AdmissionError> {
        let Some(hosted) = self.hosted.as_mut() else {
            return Err(self.stop());
        };
        let r = hosted.on_events(events, ctl);
        if self
            .error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
        {
            return Err(self.stop());
        }
        r
    }

    fn dump(&self) -> String {
        self.hosted.as_ref().map(Hosted::dump).unwrap_or_default()
    }
}
