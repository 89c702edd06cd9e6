//! Run configuration (TOML or JSON). The schema is documented in
//! `docs/formats/config.md`; every table refuses unknown keys.

use crate::Platform;
use cosched_des::SimTime;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Where the scheduler's runtime estimate comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum EstimateSource {
    /// The user's requested time (SWF field 9); the real runtime when it is missing.
    #[default]
    Requested,
    /// The real runtime (perfect estimates).
    Exact,
}

/// What happens to a job whose real runtime exceeds its requested time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OverrunPolicy {
    /// The estimate becomes max(requested, runtime): the job runs to completion
    /// and the scheduler never sees a job outlive its estimate.
    #[default]
    Extend,
    /// The estimate is the requested time and the job is killed when it reaches it.
    Kill,
}

/// Node placement of a started job's processors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// PACKING: the lowest-numbered free processors, so a job occupies contiguous nodes when it can.
    #[default]
    Packing,
    /// NO PACKING: processors drawn uniformly at random among the free ones (seeded stream "placement").
    Random,
}

/// When the job-level engine calls the cluster policy (`scheduler.event_order`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum EventOrder {
    /// One scheduling pass per instant with all of its events (completions, then
    /// submissions, then the timer).
    #[default]
    PerInstant,
    /// One scheduling pass after each event; at one instant submissions come first
    /// (workload order), then completions (in the order their ends were scheduled),
    /// then the timer, and a completion's processors are freed only when it is
    /// delivered (the order of simulators such as pyss).
    PerEvent,
}

impl EventOrder {
    pub fn is_default(&self) -> bool {
        *self == EventOrder::PerInstant
    }
}

/// How `workload.load_scale` changes a trace's offered load (the rule of
/// `cosched trace scale-load`; [`crate::swf::scale_load`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LoadScaleBy {
    /// Divide the gaps between submit times by the factor (same jobs, denser arrivals).
    #[default]
    Interarrival,
    /// Multiply run, requested and average CPU times by the factor (same arrivals, longer jobs).
    Runtime,
}

/// How a trace becomes a workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadOptions {
    /// Where the runtime estimate comes from.
    #[serde(default)]
    pub estimates: EstimateSource,
    /// What happens when a job runs longer than its requested time.
    #[serde(default)]
    pub overrun: OverrunPolicy,
    /// Take the machine size from `MaxNodes` instead of `MaxProcs`.
    #[serde(default)]
    pub machine_size_from_nodes: bool,
    /// Machine size in processors, overriding the trace header.
    #[serde(default)]
    pub machine_size: Option<u32>,
}

impl WorkloadOptions {
    /// The scheduler's estimate and the kill time of a job with this real runtime and
    /// requested time: exact -> (runtime, none); requested + extend -> (max(requested,
    /// runtime), none); requested + kill -> (requested, requested); a missing requested
    /// time falls back to (runtime, none).
    pub fn estimate(
        &self,
        runtime: SimTime,
        requested: Option<SimTime>,
    ) -> (SimTime, Option<SimTime>) {
        match (self.estimates, self.overrun, requested) {
            (EstimateSource::Exact, _, _) | (EstimateSource::Requested, _, None) => (runtime, None),
            (EstimateSource::Requested, OverrunPolicy::Extend, Some(req)) => {
                (req.max(runtime), None)
            }
            (EstimateSource::Requested, OverrunPolicy::Kill, Some(req)) => (req, Some(req)),
        }
    }
}

impl Default for WorkloadOptions {
    fn default() -> Self {
        Self {
            estimates: EstimateSource::Requested,
            overrun: OverrunPolicy::Extend,
            machine_size_from_nodes: false,
            machine_size: None,
        }
    }
}

/// One job of a process-level workload: an application preset (see `cosched apps`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppJob {
    /// Application preset name, e.g. `"CG"`.
    pub app: String,
    /// Problem class, e.g. `"A"` (`"-"` for single-size applications).
    #[serde(default = "default_class")]
    pub class: String,
    /// Number of processes.
    pub procs: u32,
    /// Submission time, seconds.
    #[serde(default)]
    pub submit_s: f64,
    /// A background job (a competing load such as `cpu-load`): the run ends when
    /// every foreground job has finished, and background processes are stopped then.
    #[serde(default)]
    pub background: bool,
    /// Consecutive ranks placed on the same node (default 1: one rank per node);
    /// seed 002's "two application threads per node" is 2. FCFS admission only.
    #[serde(default = "one_u32", skip_serializing_if = "is_one")]
    pub ranks_per_node: u32,
    /// Nice value of the job's processes, -20 to 19 (default 0), as the node's OS
    /// scheduler model maps it (Linux 2.4: per-nice base quantum and goodness; CFS:
    /// weight; Solaris TS: user priority; round robin: ignored).
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub nice: i32,
    /// Compute noise: every compute burst of the job is scaled by a log-normal factor
    /// of mean 1 and this coefficient of variation (default 0: none), drawn from the
    /// process's seeded stream.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub noise_cv: f64,
    /// Seconds the job holds its processors without computing when it starts
    /// (a resource manager's launch: prologue, step creation, process start),
    /// default 0: an I/O wait of this length opens every rank's program.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub start_delay_s: f64,
    /// Seconds the job holds its processors after its work (a resource
    /// manager's epilogue and completion), default 0: an I/O wait of this
    /// length closes every rank's program.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub end_delay_s: f64,
}

fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}
fn is_zero_f64(v: &f64) -> bool {
    *v == 0.0
}

fn one_u32() -> u32 {
    1
}
fn is_one(v: &u32) -> bool {
    *v == 1
}

fn default_class() -> String {
    "-".into()
}

/// The largest `noise_cv` of a process-level job: at 10 the log-normal factor's
/// median is already 0.1 and its 99th percentile 15; beyond, compute times
/// collapse to 0 or explode.
pub const NOISE_CV_MAX: f64 = 10.0;

/// The `[workload]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadConfig {
    /// Path of an SWF trace (plain or .gz), relative to the config file (job fidelity).
    #[serde(default)]
    pub trace: Option<PathBuf>,
    /// Application jobs (process fidelity), in any order.
    #[serde(default)]
    pub jobs: Vec<AppJob>,
    /// Keep only the first N jobs (after dropping never-ran jobs).
    #[serde(default)]
    pub max_jobs: Option<usize>,
    /// Where the runtime estimate comes from.
    #[serde(default)]
    pub estimates: EstimateSource,
    /// What happens when a job runs longer than its requested time.
    #[serde(default)]
    pub overrun: OverrunPolicy,
    /// Take the machine size from `MaxNodes` instead of `MaxProcs`.
    #[serde(default)]
    pub machine_size_from_nodes: bool,
    /// Machine size in processors, overriding the trace header.
    #[serde(default)]
    pub machine_size: Option<u32>,
    /// Multiply the trace's offered load by this factor (job fidelity), before `max_jobs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_scale: Option<f64>,
    /// How `load_scale` applies (default: interarrival).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_scale_by: Option<LoadScaleBy>,
}

impl WorkloadConfig {
    /// The load scaling to apply to the trace, if any.
    pub fn load_scaling(&self) -> Option<(f64, LoadScaleBy)> {
        self.load_scale
            .map(|f| (f, self.load_scale_by.unwrap_or_default()))
    }

    /// The options that turn the trace into a workload.
    pub fn options(&self) -> WorkloadOptions {
        WorkloadOptions {
            estimates: self.estimates,
            overrun: self.overrun,
            machine_size_from_nodes: self.machine_size_from_nodes,
            machine_size: self.machine_size,
        }
    }
}

/// The `[scheduler]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerConfig {
    /// Cluster policy name with optional parameters, e.g. `"easy"` or `"fcfs"`; see
    /// `cosched policies`. At process fidelity: `"fcfs"` (admission under `mpl`),
    /// `"batch"`, `"easy"` or `"gang[...]"`, checked by the policy registry when the
    /// configuration is loaded or run.
    #[serde(default = "default_policy")]
    pub policy: String,
    #[serde(default)]
    pub placement: Placement,
    /// When the job-level engine calls the policy: `"per-instant"` (default) or
    /// `"per-event"` (job fidelity).
    #[serde(default, skip_serializing_if = "EventOrder::is_default")]
    pub event_order: EventOrder,
    /// Node-level policy (process fidelity), e.g. `"nls"`.
    #[serde(default = "default_node_policy")]
    pub node_policy: String,
    /// Most processes per node (process fidelity).
    #[serde(default = "default_mpl")]
    pub mpl: u32,
    /// Admit a job only where its memory fits (process fidelity).
    #[serde(default)]
    pub memory_aware: bool,
}

fn default_policy() -> String {
    "fcfs".into()
}
fn default_node_policy() -> String {
    "nls".into()
}
fn default_mpl() -> u32 {
    1
}

/// The `[node_platform]` table (process fidelity): a preset, optionally with another
/// native OS scheduler.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodePlatformConfig {
    /// `choi2004`, `ghanesh`, `lee4` or `lee32`.
    pub preset: String,
    /// Replaces the preset's OS scheduler, e.g. `{ model = "cfs" }`.
    #[serde(default)]
    pub os: Option<crate::node::OsConfig>,
    /// Replaces the preset's node count (e.g. 16 `ghanesh` nodes for seed 002 Fig. 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<u32>,
    /// Replaces the preset's CPU speed relative to the reference CPU of the
    /// application presets (`NodePlatform::cpu_speed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_speed: Option<f64>,
    /// Replaces the preset's OS noise, microseconds of CPU per timer tick
    /// (`NodePlatform::os_noise_tick_us`; 0 turns it off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_noise_tick_us: Option<f64>,
    /// Replace the preset's messaging and switching costs (the `NodePlatform`
    /// fields of the same names), e.g. with costs measured on a real machine
    /// (`cosched reproduce real-vs-sim` builds its preset of this machine so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_mb_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_overhead_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recv_overhead_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub byte_overhead_ns: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eager_copy_ns: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupt_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_switch_us: Option<f64>,
    /// Replaces the preset's boost re-check (`NodePlatform::boost_recheck`:
    /// `none` or `agent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boost_recheck: Option<crate::node::BoostRecheck>,
}

