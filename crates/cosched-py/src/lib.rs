//! `coscheduling._core`: the private Python binding of cosched.
//!
//! This crate only converts: Python arguments to the Rust API of the `cosched`
//! facade, and results back to Python objects. Errors become Python exceptions
//! carrying the Rust error's message (which names the file, line and field):
//! `ValueError` for bad input (trace, configuration, options, policy names),
//! `RuntimeError` for failures of the engine itself.

mod apps_export;
mod guard;
mod pypolicy;
mod real;
mod table;

use cosched::des::SimTime;
use cosched::model::swf;
use cosched::model::{
    EstimateSource, EventOrder, OverrunPolicy, Placement, Platform, WorkloadOptions,
};
use cosched::model::{JobSpec, Workload};
use cosched::{Error, TraceRun};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList};
use pyo3_stub_gen::derive::{gen_stub_pyclass, gen_stub_pyfunction, gen_stub_pymethods};
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

// ---------------------------------------------------------------------------
// Errors

fn value_error(msg: impl Into<String>) -> PyErr {
    PyValueError::new_err(msg.into())
}

/// Maps a facade error to a Python exception: input errors to `ValueError`,
/// engine failures to `RuntimeError`.
fn to_py(e: Error) -> PyErr {
    if e.is_input() {
        value_error(e.to_string())
    } else {
        PyRuntimeError::new_err(e.to_string())
    }
}

/// Runs a facade call through [`guard::run_guarded`] (GIL released, Ctrl-C
/// stops it, panics become `RuntimeError`).
fn guarded<T: Send>(py: Python<'_>, f: impl FnOnce() -> Result<T, Error> + Send) -> PyResult<T> {
    guard::run_guarded(py, f, Error::is_interrupted, to_py)
}

fn json_text<T: serde::Serialize>(v: &T) -> PyResult<String> {
    serde_json::to_string(v)
        .map_err(|e| PyRuntimeError::new_err(format!("cannot serialize to JSON: {e}")))
}

// ---------------------------------------------------------------------------
// Argument conversion

/// Parses an option value with the Rust type's own serde names (`"requested"`, `"kill"`, ...).
fn enum_arg<T: DeserializeOwned>(name: &str, value: &str) -> PyResult<T> {
    serde_json::from_value(serde_json::Value::String(value.to_string()))
        .map_err(|e| value_error(format!("{name}: {e}")))
}

fn workload_options(
    estimates: &str,
    overrun: &str,
    machine_size: Option<i64>,
    machine_size_from_nodes: bool,
) -> PyResult<WorkloadOptions> {
    let machine_size = match machine_size {
        None => None,
        Some(n) if (1..=u32::MAX as i64).contains(&n) => Some(n as u32),
        Some(n) => {
            return Err(value_error(format!(
                "machine_size: must be between 1 and {}, got {n}",
                u32::MAX
            )))
        }
    };
    Ok(WorkloadOptions {
        estimates: enum_arg::<EstimateSource>("estimates", estimates)?,
        overrun: enum_arg::<OverrunPolicy>("overrun", overrun)?,
        machine_size_from_nodes,
        machine_size,
    })
}

fn seed_arg(seed: i128) -> PyResult<u64> {
    u64::try_from(seed).map_err(|_| {
        value_error(format!(
            "seed: must be between 0 and {}, got {seed}",
            u64::MAX
        ))
    })
}

fn count_arg(name: &str, v: i64) -> PyResult<usize> {
    usize::try_from(v).map_err(|_| value_error(format!("{name}: must be >= 0, got {v}")))
}

/// Converts a platform dict (`nodes`, `procs_per_node`, `idle_watts`, `busy_watts`)
/// through the Rust type's serde schema, so defaults and unknown-key errors are the Rust ones.
fn platform_arg(d: &Bound<'_, PyDict>) -> PyResult<Platform> {
    let mut map = serde_json::Map::new();
    for (k, v) in d.iter() {
        let key: String = k
            .extract()
            .map_err(|_| value_error("platform: keys must be strings"))?;
        let value = if v.is_instance_of::<PyBool>() {
            return Err(value_error(format!(
                "platform.{key}: expected a number, got a bool"
            )));
        } else if v.is_instance_of::<PyInt>() {
            serde_json::Value::from(
                v.extract::<i64>()
                    .map_err(|e| value_error(format!("platform.{key}: {e}")))?,
            )
        } else if v.is_instance_of::<PyFloat>() {
            let x: f64 = v.extract()?;
            if !x.is_finite() {
                return Err(value_error(format!(
                    "platform.{key}: must be finite, got {x}"
                )));
            }
            serde_json::Value::from(x)
        } else {
            return Err(value_error(format!(
                "platform.{key}: expected a number, got {}",
                v.get_type().name()?
            )));
        };
        map.insert(key, value);
    }
    let p: Platform = serde_json::from_value(serde_json::Value::Object(map))
        .map_err(|e| value_error(format!("platform: {e}")))?;
    p.validate().map_err(|e| value_error(e.to_string()))?;
    Ok(p)
}

