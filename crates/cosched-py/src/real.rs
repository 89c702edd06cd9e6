//! `real_run`: a process-level configuration executed for real on this machine
//! (`cosched run`), its outputs shaped like a simulation's.

use cosched::des::SimTime;
use cosched::engine::metrics::{summarize_busy, MeasuredBusy};
use cosched::engine::{EngineStats, JobRecord, JobStatus, SimOutput};
use cosched::model::{JobSpec, Platform, Workload};
use cosched_real::controller::{run, RunSpec};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3_stub_gen::derive::gen_stub_pyfunction;

/// Checks that the gang slot policy `spec` (`gang[...]`, the simulator's
/// string) can run in real mode (`cosched run`); raises ValueError naming the
/// option and what real mode lacks for it otherwise.
#[gen_stub_pyfunction]
#[pyfunction]
pub fn real_gang_check(spec: &str) -> PyResult<()> {
    cosched_real::slothost::gang_policy_with(spec, true, true)
        .map(|_| ())
        .map_err(PyValueError::new_err)
}

/// Runs jobs for real: `spec_json` is the controller's run specification
/// (`cosched_real::controller::RunSpec` as JSON), `platform_json` the platform whose
/// power model prices the measured busy time, `policy` the summary's policy name.
/// `progress(queued, running, done, failed, elapsed_s)` is called about twice a
/// second. Returns JSON text: `jobs` (the job table's columns), `summary` (the
/// summary.json keys) and `real` (per-job measurements, the sampled timeline,
/// the agent's counters, gang switch times). A job whose program fails has status
/// `failed` and its error in `real.jobs[i].error`.
#[gen_stub_pyfunction]
#[pyfunction]
#[pyo3(signature = (spec_json, platform_json, policy, progress=None))]
pub fn real_run(
    py: Python<'_>,
    spec_json: &str,
    platform_json: &str,
    policy: &str,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let spec: RunSpec = serde_json::from_str(spec_json)
        .map_err(|e| PyValueError::new_err(format!("run specification: {e}")))?;
    let platform: Platform = serde_json::from_str(platform_json)
        .map_err(|e| PyValueError::new_err(format!("platform: {e}")))?;
    // A signal (Ctrl-C) is seen at the next progress call: the controller then
    // ends its jobs, the agent restores everything, and the exception is raised.
    let mut pending: Option<PyErr> = None;
    let out = py.detach(|| {
        run(&spec, |p| {
            Python::attach(|py| {
                if let Err(e) = py.check_signals() {
                    pending = Some(e);
                    return false;
                }
                if let Some(cb) = &progress {
                    if let Err(e) = cb.call1(py, p) {
                        pending = Some(e);
                        return false;
                    }
                }
                true
            })
        })
    });
    if let Some(e) = pending {
        return Err(e);
    }
    let out = out.map_err(PyRuntimeError::new_err)?;
    let s = |ns: u64| SimTime(ns as i64);
    let jobs: Vec<JobSpec> = spec
        .jobs
        .iter()
        .zip(&out.jobs)
        .map(|(j, o)| {
            let exec = o.end_ns.zip(o.start_ns).map_or(0, |(e, st)| e - st);
            JobSpec {
                source_id: j.id,
                submit: s(j.submit_ns),
                runtime: s(exec),
                procs: j.procs,
                requested: None,
                estimate: s(j.estimate_ns),
                kill_after: None,
            }
        })
        .collect();
    let records: Vec<JobRecord> = out
        .jobs
        .iter()
        .map(|o| JobRecord {
            start: o.start_ns.map(s),
            end: o.end_ns.map(s),
            status: match (o.start_ns, o.ok) {
                (None, _) => JobStatus::Rejected,
                (Some(_), true) => JobStatus::Completed,
                (Some(_), false) if o.timed_out => JobStatus::Killed,
                (Some(_), false) => JobStatus::Failed,
            },
            alloc: o
                .nodes
                .iter()
                .map(|&n| (n * platform.procs_per_node, n * platform.procs_per_node + 1))
                .collect(),
            nodes: o.nodes.len() as u32,
        })
        .collect();
    let measured = MeasuredBusy {
        job_cpu_s: out.jobs.iter().map(|o| o.cpu_ns as f64 / 1e9).collect(),
        total_proc_s: out.jobs.iter().map(|o| o.cpu_ns as f64 / 1e9).sum(),
    };
    let workload = Workload {
        jobs,
        ..Workload::default()
    };
    let sim = SimOutput {
        records,
        stats: EngineStats::default(),
        policy: policy.to_string(),
    };
    let (mut table, summary) = summarize_busy(&workload, &platform, &sim, 10.0, Some(&measured));
    table.gang_row = out.jobs.iter().map(|o| o.gang_row).collect();
    let doc = serde_json::json!({ "jobs": table, "summary": summary, "real": out });
    serde_json::to_string(&doc).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}