impl NodePlatformConfig {
    pub fn platform(&self) -> Result<crate::node::NodePlatform, String> {
        let mut p = crate::node::NodePlatform::preset(&self.preset)?;
        if let Some(os) = &self.os {
            p.os = os.clone();
        }
        if let Some(n) = self.nodes {
            p.nodes = n;
        }
        if let Some(s) = self.cpu_speed {
            p.cpu_speed = s;
        }
        if let Some(x) = self.os_noise_tick_us {
            p.os_noise_tick_us = x;
        }
        if let Some(b) = self.boost_recheck {
            p.boost_recheck = b;
        }
        for (over, field) in [
            (self.latency_us, &mut p.latency_us),
            (self.bandwidth_mb_s, &mut p.bandwidth_mb_s),
            (self.send_overhead_us, &mut p.send_overhead_us),
            (self.recv_overhead_us, &mut p.recv_overhead_us),
            (self.byte_overhead_ns, &mut p.byte_overhead_ns),
            (self.eager_copy_ns, &mut p.eager_copy_ns),
            (self.interrupt_us, &mut p.interrupt_us),
            (self.context_switch_us, &mut p.context_switch_us),
        ] {
            if let Some(x) = over {
                *field = x;
            }
        }
        p.validate()?;
        Ok(p)
    }
}

/// The `[metrics]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Bounded-slowdown threshold in seconds: max(1, response / max(runtime, threshold)).
    #[serde(default = "default_bsld")]
    pub bounded_slowdown_threshold_s: f64,
    /// Process fidelity: measure each job's wait time (summary entry
    /// `process.measures.wait_time`). Off by default: it follows every wait.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wait_time: bool,
}

fn default_bsld() -> f64 {
    10.0
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            bounded_slowdown_threshold_s: default_bsld(),
            wait_time: false,
        }
    }
}

/// The `[limits]` table: watchdogs that stop a run with an engine error (exit
/// code 1) instead of letting it run for hours. Both fidelities use them; an
/// absent key takes its fidelity's default ([`LimitsConfig::sim_time_s`],
/// [`LimitsConfig::events`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// The run stops past this simulated time, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sim_time_s: Option<f64>,
    /// The run stops after this many simulation events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_events: Option<u64>,
}

/// Default of `limits.max_sim_time_s` at process fidelity (about 116 days).
pub const DEFAULT_MAX_SIM_TIME_S: f64 = 1e7;
/// Default of `limits.max_sim_time_s` at job fidelity: the whole range of simulated
/// time. A job-level run's instants come from its workload, whose submit and run
/// times are at most 2^31 - 1 s (about 68 years) each, so a real trace, spanning
/// years, ends far below it; only a policy that keeps waking itself gets there.
pub const DEFAULT_JOB_MAX_SIM_TIME_S: f64 = 9e9;
/// Default of `limits.max_events` at process fidelity (roughly 10 to 20 minutes of one core).
pub const DEFAULT_MAX_EVENTS: u64 = 2_000_000_000;
/// Default of `limits.max_events` at job fidelity. A job-level run delivers two
/// events per job (its submission and its end) plus the policy's own wake-ups: the
/// archive's largest traces have a few million jobs (about 1e7 events), and a policy
/// waking every minute through a ten-year trace adds 5e6, so a real trace stays more
/// than ten times below it; a Python policy that wakes itself at every call reaches it
/// after a few minutes of CPU (about half a million calls per second).
pub const DEFAULT_JOB_MAX_EVENTS: u64 = 200_000_000;

impl LimitsConfig {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// `max_sim_time_s`, or the default of `fidelity` (`"process"` or `"job"`).
    pub fn sim_time_s(&self, fidelity: &str) -> f64 {
        self.max_sim_time_s.unwrap_or(if fidelity == "process" {
            DEFAULT_MAX_SIM_TIME_S
        } else {
            DEFAULT_JOB_MAX_SIM_TIME_S
        })
    }

    /// `max_events`, or the default of `fidelity` (`"process"` or `"job"`).
    pub fn events(&self, fidelity: &str) -> u64 {
        self.max_events.unwrap_or(if fidelity == "process" {
            DEFAULT_MAX_EVENTS
        } else {
            DEFAULT_JOB_MAX_EVENTS
        })
    }
}

/// A whole run: `cosched simulate CONFIG`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// Master seed of every random stream.
    #[serde(default)]
    pub seed: u64,
    /// Fidelity of the model: `"job"` (trace-scale, jobs own their processors) or
    /// `"process"` (nodes time-share processes that compute and exchange messages).
    #[serde(default = "default_fidelity")]
    pub fidelity: String,
    pub workload: WorkloadConfig,
    /// The platform; when absent it is derived from the trace (machine size, 1 processor per node
    /// unless MaxProcs is a multiple of MaxNodes).
    #[serde(default)]
    pub platform: Option<Platform>,
    /// The process-level platform (process fidelity).
    #[serde(default)]
    pub node_platform: Option<NodePlatformConfig>,
    pub scheduler: SchedulerConfig,
    #[serde(default)]
    pub metrics: MetricsConfig,
    /// Run limits; keys left out stay out of the canonical form, so existing
    /// configurations keep their hash.
    #[serde(default, skip_serializing_if = "LimitsConfig::is_default")]
    pub limits: LimitsConfig,
    /// The file the configuration was read from (set by [`RunConfig::load`]; used
    /// in error messages, never serialized).
    #[serde(skip)]
    pub origin: Option<String>,
}

fn default_fidelity() -> String {
    "job".into()
}

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("{path}: cannot read: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {msg}")]
    Parse { path: String, msg: String },
    #[error("{path}: field `{field}`: {msg}")]
    Invalid {
        path: String,
        field: String,
        msg: String,
    },
}