// ---------------------------------------------------------------------------
// Results

/// The result of one run: the per-job table, the summary, warnings and wall-clock timings.
#[gen_stub_pyclass]
#[pyclass(module = "coscheduling._core", frozen)]
pub struct RunResult {
    inner: cosched::RunResult,
}

#[gen_stub_pymethods]
#[pymethods]
impl RunResult {
    /// Every column of the job table, in table order: name -> list of values
    /// (times in seconds; NaN for jobs that never started).
    #[gen_stub(override_return_type(type_repr = "dict[str, list[typing.Any]]", imports = ("typing")))]
    fn columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let t = &self.inner.table;
        let d = PyDict::new(py);
        d.set_item("job_id", PyList::new(py, &t.job_id)?)?;
        d.set_item("submit_s", PyList::new(py, &t.submit_s)?)?;
        d.set_item("start_s", PyList::new(py, &t.start_s)?)?;
        d.set_item("end_s", PyList::new(py, &t.end_s)?)?;
        d.set_item("wait_s", PyList::new(py, &t.wait_s)?)?;
        d.set_item("execution_s", PyList::new(py, &t.execution_s)?)?;
        d.set_item("response_s", PyList::new(py, &t.response_s)?)?;
        d.set_item("slowdown", PyList::new(py, &t.slowdown)?)?;
        d.set_item("bounded_slowdown", PyList::new(py, &t.bounded_slowdown)?)?;
        d.set_item("procs", PyList::new(py, &t.procs)?)?;
        d.set_item("nodes", PyList::new(py, &t.nodes)?)?;
        d.set_item("runtime_s", PyList::new(py, &t.runtime_s)?)?;
        d.set_item("estimate_s", PyList::new(py, &t.estimate_s)?)?;
        d.set_item("requested_s", PyList::new(py, &t.requested_s)?)?;
        d.set_item("status", PyList::new(py, &t.status)?)?;
        d.set_item("energy_j", PyList::new(py, &t.energy_j)?)?;
        d.set_item("node_list", PyList::new(py, &t.node_list)?)?;
        let rows = if t.gang_row.is_empty() {
            vec![-1i64; t.job_id.len()]
        } else {
            t.gang_row.clone()
        };
        d.set_item("gang_row", PyList::new(py, &rows)?)?;
        Ok(d)
    }

    /// The job table as Arrow buffers, one entry per column in table order:
    /// (name, Arrow type name, values, validity bitmap or None, string offsets or None).
    /// NaN floats are null. `coscheduling.api` wraps them into a `pyarrow.Table`.
    #[gen_stub(override_return_type(
        type_repr = "list[tuple[str, str, bytes, bytes | None, bytes | None]]"
    ))]
    fn jobs_arrow<'py>(&self, py: Python<'py>) -> PyResult<Vec<table::ArrowColumn<'py>>> {
        table::arrow_buffers(py, &table::job_columns(&self.inner.table))
    }

    /// Writes the job table to `path` as jobs.csv (docs/formats/jobs.md): the bytes
    /// pandas `to_csv(index=False, lineterminator="\n", na_rep="")` writes.
    fn write_jobs_csv(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let t = &self.inner.table;
        py.detach(|| table::write_file(&path, &table::csv_text(&table::job_columns(t))))
    }

    /// The per-node timeline of a process-level run recorded with `timeline=True`,
    /// as columns: node, cpu (-1 for the disk, -2 for a process's own ready and
    /// blocked intervals), job, rank, pid, start_s, end_s, kind (useful, spin,
    /// switch, page_in, io, ready, blocked), sorted by node, cpu, start (and pid);
    /// contiguous pieces of one activity of one process on one lane are merged.
    fn timeline_columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        use cosched::engine::process::{Segment, SegmentKind};
        let lane = |s: &Segment| match (s.cpu, s.kind.is_state()) {
            (Some(c), _) => i64::from(c),
            (None, false) => -1,
            (None, true) => -2,
        };
        let mut sorted: Vec<_> = self.inner.timeline.clone();
        sorted.sort_by_key(|s| (s.node, lane(s), s.start, s.end, s.pid));
        // Contiguous pieces of one activity on one lane become one segment.
        let mut segs: Vec<Segment> = Vec::with_capacity(sorted.len());
        for s in sorted {
            match segs.last_mut() {
                Some(p)
                    if p.node == s.node
                        && p.cpu == s.cpu
                        && p.pid == s.pid
                        && p.kind == s.kind
                        && p.end == s.start =>
                {
                    p.end = s.end
                }
                _ => segs.push(s),
            }
        }
        let d = PyDict::new(py);
        let col = |f: &dyn Fn(&Segment) -> i64| -> Vec<i64> { segs.iter().map(f).collect() };
        d.set_item("node", PyList::new(py, col(&|s| i64::from(s.node)))?)?;
        d.set_item("cpu", PyList::new(py, col(&lane))?)?;
        d.set_item("job", PyList::new(py, col(&|s| s.job as i64))?)?;
        d.set_item("rank", PyList::new(py, col(&|s| i64::from(s.rank)))?)?;
        d.set_item("pid", PyList::new(py, col(&|s| i64::from(s.pid)))?)?;
        let secs = |f: &dyn Fn(&Segment) -> SimTime| -> Vec<f64> {
            segs.iter().map(|s| f(s).as_secs_f64()).collect()
        };
        d.set_item("start_s", PyList::new(py, secs(&|s| s.start))?)?;
        d.set_item("end_s", PyList::new(py, secs(&|s| s.end))?)?;
        let kinds: Vec<&str> = segs
            .iter()
            .map(|s| match s.kind {
                SegmentKind::Useful => "useful",
                SegmentKind::Spin => "spin",
                SegmentKind::Switch => "switch",
                SegmentKind::PageIn => "page_in",
                SegmentKind::SwapOut => "swap_out",
                SegmentKind::Io => "io",
                SegmentKind::Ready => "ready",
                SegmentKind::Blocked => "blocked",
            })
            .collect();
        d.set_item("kind", PyList::new(py, kinds)?)?;
        Ok(d)
    }

    /// The run summary as JSON text (the summary.json keys, in a fixed order; NaN as null).
    fn summary_json(&self) -> PyResult<String> {
        json_text(&self.inner.summary)
    }

    /// The platform the run used: nodes, procs_per_node, idle_watts, busy_watts.
    fn platform_json(&self) -> PyResult<String> {
        json_text(&self.inner.platform)
    }

    /// Warnings produced while building the workload.
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings.clone()
    }

    /// Wall-clock seconds of each phase: parse_s, simulate_s, metrics_s.
    fn timings(&self) -> BTreeMap<String, f64> {
        let t = &self.inner.timings;
        BTreeMap::from([
            ("parse_s".to_string(), t.parse_s),
            ("simulate_s".to_string(), t.simulate_s),
            ("metrics_s".to_string(), t.metrics_s),
        ])
    }

    /// Number of jobs in the table.
    fn __len__(&self) -> usize {
        self.inner.table.job_id.len()
    }
}

