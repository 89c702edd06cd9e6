//! The cluster-policy contract.
//!
//! The engine calls [`ClusterPolicy::on_events`] with each batch of events of a
//! simulated instant, in delivery order (completions first, then submissions in
//! submit order, then the timer). An instant normally makes one call; it makes
//! more when a decision creates new events at the same instant (a zero-length
//! job's completion, a wake-up requested for now). The
//! policy answers by pushing [`Decision`]s; the engine applies them in order,
//! stopping the run with a [`DecisionError`] at the first invalid one. A
//! policy never mutates engine state itself; it keeps its own bookkeeping
//! (queue, reservations) from the events it receives and the decisions it makes.

use cosched_des::SimTime;
use cosched_model::{JobId, JobSpec};
use thiserror::Error;

/// Something that happened at the current instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A job arrived and waits in the policy's queue.
    Submitted(JobId),
    /// A running job finished its work and released its processors.
    Completed(JobId),
    /// A running job was killed at its estimate and released its processors.
    Killed(JobId),
    /// A wake-up requested by [`Decision::WakeAt`] fired.
    Timer,
}

/// What a policy asks the engine to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Start a queued job now; the engine places it with the run's placement rule.
    Start(JobId),
    /// Start a queued job now on exactly these processors.
    StartOn(JobId, Vec<u32>),
    /// Refuse a queued job; it ends with status `rejected` and is not simulated.
    Reject(JobId),
    /// Deliver an [`Event::Timer`] at this time (no earlier than now). One wake-up is
    /// pending at a time: an earlier request replaces a later pending one, and a request
    /// later than the pending one is dropped, so a policy asks again after each timer.
    WakeAt(SimTime),
}

/// Why the engine refused a decision.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DecisionError {
    #[error("job index {0} does not exist")]
    UnknownJob(u32),
    #[error("job {job} is not waiting in the queue (state: {state})")]
    NotQueued { job: i64, state: &'static str },
    #[error("job {job} needs {need} processors but only {free} are free")]
    InsufficientProcessors { job: i64, need: u32, free: u32 },
    #[error("job {job}: processor {proc} is busy")]
    ProcessorBusy { job: i64, proc: u32 },
    #[error("job {job}: processor {proc} does not exist (the machine has {total})")]
    NoSuchProcessor { job: i64, proc: u32, total: u32 },
    #[error("job {job}: {given} processors given, {need} needed")]
    WrongProcessorCount { job: i64, given: usize, need: u32 },
    #[error("wake-up at {at} is before now ({now})")]
    WakeInPast { at: SimTime, now: SimTime },
}

/// Read-only view of the engine state offered to policies.
pub trait ClusterView {
    /// The current instant.
    fn now(&self) -> SimTime;
    /// Processors in the machine.
    fn total_procs(&self) -> u32;
    /// Processors free right now (before this call's decisions are applied).
    fn free_procs(&self) -> u32;
    /// A job's specification (procs, estimate, submit...).
    fn job(&self, id: JobId) -> &JobSpec;
    /// Start time of a running or finished job.
    fn start_time(&self, id: JobId) -> Option<SimTime>;
}

/// A cluster-level scheduling policy. See the module documentation for the protocol.
pub trait ClusterPolicy {
    /// The policy's canonical name with parameters, e.g. `easy` or `fcfs`.
    fn name(&self) -> String;
    /// Reacts to the events of one instant by pushing decisions to `out`.
    fn on_events(&mut self, events: &[Event], view: &dyn ClusterView, out: &mut Vec<Decision>);
    /// A human-readable dump of the policy's internal state, for debugging and
    /// for the engine's stall report.
    fn dump(&self) -> String {
        String::new()
    }
}
