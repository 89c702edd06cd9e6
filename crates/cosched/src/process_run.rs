//! Process-level runs of a configuration (`fidelity = "process"`): application
//! jobs on a node platform, FCFS admission with an MPL limit, a node policy on
//! every node. Results take the same shape as job-level runs (job table and
//! summary); busy time and energy come from the CPUs' measured busy time, so a
//! spinning process counts as busy (docs/models/seed-parameters.md, G-EN-1).

use crate::{Error, RunResult, Timings};
use cosched_des::SimTime;
use cosched_engine::metrics::{summarize_busy, MeasuredBusy, ProcessSummary};
use cosched_engine::process::admit::AdmissionFactory;
use cosched_engine::process::policy::NodePolicy;
use cosched_engine::process::{simulate_processes, ProcError, ProcJob, ProcOptions};
use cosched_engine::{JobRecord, JobStatus, SimOutput};
use cosched_model::node::NodePlatform;
use cosched_model::{ConfigError, EstimateSource, JobSpec, Platform, RunConfig, Workload};
use cosched_policies::ProcAdmission;
use std::time::Instant;

/// The jobs of a process-level configuration, sorted by submit time (stable).
pub fn jobs_of(cfg: &RunConfig, origin: &str) -> Result<Vec<ProcJob>, Error> {
    let mut jobs = Vec::with_capacity(cfg.workload.jobs.len());
    for (i, j) in cfg.workload.jobs.iter().enumerate() {
        let class = j.class.chars().next().unwrap_or('-');
        let program = cosched_model::apps::build(&j.app, class, j.procs).map_err(|e| {
            ConfigError::Invalid {
                path: origin.into(),
                field: format!("workload.jobs[{i}]"),
                msg: e.to_string(),
            }
        })?;
        // A configured noise replaces the preset's (every preset has none).
        let program = if j.noise_cv > 0.0 {
            program.with_noise(j.noise_cv)
        } else {
            program
        };
        jobs.push(ProcJob {
            program: program.with_delays(
                SimTime::from_secs_f64(j.start_delay_s).0,
                SimTime::from_secs_f64(j.end_delay_s).0,
            ),
            submit: SimTime::from_secs_f64(j.submit_s),
            background: j.background,
            ranks_per_node: j.ranks_per_node,
            nice: j.nice,
        });
    }
    jobs.sort_by_key(|j| j.submit);
    Ok(jobs)
}

/// The index in `workload.jobs` of the configuration of the `k`-th job of
/// [`jobs_of`] (which sorts the jobs by submit time, stably).
fn config_index(cfg: &RunConfig, k: usize) -> usize {
    let mut order: Vec<usize> = (0..cfg.workload.jobs.len()).collect();
    order.sort_by_key(|&i| SimTime::from_secs_f64(cfg.workload.jobs[i].submit_s));
    order.get(k).copied().unwrap_or(k)
}

/// A process-level engine error as the facade reports it: problems of a job or
/// of the platform name the configuration file and field (bad input); the
/// watchdogs name the limit to raise; deadlocks and invariant violations are
/// engine failures.
fn proc_error(cfg: &RunConfig, e: ProcError) -> Error {
    let origin = cfg.origin();
    let invalid = |field: String, msg: String| {
        Error::Config(ConfigError::Invalid {
            path: origin.to_string(),
            field,
            msg,
        })
    };
    let job_field = |job: usize| {
        let i = config_index(cfg, job);
        let what = match cfg.workload.jobs.get(i) {
            Some(j) => format!("app {} at {} processes: ", j.app, j.procs),
            None => String::new(),
        };
        (format!("workload.jobs[{i}]"), what)
    };
    // Drops the engine's "job N: " prefix (N is the index after sorting by submit time).
    let detail = |full: String| match full.split_once(": ") {
        Some((head, rest)) if head.starts_with("job ") => rest.to_string(),
        _ => full,
    };
    match e {
        ProcError::Platform(msg) => invalid("node_platform".into(), msg),
        ProcError::Mpl => invalid("scheduler.mpl".into(), "must be at least 1".into()),
        ProcError::TooWide { job, .. }
        | ProcError::TooBig { job, .. }
        | ProcError::BadProgram { job, .. }
        | ProcError::BadRank { job, .. } => {
            let (field, what) = job_field(job);
            invalid(field, format!("{what}{}", detail(e.to_string())))
        }
        ProcError::Options(msg) => invalid("scheduler".into(), msg),
        ProcError::Unsorted(_) => Error::Invalid(e.to_string()),
        ProcError::TimeLimit { .. } => Error::Run(format!(
            "{origin}: {e}\n(raise `limits.max_sim_time_s` in the configuration if the run is meant to be this long)"
        )),
        ProcError::EventLimit { .. } => Error::Run(format!(
            "{origin}: {e} (raise `limits.max_events` in the configuration if the run is meant to be this long)"
        )),
        ProcError::Interrupted { .. } => Error::Interrupted,
        ProcError::ProgramDeadlock { job, .. } => {
            let (field, what) = job_field(job);
            Error::Run(format!("{origin}: {field}: {what}{}", detail(e.to_string())))
        }
        ProcError::Deadlock { .. }
        | ProcError::Invariant(_)
        | ProcError::Admission(_)
        | ProcError::Slot(_) => {
            Error::Run(format!("{origin}: {e}"))
        }
    }
}