fn wrap(r: cosched::RunResult) -> RunResult {
    RunResult { inner: r }
}

// ---------------------------------------------------------------------------
// Functions

/// The version of the Rust core.
#[gen_stub_pyfunction]
#[pyfunction]
fn version() -> &'static str {
    cosched::VERSION
}

/// Reads an SWF trace and simulates it under a policy (job-level model).
///
/// `platform` (keys nodes, procs_per_node, idle_watts, busy_watts) overrides the
/// platform derived from the trace header. `event_order` is `"per-instant"` (one
/// policy call per instant) or `"per-event"` (one per event, submissions first).
#[gen_stub_pyfunction]
#[pyfunction]
#[pyo3(signature = (
    trace, policy, *, estimates = "requested", overrun = "extend", machine_size = None,
    machine_size_from_nodes = false, max_jobs = None, platform = None, placement = "packing",
    seed = 0, bsld_threshold_s = 10.0, policy_object = None, event_order = "per-instant"
))]
#[allow(clippy::too_many_arguments)]
fn run_trace(
    py: Python<'_>,
    trace: PathBuf,
    policy: &str,
    estimates: &str,
    overrun: &str,
    machine_size: Option<i64>,
    machine_size_from_nodes: bool,
    max_jobs: Option<i64>,
    platform: Option<Bound<'_, PyDict>>,
    placement: &str,
    seed: i128,
    bsld_threshold_s: f64,
    policy_object: Option<Py<PyAny>>,
    event_order: &str,
) -> PyResult<RunResult> {
    let mut run = TraceRun::new(trace, policy);
    run.event_order = enum_arg::<EventOrder>("event_order", event_order)?;
    run.options = workload_options(estimates, overrun, machine_size, machine_size_from_nodes)?;
    run.max_jobs = max_jobs.map(|n| count_arg("max_jobs", n)).transpose()?;
    run.platform = platform.as_ref().map(platform_arg).transpose()?;
    run.placement = enum_arg::<Placement>("placement", placement)?;
    run.seed = seed_arg(seed)?;
    run.bsld_threshold_s = bsld_threshold_s;
    run_hosted(py, policy, policy_object, |p| {
        cosched::run_trace_with(&run, p)
    })
}

