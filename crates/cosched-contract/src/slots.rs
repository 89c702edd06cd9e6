//! The process-level cluster contract, time-slot part: which job's processes
//! the nodes' CPUs run, slot by slot (gang scheduling, its flexible options,
//! any scheme that coordinates the nodes' CPUs across the machine).
//!
//! A [`SlotPolicy`] decides; the mechanism (the simulator's process engine, a
//! real-execution coordinator) carries out. The policy is a table of ops, each
//! with a default, each called at one documented moment (like `sched_ext`'s
//! operations). Events in: a job arrives ([`SlotPolicy::on_arrival`]), a
//! process or job ends, the slot timer fires, a global switch is over, a
//! process wakes from its disk I/O or blocks, a process gives its CPU up
//! (a measurement of how long it held it). Decisions out ([`SlotDecision`]):
//! admit a job on these nodes, run this row's slot until `T`, switch (take
//! every CPU back and idle), stop the cycle, wake me at `T`; per node, which
//! process an idle CPU runs ([`SlotPolicy::pick`]: the active row's, or a
//! fragment lent to another row's process) and which CPU a woken process takes
//! at once ([`SlotPolicy::on_wake`]: an I/O interrupt, or the owner of a lent
//! column taking it back).
//!
//! The policy reads the machine through a read-only [`SlotView`], and shows
//! its matrix to the mechanism's observers (the perturbation bookkeeping, the
//! gangedness estimator) through the read-only [`MatrixView`], its gang
//! parameters through [`SlotPolicy::gang`] and, when it perturbs the schedule,
//! its perturbations through [`PerturbView`]. The observers measure and never
//! decide; what they measure that a policy uses comes back to it as a
//! measurement op ([`SlotPolicy::on_gangedness`]).
//!
//! The mechanism validates every decision: a decision it cannot carry out (a
//! job that is not waiting, a node that does not exist or lacks the memory, a
//! process that has finished or is on another node, a CPU that runs nothing)
//! is a [`SlotError`] that stops the run, never a silent no-op.
//!
//! Order of the ops at one instant, as the mechanism guarantees it:
//! - an arrival: `on_arrival`, then [`SlotPolicy::next`] until `None`;
//! - a job's end: `on_process_end` of its last process, `on_job_end`, then
//!   `next` until `None` (the admissions the end allows, then any re-plan);
//! - after each [`SlotDecision::Admit`] carried out, `on_started` with the
//!   job's processes and nodes, then its processes are started;
//! - before the run: [`SlotPolicy::gang`] and [`SlotPolicy::check_job`] of
//!   every job (the setup checks);
//! - the slot timer: `on_slot_timer`; after a [`SlotDecision::Switch`] every
//!   CPU is taken back (each one's `on_ran`), then `on_gangedness` for each
//!   job whose estimated class changed in the slot, and when the idle time is
//!   over, `on_switch_done`.

use crate::admission::AdmissionError;
use crate::node::Pid;
use crate::process::{GangClass, GangParams};
use cosched_des::SimTime;
use std::sync::Arc;
use thiserror::Error;

/// A decision of a [`SlotPolicy`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotDecision {
    /// Start waiting job `job` now on its nodes among `among` (ascending; the
    /// mechanism chooses which by the run's placement rule, its consecutive
    /// ranks together on a node). Followed by [`SlotPolicy::on_started`].
    Admit { job: usize, among: Vec<u32> },
    /// Row `row`'s slot runs from now; the slot timer fires at `until` (the
    /// pending one is cancelled). The mechanism then fills every idle CPU
    /// through [`SlotPolicy::pick`].
    Run { row: usize, until: SimTime },
    /// The slot timer fires at `at` (the pending one is cancelled).
    WakeAt(SimTime),
    /// The global switch: every CPU of the machine is taken back now and every
    /// node idles for `idle`; then [`SlotPolicy::on_switch_done`].
    Switch { idle: SimTime },
    /// The cycle stops: no slot runs and no slot timer is pending, until the
    /// policy answers [`SlotDecision::Run`] again.
    Stop,
}

/// A CPU the mechanism takes at once for a woken process
/// ([`SlotPolicy::on_wake`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interrupt {
    /// The CPU of the woken process's node (its index in
    /// [`SlotView::running`]).
    pub cpu: u32,
    /// Whether it is an I/O interrupt (the woken process has I/O priority),
    /// counted apart from an owner taking its lent column back.
    pub io: bool,
}