/// Each job's dedicated execution time (EASY's "perfect estimates", assumption
/// G-SCH-8, and the base of its requested walltimes), simulated alone on the platform (one process per
/// node, the configuration's node policy, placement and seed), cached per
/// application, class and process count. Background jobs get no finite estimate.
fn dedicated_estimates(
    cfg: &RunConfig,
    plat: &NodePlatform,
    jobs: &[ProcJob],
    make: &dyn Fn() -> Box<dyn NodePolicy>,
) -> Result<Vec<SimTime>, Error> {
    let mut apps: Vec<_> = cfg.workload.jobs.iter().collect();
    apps.sort_by_key(|a| SimTime::from_secs_f64(a.submit_s)); // the order of `jobs_of`
    let mut cache = std::collections::BTreeMap::new();
    let mut est = Vec::with_capacity(jobs.len());
    for (a, job) in apps.iter().zip(jobs) {
        if job.background {
            // A competing load runs until the foreground ends: no finite estimate.
            est.push(SimTime::MAX);
            continue;
        }
        let key = (a.app.clone(), a.class.clone(), a.procs);
        if let Some(&t) = cache.get(&key) {
            est.push(t);
            continue;
        }
        let alone = ProcJob::new(job.program.clone(), SimTime::ZERO);
        let opts = ProcOptions {
            placement: cfg.scheduler.placement,
            seed: cfg.seed,
            ..Default::default()
        };
        let out = simulate_processes(plat, std::slice::from_ref(&alone), make, &opts)
            .map_err(|e| proc_error(cfg, e))?;
        let t = out.jobs[0].end - out.jobs[0].start;
        cache.insert(key, t);
        est.push(t);
    }
    Ok(est)
}

/// Each job's runtime estimate of kind `kind` ([`cosched_policies::process::batch::estimates_of`])
/// from the dedicated runtimes ([`dedicated_estimates`]) and the jobs' classes.
fn job_estimates(
    cfg: &RunConfig,
    plat: &NodePlatform,
    jobs: &[ProcJob],
    make: &dyn Fn() -> Box<dyn NodePolicy>,
    kind: cosched_policies::process::batch::Estimates,
) -> Result<Vec<SimTime>, Error> {
    let dedicated = dedicated_estimates(cfg, plat, jobs, make)?;
    let mut apps: Vec<_> = cfg.workload.jobs.iter().collect();
    apps.sort_by_key(|a| SimTime::from_secs_f64(a.submit_s)); // the order of `jobs_of`
    let class: Vec<String> = apps.iter().map(|a| a.class.to_uppercase()).collect();
    let class: Vec<&str> = class.iter().map(String::as_str).collect();
    Ok(cosched_policies::process::batch::estimates_of(
        kind, &dedicated, &class,
    ))
}

/// Runs a validated process-level configuration.
pub fn run_process_config(cfg: &RunConfig) -> Result<RunResult, Error> {
    run_process_config_recording(cfg, false)
}

/// Runs a validated process-level configuration, recording the per-node timeline
/// when `timeline` is set.
pub fn run_process_config_recording(cfg: &RunConfig, timeline: bool) -> Result<RunResult, Error> {
    if crate::is_external_policy(&cfg.scheduler.policy) {
        return Err(Error::Invalid(format!(
            "policy {:?}: a Python policy needs its object (use coscheduling.run)",
            cfg.scheduler.policy
        )));
    }
    run_admitting(cfg, timeline, |opts, estimates| {
        let admission = cosched_policies::build_process(&cfg.scheduler.policy)?;
        wire(admission, opts, estimates)
    })
}

/// Builds a run's admission from each job's runtime estimate.
pub type AdmissionMaker<'a> = &'a dyn Fn(Vec<SimTime>) -> AdmissionFactory;