/// Runs `f` without the GIL, with the Python policy object (if any) as the policy;
/// a Python error raised inside the policy is re-raised here.
fn run_hosted(
    py: Python<'_>,
    name: &str,
    policy_object: Option<Py<PyAny>>,
    f: impl FnOnce(Option<&mut dyn cosched::engine::ClusterPolicy>) -> Result<cosched::RunResult, Error>
        + Send,
) -> PyResult<RunResult> {
    match policy_object {
        None => {
            if cosched::is_external_policy(name) {
                return Err(value_error(format!(
                    "policy {name:?}: a Python policy needs its object (use coscheduling.run)"
                )));
            }
            guarded(py, || f(None)).map(wrap)
        }
        Some(obj) => {
            let mut p = pypolicy::PyPolicy::new(obj, name.to_string());
            let r = guarded(py, || f(Some(&mut p)));
            if let Some(e) = p.take_error() {
                return Err(e);
            }
            r.map(wrap)
        }
    }
}

/// Loads and validates a run configuration file (TOML or JSON) and runs it; at
/// process fidelity `timeline` records the per-node timeline (`timeline_columns`).
/// A Python policy (`python:module:Class`) is `policy_object` at job fidelity;
/// at process fidelity `policy_factory()` builds a fresh one for the run.
#[gen_stub_pyfunction]
#[pyfunction]
#[pyo3(signature = (path, timeline = false, policy_object = None, policy_factory = None))]
fn run_config(
    py: Python<'_>,
    path: PathBuf,
    timeline: bool,
    policy_object: Option<Py<PyAny>>,
    policy_factory: Option<Py<PyAny>>,
) -> PyResult<RunResult> {
    let cfg = guarded(py, || cosched::load_config(&path))?;
    let external = cosched::is_external_policy(&cfg.scheduler.policy);
    if cfg.fidelity == "process" {
        if policy_object.is_some() {
            return Err(value_error(
                "policy_object: a process-level run builds a fresh policy: give policy_factory",
            ));
        }
        return match policy_factory {
            Some(factory) if external => run_process_python(py, &cfg, timeline, &factory),
            _ => guarded(py, || cosched::run_config_recording(&cfg, timeline)).map(wrap),
        };
    }
    if policy_factory.is_some() {
        return Err(value_error(
            "policy_factory: only for process-level runs; a job-level run takes policy_object",
        ));
    }
    if policy_object.is_none() && !external {
        return guarded(py, || cosched::run_config_recording(&cfg, timeline)).map(wrap);
    }
    let run = cosched::TraceRun::from(&cfg);
    run_hosted(py, &cfg.scheduler.policy, policy_object, |p| {
        cosched::run_trace_with(&run, p)
    })
}

