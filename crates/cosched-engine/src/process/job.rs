//! The input of a process-level run: a job ([`ProcJob`]: its program, submit
//! time, background flag, ranks per node and niceness) and the run's options
//! ([`ProcOptions`]).

use super::admit;
#[allow(unused_imports)] // named by the doc links
use super::ProcOutput;
use cosched_des::SimTime;
use cosched_model::program::Program;
use cosched_model::Placement;

/// A job of the process-level model.
#[derive(Clone, Debug)]
pub struct ProcJob {
    pub program: Program,
    pub submit: SimTime,
    /// A background job (a competing load): stopped by the engine when every
    /// foreground job has finished; it never keeps the run going.
    pub background: bool,
    /// Consecutive ranks placed on the same node (1: one rank per node). With
    /// `k`, ranks `0..k` share the first chosen node, `k..2k` the second, and so
    /// on (seed 002's "two application threads per node"). FCFS admission only.
    pub ranks_per_node: u32,
    /// Nice value of the job's processes, -20 to 19 (0: the default priority), as
    /// each native scheduler model maps it ([`crate::os`]).
    pub nice: i32,
}

impl ProcJob {
    /// A foreground job.
    pub fn new(program: Program, submit: SimTime) -> Self {
        Self {
            program,
            submit,
            background: false,
            ranks_per_node: 1,
            nice: 0,
        }
    }

    /// The same job with `k` consecutive ranks per node ([`ProcJob::ranks_per_node`]).
    pub fn with_ranks_per_node(mut self, k: u32) -> Self {
        self.ranks_per_node = k;
        self
    }

    /// Nodes the job occupies: its processes divided by `ranks_per_node`, rounded up.
    pub fn nodes_needed(&self) -> u32 {
        self.program.size().div_ceil(self.ranks_per_node.max(1))
    }

    /// A background job (see [`ProcJob::background`]).
    pub fn background(program: Program, submit: SimTime) -> Self {
        Self {
            program,
            submit,
            background: true,
            ranks_per_node: 1,
            nice: 0,
        }
    }

    /// The same job with nice value `nice` ([`ProcJob::nice`]).
    pub fn with_nice(mut self, nice: i32) -> Self {
        self.nice = nice;
        self
    }
}

/// Default of [`ProcOptions::time_limit`], in simulated seconds (about 116 days).
pub const DEFAULT_TIME_LIMIT_S: i64 = 10_000_000;
/// Default of [`ProcOptions::event_limit`]: about 10 to 20 minutes of a run on one core.
pub const DEFAULT_EVENT_LIMIT: u64 = 2_000_000_000;

/// Options of a process-level run.
#[derive(Clone, Debug)]
pub struct ProcOptions {
    /// Most processes per node (multiprogramming level).
    pub mpl: u32,
    pub placement: Placement,
    pub seed: u64,
    /// Admit a job only where its processes' memory fits beside the others'.
    pub memory_aware: bool,
    /// Record the per-node timeline ([`ProcOutput::timeline`]).
    pub record_timeline: bool,
    /// The run stops with an error past this simulated time (a watchdog for
    /// programs that spin forever).
    pub time_limit: SimTime,
    /// The run stops with an error after this many events (a watchdog for runs
    /// whose parameters make them far longer than intended).
    pub event_limit: u64,
    /// Gang mode: the slot policy that decides the slots instead of FCFS
    /// admission under `mpl` ([`super::slots`];
    /// `cosched_policies::process::gang::factory`, or
    /// `cosched_policies::process::perturb::factory` for the perturbation
    /// harness of seed 003). The policy carries its gang parameters
    /// (`SlotPolicy::gang`: rows, quantum, switch cost, flexible options), the
    /// one source the engine's setup checks and observers read.
    pub slots: Option<cosched_contract::slots::SlotFactory>,
    /// The admission policy outside gang mode ([`admit`]; `None`: the
    /// reference strict FCFS under `mpl`, `cosched_rules::admission::Fcfs`).
    pub admission: Option<admit::AdmissionFactory>,
    /// Measure each job's wait time ([`super::wait_time`]). Off by default:
    /// it follows every wait of the run.
    pub measure_waits: bool,
}

impl Default for ProcOptions {
    fn default() -> Self {
        Self {
            mpl: 1,
            placement: Placement::Packing,
            seed: 0,
            memory_aware: false,
            record_timeline: false,
            time_limit: SimTime::from_secs(DEFAULT_TIME_LIMIT_S),
            event_limit: DEFAULT_EVENT_LIMIT,
            slots: None,
            admission: None,
            measure_waits: false,
        }
    }
}