/// Runs a validated process-level configuration under an admission policy the
/// caller builds (a policy the registry does not know, such as one written in
/// Python): `admission` gets each job's runtime estimate, of the kind the
/// configuration's `workload.estimates` names ([`estimates_of`]), and returns
/// the factory the engine calls once per run. The run is at MPL 1, as every
/// hosted job-level policy's; `scheduler.policy` only names it in the summary.
pub fn run_process_config_admitting(
    cfg: &RunConfig,
    timeline: bool,
    admission: AdmissionMaker<'_>,
) -> Result<RunResult, Error> {
    run_admitting(cfg, timeline, |opts, estimates| {
        opts.mpl = 1;
        let est = estimates(estimates_of(cfg.workload.estimates))?;
        opts.admission = Some(admission(est));
        Ok(())
    })
}

/// The process-level estimates a configuration's `workload.estimates` names,
/// as at job fidelity: `"requested"`, the requested walltime (at process
/// fidelity the class's, `estimates=request` with `round_s=600`,
/// [`cosched_policies::process::batch::Estimates::DEFAULT`]); `"exact"`, the
/// real runtime (each job's dedicated runtime, `estimates=perfect`).
pub fn estimates_of(source: EstimateSource) -> cosched_policies::process::batch::Estimates {
    use cosched_policies::process::batch::Estimates;
    match source {
        EstimateSource::Requested => Estimates::DEFAULT,
        EstimateSource::Exact => Estimates::Perfect,
    }
}

/// Each job's runtime estimate of a kind, for the run being set up.
type EstimatesOf<'a> =
    &'a dyn Fn(cosched_policies::process::batch::Estimates) -> Result<Vec<SimTime>, Error>;

/// Sets the admission of a registered process-level scheme in `opts`.
fn wire(
    admission: ProcAdmission,
    opts: &mut ProcOptions,
    estimates: EstimatesOf<'_>,
) -> Result<(), Error> {
    match admission {
        ProcAdmission::Fcfs => {}
        ProcAdmission::Batch(b) => {
            opts.mpl = 1;
            opts.admission = Some(AdmissionFactory::new(move || {
                cosched_policies::process::batch::admission(&b)
            }));
        }
        ProcAdmission::Hosted {
            policy,
            estimates: kind,
        } => {
            // Nodes are the hosted policy's processors: one process per node.
            opts.mpl = 1;
            let est = estimates(kind)?;
            opts.admission = Some(AdmissionFactory::new(move || {
                let p = cosched_policies::build(&policy).expect("checked by build_process");
                Box::new(cosched_policies::process::hosted::Hosted::new(
                    p,
                    est.clone(),
                ))
            }));
        }
        ProcAdmission::Gang(g) => {
            opts.mpl = g.rows;
            opts.slots = Some(cosched_policies::process::gang::factory(g));
        }
        ProcAdmission::GangPerturb { gang, perturb } => {
            opts.mpl = gang.rows;
            opts.slots = Some(cosched_policies::process::perturb::factory(gang, perturb));
        }
    }
    Ok(())
}