/// Runs a process-level configuration whose policy is written in Python:
/// `factory()` builds the policy object, hosted as the admission; a Python
/// error raised inside the policy is re-raised here (the run stops at it).
fn run_process_python(
    py: Python<'_>,
    cfg: &cosched::model::RunConfig,
    timeline: bool,
    factory: &Py<PyAny>,
) -> PyResult<RunResult> {
    let failure = pypolicy::Failure::default();
    let name = cfg.scheduler.policy.trim().to_string();
    let factory = Arc::new(factory.clone_ref(py));
    let make = |est: Vec<SimTime>| {
        let (factory, name, failure) = (factory.clone(), name.clone(), failure.clone());
        cosched::engine::process::admit::AdmissionFactory::new(move || {
            Box::new(pypolicy::PyAdmission::new(
                &factory,
                &name,
                est.clone(),
                failure.clone(),
            ))
        })
    };
    let r = guarded(py, || {
        cosched::process_run::run_process_config_admitting(cfg, timeline, &make)
    });
    if let Some(e) = pypolicy::take(&failure) {
        return Err(e);
    }
    r.map(wrap)
}

/// Loads and validates a run configuration file; returns it as JSON text with
/// every default filled in and the trace path resolved against the file's folder.
#[gen_stub_pyfunction]
#[pyfunction]
fn load_config(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    let cfg = guarded(py, || cosched::load_config(&path))?;
    json_text(&cfg)
}

fn check_len(name: &str, len: usize, n: usize) -> PyResult<()> {
    if len != n {
        return Err(value_error(format!(
            "jobs: column {name} has {len} rows, submit_s has {n}"
        )));
    }
    Ok(())
}

/// Simulates an in-memory workload (one entry per job in every list).
///
/// `requested_s` is the user's requested time; NaN or <= 0 means unknown.
/// `job_id` defaults to the row index. Jobs are sorted stably by submit time;
/// the estimate each job gets follows the same rules as for SWF traces.
#[gen_stub_pyfunction]
#[pyfunction]
#[pyo3(signature = (
    submit_s, runtime_s, procs, requested_s, job_id = None, *, platform, policy,
    estimates = "requested", overrun = "extend", placement = "packing", seed = 0, bsld_threshold_s = 10.0,
    policy_object = None
))]
#[allow(clippy::too_many_arguments)]
fn run_jobs(
    py: Python<'_>,
    submit_s: Vec<f64>,
    runtime_s: Vec<f64>,
    procs: Vec<i64>,
    requested_s: Vec<f64>,
    job_id: Option<Vec<i64>>,
    platform: Bound<'_, PyDict>,
    policy: &str,
    estimates: &str,
    overrun: &str,
    placement: &str,
    seed: i128,
    bsld_threshold_s: f64,
    policy_object: Option<Py<PyAny>>,
) -> PyResult<RunResult> {
    let n = submit_s.len();
    check_len("runtime_s", runtime_s.len(), n)?;
    check_len("procs", procs.len(), n)?;
    check_len("requested_s", requested_s.len(), n)?;
    if let Some(ids) = &job_id {
        check_len("job_id", ids.len(), n)?;
        // The job table and the result files are keyed by job id.
        let mut first = std::collections::HashMap::with_capacity(n);
        for (i, id) in ids.iter().enumerate() {
            if let Some(j) = first.insert(*id, i) {
                return Err(value_error(format!(
                    "jobs: column job_id: job id {id} appears in rows {j} and {i}; job ids must be unique"
                )));
            }
        }
    }
    let platform = platform_arg(&platform)?;
    let opts = workload_options(estimates, overrun, None, false)?;
    let placement = enum_arg::<Placement>("placement", placement)?;
    let seed = seed_arg(seed)?;

    let bad = |i: usize, col: &str, msg: String| {
        value_error(format!("jobs row {i}: column {col}: {msg}"))
    };
    let mut jobs = Vec::with_capacity(n);
    for i in 0..n {
        let (s, r, p, q) = (submit_s[i], runtime_s[i], procs[i], requested_s[i]);
        if !(s.is_finite() && s >= 0.0) {
            return Err(bad(
                i,
                "submit_s",
                format!("must be a finite number >= 0, got {s}"),
            ));
        }
        if !(r.is_finite() && r >= 0.0) {
            return Err(bad(
                i,
                "runtime_s",
                format!("must be a finite number >= 0, got {r}"),
            ));
        }
        if !(1..=u32::MAX as i64).contains(&p) {
            return Err(bad(
                i,
                "procs",
                format!("must be between 1 and {}, got {p}", u32::MAX),
            ));
        }
        if q.is_infinite() {
            return Err(bad(
                i,
                "requested_s",
                format!("must be finite (NaN or <= 0 for unknown), got {q}"),
            ));
        }
        let time = |col: &str, v: f64| {
            SimTime::try_from_secs_f64(v).map_err(|e| bad(i, col, e.to_string()))
        };
        let submit = time("submit_s", s)?;
        let runtime = time("runtime_s", r)?;
        let requested = if q > 0.0 {
            Some(time("requested_s", q)?)
        } else {
            None
        };
        let (estimate, kill_after) = opts.estimate(runtime, requested);
        jobs.push(JobSpec {
            source_id: job_id.as_ref().map_or(i as i64, |ids| ids[i]),
            submit,
            runtime,
            procs: p as u32,
            requested,
            estimate,
            kill_after,
        });
    }
    let mut workload = Workload::from_jobs(jobs, "jobs");
    if let Some(w) = wider_than_machine(&workload, &platform) {
        workload.warnings.push(w);
    }
    run_hosted(py, policy, policy_object, |p| match p {
        Some(p) => {
            cosched::run_workload_with(&workload, &platform, p, placement, seed, bsld_threshold_s)
        }
        None => cosched::run_workload(
            &workload,
            &platform,
            policy,
            placement,
            seed,
            bsld_threshold_s,
        ),
    })
}

