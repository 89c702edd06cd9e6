//! Shared helpers for the policy tests.
#![allow(dead_code)]

use cosched_des::SimTime;
use cosched_engine::check::check_schedule;
use cosched_engine::{simulate, ClusterPolicy, SimOptions, SimOutput};
use cosched_model::{JobSpec, Platform, Workload};

pub fn s(x: i64) -> SimTime {
    SimTime::from_secs(x)
}

/// A job: (submit s, procs, runtime s, requested s or None); estimates follow the
/// default rule max(requested, runtime), or kill at the requested time when `kill`.
pub fn job(
    id: i64,
    submit: i64,
    procs: u32,
    runtime: i64,
    requested: Option<i64>,
    kill: bool,
) -> JobSpec {
    let runtime = s(runtime);
    let requested = requested.map(s);
    let (estimate, kill_after) = match (requested, kill) {
        (Some(r), true) => (r, Some(r)),
        (Some(r), false) => (r.max(runtime), None),
        (None, _) => (runtime, None),
    };
    JobSpec {
        source_id: id,
        submit: s(submit),
        runtime,
        procs,
        requested,
        estimate,
        kill_after,
    }
}

pub fn workload(jobs: Vec<JobSpec>) -> Workload {
    Workload {
        jobs,
        ..Default::default()
    }
}

/// Runs and checks the schedule's invariants.
pub fn run(w: &Workload, procs: u32, policy: &mut dyn ClusterPolicy) -> SimOutput {
    let p = Platform::new(procs, 1);
    let out = simulate(w, &p, policy, &SimOptions::default()).expect("valid run");
    check_schedule(w, &p, &out).expect("schedule invariants");
    out
}

/// (start, end) in whole seconds per job.
pub fn spans(out: &SimOutput) -> Vec<(i64, i64)> {
    out.records
        .iter()
        .map(|r| {
            (
                r.start.map_or(-1, |t| t.as_ns() / 1_000_000_000),
                r.end.map_or(-1, |t| t.as_ns() / 1_000_000_000),
            )
        })
        .collect()
}

/// A node policy that only spins (the process-level tests' default).
pub struct Spin;
impl cosched_engine::process::policy::NodePolicy for Spin {
    fn name(&self) -> String {
        "spin".into()
    }
}

/// `nodes` single-CPU nodes without context-switch cost or OS noise.
pub fn proc_platform(nodes: u32) -> cosched_model::node::NodePlatform {
    cosched_model::node::NodePlatform {
        nodes,
        cpus_per_node: 1,
        context_switch_us: 0.0,
        os_noise_tick_us: 0.0,
        boost_recheck: Default::default(),
        cpu_speed: 1.0,
        ..cosched_model::node::NodePlatform::preset("lee4").expect("preset")
    }
}

/// `p` ranks computing `ms` each, submitted at 0.
pub fn compute(p: u32, ms: i64) -> cosched_engine::process::ProcJob {
    use cosched_model::program::{Builder, Op};
    let mut b = Builder::new(p);
    b.all(Op::Compute { ns: ms * 1_000_000 });
    cosched_engine::process::ProcJob::new(b.build("compute", 10.0), SimTime::ZERO)
}
