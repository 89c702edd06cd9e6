//! cosched: run a simulation end to end.
//!
//! `trace or workload -> policy (by name) -> engine -> metrics`. This is the
//! API the Python bindings and the benchmarks use; it adds no behaviour of its
//! own beyond wiring and timing.

use cosched_engine::metrics::{summarize, JobTable, Summary};
use cosched_engine::{simulate, ClusterPolicy, EngineError, SimOptions};
use cosched_model::swf::{self, MachineSize, SwfError};
use cosched_model::{
    ConfigError, EventOrder, LimitsConfig, LoadScaleBy, Placement, Platform, RunConfig, Workload,
    WorkloadOptions,
};
use cosched_des::SimTime;
use std::path::PathBuf;
use std::time::Instant;
use thiserror::Error;

pub mod invariants;
pub mod process_run;
pub mod timeshare;

pub mod calibrate;
pub mod validation;

pub use cosched_contract as contract;
pub use cosched_des as des;
pub use cosched_engine as engine;
pub use cosched_model as model;
pub use cosched_policies as policies;

/// The package version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Debug, Error)]
pub enum Error {
    #[error(transparent)]
    Swf(#[from] SwfError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Policy(#[from] cosched_policies::RegistryError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("{0}")]
    Invalid(String),
    /// A failure of the run itself (a watchdog limit, a deadlock, a violated
    /// invariant), not of its input.
    #[error("{0}")]
    Run(String),
    /// The run stopped because an interruption was requested ([`cosched_des::interrupt`]).
    #[error("interrupted")]
    Interrupted,
}

impl Error {
    /// Whether the error is the caller's input (exit code 2) rather than a failure
    /// of the engine or the policy (exit code 1) or an interruption.
    pub fn is_input(&self) -> bool {
        match self {
            Error::Engine(e) => matches!(
                e,
                EngineError::Platform(_)
                    | EngineError::Unsorted(_)
                    | EngineError::EstimateBelowRuntime { .. }
                    | EngineError::Params(_)
            ),
            Error::Run(_) | Error::Interrupted => false,
            Error::Swf(_) | Error::Config(_) | Error::Policy(_) | Error::Invalid(_) => true,
        }
    }

    /// Whether the run stopped because an interruption was requested.
    pub fn is_interrupted(&self) -> bool {
        matches!(
            self,
            Error::Interrupted | Error::Engine(EngineError::Interrupted { .. })
        )
    }
}

/// One job-level run of a trace.
#[derive(Clone, Debug)]
pub struct TraceRun {
    pub trace: PathBuf,
    pub policy: String,
    pub options: WorkloadOptions,
    pub max_jobs: Option<usize>,
    /// Overrides the platform derived from the trace header.
    pub platform: Option<Platform>,
    pub placement: Placement,
    /// When the engine calls the policy (`scheduler.event_order`).
    pub event_order: EventOrder,
    pub seed: u64,
    pub bsld_threshold_s: f64,
    /// Scale the trace's offered load before building the workload
    /// (`workload.load_scale`; [`swf::scale_load`]).
    pub load_scale: Option<(f64, LoadScaleBy)>,
    /// Run limits (`[limits]`; job-level defaults when absent).
    pub limits: LimitsConfig,
    /// The configuration file the run comes from, named by watchdog errors.
    pub origin: Option<String>,
}

impl TraceRun {
    pub fn new(trace: impl Into<PathBuf>, policy: &str) -> Self {
        Self {
            trace: trace.into(),
            policy: policy.to_string(),
            options: WorkloadOptions::default(),
            max_jobs: None,
            platform: None,
            placement: Placement::Packing,
            event_order: EventOrder::PerInstant,
            seed: 0,
            bsld_threshold_s: 10.0,
            load_scale: None,
            limits: LimitsConfig::default(),
            origin: None,
        }
    }
}

impl From<&RunConfig> for TraceRun {
    fn from(c: &RunConfig) -> Self {
        Self {
            trace: c.workload.trace.clone().unwrap_or_default(),
            policy: c.scheduler.policy.clone(),
            options: c.workload.options(),
            max_jobs: c.workload.max_jobs,
            platform: c.platform.clone(),
            placement: c.scheduler.placement,
            event_order: c.scheduler.event_order,
            seed: c.seed,
            bsld_threshold_s: c.metrics.bounded_slowdown_threshold_s,
            load_scale: c.workload.load_scaling(),
            limits: c.limits.clone(),
            origin: c.origin.clone(),
        }
    }
}

/// Wall-clock phases of a run (reported by benchmarks, never written to result files).
#[derive(Clone, Debug, Default)]
pub struct Timings {
    pub parse_s: f64,
    pub simulate_s: f64,
    pub metrics_s: f64,
}

/// Everything a run produces.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub table: JobTable,
    pub summary: Summary,
    pub platform: Platform,
    pub warnings: Vec<String>,
    pub timings: Timings,
    /// The per-node timeline of a process-level run, when it was asked for
    /// ([`run_config_recording`]); empty otherwise.
    pub timeline: Vec<cosched_engine::process::Segment>,
}