/// The warning a trace gives for jobs needing more processors than the machine
/// has (`cosched::model::swf`, docs/formats/swf.md rule 6), for a `jobs=` table:
/// the engine rejects them at submission (status `rejected`, counted in the
/// summary's `jobs_rejected`).
fn wider_than_machine(workload: &Workload, platform: &Platform) -> Option<String> {
    let total = platform.total_procs();
    let wider = workload.jobs.iter().filter(|j| j.procs > total).count();
    (wider > 0).then(|| {
        format!(
            "jobs: {wider} jobs need more processors than the machine's {total} (platform: {} nodes x {} procs); they are rejected",
            platform.nodes, platform.procs_per_node
        )
    })
}

/// Statistics of an SWF trace, as JSON text.
#[gen_stub_pyfunction]
#[pyfunction]
#[pyo3(signature = (path, *, machine_size_from_nodes = false, machine_size = None))]
fn trace_info(
    py: Python<'_>,
    path: PathBuf,
    machine_size_from_nodes: bool,
    machine_size: Option<i64>,
) -> PyResult<String> {
    let opts = workload_options("requested", "extend", machine_size, machine_size_from_nodes)?;
    let stats = guarded(py, || {
        swf::read_swf(&path)
            .and_then(|t| swf::trace_stats(&t, &opts))
            .map_err(Error::from)
    })?;
    json_text(&stats)
}

/// Writes the first `first` data records of the trace `src` to `dst` (gzip when
/// `dst` ends in .gz), keeping every header comment line. Atomic.
#[gen_stub_pyfunction]
#[pyfunction]
fn slice_trace(py: Python<'_>, src: PathBuf, dst: PathBuf, first: i64) -> PyResult<()> {
    let first = count_arg("first", first)?;
    guarded(py, || {
        let mut t = swf::read_swf(Path::new(&src))?;
        t.records.truncate(first);
        swf::write_swf(&t, &dst).map_err(Error::from)
    })
}

/// Every registered policy with its level, summary and parameters: cluster and node
/// policies, the job-level time-sharing models (`gang`, `timeshare`) and the
/// process-level schemes (`fcfs`, `batch`, `easy`, `gang` at process fidelity), as JSON text.
#[gen_stub_pyfunction]
#[pyfunction]
fn policies() -> PyResult<String> {
    let mut all = cosched::policies::catalog();
    let models = cosched::timeshare::catalog();
    all.retain(|p| {
        !models
            .iter()
            .any(|m| m.name == p.name && p.level == "cluster")
    });
    all.extend(models);
    json_text(&all)
}

/// Parses a `name[key=value,...]` string (a policy string or a parameterized
/// application name) with the one parser of the Rust core: the name and the
/// parameters as (key, value) text pairs in the order written. Surrounding
/// whitespace is ignored. A malformed string raises `ValueError` naming the string,
/// the 1-based character position and the reason.
#[gen_stub_pyfunction]
#[pyfunction]
fn parse_spec(spec: &str) -> PyResult<(String, Vec<(String, String)>)> {
    let s = cosched::model::spec::parse(spec).map_err(|e| value_error(e.to_string()))?;
    Ok((s.name, s.params))
}

/// Every application preset (NAS kernels, sPPM, BlockSolve95) with its classes,
/// process counts, memory per process at 16 processes and source, as JSON text.
#[gen_stub_pyfunction]
#[pyfunction]
fn apps() -> PyResult<String> {
    json_text(&cosched::model::apps::catalog())
}