/// A decision the mechanism refused.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum SlotError {
    /// An [`SlotDecision::Admit`] the mechanism cannot carry out (a job not
    /// waiting, a node that does not exist, is offered twice or lacks the
    /// memory, too few nodes).
    #[error(transparent)]
    Start(#[from] AdmissionError),
    #[error("process {pid} cannot run on node {node}: it has finished, is not runnable or lives on another node")]
    NotRunnable { pid: Pid, node: u32 },
    #[error("CPU {cpu} of node {node} cannot be interrupted: it does not exist or runs nothing")]
    NoVictim { node: u32, cpu: u32 },
    #[error("row {row} does not exist: the matrix has {rows} rows")]
    NoRow { row: usize, rows: usize },
    #[error("slot decision {0} is not allowed here")]
    Misplaced(String),
    #[error("slot timer at {at} is in the past (now {now})")]
    Past { at: SimTime, now: SimTime },
    #[error("slot policy: {0}")]
    Policy(String),
}

/// The machine as a slot policy sees it (read only).
pub trait SlotView {
    fn now(&self) -> SimTime;
    /// Nodes of the machine.
    fn nodes(&self) -> u32;
    /// CPUs per node.
    fn cpus(&self) -> u32;
    /// Nodes job `job` needs (its processes over its processes per node).
    fn nodes_needed(&self, job: usize) -> u32;
    /// Processes of job `job` per node.
    fn ranks_per_node(&self, job: usize) -> u32;
    /// The application of job `job` (its program's name before any `[`).
    fn app(&self, job: usize) -> String;
    /// Whether node `node` has the memory for job `job`'s processes of one
    /// node (always true unless admission is memory-aware).
    fn fits_memory(&self, job: usize, node: u32) -> bool;
    /// Whether process `pid` may be given a CPU now (ready, not paging in).
    fn runnable(&self, pid: Pid) -> bool;
    /// What each CPU of `node` runs.
    fn running(&self, node: u32) -> Vec<Option<Pid>>;
}

/// A policy's matrix as the mechanism's observers read it.
pub trait MatrixView {
    /// Rows (time slots) of the matrix.
    fn rows(&self) -> usize;
    /// The active row, `None` while the cycle is stopped.
    fn active(&self) -> Option<usize>;
    /// Row of job `job`, once placed.
    fn row_of(&self, job: usize) -> Option<usize>;
    /// The first job and process in `row` on `node`.
    fn cell(&self, row: usize, node: u32) -> Option<(usize, Pid)>;
    /// The jobs in the matrix with their processes (ascending).
    fn placed(&self) -> Vec<(usize, Vec<Pid>)>;
}

/// What a perturbing policy (seed 003 §4's harness) changes, as the
/// mechanism's observers read it. The perturbed ranks of a slot are fixed when
/// the slot starts ([`SlotDecision::Run`]) and hold until the next one starts:
/// an observer reads them at any moment of the slot and at its end (the
/// global switch).
pub trait PerturbView {
    /// The measured job.
    fn target(&self) -> usize;
    /// The ranks of the target whose processor the current slot perturbs
    /// (empty: the slot is not perturbed).
    fn perturbed(&self) -> &[u32];
    /// Perturbations that took effect so far (each perturbed rank of a slot
    /// counts one).
    fn applied(&self) -> u32;
    /// Perturbations planned.
    fn planned(&self) -> u32;
}

/// A process-level slot policy. Every op has a default; a policy overrides
/// those it needs.
pub trait SlotPolicy: Send {
    /// Canonical name, e.g. `"gang"`.
    fn name(&self) -> String;

    /// Job `job` was submitted and waits for admission (arrivals of one
    /// instant in submission order). Decisions come from [`Self::next`].
    fn on_arrival(&mut self, _job: usize, _v: &dyn SlotView) {}

    /// Asked after arrivals and job ends, again after each decision is carried
    /// out, until `None`: the next decision of this instant (an
    /// [`SlotDecision::Admit`], or a re-plan such as ending an emptied slot
    /// with [`SlotDecision::WakeAt`] now).
    fn next(&mut self, _v: &dyn SlotView) -> Option<SlotDecision> {
        None
    }

    /// Job `job`, admitted by the last [`SlotDecision::Admit`], starts now:
    /// process `first + k` on node `nodes[k]`. Answers the slot decisions the
    /// start implies (e.g. [`SlotDecision::Run`] when the cycle was stopped).
    fn on_started(
        &mut self,
        _job: usize,
        _first: Pid,
        _nodes: &[u32],
        _v: &dyn SlotView,
    ) -> Vec<SlotDecision> {
        Vec::new()
    }

