//! Per-job rows and the run summary.
//!
//! Definitions (all documented in `docs/formats/jobs.md` and `docs/formats/summary.md`):
//! - wait = start - submit; execution = end - start; response = end - submit;
//! - slowdown = response / execution (undefined, NaN, when execution is 0);
//! - bounded slowdown = max(1, response / max(execution, threshold));
//! - makespan = last end - first submit, over simulated (started) jobs;
//! - utilization = sum(procs * execution) / (machine procs * makespan);
//! - energy: node power is linear in its busy processors, so with B = idle watts and
//!   W = busy watts, busy node-seconds = sum(procs * execution) / procs_per_node,
//!   idle node-seconds = nodes * makespan - busy node-seconds,
//!   energy_busy = W * busy node-seconds, energy_idle = B * idle node-seconds (exact);
//!   a job's energy share = W * procs * execution / procs_per_node.
//! - percentiles use linear interpolation between closest ranks (numpy's default).

use crate::alloc::node_list;
use crate::cluster::{JobRecord, JobStatus, SimOutput};
use cosched_des::SimTime;
use cosched_model::{JobSpec, Platform, Workload};
use serde::Serialize;

/// The per-job table in columnar form (times in seconds).
#[derive(Clone, Debug, Default, Serialize)]
pub struct JobTable {
    pub job_id: Vec<i64>,
    pub submit_s: Vec<f64>,
    pub start_s: Vec<f64>,
    pub end_s: Vec<f64>,
    pub wait_s: Vec<f64>,
    pub execution_s: Vec<f64>,
    pub response_s: Vec<f64>,
    pub slowdown: Vec<f64>,
    pub bounded_slowdown: Vec<f64>,
    pub procs: Vec<u32>,
    pub nodes: Vec<u32>,
    pub runtime_s: Vec<f64>,
    pub estimate_s: Vec<f64>,
    pub requested_s: Vec<f64>,
    pub status: Vec<&'static str>,
    pub energy_j: Vec<f64>,
    pub node_list: Vec<String>,
    /// Job-level gang scheduling only: the Ousterhout-matrix row of each job (-1 if
    /// rejected); empty for every other model (written as -1).
    pub gang_row: Vec<i64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The run summary; field names are the public summary.json keys.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Summary {
    pub policy: String,
    pub jobs_total: u64,
    pub jobs_simulated: u64,
    pub jobs_completed: u64,
    pub jobs_killed: u64,
    pub jobs_rejected: u64,
    /// Real execution only (a program that crashed or exited non-zero); absent
    /// from simulated summaries, where it is always 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub jobs_failed: u64,
    pub jobs_dropped: u64,
    pub jobs_dropped_never_ran: u64,
    pub jobs_dropped_no_procs: u64,
    pub mean_wait_s: f64,
    pub median_wait_s: f64,
    pub p90_wait_s: f64,
    pub mean_response_s: f64,
    pub median_response_s: f64,
    pub p90_response_s: f64,
    pub mean_execution_s: f64,
    pub mean_slowdown: f64,
    pub mean_bounded_slowdown: f64,
    pub median_bounded_slowdown: f64,
    pub p90_bounded_slowdown: f64,
    pub bounded_slowdown_threshold_s: f64,
    pub utilization: f64,
    pub first_submit_s: f64,
    pub last_end_s: f64,
    pub makespan_s: f64,
    pub energy_j: f64,
    pub energy_busy_j: f64,
    pub energy_idle_j: f64,
    /// Seed 000's estimate E = (B + X*U) * N * T, for comparison with the exact integral.
    pub energy_estimate_j: f64,
    pub machine_procs: u32,
    pub machine_nodes: u32,
    pub procs_per_node: u32,
    pub policy_calls: u64,
    pub decisions: u64,
    /// Counters of a process-level run (absent at job fidelity).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process: Option<ProcessSummary>,
}

/// The counters of a process-level run, in summary units (docs/formats/summary.md).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ProcessSummary {
    pub events: u64,
    pub context_switches: u64,
    pub messages: u64,
    /// Wake-ups of blocked processes by a message, acknowledgement, I/O or page-in interrupt.
    pub interrupts: u64,
    /// CPU time spent busy-waiting, all processes, seconds.
    pub spin_s: f64,
    /// CPU time spent making progress (compute and overheads), all processes, seconds.
    pub useful_s: f64,
    /// CPU fragmentation (seed 003 §3.2): the share of the machine's CPU time over
    /// the makespan not spent on useful work (idle, spinning, context and gang
    /// switches), `1 - useful_s / (CPUs x makespan_s)`; 0 for an empty run.
    pub cpu_fragmentation: f64,
    /// Recommendations of the node policy that the native schedulers followed.
    pub hints_followed: u64,
    pub page_ins: u64,
    /// Memory read back from disk by page-ins, MB.
    pub paged_in_mb: f64,
    /// Memory written to swap when pages were taken from a process, MB.
    #[serde(default)]
    pub paged_out_mb: f64,
    /// Interrupts a node policy raised for processes that were not running (DCS, PB,
    /// CC on a message or at their timer), each charged the platform's interrupt cost.
    pub policy_interrupts: u64,
    /// Priority boosts a node policy applied (until restored or until the process runs).
    pub boosts: u64,
    /// Running processes preempted at once by a boosted one.
    pub boost_preemptions: u64,
    /// Boosts a node policy applied when a NIC acknowledgement arrived for a
    /// sender (CC's sender boost); included in `boosts`.
    pub ack_boosts: u64,
    /// Gang slot switches (each idles every node for the switch cost).
    pub gang_switches: u64,
    /// Flexible gang: running processes preempted by a process woken by its disk completion.
    pub gang_io_preemptions: u64,
    /// Node-policy actions the engine refused because they could not apply (a
    /// process of another node or one that has ended, a spin change for a process
    /// that is not spinning in a wait).
    pub policy_action_errors: u64,
    /// What the run's observers measured, one entry per measure under its
    /// name (`cosched_engine::process::observe::Measures::summary`; the
    /// entries and their keys are in docs/formats/summary.md).
    pub measures: serde_json::Map<String, serde_json::Value>,
}

