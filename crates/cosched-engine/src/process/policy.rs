//! The node-level policy contract: the seeds' SchedAsst module in the shape of
//! Linux's sched_class / sched_ext ops.
//!
//! Every op is optional (has a default). The engine calls them at the documented
//! moments; a policy answers with [`NodeAction`]s or a recommendation, and the
//! node's native scheduler ([`crate::os`]) keeps the final word: it follows a
//! recommendation or honours a boost only as far as its fairness rule allows.
//! A policy never changes engine state itself.

use crate::os::Pid;
use cosched_des::SimTime;

/// What a process is waiting for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitKind {
    /// A blocking receive (the receiver side of the seeds' Table 1).
    Recv,
    /// The NIC's acknowledgement of a blocking send (the sender side).
    SendAck,
    /// Completion of outstanding non-blocking operations (`Wait`).
    Completion,
}

/// How a process waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitMode {
    /// Busy-wait on the CPU until the condition holds (or the OS preempts it).
    Spin,
    /// Busy-wait up to this long, then block until woken by the NIC interrupt.
    SpinBlock(SimTime),
    /// Give up the CPU at once; woken by the NIC interrupt.
    Block,
}

/// What a policy asks the node to do.
///
/// A boost takes effect at once: if the boosted process is runnable and every
/// CPU of the node is busy, the engine applies the native scheduler's wake-up
/// preemption rule (`should_preempt`, which counts the boost only as far as the
/// model's fairness rule allows) against the running processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeAction {
    /// Raise a process's priority until [`NodeAction::Unboost`] (HYBRID's
    /// collective boost).
    Boost(Pid),
    /// Raise a process's priority until it next gets a CPU (DCS, PB, CC): the
    /// engine restores it when the process is dispatched.
    BoostUntilRun(Pid),
    /// Restore a process's priority.
    Unboost(Pid),
    /// The NIC raises an interrupt for a process that is not running (DCS's and
    /// CC's notification). It costs the platform's `interrupt_us` of CPU, charged
    /// to that process (paid when it next runs) and counted in
    /// `ProcCounters::policy_interrupts`. When the message that caused it also
    /// wakes the process from blocking, the wake-up's interrupt is this one: it is
    /// charged and counted once, as a wake-up. Ignored for a running process.
    Interrupt(Pid),
}

/// What a policy may read about its node.
pub trait NodeView {
    fn now(&self) -> SimTime;
    /// Processes placed on this node (running, runnable or sleeping).
    fn processes(&self) -> &[Pid];
    /// Whether `p` is on a CPU right now.
    fn is_running(&self, p: Pid) -> bool;
    /// Messages that arrived for `p` and are not consumed yet.
    fn unconsumed(&self, p: Pid) -> usize;
}

/// A node-level scheduling policy. One instance per node.
pub trait NodePolicy: Send {
    /// Canonical name with parameters.
    fn name(&self) -> String;

    /// How a process of this node waits for `kind`. Default: spin (NLS).
    fn wait_mode(&self, _kind: WaitKind) -> WaitMode {
        WaitMode::Spin
    }

    /// SchedAsst's recommendation for a free CPU (the native scheduler checks it).
    fn recommend(&mut self, _view: &dyn NodeView) -> Option<Pid> {
        None
    }

    /// A message arrived in `p`'s buffer; `running` tells whether `p` is on a CPU.
    fn on_message(
        &mut self,
        _view: &dyn NodeView,
        _p: Pid,
        _running: bool,
        _out: &mut Vec<NodeAction>,
    ) {
    }

    /// `p` starts waiting for `kind`.
    fn on_wait_begin(
        &mut self,
        _view: &dyn NodeView,
        _p: Pid,
        _kind: WaitKind,
        _out: &mut Vec<NodeAction>,
    ) {
    }

    /// `p` enters (`enter == true`) or leaves a collective operation.
    fn on_collective(
        &mut self,
        _view: &dyn NodeView,
        _p: Pid,
        _enter: bool,
        _out: &mut Vec<NodeAction>,
    ) {
    }

    /// Period of [`NodePolicy::on_timer`], if the policy has a periodic mechanism.
    fn period(&self) -> Option<SimTime> {
        None
    }

    /// The periodic mechanism (PB's endpoint scan, CC's most-messages pick).
    fn on_timer(&mut self, _view: &dyn NodeView, _out: &mut Vec<NodeAction>) {}

    /// Internal state, for the engine's stall report.
    fn dump(&self) -> String {
        String::new()
    }
}