/// Runs a validated process-level configuration whose admission `admit` sets
/// in the engine's options (given each job's estimates of a kind on demand).
#[expect(
    clippy::too_many_lines,
    reason = "wiring from a configuration to the engine's options, the run and its summary, one section after the other"
)]
fn run_admitting(
    cfg: &RunConfig,
    timeline: bool,
    admit: impl FnOnce(&mut ProcOptions, EstimatesOf<'_>) -> Result<(), Error>,
) -> Result<RunResult, Error> {
    let origin = cfg.origin();
    let np = cfg
        .node_platform
        .as_ref()
        .ok_or_else(|| Error::Invalid("node_platform is required".into()))?;
    let plat = np.platform().map_err(Error::Invalid)?;
    let jobs = jobs_of(cfg, origin)?;
    let policy = cfg.scheduler.node_policy.clone();
    cosched_policies::build_node(&policy)?;
    let make = || cosched_policies::build_node(&policy).expect("checked above");
    let mut opts = ProcOptions {
        mpl: cfg.scheduler.mpl,
        placement: cfg.scheduler.placement,
        seed: cfg.seed,
        memory_aware: cfg.scheduler.memory_aware,
        record_timeline: timeline,
        time_limit: SimTime::checked_from_secs_f64(cfg.limits.sim_time_s("process"))
            .unwrap_or(SimTime::MAX),
        event_limit: cfg.limits.events("process"),
        measure_waits: cfg.metrics.wait_time,
        ..Default::default()
    };
    admit(&mut opts, &|kind| {
        job_estimates(cfg, &plat, &jobs, &make, kind)
    })?;
    let t0 = Instant::now();
    let mut out = simulate_processes(&plat, &jobs, &make, &opts).map_err(|e| proc_error(cfg, e))?;
    let simulate_s = t0.elapsed().as_secs_f64();
    // The job table: each job's span and nodes, with its processes' CPU time as its busy time.
    let platform = Platform {
        nodes: plat.nodes,
        procs_per_node: plat.cpus_per_node,
        idle_watts: plat.idle_watts,
        busy_watts: plat.busy_watts,
    };
    let mut specs = Vec::with_capacity(jobs.len());
    let mut records = Vec::with_capacity(jobs.len());
    let mut job_cpu_ns = vec![0i64; jobs.len()];
    for (&job, &cpu) in out.proc_job.iter().zip(&out.proc_cpu_ns) {
        job_cpu_ns[job] += cpu;
    }
    for (k, (job, rec)) in jobs.iter().zip(&out.jobs).enumerate() {
        let size = job.program.size() as usize;
        let exec = rec.end - rec.start;
        specs.push(JobSpec {
            source_id: k as i64,
            submit: job.submit,
            runtime: exec,
            procs: size as u32,
            requested: None,
            estimate: exec,
            kill_after: None,
        });
        let mut nodes = rec.nodes.clone();
        nodes.sort_unstable();
        // The k-th rank of the job on a node is shown on that node's k-th CPU slot
        // (several ranks share a node with `ranks_per_node`).
        let mut alloc = Vec::with_capacity(nodes.len());
        let mut distinct = 0u32;
        for (i, &n) in nodes.iter().enumerate() {
            let k = nodes[..i].iter().rev().take_while(|&&m| m == n).count() as u32;
            if k == 0 {
                distinct += 1;
            }
            let p = n * plat.cpus_per_node + k;
            alloc.push((p, p + 1));
        }
        records.push(JobRecord {
            start: Some(rec.start),
            end: Some(rec.end),
            status: JobStatus::Completed,
            alloc,
            nodes: distinct,
        });
    }
    let workload = Workload {
        jobs: specs,
        ..Default::default()
    };
    let sim = SimOutput {
        records,
        stats: Default::default(),
        policy: format!("{}+{}", cfg.scheduler.policy, policy),
    };
    let measured = MeasuredBusy {
        job_cpu_s: job_cpu_ns.iter().map(|&ns| ns as f64 / 1e9).collect(),
        total_proc_s: out.node_busy_ns.iter().sum::<i64>() as f64 / 1e9,
    };
    let t1 = Instant::now();
    let (table, mut summary) = summarize_busy(
        &workload,
        &platform,
        &sim,
        cfg.metrics.bounded_slowdown_threshold_s,
        Some(&measured),
    );
    crate::invariants::check(&workload, &sim, &summary)?;
    let (c, m) = (&out.counters, &out.measures);
    summary.process = Some(ProcessSummary {
        events: c.events,
        context_switches: c.context_switches,
        messages: c.messages,
        interrupts: c.interrupts,
        spin_s: c.spin_ns as f64 / 1e9,
        useful_s: c.useful_ns as f64 / 1e9,
        cpu_fragmentation: {
            let capacity = f64::from(plat.nodes * plat.cpus_per_node) * summary.makespan_s;
            if capacity > 0.0 {
                1.0 - c.useful_ns as f64 / 1e9 / capacity
            } else {
                0.0
            }
        },
        hints_followed: c.hints_followed,
        page_ins: c.page_ins,
        paged_in_mb: c.paged_in_kb as f64 / 1000.0,
        paged_out_mb: c.paged_out_kb as f64 / 1000.0,
        policy_interrupts: c.policy_interrupts,
        boosts: c.boosts,
        boost_preemptions: c.boost_preemptions,
        ack_boosts: c.ack_boosts,
        gang_switches: c.gang_switches,
        gang_io_preemptions: c.gang_io_preemptions,
        policy_action_errors: c.action_errors.total(),
        measures: m.summary(),
    });
    Ok(RunResult {
        timeline: std::mem::take(&mut out.timeline),
        table,
        summary,
        platform,
        warnings: Vec::new(),
        timings: Timings {
            parse_s: 0.0,
            simulate_s,
            metrics_s: t1.elapsed().as_secs_f64(),
        },
    })
}

/// A seed 000 style job mix (seed 000 §5.1; the draw rules are assumption G-WL-4 of
/// docs/models/seed-parameters.md): `n` jobs, each an application drawn uniformly
/// from `apps`, a class uniformly from `classes`, a process count uniformly from the
/// application's allowed counts (an application without any of `classes`, such as
/// sPPM or BlockSolve95, draws from its own classes), redrawn when a process would not fit in
/// `job_memory_mb`; exponential inter-arrival times of mean `mean_interarrival_s`,
/// the first job at 0. Seeded stream `"workload"`.
pub fn nas_mix(
    n: usize,
    apps: &[&str],
    classes: &[char],
    mean_interarrival_s: f64,
    job_memory_mb: f64,
    seed: u64,
) -> Result<Vec<cosched_model::config::AppJob>, Error> {
    use rand::Rng;
    if apps.is_empty()
        || classes.is_empty()
        || !(mean_interarrival_s.is_finite() && mean_interarrival_s >= 0.0)
    {
        return Err(Error::Invalid(
            "nas_mix: apps and classes must not be empty; mean inter-arrival >= 0".into(),
        ));
    }
    let catalog = cosched_model::apps::catalog();
    let mut rng = cosched_des::RngStreams::new(seed).stream("workload");
    let mut t = 0.0;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let app = apps[rng.gen_range(0..apps.len())];
        // The given classes the application has, or its own (sPPM, BlockSolve95: '-').
        let own = cosched_model::apps::canonical(app)
            .map(cosched_model::apps::classes)
            .unwrap_or_default();
        let mut allowed: Vec<char> = classes
            .iter()
            .copied()
            .filter(|c| own.contains(c))
            .collect();
        if allowed.is_empty() {
            allowed = own;
        }
        if allowed.is_empty() {
            return Err(Error::Invalid(format!(
                "nas_mix: unknown application {app:?}"
            )));
        }
        let class = allowed[rng.gen_range(0..allowed.len())];
        let info = catalog
            .iter()
            .find(|i| i.name == app)
            .ok_or_else(|| Error::Invalid(format!("nas_mix: unknown application {app:?}")))?;
        let procs = info.procs[rng.gen_range(0..info.procs.len())];
        let program = cosched_model::apps::build(app, class, procs)
            .map_err(|e| Error::Invalid(e.to_string()))?;
        if program.memory_mb > job_memory_mb {
            continue;
        }
        out.push(cosched_model::config::AppJob {
            app: app.into(),
            class: class.to_string(),
            procs,
            submit_s: t,
            background: false,
            ranks_per_node: 1,
            nice: 0,
            noise_cv: 0.0,
            start_delay_s: 0.0,
            end_delay_s: 0.0,
        });
        let u: f64 = rng.gen::<f64>();
        t += -mean_interarrival_s * (1.0 - u).ln();
    }
    Ok(out)
}

