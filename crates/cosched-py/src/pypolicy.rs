//! A cluster policy written in Python (`python:module:Class[...]`), hosted by the engine.
//!
//! The engine calls [`ClusterPolicy::on_events`] once per batch of events; this
//! adapter converts the batch to Python values, calls the object's
//! `on_events(now_s, events, free_procs, total_procs)` with the GIL held, and
//! converts the returned decisions (protocol: `coscheduling.pypolicy`). The first
//! exception (raised by the policy, or a malformed decision) is kept, the policy
//! then decides nothing more, and the binding re-raises it after the run.

use cosched::des::SimTime;
use cosched::engine::{ClusterPolicy, ClusterView, Decision, Event};
use cosched::model::JobId;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

pub struct PyPolicy {
    obj: Py<PyAny>,
    name: String,
    /// The first Python error, re-raised after the run.
    pub error: Option<PyErr>,
}

impl PyPolicy {
    pub fn new(obj: Py<PyAny>, name: String) -> Self {
        Self {
            obj,
            name,
            error: None,
        }
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
        let res = self.obj.call_method1(
            py,
            "on_events",
            (
                view.now().as_secs_f64(),
                evs,
                view.free_procs(),
                view.total_procs(),
            ),
        )?;
        let bad = |msg: String| PyValueError::new_err(format!("policy {}: {msg}", self.name));
        for item in res.bind(py).try_iter()? {
            let item = item?;
            let t = item
                .cast_into::<PyTuple>()
                .map_err(|_| bad("a decision must be a tuple such as (\"start\", job)".into()))?;
            let kind: String = t.get_item(0)?.extract()?;
            let job = || -> PyResult<JobId> { Ok(JobId(t.get_item(1)?.extract()?)) };
            match kind.as_str() {
                "start" => out.push(Decision::Start(job()?)),
                "start_on" => out.push(Decision::StartOn(job()?, t.get_item(2)?.extract()?)),
                "reject" => out.push(Decision::Reject(job()?)),
                "wake_at" => {
                    let at: f64 = t.get_item(1)?.extract()?;
                    if !(at.is_finite() && at >= 0.0) {
                        return Err(bad(format!(
                            "wake_at: time must be finite and >= 0, got {at}"
                        )));
                    }
                    out.push(Decision::WakeAt(SimTime::from_secs_f64(at)))
                }
                other => {
                    return Err(bad(format!(
                        "unknown decision {other:?}; valid: start, start_on, reject, wake_at"
                    )))
                }
            }
        }
        Ok(())
    }
}

impl ClusterPolicy for PyPolicy {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn on_events(&mut self, events: &[Event], view: &dyn ClusterView, out: &mut Vec<Decision>) {
        if self.error.is_some() {
            return;
        }
        if let Err(e) = Python::attach(|py| self.call(py, events, view, out)) {
            out.clear();
            self.error = Some(e);
        }
    }

    fn dump(&self) -> String {
        Python::attach(|py| {
            self.obj
                .bind(py)
                .call_method0("dump")
                .and_then(|r| r.extract::<String>())
                .unwrap_or_default()
        })
    }
}