    /// Process `pid` finished its program (it holds no CPU).
    fn on_process_end(&mut self, _pid: Pid) {}

    /// Every process of job `job` has ended: its resources are free.
    fn on_job_end(&mut self, _job: usize, _v: &dyn SlotView) {}

    /// The slot timer fired. Answers [`SlotDecision::Switch`],
    /// [`SlotDecision::Stop`], [`SlotDecision::Run`] or nothing.
    fn on_slot_timer(&mut self, _v: &dyn SlotView) -> Vec<SlotDecision> {
        Vec::new()
    }

    /// The global switch is over (every CPU idle). Answers
    /// [`SlotDecision::Run`] (the next slot) or [`SlotDecision::Stop`].
    fn on_switch_done(&mut self, _v: &dyn SlotView) -> Vec<SlotDecision> {
        vec![SlotDecision::Stop]
    }

    /// Process `pid` was woken by its disk completion.
    fn on_io_wake(&mut self, _pid: Pid) {}

    /// Process `pid` gave its CPU up to sleep.
    fn on_block(&mut self, _pid: Pid) {}

    /// Measurement: process `pid` of job `job` held a CPU for `ran` until now
    /// (called whenever a process gives a CPU up).
    fn on_ran(&mut self, _pid: Pid, _job: usize, _ran: SimTime) {}

    /// The process an idle CPU of `node` runs now (outside a switch), or
    /// `None` to leave it idle. It must be runnable and live on `node`.
    fn pick(&self, _node: u32, _v: &dyn SlotView) -> Option<Pid> {
        None
    }

    /// Process `pid` of `node` became runnable (woken): the CPU it takes at
    /// once from the process running there, if any (outside a switch).
    fn on_wake(&self, _pid: Pid, _node: u32, _v: &dyn SlotView) -> Option<Interrupt> {
        None
    }

    /// Measurement: the mechanism's online gangedness estimator (seed 003
    /// §5.2, configured by [`Self::gang`]'s flexible options) classified job
    /// `job` as `class`. Called at the end of a slot (after its global switch
    /// has taken every CPU back), for each job whose class changed; a job not
    /// classified yet is [`GangClass::Unknown`].
    fn on_gangedness(&mut self, _job: usize, _class: GangClass) {}

    /// The policy's matrix, for the mechanism's observers (`None`: no matrix).
    fn matrix(&self) -> Option<&dyn MatrixView> {
        None
    }

    /// The gang parameters the policy runs with: its matrix's rows (the
    /// multiprogramming level), slot quantum, switch cost and flexible options
    /// (`None`: none; the mechanism then assumes no switch cost and the
    /// estimator's defaults). Read by the mechanism once before the run (its
    /// setup checks) and by its observers (the gangedness estimator's quantum
    /// and classification parameters, the switch-cost invariant): the one
    /// source of the run's gang geometry.
    fn gang(&self) -> Option<&GangParams> {
        None
    }

    /// Before the run starts, once per job of the run (in job order): whether
    /// the policy can schedule job `job` of `ranks` processes. An `Err`
    /// (its message names what is wrong) refuses the run's input.
    fn check_job(&self, _job: usize, _ranks: u32) -> Result<(), String> {
        Ok(())
    }

    /// A perturbing policy's perturbations, for the mechanism's observers
    /// (`None`: the policy perturbs nothing).
    fn perturbation(&self) -> Option<&dyn PerturbView> {
        None
    }

    /// State dump for the stall report (default: empty).
    fn dump(&self) -> String {
        String::new()
    }
}

/// What a slot policy is built for: the machine and the run's jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotSetup {
    pub nodes: u32,
    pub cpus: u32,
    pub jobs: usize,
}

/// Builds the slot policy of each run.
#[derive(Clone)]
pub struct SlotFactory(pub Arc<dyn Fn(SlotSetup) -> Box<dyn SlotPolicy> + Send + Sync>);

impl SlotFactory {
    pub fn new(f: impl Fn(SlotSetup) -> Box<dyn SlotPolicy> + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    pub fn build(&self, setup: SlotSetup) -> Box<dyn SlotPolicy> {
        (self.0)(setup)
    }
}

impl std::fmt::Debug for SlotFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let setup = SlotSetup {
            nodes: 1,
            cpus: 1,
            jobs: 0,
        };
        write!(f, "SlotFactory({})", self.build(setup).name())
    }
}

impl PartialEq for SlotFactory {
    fn eq(&self, o: &Self) -> bool {
        Arc::ptr_eq(&self.0, &o.0)
    }
}