/// Linear-interpolation percentile of a sorted slice (numpy "linear"); NaN if empty.
pub fn percentile_sorted(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q / 100.0 * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

/// Builds the job table and the summary of a finished run.
pub fn summarize(
    workload: &Workload,
    platform: &Platform,
    out: &SimOutput,
    bsld_threshold_s: f64,
) -> (JobTable, Summary) {
    summarize_busy(workload, platform, out, bsld_threshold_s, None)
}

/// Busy processor time measured by a time-sharing engine: per job (its processes'
/// CPU time, seconds) and in all (seconds of busy processors, all nodes).
#[derive(Clone, Debug)]
pub struct MeasuredBusy {
    pub job_cpu_s: Vec<f64>,
    pub total_proc_s: f64,
}

/// [`summarize`] for a run where jobs do not own their processors for their whole
/// execution (time sharing): a job's energy share and the busy time come from the
/// measured CPU time instead of processors x execution.
pub fn summarize_busy(
    workload: &Workload,
    platform: &Platform,
    out: &SimOutput,
    bsld_threshold_s: f64,
    measured: Option<&MeasuredBusy>,
) -> (JobTable, Summary) {
    let n = workload.jobs.len();
    let mut t = JobTable::default();
    let ppn = platform.procs_per_node as f64;
    let mut acc = Samples::new();
    let mut s = Summary {
        jobs_total: n as u64,
        ..Default::default()
    };
    for (i, (spec, rec)) in workload.jobs.iter().zip(&out.records).enumerate() {
        push_spec(&mut t, spec, rec, platform.procs_per_node);
        match (rec.start, rec.end) {
            (Some(st), Some(en)) => {
                let exec = (en - st).as_secs_f64();
                let proc_s = measured.map_or(spec.procs as f64 * exec, |m| m.job_cpu_s[i]);
                let energy = platform.busy_watts * proc_s / ppn;
                acc.ran(&mut t, spec, (st, en), bsld_threshold_s, energy);
                acc.busy_proc_s += proc_s;
                match rec.status {
                    JobStatus::Killed => s.jobs_killed += 1,
                    JobStatus::Failed => s.jobs_failed += 1,
                    _ => s.jobs_completed += 1,
                }
            }
            _ => {
                for col in [
                    &mut t.start_s,
                    &mut t.end_s,
                    &mut t.wait_s,
                    &mut t.execution_s,
                    &mut t.response_s,
                    &mut t.slowdown,
                    &mut t.bounded_slowdown,
                ] {
                    col.push(f64::NAN);
                }
                t.energy_j.push(0.0);
                s.jobs_rejected += 1;
            }
        }
    }
    s.policy = out.policy.clone();
    s.jobs_simulated = s.jobs_completed + s.jobs_killed + s.jobs_failed;
    s.jobs_dropped_never_ran = workload.dropped_never_ran;
    s.jobs_dropped_no_procs = workload.dropped_no_procs;
    s.jobs_dropped = workload.dropped();
    aggregate(&mut s, acc, out, platform, bsld_threshold_s, measured);
    (t, s)
}

/// The job table's columns that do not depend on whether the job ran.
fn push_spec(t: &mut JobTable, spec: &JobSpec, rec: &JobRecord, procs_per_node: u32) {
    t.job_id.push(spec.source_id);
    t.submit_s.push(spec.submit.as_secs_f64());
    t.procs.push(spec.procs);
    t.runtime_s.push(spec.runtime.as_secs_f64());
    t.estimate_s.push(spec.estimate.as_secs_f64());
    t.requested_s
        .push(spec.requested.map_or(f64::NAN, |r| r.as_secs_f64()));
    t.status.push(rec.status.as_str());
    t.nodes.push(rec.nodes);
    t.node_list.push(node_list(&rec.alloc, procs_per_node));
}

/// The figures of the jobs that ran, which the summary aggregates.
struct Samples {
    waits: Vec<f64>,
    resps: Vec<f64>,
    bslds: Vec<f64>,
    slds: Vec<f64>,
    execs: Vec<f64>,
    busy_proc_s: f64,
    first_submit: f64,
    last_end: f64,
}

impl Samples {
    fn new() -> Self {
        Self {
            waits: Vec::new(),
            resps: Vec::new(),
            bslds: Vec::new(),
            slds: Vec::new(),
            execs: Vec::new(),
            busy_proc_s: 0.0,
            first_submit: f64::INFINITY,
            last_end: f64::NEG_INFINITY,
        }
    }

    /// A job that ran from `st` to `en`: its timing columns, and its figures.
    fn ran(
        &mut self,
        t: &mut JobTable,
        spec: &JobSpec,
        (st, en): (SimTime, SimTime),
        bsld_threshold_s: f64,
        energy: f64,
    ) {
        let submit = spec.submit.as_secs_f64();
        let (start, end) = (st.as_secs_f64(), en.as_secs_f64());
        let wait = (st - spec.submit).as_secs_f64();
        let exec = (en - st).as_secs_f64();
        let resp = (en - spec.submit).as_secs_f64();
        let sld = if exec > 0.0 { resp / exec } else { f64::NAN };
        let bsld = (resp / exec.max(bsld_threshold_s)).max(1.0);
        t.start_s.push(start);
        t.end_s.push(end);
        t.wait_s.push(wait);
        t.execution_s.push(exec);
        t.response_s.push(resp);
        t.slowdown.push(sld);
        t.bounded_slowdown.push(bsld);
        t.energy_j.push(energy);
        self.waits.push(wait);
        self.resps.push(resp);
        self.bslds.push(bsld);
        self.execs.push(exec);
        if !sld.is_nan() {
            self.slds.push(sld);
        }
        self.first_submit = self.first_submit.min(submit);
        self.last_end = self.last_end.max(end);
    }
}

/// The summary's means, percentiles, machine, utilization and energy figures.
fn aggregate(
    s: &mut Summary,
    acc: Samples,
    out: &SimOutput,
    platform: &Platform,
    bsld_threshold_s: f64,
    measured: Option<&MeasuredBusy>,
) {
    let ppn = platform.procs_per_node as f64;
    s.mean_wait_s = mean(&acc.waits);
    s.mean_response_s = mean(&acc.resps);
    s.mean_execution_s = mean(&acc.execs);
    s.mean_slowdown = mean(&acc.slds);
    s.mean_bounded_slowdown = mean(&acc.bslds);
    let (waits, resps, bslds) = (sorted(acc.waits), sorted(acc.resps), sorted(acc.bslds));
    s.median_wait_s = percentile_sorted(&waits, 50.0);
    s.p90_wait_s = percentile_sorted(&waits, 90.0);
    s.median_response_s = percentile_sorted(&resps, 50.0);
    s.p90_response_s = percentile_sorted(&resps, 90.0);
    s.median_bounded_slowdown = percentile_sorted(&bslds, 50.0);
    s.p90_bounded_slowdown = percentile_sorted(&bslds, 90.0);
    s.bounded_slowdown_threshold_s = bsld_threshold_s;
    s.machine_procs = platform.total_procs();
    s.machine_nodes = platform.nodes;
    s.procs_per_node = platform.procs_per_node;
    s.policy_calls = out.stats.policy_calls;
    s.decisions = out.stats.decisions;
    if s.jobs_simulated > 0 {
        s.first_submit_s = acc.first_submit;
        s.last_end_s = acc.last_end;
        s.makespan_s = acc.last_end - acc.first_submit;
        let busy_proc_s = measured.map_or(acc.busy_proc_s, |m| m.total_proc_s);
        let capacity = platform.total_procs() as f64 * s.makespan_s;
        s.utilization = if capacity > 0.0 {
            busy_proc_s / capacity
        } else {
            0.0
        };
        let busy_node_s = busy_proc_s / ppn;
        let idle_node_s = platform.nodes as f64 * s.makespan_s - busy_node_s;
        s.energy_busy_j = platform.busy_watts * busy_node_s;
        s.energy_idle_j = platform.idle_watts * idle_node_s;
        s.energy_j = s.energy_busy_j + s.energy_idle_j;
        let x = platform.busy_watts - platform.idle_watts;
        s.energy_estimate_j =
            (platform.idle_watts + x * s.utilization) * platform.nodes as f64 * s.makespan_s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn percentiles_match_numpy_linear() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile_sorted(&v, 50.0), 2.5);
        assert!((percentile_sorted(&v, 90.0) - 3.7).abs() < 1e-12);
        assert_eq!(percentile_sorted(&[5.0], 90.0), 5.0);
        assert!(percentile_sorted(&[], 50.0).is_nan());
    }
}