/// The platform a trace implies: its machine size, with the default power model.
pub fn platform_of(m: &MachineSize) -> Platform {
    Platform::new(m.nodes, m.procs_per_node)
}

/// Reads a trace and runs it.
pub fn run_trace(run: &TraceRun) -> Result<RunResult, Error> {
    run_trace_with(run, None)
}

/// Reads a trace and runs it under `policy` if given (e.g. a policy written in
/// Python, built by the binding), else under the registered policy `run.policy`.
pub fn run_trace_with(
    run: &TraceRun,
    policy: Option<&mut dyn ClusterPolicy>,
) -> Result<RunResult, Error> {
    let t0 = Instant::now();
    let mut trace =
        swf::read_swf(&run.trace).map_err(|e| trace_error(e, run.origin.as_deref()))?;
    if let Some((factor, by)) = run.load_scale {
        if !(factor.is_finite() && factor > 0.0) {
            return Err(Error::Invalid(format!(
                "load scale must be a finite number > 0, got {factor}"
            )));
        }
        swf::scale_load(&mut trace, factor, by);
    }
    let mut options = run.options.clone();
    if let (Some(p), None) = (&run.platform, options.machine_size) {
        // An explicit platform sizes the machine; the trace header is then not needed.
        options.machine_size = Some(p.total_procs());
    }
    let (workload, machine) = swf::to_workload(&trace, &options, run.max_jobs)?;
    let parse_s = t0.elapsed().as_secs_f64();
    let platform = run
        .platform
        .clone()
        .unwrap_or_else(|| platform_of(&machine));
    let sim = SimOptions {
        placement: run.placement,
        seed: run.seed,
        event_order: run.event_order,
        time_limit: SimTime::checked_from_secs_f64(run.limits.sim_time_s("job"))
            .unwrap_or(SimTime::MAX),
        event_limit: run.limits.events("job"),
    };
    let r = match policy {
        Some(p) => run_simulation(&workload, &platform, p, &sim, run.bsld_threshold_s),
        None => {
            if let Some(model) = timeshare::model_of(&run.policy, run.placement, run.seed)? {
                if !run.event_order.is_default() {
                    return Err(Error::Invalid(format!(
                        "event order per-event: only for cluster policies run by the job-level engine, not for {}",
                        run.policy
                    )));
                }
                timeshare::run_model(&workload, &platform, &model, run.bsld_threshold_s)
            } else {
                let mut p = timeshare::build_cluster(&run.policy)?;
                run_simulation(&workload, &platform, p.as_mut(), &sim, run.bsld_threshold_s)
            }
        }
    };
    let mut r = r.map_err(|e| limit_error(e, run.origin.as_deref()))?;
    r.timings.parse_s = parse_s;
    Ok(r)
}

/// A trace that cannot be read, named with the configuration file and field that give
/// it when the run comes from one.
fn trace_error(e: SwfError, origin: Option<&str>) -> Error {
    match (&e, origin) {
        (SwfError::Io { .. }, Some(o)) => ConfigError::Invalid {
            path: o.to_string(),
            field: "workload.trace".into(),
            msg: e.to_string(),
        }
        .into(),
        _ => e.into(),
    }
}

/// A job-level watchdog error as a run failure (exit 1) naming the configuration
/// key to raise (and the file, when the run comes from one); other errors as they are.
fn limit_error(e: Error, origin: Option<&str>) -> Error {
    let key = match &e {
        Error::Engine(EngineError::TimeLimit { .. }) => "limits.max_sim_time_s",
        Error::Engine(EngineError::EventLimit { .. }) => "limits.max_events",
        _ => return e,
    };
    let at = origin.map(|o| format!("{o}: ")).unwrap_or_default();
    Error::Run(format!(
        "{at}{e} (raise `{key}` in the run configuration if the run is meant to be this long)"
    ))
}

/// Runs a configuration file's run.
pub fn run_config(cfg: &RunConfig) -> Result<RunResult, Error> {
    run_config_recording(cfg, false)
}