/// Figures of one process-level benchmark run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ProcessBench {
    pub jobs: usize,
    pub events: u64,
    pub wall_s: f64,
    pub simulated_s: f64,
}

/// The process-level benchmark: 20 NAS jobs of the seed 000 mix (classes A, B, C,
/// mean inter-arrival 100 s) on choi2004, MPL 3, NLS, memory-aware admission.
pub fn bench_process_level(seed: u64) -> Result<ProcessBench, Error> {
    let plat = cosched_model::node::NodePlatform::preset("choi2004").map_err(Error::Invalid)?;
    let mix = nas_mix(
        20,
        &["CG", "IS", "SP", "MG", "BT", "LU", "EP"],
        &['A', 'B', 'C'],
        100.0,
        plat.job_memory_mb,
        seed,
    )?;
    let mut jobs = Vec::with_capacity(mix.len());
    for j in &mix {
        let class = j.class.chars().next().unwrap_or('-');
        let program = cosched_model::apps::build(&j.app, class, j.procs)
            .map_err(|e| Error::Invalid(e.to_string()))?;
        jobs.push(ProcJob::new(program, SimTime::from_secs_f64(j.submit_s)));
    }
    let make = || cosched_policies::build_node("nls").expect("registered");
    let opts = ProcOptions {
        mpl: 3,
        memory_aware: true,
        seed,
        ..Default::default()
    };
    let t0 = Instant::now();
    let out = simulate_processes(&plat, &jobs, &make, &opts)
        .map_err(|e| Error::Invalid(e.to_string()))?;
    Ok(ProcessBench {
        jobs: jobs.len(),
        events: out.counters.events,
        wall_s: t0.elapsed().as_secs_f64(),
        simulated_s: out.end.as_secs_f64(),
    })
}
