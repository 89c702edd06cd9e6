//! What a process-level run produces: each job's record, the timeline's
//! segments, the run's counters ([`ProcOutput`]), and its assembly at the end
//! of a run (`Sim::finish`).

use super::observe::Measures;
use super::policy::ActionErrorCounts;
use super::Sim;
#[allow(unused_imports)] // named by the doc links
use super::{
    policy::{ActionError, NodeAction},
    ProcOptions,
};
use crate::os::Pid;
use cosched_des::SimTime;
use cosched_model::program::Rank;

/// The outcome of one job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcJobRecord {
    pub start: SimTime,
    pub end: SimTime,
    /// The node of each rank.
    pub nodes: Vec<u32>,
}

/// What a CPU or a disk did during a [`Segment`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentKind {
    /// Progress: compute or message overheads.
    Useful,
    /// Busy-waiting.
    Spin,
    /// Switching to another process.
    Switch,
    /// The node's disk reading a process's pages back.
    PageIn,
    /// The node's disk writing to swap pages taken from a process.
    SwapOut,
    /// The node's disk serving a process's I/O burst.
    Io,
    /// The process is runnable but waits for a CPU (off every CPU).
    Ready,
    /// The process sleeps: blocked in a wait, in its disk burst, or waiting for its
    /// pages to be read back (off every CPU, not runnable).
    Blocked,
}

impl SegmentKind {
    /// Whether the segment is a process's own state (ready or blocked) rather than
    /// a CPU's or a disk's activity.
    pub fn is_state(self) -> bool {
        matches!(self, SegmentKind::Ready | SegmentKind::Blocked)
    }
}

/// One interval of a node's timeline. CPU segments have `cpu = Some(k)`; disk
/// segments (`PageIn`, `Io`) and process-state segments (`Ready`, `Blocked`) have
/// `cpu = None`. From its admission to its end, every process is at each instant in
/// exactly one of: on a CPU (`Useful`, `Spin`, `Switch`), `Ready` or `Blocked`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub node: u32,
    pub cpu: Option<u32>,
    pub pid: Pid,
    pub job: usize,
    pub rank: Rank,
    pub start: SimTime,
    pub end: SimTime,
    pub kind: SegmentKind,
}

/// Counters of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcCounters {
    /// Events handled. A CPU's planned segment end is a re-settable timer: when
    /// the CPU's plan changes, the end it replaces is dropped, never handled nor
    /// counted.
    pub events: u64,
    pub context_switches: u64,
    pub messages: u64,
    pub interrupts: u64,
    /// CPU time spent spinning, all processes.
    pub spin_ns: i64,
    /// CPU time spent making progress (compute and message overheads), all processes.
    pub useful_ns: i64,
    /// Wake-up recommendations the native schedulers followed.
    pub hints_followed: u64,
    /// Messages consumed by their receivers.
    pub consumed: u64,
    /// Compute time the programs asked for (after noise), all processes.
    pub compute_ns: i64,
    /// Page faults that blocked their process: each reads one read-ahead cluster
    /// (or what is missing, if less) after the write-out of the dirty frames it
    /// takes, or, for never-touched pages, only waits for that write-out.
    pub page_ins: u64,
    /// Memory read back from disk by page faults, KB.
    pub paged_in_kb: i64,
    /// Memory written to swap when its pages were taken from a process, KB.
    pub paged_out_kb: i64,
    /// Interrupts a node policy raised for processes that were not running
    /// ([`NodeAction::Interrupt`]), each charged `interrupt` of CPU.
    pub policy_interrupts: u64,
    /// Boosts applied ([`NodeAction::Boost`] and [`NodeAction::BoostUntilRun`]).
    pub boosts: u64,
    /// Running processes preempted at once by a boosted one.
    pub boost_preemptions: u64,
    /// Boosts a policy applied on a NIC acknowledgement (`on_ack`, CC's sender boost).
    pub ack_boosts: u64,
    /// Messages sent by the rendezvous protocol (the others are eager).
    pub rendezvous: u64,
    /// Gang slot switches (each one idles every node for the switch cost).
    pub gang_switches: u64,
    /// Flexible gang: running processes preempted by a process woken by its disk
    /// completion (`io_preempt`).
    pub gang_io_preemptions: u64,
    /// Node-policy actions refused because they could not apply ([`ActionError`]).
    pub action_errors: ActionErrorCounts,
}

/// Everything a process-level run produces.
#[derive(Clone, Debug)]
pub struct ProcOutput {
    pub jobs: Vec<ProcJobRecord>,
    pub counters: ProcCounters,
    /// Busy CPU time per node (useful, spinning and context switches).
    pub node_busy_ns: Vec<i64>,
    /// The job of each process (indexed by pid). Pids are given as processes start, so a job
    /// started ahead of an earlier one (backfilling, non-strict FIFO) has the lower pids: read a
    /// process's job here, never from its pid.
    pub proc_job: Vec<usize>,
    /// CPU time of each process (indexed by pid).
    pub proc_cpu_ns: Vec<i64>,
    pub proc_spin_ns: Vec<i64>,
    /// Compute time each process asked for (after noise and drawn bursts).
    pub proc_compute_ns: Vec<i64>,
    /// When each process finished its program (or was stopped, for a background process).
    pub proc_end: Vec<SimTime>,
    /// The per-node timeline, when [`ProcOptions::record_timeline`] is set.
    pub timeline: Vec<Segment>,
    pub end: SimTime,
    /// What the run's observers measured ([`super::observe`]): the priority
    /// inversion (every run), the gang fragment time and gangedness estimates
    /// (gang mode) and the perturbation records (when the slot policy perturbs),
    /// each under its name.
    pub measures: Measures,
}

impl Sim<'_> {
    /// The run's output, after its end-of-run checks; background jobs that never
    /// started (every foreground job ended first) get an empty record at the end.
    pub(super) fn finish(mut self) -> Result<ProcOutput, super::ProcError> {
        // Background jobs that never started (every foreground job ended first).
        let end = self.q.now();
        for r in self.records.iter_mut().filter(|r| r.is_none()) {
            *r = Some(ProcJobRecord {
                start: end,
                end,
                nodes: Vec::new(),
            });
        }
        self.check_invariants()?;
        let measures = self.observed();
        let node_busy_ns = self
            .nodes
            .iter()
            .map(|n| n.cpus.iter().map(|c| c.busy_ns).sum())
            .collect();
        Ok(ProcOutput {
            jobs: self
                .records
                .into_iter()
                .map(|r| r.expect("every job ended"))
                .collect(),
            counters: self.counters,
            node_busy_ns,
            proc_job: self.procs.iter().map(|p| p.job).collect(),
            proc_cpu_ns: self.procs.iter().map(|p| p.cpu_ns).collect(),
            proc_spin_ns: self.procs.iter().map(|p| p.spin_ns).collect(),
            proc_compute_ns: self.procs.iter().map(|p| p.compute_ns).collect(),
            proc_end: self.procs.iter().map(|p| p.end).collect(),
            timeline: self.timeline.unwrap_or_default(),
            end: self.q.now(),
            measures,
        })
    }
}