/// Runs a validated configuration; at process fidelity, `timeline` records the
/// per-node timeline into [`RunResult::timeline`] (ignored at job fidelity).
pub fn run_config_recording(cfg: &RunConfig, timeline: bool) -> Result<RunResult, Error> {
    match cfg.fidelity.as_str() {
        "process" => process_run::run_process_config_recording(cfg, timeline),
        _ => run_trace(&TraceRun::from(cfg)),
    }
}

/// Loads a configuration file and checks everything that can be checked before a
/// run, including that its policy exists and accepts its parameters; errors name
/// the file and the field.
pub fn load_config(path: &std::path::Path) -> Result<RunConfig, Error> {
    let cfg = RunConfig::load(path)?;
    if cfg.fidelity == "process" {
        let origin = path.display().to_string();
        process_run::jobs_of(&cfg, &origin)?;
        if let Err(e) = cosched_policies::build_node(&cfg.scheduler.node_policy) {
            return Err(ConfigError::Invalid {
                path: origin,
                field: "scheduler.node_policy".into(),
                msg: e.to_string(),
            }
            .into());
        }
    }
    if is_external_policy(&cfg.scheduler.policy) {
        return Ok(cfg); // built and checked by the binding that hosts it
    }
    if cfg.fidelity != "process" {
        let checked = timeshare::model_of(&cfg.scheduler.policy, cfg.scheduler.placement, cfg.seed)
            .map_err(|e| ConfigError::Invalid {
                path: path.display().to_string(),
                field: "scheduler.policy".into(),
                msg: e.to_string(),
            })?;
        if checked.is_some() {
            return Ok(cfg);
        }
    }
    let checked = if cfg.fidelity == "process" {
        cosched_policies::build_process(&cfg.scheduler.policy).map(|_| ())
    } else {
        timeshare::build_cluster(&cfg.scheduler.policy).map(|_| ())
    };
    if let Err(e) = checked {
        return Err(ConfigError::Invalid {
            path: path.display().to_string(),
            field: "scheduler.policy".into(),
            msg: e.to_string(),
        }
        .into());
    }
    Ok(cfg)
}

/// Whether a cluster policy name refers to a policy hosted outside the Rust
/// registry (`python:module:Class[...]`, built by the Python binding); surrounding
/// whitespace is ignored, as by the policy-string parser.
pub fn is_external_policy(name: &str) -> bool {
    name.trim_start().starts_with("python:")
}

/// Runs an in-memory workload.
pub fn run_workload(
    workload: &Workload,
    platform: &Platform,
    policy: &str,
    placement: Placement,
    seed: u64,
    bsld_threshold_s: f64,
) -> Result<RunResult, Error> {
    if let Some(model) = timeshare::model_of(policy, placement, seed)? {
        return timeshare::run_model(workload, platform, &model, bsld_threshold_s);
    }
    let mut p = timeshare::build_cluster(policy)?;
    run_workload_with(
        workload,
        platform,
        p.as_mut(),
        placement,
        seed,
        bsld_threshold_s,
    )
}

/// Runs an in-memory workload under a policy object.
pub fn run_workload_with(
    workload: &Workload,
    platform: &Platform,
    policy: &mut dyn ClusterPolicy,
    placement: Placement,
    seed: u64,
    bsld_threshold_s: f64,
) -> Result<RunResult, Error> {
    run_simulation(
        workload,
        platform,
        policy,
        &SimOptions {
            placement,
            seed,
            ..Default::default()
        },
        bsld_threshold_s,
    )
    .map_err(|e| limit_error(e, None))
}

/// Runs an in-memory workload under a policy object with the engine's options.
pub fn run_simulation(
    workload: &Workload,
    platform: &Platform,
    policy: &mut dyn ClusterPolicy,
    opts: &SimOptions,
    bsld_threshold_s: f64,
) -> Result<RunResult, Error> {
    if !(bsld_threshold_s.is_finite() && bsld_threshold_s > 0.0) {
        return Err(Error::Invalid(format!(
            "bounded slowdown threshold must be > 0, got {bsld_threshold_s}"
        )));
    }
    let t1 = Instant::now();
    let out = simulate(workload, platform, policy, opts)?;
    let simulate_s = t1.elapsed().as_secs_f64();
    let t2 = Instant::now();
    let (table, summary) = summarize(workload, platform, &out, bsld_threshold_s);
    invariants::check(workload, &out, &summary)?;
    let metrics_s = t2.elapsed().as_secs_f64();
    Ok(RunResult {
        timeline: Vec::new(),
        table,
        summary,
        platform: platform.clone(),
        warnings: workload.warnings.clone(),
        timings: Timings {
            parse_s: 0.0,
            simulate_s,
            metrics_s,
        },
    })
}