impl RunConfig {
    /// Parses a TOML (`.toml`) or JSON (anything else) configuration text. `origin` names
    /// the source in error messages. Relative trace paths are resolved against `base_dir`.
    pub fn from_str_with(
        text: &str,
        origin: &str,
        base_dir: Option<&Path>,
    ) -> Result<Self, ConfigError> {
        let is_toml = if origin.ends_with(".toml") {
            true
        } else if origin.ends_with(".json") {
            false
        } else {
            !text.trim_start().starts_with('{')
        };
        let mut cfg: RunConfig = if is_toml {
            toml::from_str(text).map_err(|e| ConfigError::Parse {
                path: origin.into(),
                msg: toml_msg(&e, text),
            })?
        } else {
            from_json(text).map_err(|msg| ConfigError::Parse {
                path: origin.into(),
                msg,
            })?
        };
        if let (Some(base), Some(trace)) = (base_dir, &mut cfg.workload.trace) {
            if trace.is_relative() {
                *trace = base.join(&*trace);
            }
        }
        cfg.validate(origin)?;
        Ok(cfg)
    }

    /// Reads and validates a configuration file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: origin.clone(),
            source,
        })?;
        let mut cfg = Self::from_str_with(&text, &origin, path.parent())?;
        cfg.origin = Some(origin);
        Ok(cfg)
    }

    /// Where the configuration came from, for messages: its file, else "configuration".
    pub fn origin(&self) -> &str {
        self.origin.as_deref().unwrap_or("configuration")
    }

    /// The per-job checks of a process-level workload (`workload.jobs[i].*`).
    fn validate_process_jobs(&self, origin: &str) -> Result<(), ConfigError> {
        let bad = |field: &str, msg: String| {
            Err(ConfigError::Invalid {
                path: origin.into(),
                field: field.into(),
                msg,
            })
        };
        for (i, j) in self.workload.jobs.iter().enumerate() {
            if j.class.chars().count() != 1 {
                return bad(
                    &format!("workload.jobs[{i}].class"),
                    format!("one letter, got {:?}", j.class),
                );
            }
            if !(j.submit_s.is_finite() && j.submit_s >= 0.0) {
                return bad(
                    &format!("workload.jobs[{i}].submit_s"),
                    format!("must be a finite number >= 0, got {}", j.submit_s),
                );
            }
            if !(-20..=19).contains(&j.nice) {
                return bad(
                    &format!("workload.jobs[{i}].nice"),
                    format!("must be between -20 and 19, got {}", j.nice),
                );
            }
            if !(j.noise_cv.is_finite() && (0.0..=NOISE_CV_MAX).contains(&j.noise_cv)) {
                return bad(
                    &format!("workload.jobs[{i}].noise_cv"),
                    format!(
                        "must be a finite number between 0 and {NOISE_CV_MAX}, got {}",
                        j.noise_cv
                    ),
                );
            }
            if j.ranks_per_node == 0 {
                return bad(
                    &format!("workload.jobs[{i}].ranks_per_node"),
                    "must be at least 1".into(),
                );
            }
            for (field, v) in [
                ("start_delay_s", j.start_delay_s),
                ("end_delay_s", j.end_delay_s),
            ] {
                if !(v.is_finite() && (0.0..=SimTime::INPUT_LIMIT_S).contains(&v)) {
                    return bad(
                        &format!("workload.jobs[{i}].{field}"),
                        format!(
                            "must be a finite number from 0 to {}, got {v}",
                            SimTime::INPUT_LIMIT_S
                        ),
                    );
                }
            }
            if j.submit_s > SimTime::INPUT_LIMIT_S {
                return bad(
                    &format!("workload.jobs[{i}].submit_s"),
                    SimTime::try_from_secs_f64(j.submit_s)
                        .unwrap_err()
                        .to_string(),
                );
            }
        }
        Ok(())
    }

    /// Semantic checks serde cannot express.
    #[expect(
        clippy::too_many_lines,
        reason = "every semantic check of a configuration, one after the other, each naming its field"
    )]
    pub fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        let bad = |field: &str, msg: String| {
            Err(ConfigError::Invalid {
                path: origin.into(),
                field: field.into(),
                msg,
            })
        };
        match self.fidelity.as_str() {
            "job" => {
                if self.workload.trace.is_none() {
                    return bad("workload.trace", "required at fidelity \"job\"".into());
                }
                if !self.workload.jobs.is_empty() {
                    return bad("workload.jobs", "only at fidelity \"process\"".into());
                }
                if self.node_platform.is_some() {
                    return bad("node_platform", "only at fidelity \"process\"".into());
                }
                if self.metrics.wait_time {
                    return bad("metrics.wait_time", "only at fidelity \"process\"".into());
                }
            }
            "process" => {
                if self.workload.trace.is_some() {
                    return bad(
                        "workload.trace",
                        "not supported at fidelity \"process\"; list `jobs`".into(),
                    );
                }
                if !self.scheduler.event_order.is_default() {
                    return bad(
                        "scheduler.event_order",
                        "only at fidelity \"job\" (the process-level engine has its own event order)"
                            .into(),
                    );
                }
                if self.workload.jobs.is_empty() {
                    return bad(
                        "workload.jobs",
                        "at least one job is required at fidelity \"process\"".into(),
                    );
                }
                self.validate_process_jobs(origin)?;
                match &self.node_platform {
                    None => return bad("node_platform", "required at fidelity \"process\"".into()),
                    Some(np) => {
                        if let Err(msg) = np.platform() {
                            return bad("node_platform", msg);
                        }
                    }
                }
            }
            other => {
                return bad(
                    "fidelity",
                    format!("unknown fidelity {other:?}; valid: \"job\", \"process\""),
                )
            }
        }
        // Used at process fidelity only, but 0 is never meaningful: refused at both.
        if self.scheduler.mpl == 0 {
            return bad("scheduler.mpl", "must be at least 1".into());
        }
        if let Some(p) = &self.platform {
            if let Err(crate::PlatformError::Invalid { field, msg }) = p.validate() {
                return bad(&format!("platform.{field}"), msg);
            }
        }
        let t = self.metrics.bounded_slowdown_threshold_s;
        if !(t.is_finite() && t > 0.0) {
            return bad(
                "metrics.bounded_slowdown_threshold_s",
                format!("must be a finite number > 0, got {t}"),
            );
        }
        if self.scheduler.policy.trim().is_empty() {
            return bad("scheduler.policy", "must not be empty".into());
        }
        let l = &self.limits;
        if let Some(t) = l
            .max_sim_time_s
            .filter(|t| !(t.is_finite() && *t > 0.0 && *t <= 9e9))
        {
            return bad(
                "limits.max_sim_time_s",
                format!(
                    "must be a number > 0 and at most 9e9 (the range of simulated time), got {t}"
                ),
            );
        }
        if l.max_events == Some(0) {
            return bad("limits.max_events", "must be at least 1".into());
        }
        if self.workload.machine_size == Some(0) {
            return bad("workload.machine_size", "must be at least 1".into());
        }
        if let Some(f) = self.workload.load_scale {
            if self.fidelity != "job" {
                return bad("workload.load_scale", "only at fidelity \"job\"".into());
            }
            if !(f.is_finite() && f > 0.0) {
                return bad(
                    "workload.load_scale",
                    format!("must be a finite number > 0, got {f}"),
                );
            }
        } else if self.workload.load_scale_by.is_some() {
            return bad("workload.load_scale_by", "needs workload.load_scale".into());
        }
        Ok(())
    }
}