/// Runs every application with a seed 000 Table 1 time dedicated at 16 processes on
/// the choi2004 platform with the committed calibration; one row per (app, class)
/// with the measured and Table 1 times and the relative error, as JSON text.
#[gen_stub_pyfunction]
#[pyfunction]
fn apps_validate(py: Python<'_>) -> PyResult<String> {
    let rows = guarded(py, || {
        cosched::calibrate::validate().map_err(|e| Error::Run(e.to_string()))
    })?;
    json_text(&rows)
}

/// Runs every application of seed 002 Table 1 (NAS class B, 4 processes, one per
/// node) dedicated on the ghanesh platform under `block` and compares execution
/// time, message rate, data rate and CPU utilization with the table (the looser
/// second target); one row per application with the columns off the tolerance and
/// those that are known deviations, as JSON text.
#[gen_stub_pyfunction]
#[pyfunction]
fn apps_validate_seed002(py: Python<'_>) -> PyResult<String> {
    let rows = guarded(py, || {
        cosched::calibrate::validate_seed002().map_err(|e| Error::Run(e.to_string()))
    })?;
    json_text(&rows)
}

/// Fits the application library afresh (the full fit of `cosched::calibrate`:
/// every application and class, the imbalances jointly with seed 002 Table 1;
/// minutes of CPU on two threads) and compares `committed`, a calibration table as
/// JSON text (the committed `calibration.json`), with it; returns one line per
/// difference, none when the table is what the fit produces now.
#[gen_stub_pyfunction]
#[pyfunction]
fn apps_fit_differences(py: Python<'_>, committed: &str) -> PyResult<Vec<String>> {
    let committed: cosched::model::apps::Calibration = serde_json::from_str(committed)
        .map_err(|e| value_error(format!("committed calibration table: {e}")))?;
    let fresh = guarded(py, || {
        cosched::calibrate::fit_all().map_err(|e| Error::Run(e.to_string()))
    })?;
    Ok(cosched::calibrate::differences(&fresh, &committed))
}

/// The process-level benchmark: 20 NAS jobs of the seed 000 mix on choi2004,
/// MPL 3, NLS; returns jobs, events, wall seconds and simulated seconds as JSON text.
#[gen_stub_pyfunction]
#[pyfunction]
#[pyo3(signature = (seed = 1))]
fn bench_process_level(py: Python<'_>, seed: u64) -> PyResult<String> {
    let b = guarded(py, || cosched::process_run::bench_process_level(seed))?;
    json_text(&b)
}

/// Job-level time sharing (`cosched_engine::timeshare_fluid`) of in-memory jobs with a
/// per-job efficiency table: job `i` uses `tables[classes[i]]`. Used to validate
/// interference tables against process-level runs.
#[gen_stub_pyfunction]
#[pyfunction]
#[pyo3(signature = (submit_s, runtime_s, procs, classes, tables, *, nodes, mpl = 3, placement = "packing", seed = 0))]
#[allow(clippy::too_many_arguments)]
fn run_timeshare_jobs(
    py: Python<'_>,
    submit_s: Vec<f64>,
    runtime_s: Vec<f64>,
    procs: Vec<u32>,
    classes: Vec<usize>,
    tables: Vec<Vec<f64>>,
    nodes: u32,
    mpl: u32,
    placement: &str,
    seed: i128,
) -> PyResult<RunResult> {
    let n = submit_s.len();
    check_len("runtime_s", runtime_s.len(), n)?;
    check_len("procs", procs.len(), n)?;
    check_len("classes", classes.len(), n)?;
    let placement = enum_arg::<Placement>("placement", placement)?;
    let seed = seed_arg(seed)?;
    let mut jobs = Vec::with_capacity(n);
    for i in 0..n {
        if !(submit_s[i].is_finite()
            && submit_s[i] >= 0.0
            && runtime_s[i].is_finite()
            && runtime_s[i] >= 0.0)
        {
            return Err(value_error(format!(
                "jobs row {i}: submit_s and runtime_s must be finite and >= 0"
            )));
        }
        let time = |v: f64| {
            SimTime::try_from_secs_f64(v).map_err(|e| value_error(format!("jobs row {i}: {e}")))
        };
        let rt = time(runtime_s[i])?;
        jobs.push(JobSpec {
            source_id: i as i64,
            submit: time(submit_s[i])?,
            runtime: rt,
            procs: procs[i],
            requested: None,
            estimate: rt,
            kill_after: None,
        });
    }
    let workload = Workload::from_jobs(jobs, "jobs");
    let platform = Platform::new(nodes, 1);
    let model = cosched::timeshare::JobLevelModel::Timeshare(
        cosched::engine::timeshare_fluid::TimeshareParams {
            mpl,
            placement,
            seed,
            efficiency: tables,
            class_of: classes,
            name: format!("timeshare[mpl={mpl}]"),
        },
    );
    guarded(py, || {
        cosched::timeshare::run_model(&workload, &platform, &model, 10.0)
    })
    .map(wrap)
}

