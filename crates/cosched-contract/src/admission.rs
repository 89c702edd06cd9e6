//! The process-level cluster contract, admission part: which queued job starts
//! when, and on which nodes. An [`AdmissionPolicy`] receives the jobs' arrivals
//! and ends ([`AdmissionEvent`]) and answers by starting jobs through an
//! [`AdmissionControl`], which the mechanism (the simulator's process engine,
//! a real-execution controller) implements: it reads the machine's state and
//! carries out each start at once, so the next question the policy asks sees it.
//! Every start is validated; a start that cannot apply is an
//! [`AdmissionError`], never a silent no-op.
//!
//! The reference admission, first come first served under the
//! multiprogramming level, is rule code, not contract: `cosched_rules::admission::Fcfs`.

use cosched_des::SimTime;
use thiserror::Error;

/// What an admission policy is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdmissionEvent {
    /// Job `j` was submitted and waits for admission.
    Arrived(usize),
    /// Every process of job `j` has ended.
    Ended(usize),
    /// The wake-up the policy asked for with [`AdmissionControl::wake_at`] fired.
    Timer,
}

/// A start the mechanism refused.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum AdmissionError {
    #[error("job {0} cannot start: it is not waiting for admission")]
    NotQueued(usize),
    #[error("job {job} cannot start: node {node} does not exist or has no room for it")]
    NoRoom { job: usize, node: u32 },
    #[error("job {job} needs {need} nodes, {offered} offered")]
    TooFew { job: usize, need: u32, offered: u32 },
    #[error("admission policy: {0}")]
    Policy(String),
    #[error("wake-up at {at} is before now ({now})")]
    WakeInPast { at: SimTime, now: SimTime },
    #[error("this mechanism has no admission timer (wake-up at {0} asked)")]
    NoTimer(SimTime),
    /// A decision of a hosted job-level policy that has no process-level meaning
    /// or does not fit the machine (`process::hosted` in cosched-policies).
    #[error("{policy}: decision {decision} cannot apply at process level: {why}")]
    Refused {
        policy: String,
        decision: String,
        why: String,
    },
}

/// The machine as an admission policy sees it, and the one decision it makes.
pub trait AdmissionControl {
    fn now(&self) -> SimTime;
    /// Nodes of the machine.
    fn nodes(&self) -> u32;
    /// Nodes job `j` needs (its processes over its processes per node).
    fn nodes_needed(&self, job: usize) -> u32;
    /// The nodes with room for job `j`'s processes of one node: under the
    /// multiprogramming level, and beside the others' memory when admission is
    /// memory-aware. Ascending.
    fn eligible(&self, job: usize) -> Vec<u32>;
    /// The nodes that hold no process. Ascending.
    fn idle(&self) -> Vec<u32>;
    /// Starts job `j` now on [`Self::nodes_needed`] of `among` (each with room
    /// for it), chosen by the run's placement rule; its consecutive ranks go
    /// together on a node.
    fn start(&mut self, job: usize, among: &[u32]) -> Result<(), AdmissionError>;
    /// Asks for an [`AdmissionEvent::Timer`] at `at` (no earlier than now; `at ==
    /// now` delivers it after the current call, at this instant). The timer is
    /// the last event of its instant: the policy has been told of every arrival
    /// and end at `at` before it. One wake-up
    /// is pending at a time, as with the job-level `Decision::WakeAt`: an
    /// earlier request replaces a later pending one, a request no earlier than
    /// the pending one is dropped (that one fires first), and a policy asks
    /// again after each timer. The timer does not keep a run alive: it ends
    /// when every foreground job has. A mechanism without a timer answers
    /// [`AdmissionError::NoTimer`] (the default).
    fn wake_at(&mut self, at: SimTime) -> Result<(), AdmissionError> {
        Err(AdmissionError::NoTimer(at))
    }
}

/// A process-level admission policy. Built once per run by the mechanism, in
/// the thread that runs it (not required to be `Send`, so that any job-level
/// policy can be hosted, [`crate::cluster::ClusterPolicy`] has no such bound).
pub trait AdmissionPolicy {
    /// Canonical name, e.g. `"fcfs"`.
    fn name(&self) -> String;
    /// Called with the events of one instant (arrivals in submission order);
    /// starts the jobs to start now.
    fn on_events(
        &mut self,
        events: &[AdmissionEvent],
        ctl: &mut dyn AdmissionControl,
    ) -> Result<(), AdmissionError>;
    /// State dump for the stall report (default: empty).
    fn dump(&self) -> String {
        String::new()
    }
}