/// Parses a JSON configuration; an error is "line L, column C: message", with "field `a.b`: "
/// before the message when it is about a value (a wrong type, an out-of-range number, a bad
/// enum string): the field path found by `serde_path_to_error`, as TOML errors name theirs.
fn from_json(text: &str) -> Result<RunConfig, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let cfg = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().to_string();
        json_msg(e.inner(), &field)
    })?;
    de.end().map_err(|e| json_msg(&e, "."))?;
    Ok(cfg)
}

/// "line L, column C: [field `F`: ]message" of a JSON error; `field` is `.` at the top level
/// and is named only for an error about a value (not for a syntax error or a missing field).
fn json_msg(e: &serde_json::Error, field: &str) -> String {
    let mut msg = e.to_string();
    if let Some(i) = msg.rfind(" at line ") {
        msg.truncate(i);
    }
    let about_a_value = e.classify() == serde_json::error::Category::Data
        && field != "."
        && !msg.starts_with("missing field")
        && !msg.starts_with("unknown field");
    let field = if about_a_value {
        format!("field `{field}`: ")
    } else {
        String::new()
    };
    format!("line {}, column {}: {field}{msg}", e.line(), e.column())
}

/// Formats a TOML error as "line L, column C: message", or "line L, column C: field `a.b`:
/// message" when the error points at a value (a wrong type or an out-of-range number: serde's
/// message names the type, not the key).
fn toml_msg(e: &toml::de::Error, text: &str) -> String {
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before
                .rsplit('\n')
                .next()
                .map(|l| l.chars().count())
                .unwrap_or(0)
                + 1;
            let field = toml_path_at(text, &span)
                .map(|p| format!("field `{p}`: "))
                .unwrap_or_default();
            format!("line {line}, column {col}: {field}{}", e.message())
        }
        None => e.message().to_string(),
    }
}

/// The dotted name (`platform.nodes`, `workload.jobs[0].procs`) of the TOML value whose span is
/// exactly `span`, if the text parses and one is.
fn toml_path_at(text: &str, span: &std::ops::Range<usize>) -> Option<String> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let path = table_path(doc.as_table(), span)?;
    Some(path.trim_start_matches('.').to_string())
}

fn table_path(t: &toml_edit::Table, span: &std::ops::Range<usize>) -> Option<String> {
    t.iter()
        .find_map(|(k, item)| item_path(item, span).map(|p| format!(".{k}{p}")))
}

fn item_path(item: &toml_edit::Item, span: &std::ops::Range<usize>) -> Option<String> {
    match item {
        toml_edit::Item::Value(v) => value_path(v, span),
        toml_edit::Item::Table(t) => table_path(t, span),
        toml_edit::Item::ArrayOfTables(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, t)| table_path(t, span).map(|p| format!("[{i}]{p}"))),
        toml_edit::Item::None => None,
    }
}

fn value_path(v: &toml_edit::Value, span: &std::ops::Range<usize>) -> Option<String> {
    let inner = match v {
        toml_edit::Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, x)| value_path(x, span).map(|p| format!("[{i}]{p}"))),
        toml_edit::Value::InlineTable(t) => t
            .iter()
            .find_map(|(k, x)| value_path(x, span).map(|p| format!(".{k}{p}"))),
        _ => None,
    };
    inner.or_else(|| (v.span().as_ref() == Some(span)).then(String::new))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