/// A seed 000 style job mix: `n` jobs, each an application drawn uniformly from
/// `apps`, a class from `classes` (one letter each), a process count from the
/// application's allowed counts (redrawn when a process would not fit in
/// `job_memory_mb`), exponential inter-arrival times of mean `mean_interarrival_s`
/// (first job at 0), seeded stream "workload". Returns the `workload.jobs` list of
/// a process-level configuration as JSON text.
#[gen_stub_pyfunction]
#[pyfunction]
#[pyo3(signature = (n, apps, classes, mean_interarrival_s, job_memory_mb, seed))]
fn nas_mix(
    py: Python<'_>,
    n: usize,
    apps: Vec<String>,
    classes: String,
    mean_interarrival_s: f64,
    job_memory_mb: f64,
    seed: u64,
) -> PyResult<String> {
    let names: Vec<&str> = apps.iter().map(String::as_str).collect();
    let cls: Vec<char> = classes.chars().collect();
    let jobs = guarded(py, || {
        cosched::process_run::nas_mix(n, &names, &cls, mean_interarrival_s, job_memory_mb, seed)
            .map_err(|e| Error::Invalid(e.to_string()))
    })?;
    json_text(&jobs)
}

pyo3_stub_gen::module_variable!("coscheduling._core", "__version__", String);
pyo3_stub_gen::module_variable!("coscheduling._core", "__git_commit__", String);
pyo3_stub_gen::module_doc!(
    "coscheduling._core",
    "The Rust core of coscheduling (private: use the `coscheduling` package)."
);

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add(
        "__doc__",
        "The Rust core of coscheduling (private: use the `coscheduling` package).",
    )?;
    m.add("__version__", cosched::VERSION)?;
    m.add("__git_commit__", env!("COSCHED_GIT_COMMIT"))?;
    guard::install_panic_hook();
    m.add_class::<RunResult>()?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(run_trace, m)?)?;
    m.add_function(wrap_pyfunction!(run_config, m)?)?;
    m.add_function(wrap_pyfunction!(load_config, m)?)?;
    m.add_function(wrap_pyfunction!(run_jobs, m)?)?;
    m.add_function(wrap_pyfunction!(trace_info, m)?)?;
    m.add_function(wrap_pyfunction!(slice_trace, m)?)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(parse_spec, m)?)?;
    m.add_function(wrap_pyfunction!(apps, m)?)?;
    m.add_function(wrap_pyfunction!(apps_validate, m)?)?;
    m.add_function(wrap_pyfunction!(apps_export::apps_export, m)?)?;
    m.add_function(wrap_pyfunction!(apps_export::apps_dedicated, m)?)?;
    m.add_function(wrap_pyfunction!(apps_validate_seed002, m)?)?;
    m.add_function(wrap_pyfunction!(apps_fit_differences, m)?)?;
    m.add_function(wrap_pyfunction!(bench_process_level, m)?)?;
    m.add_function(wrap_pyfunction!(nas_mix, m)?)?;
    m.add_function(wrap_pyfunction!(run_timeshare_jobs, m)?)?;
    m.add_function(wrap_pyfunction!(real::real_run, m)?)?;
    m.add_function(wrap_pyfunction!(real::real_gang_check, m)?)?;
    Ok(())
}

/// Gathers the stub information of this module, configured by the repository's
/// pyproject.toml (used by the `stub_gen` binary).
pub fn stub_info() -> pyo3_stub_gen::Result<pyo3_stub_gen::StubInfo> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest.parent().and_then(Path::parent).unwrap_or(manifest);
    pyo3_stub_gen::StubInfo::from_pyproject_toml(root.join("pyproject.toml"))
}