seed = 7
[workload]
trace = "t.swf"
estimates = "exact"
[scheduler]
policy = "easy"
placement = "random"
"#;

    /// The message of the error loading `text` as the file `origin`.
    fn load_error(text: &str, origin: &str) -> String {
        RunConfig::from_str_with(text, origin, None)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_toml_value_of_the_wrong_type_names_its_field() {
        let err = |text: &str| load_error(text, "c.toml");
        // GOOD is 8 lines (a blank first line, then seed ... placement); `[platform]` is line 9 and
        // `nodes = -1` line 10, its value at column 9 (after "nodes = ").
        assert_eq!(
            err(&format!("{GOOD}[platform]\nnodes = -1\n")),
            "c.toml: line 10, column 9: field `platform.nodes`: invalid value: integer `-1`, expected u32"
        );
        // Inside an inline table of an array: the element's index and key.
        let e = err(
            "fidelity = \"process\"\n[workload]\njobs = [{ app = \"CG\", procs = 4 }, \
                     { app = \"EP\", procs = \"four\" }]\n",
        );
        assert!(
            e.starts_with(
                "c.toml: line 3, column 58: field `workload.jobs[1].procs`: invalid type"
            ),
            "{e}"
        );
        // A key error keeps serde's own message, which names the key.
        let e = err(&GOOD.replace("placement", "placment"));
        assert!(
            e.starts_with("c.toml: line 8, column 1: unknown field `placment`"),
            "{e}"
        );
    }

    #[test]
    fn node_platform_costs_replace_the_presets_and_are_validated() {
        let parse = |extra: &str| -> NodePlatformConfig {
            toml::from_str(&format!("preset = \"lee4\"\n{extra}")).unwrap()
        };
        let base = parse("").platform().unwrap();
        let p = parse(
            "latency_us = 12.5\nbandwidth_mb_s = 3000\ninterrupt_us = 4\ncontext_switch_us = 2",
        )
        .platform()
        .unwrap();
        assert_eq!(
            (
                p.latency_us,
                p.bandwidth_mb_s,
                p.interrupt_us,
                p.context_switch_us
            ),
            (12.5, 3000.0, 4.0, 2.0)
        );
        // The costs not given keep the preset's values.
        assert_eq!(
            (p.send_overhead_us, p.recv_overhead_us),
            (base.send_overhead_us, base.recv_overhead_us)
        );
        let e = parse("latency_us = -1").platform().unwrap_err();
        assert!(e.contains("latency_us"), "{e}");
        let e = parse("latency_us = 1e300").platform().unwrap_err();
        assert!(
            e.starts_with("latency_us: must be a finite number between 0 and 1000000"),
            "{e}"
        );
        // Absent overrides stay out of the canonical form.
        assert!(!serde_json::to_string(&parse(""))
            .unwrap()
            .contains("latency_us"));
    }

    #[test]
    fn the_boost_recheck_replaces_the_presets_and_a_bad_value_names_the_field() {
        let parse = |extra: &str| -> NodePlatformConfig {
            toml::from_str(&format!("preset = \"lee4\"\n{extra}")).unwrap()
        };
        use crate::node::BoostRecheck;
        assert_eq!(
            parse("").platform().unwrap().boost_recheck,
            BoostRecheck::None
        );
        let agent = parse("boost_recheck = \"agent\"").platform().unwrap();
        assert_eq!(agent.boost_recheck, BoostRecheck::Agent);
        // The default stays out of the platform's canonical form (outputs unchanged).
        let base = parse("").platform().unwrap();
        assert!(!serde_json::to_string(&base)
            .unwrap()
            .contains("boost_recheck"));
        assert!(serde_json::to_string(&agent)
            .unwrap()
            .contains(r#""boost_recheck":"agent""#));
        // `[node_platform]` is line 3 of this text, the value at column 17.
        let e = RunConfig::from_str_with(
            "fidelity = \"process\"\n[node_platform]\npreset = \"lee4\"\nboost_recheck = \"often\"\n",
            "c.toml",
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("c.toml: line 4, column 17: field `node_platform.boost_recheck`"),
            "{e}"
        );
        assert!(e.contains("expected `none` or `agent`"), "{e}");
    }

    #[test]
    fn parses_toml_and_resolves_paths() {
        let c = RunConfig::from_str_with(GOOD, "x.toml", Some(Path::new("/base"))).unwrap();
        assert_eq!(c.seed, 7);
        assert_eq!(c.workload.trace, Some(PathBuf::from("/base/t.swf")));
        assert_eq!(c.workload.options().estimates, EstimateSource::Exact);
        assert_eq!(c.scheduler.placement, Placement::Random);
        assert_eq!(c.metrics.bounded_slowdown_threshold_s, 10.0);
    }

    #[test]
    fn metrics_wait_time_is_off_out_of_the_canonical_form_and_process_only() {
        let c = RunConfig::from_str_with(GOOD, "x.toml", None).unwrap();
        assert!(!c.metrics.wait_time);
        assert!(!serde_json::to_string(&c).unwrap().contains("wait_time"));
        let on = format!("{GOOD}[metrics]\nwait_time = true\n");
        let e = RunConfig::from_str_with(&on, "x.toml", None).unwrap_err();
        assert!(e.to_string().contains("metrics.wait_time"), "{e}");
        assert!(
            e.to_string().contains("only at fidelity \"process\""),
            "{e}"
        );
    }

    #[test]
    fn event_order_defaults_per_instant_and_stays_out_of_the_canonical_form() {
        let c = RunConfig::from_str_with(GOOD, "x.toml", None).unwrap();
        assert_eq!(c.scheduler.event_order, EventOrder::PerInstant);
        let json = serde_json::to_string(&c).unwrap();
        assert!(!json.contains("event_order"), "{json}");
        let with = GOOD.replace(
            "placement = \"random\"",
            "placement = \"random\"\nevent_order = \"per-event\"",
        );
        let c = RunConfig::from_str_with(&with, "x.toml", None).unwrap();
        assert_eq!(c.scheduler.event_order, EventOrder::PerEvent);
        let json = serde_json::to_string(&c).unwrap();
        assert!(json.contains("\"event_order\":\"per-event\""), "{json}");
        let bad = GOOD.replace(
            "placement = \"random\"",
            "placement = \"random\"\nevent_order = \"each\"",
        );
        let e = RunConfig::from_str_with(&bad, "x.toml", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("per-instant") && e.contains("per-event"), "{e}");
        let e = RunConfig::from_str_with(
            &PROCESS.replace("mpl = 3", "mpl = 3\nevent_order = \"per-event\""),
            "p.toml",
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("scheduler.event_order"), "{e}");
    }

    #[test]
    fn load_scale_is_checked_and_absent_keys_stay_out_of_the_canonical_form() {
        let c = RunConfig::from_str_with(GOOD, "x.toml", None).unwrap();
        assert_eq!(c.workload.load_scaling(), None);
        let json = serde_json::to_string(&c).unwrap();
        assert!(!json.contains("load_scale"), "{json}");
        let with = GOOD.replace(
            "estimates = \"exact\"",
            "estimates = \"exact\"\nload_scale = 1.5\nload_scale_by = \"runtime\"",
        );
        let c = RunConfig::from_str_with(&with, "x.toml", None).unwrap();
        assert_eq!(c.workload.load_scaling(), Some((1.5, LoadScaleBy::Runtime)));
        let only = GOOD.replace("estimates = \"exact\"", "load_scale = 2");
        let c = RunConfig::from_str_with(&only, "x.toml", None).unwrap();
        assert_eq!(
            c.workload.load_scaling(),
            Some((2.0, LoadScaleBy::Interarrival))
        );
        for (text, want) in [
            (
                "load_scale = 0",
                "x.toml: field `workload.load_scale`: must be a finite number > 0, got 0",
            ),
            ("load_scale = -1.0", "must be a finite number > 0, got -1"),
            (
                "load_scale_by = \"runtime\"",
                "field `workload.load_scale_by`: needs workload.load_scale",
            ),
        ] {
            let e = RunConfig::from_str_with(
                &GOOD.replace("estimates = \"exact\"", text),
                "x.toml",
                None,
            )
            .unwrap_err()
            .to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
        let e = RunConfig::from_str_with(
            &GOOD.replace("estimates = \"exact\"", "load_scale_by = \"sideways\""),
            "x.toml",
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("unknown variant `sideways`"), "{e}");
    }

    #[test]
    fn unknown_key_names_line_and_field() {
        let text = GOOD.replace("placement = \"random\"", "placment = \"random\"");
        let e = RunConfig::from_str_with(&text, "x.toml", None)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("x.toml: line 8"), "{e}");
        assert!(e.contains("placment"), "{e}");
    }

    #[test]
    fn unknown_workload_key_is_refused() {
        let text = GOOD.replace("estimates = \"exact\"", "estimate = \"exact\"");
        let e = RunConfig::from_str_with(&text, "x.toml", None)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("x.toml: line 5") && e.contains("estimate"),
            "{e}"
        );
    }

    #[test]
    fn bad_enum_value_is_named() {
        let text = GOOD.replace("\"exact\"", "\"perfect\"");
        let e = RunConfig::from_str_with(&text, "x.toml", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 5") && e.contains("perfect"), "{e}");
    }

    #[test]
    fn impossible_platform_is_refused() {
        let text = format!("{GOOD}\n[platform]\nnodes = 0\n");
        let e = RunConfig::from_str_with(&text, "x.toml", None)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "x.toml: field `platform.nodes`: must be at least 1");
    }

    const PROCESS: &str = r#"
fidelity = "process"
[node_platform]
preset = "choi2004"
[workload]
jobs = [{ app = "CG", class = "A", procs = 16 }, { app = "EP", class = "B", procs = 8, submit_s = 5 }]
[scheduler]
node_policy = "nls"
mpl = 3
"#;

    #[test]
    fn process_fidelity_configs() {
        let c = RunConfig::from_str_with(PROCESS, "p.toml", None).unwrap();
        assert_eq!(c.workload.jobs.len(), 2);
        assert_eq!(c.scheduler.mpl, 3);
        assert_eq!(c.node_platform.unwrap().platform().unwrap().nodes, 16);
        let e = RunConfig::from_str_with(&PROCESS.replace("choi2004", "choi"), "p.toml", None)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("p.toml: field `node_platform`: unknown platform preset \"choi\""),
            "{e}"
        );
        let e = RunConfig::from_str_with(
            &PROCESS.replace("class = \"A\"", "class = \"AB\""),
            "p.toml",
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("field `workload.jobs[0].class`"), "{e}");
        let e = RunConfig::from_str_with(&GOOD.replace("trace = \"t.swf\"", ""), "x.toml", None)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "x.toml: field `workload.trace`: required at fidelity \"job\""
        );
    }

    #[test]
    fn json_errors_have_line() {
        let e = RunConfig::from_str_with("{\n \"seed\": \"x\"\n}", "c.json", None)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("c.json: line 2, column 12: field `seed`: invalid type"),
            "{e}"
        );
        assert_eq!(e.matches("line").count(), 1, "{e}");
    }

    #[test]
    fn a_json_value_of_the_wrong_type_names_its_field() {
        let err = |text: &str| load_error(text, "c.json");
        // Line 2 is ` "platform": {"nodes": -1}}`: the value -1 takes columns 24-25, and serde_json
        // points at the last character it read, 25.
        assert_eq!(
            err("{\"workload\": {\"trace\": \"t.swf\"}, \"scheduler\": {\"policy\": \"easy\"},\n \"platform\": {\"nodes\": -1}}"),
            "c.json: line 2, column 25: field `platform.nodes`: invalid value: integer `-1`, expected u32"
        );
        // Inside an object of an array: the element's index and key, as TOML names them. Line 2 is
        // `{"app": "CG", "procs": 4}, {"app": "EP", "procs": "four"}]}}`: "four" takes columns 51-56.
        assert_eq!(
            err("{\"fidelity\": \"process\", \"workload\": {\"jobs\": [\n{\"app\": \"CG\", \"procs\": 4}, {\"app\": \"EP\", \"procs\": \"four\"}]}}"),
            "c.json: line 2, column 56: field `workload.jobs[1].procs`: invalid type: string \"four\", expected u32"
        );
        // A bad enum string names its field; a key error and a syntax error keep serde's own
        // message (which names the key, or is about no field).
        let e =
            err("{\"workload\": {\"trace\": \"t\"}, \"scheduler\": {\"placement\": \"tight\"}}");
        assert!(
            e.contains(": field `scheduler.placement`: unknown variant `tight`"),
            "{e}"
        );
        let e = err("{\"workload\": {\"trace\": \"t\"}, \"scheduler\": {\"placment\": \"x\"}}");
        assert!(
            e.contains(": unknown field `placment`") && !e.contains("field `scheduler"),
            "{e}"
        );
        let e = err("{\"seed\": 1,}");
        assert!(
            e.starts_with("c.json: line 1, column 12: trailing comma"),
            "{e}"
        );
        // `{"workload": {"trace": "t"}, "scheduler": {}} x`: the x is the 47th character.
        let e = err("{\"workload\": {\"trace\": \"t\"}, \"scheduler\": {}} x");
        assert!(
            e.starts_with("c.json: line 1, column 47: trailing characters"),
            "{e}"
        );
    }

    #[test]
    fn ranks_per_node_and_node_count_override() {
        let c = RunConfig::from_str_with(PROCESS, "p.toml", None).unwrap();
        assert!(c.workload.jobs.iter().all(|j| j.ranks_per_node == 1));
        // The defaults are not written back, so existing configurations keep their hash.
        let json = serde_json::to_string(&c).unwrap();
        assert!(!json.contains("ranks_per_node") && !json.contains("\"nodes\""));
        assert!(!json.contains("nice") && !json.contains("noise_cv"));
        let text = PROCESS
            .replace("procs = 8,", "procs = 8, ranks_per_node = 2,")
            .replace("preset = \"choi2004\"", "preset = \"ghanesh\"\nnodes = 16");
        let c = RunConfig::from_str_with(&text, "p.toml", None).unwrap();
        assert_eq!(c.workload.jobs[1].ranks_per_node, 2);
        assert_eq!(c.node_platform.unwrap().platform().unwrap().nodes, 16);
    }

    #[test]
    fn cpu_speed_overrides_the_preset_and_must_be_positive() {
        let c = RunConfig::from_str_with(PROCESS, "p.toml", None).unwrap();
        assert!(!serde_json::to_string(&c).unwrap().contains("cpu_speed"));
        assert_eq!(c.node_platform.unwrap().platform().unwrap().cpu_speed, 1.0);
        let text = PROCESS.replace("preset = \"choi2004\"", "preset = \"ghanesh\"");
        let c = RunConfig::from_str_with(&text, "p.toml", None).unwrap();
        assert_eq!(
            c.node_platform.unwrap().platform().unwrap().cpu_speed,
            crate::node::GHANESH_CPU_SPEED
        );
        let text = PROCESS.replace(
            "preset = \"choi2004\"",
            "preset = \"choi2004\"\ncpu_speed = 2.0",
        );
        let c = RunConfig::from_str_with(&text, "p.toml", None).unwrap();
        assert_eq!(c.node_platform.unwrap().platform().unwrap().cpu_speed, 2.0);
        let text = PROCESS.replace(
            "preset = \"choi2004\"",
            "preset = \"choi2004\"\ncpu_speed = 0.0",
        );
        let e = RunConfig::from_str_with(&text, "p.toml", None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cpu_speed: must be a finite number between 0.001 and 1000 (the plausible range), got 0"),
            "{e}"
        );
    }

    #[test]
    fn process_jobs_may_be_background() {
        let text = PROCESS.replace(
            "submit_s = 5 }]",
            "submit_s = 5 }, { app = \"cpu-load\", procs = 1, background = true }]",
        );
        let c = RunConfig::from_str_with(&text, "p.toml", None).unwrap();
        let bg: Vec<bool> = c.workload.jobs.iter().map(|j| j.background).collect();
        assert_eq!(bg, vec![false, false, true]);
        assert_eq!(c.workload.jobs[2].class, "-");
    }
}
