//! The node-level policy contract: the seeds' SchedAsst module in the shape of
//! Linux's sched_class / sched_ext ops.
//!
//! Every op is optional (has a default). The engine calls them at the documented
//! moments; a policy answers with [`NodeAction`]s or a recommendation, and the
//! node's native scheduler (the engine's OS model) keeps the final word: it follows a
//! recommendation or honours a boost only as far as its fairness rule allows.
//! A policy never changes engine state itself.
//!
//! The ops, in the order of a process's life (sched_ext's names in brackets):
//!
//! | op | called when | answer |
//! |---|---|---|
//! | [`enqueue`](NodePolicy::enqueue) (`runnable`) | a process becomes runnable: admitted, woken by the NIC interrupt, its disk burst or page-in done | actions, deferred |
//! | [`recommend`](NodePolicy::recommend) (`dispatch`) | a CPU of the node is free and the native scheduler is about to pick | a process, checked by the native scheduler's fairness rule |
//! | [`running`](NodePolicy::running) (`running`) | a process is dispatched on a CPU | actions, deferred |
//! | [`tick`](NodePolicy::tick) (`tick`) | the node's OS timer ticks (the OS model's timer period) while it holds processes | actions, at once |
//! | [`on_message`](NodePolicy::on_message) | a message lands in a process's buffer | actions, at once |
//! | [`on_ack`](NodePolicy::on_ack) | the NIC acknowledgement of a blocking send comes back to its sender | actions, at once |
//! | [`wait_mode`](NodePolicy::wait_mode) | a running process starts waiting | how it waits (spin, spin then block, block) |
//! | [`on_wait_begin`](NodePolicy::on_wait_begin) | a running process starts waiting, right after `wait_mode` | actions, at the next scheduling point |
//! | [`on_wait_end`](NodePolicy::on_wait_end) | a wait told to `on_wait_begin` ends: its message, acknowledgement or completion is there | actions, at the next scheduling point (deferred when the process notices it as it is dispatched) |
//! | [`on_collective`](NodePolicy::on_collective) | a running process enters or leaves a collective | actions, at the next scheduling point |
//! | [`stopping`](NodePolicy::stopping) (`stopping`) | a process is taken off its CPU, with the reason | actions, deferred |
//! | [`dequeue`](NodePolicy::dequeue) (`quiescent`) | a process leaves the runnable set: it blocks, starts a disk burst, waits for a page-in, ends | actions, deferred |
//! | [`on_timer`](NodePolicy::on_timer) | every [`period`](NodePolicy::period) while the node holds processes | actions, at once |
//! | [`dump`](NodePolicy::dump) | the run stops on a deadlock or at its time limit | text for the error message |
//!
//! "At once": a boost of a runnable process goes through the native scheduler's
//! wake-up preemption rule immediately and the node is rescheduled. "At the next
//! scheduling point": the priority changes now, the node is rescheduled, nothing is
//! preempted. "Deferred": the priority changes now but the engine neither preempts
//! nor reschedules (these ops run in the middle of a CPU hand-over); the change
//! counts at the node's next scheduling decision.
//!
//! The runnable set holds the processes that are ready or running (Linux's
//! runqueue, sched_ext's "runnable"): a process preempted or at the end of its
//! slice stays in it ([`stopping`](NodePolicy::stopping) with
//! [`Stop::Preempted`] or [`Stop::Expired`], no `dequeue`),
//! one that blocks leaves it (`stopping` with [`Stop::Blocked`], then
//! `dequeue`). Per process: `enqueue` and `dequeue` alternate, starting with
//! `enqueue(Admitted)` and ending with `dequeue(Finished)` (a background process
//! stopped by the engine ends with `dequeue(Stopped)` if it was runnable then, and
//! with its last `dequeue` if it was blocked); `running` and `stopping` alternate
//! between them.
//!
//! Cost: `enqueue`, `dequeue`, `running`, `stopping`, `tick`, `on_ack` and
//! `on_wait_end` are called only when the policy declares them in
//! [`NodePolicy::ops`], so a policy that does not use them costs nothing on
//! these paths. A policy must declare exactly the ops among them that it
//! implements: [`undeclared_ops`] finds the others, and the registry's tests
//! run it on every registered policy.
//!
//! Actions that cannot apply (a process of another node, one that has ended,
//! a spin change for a process that is not spinning in a wait) are answered
//! with an [`ActionError`]: the mechanism counts them by kind and reports them
//! (the process-level summary's `policy_action_errors`); it never drops one
//! silently.

use cosched_des::SimTime;
use std::cell::Cell;
use thiserror::Error;

/// A process, as the node's scheduler knows it (dense per run).
pub type Pid = u32;

/// Why a running process stops running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Preempted by another process (it goes back to the runnable set).
    Preempted,
    /// Its slice ran out (it goes back to the runnable set).
    Expired,
    /// It blocks (sleeps) until woken.
    Blocked,
}

/// What a process is waiting for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitKind {
    /// A blocking receive (the receiver side of the seeds' Table 1).
    Recv,
    /// The NIC's acknowledgement of a blocking send (the sender side).
    SendAck,
    /// A `Wait` with at least one posted non-blocking receive whose message has
    /// not arrived yet (the receive completion queue of seed 000 §3).
    RecvCompletion,
    /// A `Wait` whose posted receives (if any) have their messages buffered
    /// already: only non-blocking sends are still being transmitted (the send
    /// completion queue of seed 000 §3).
    SendCompletion,
}

impl WaitKind {
    /// Whether the wait is on the receiving side (a receive or a receive completion).
    pub fn is_receive(self) -> bool {
        matches!(self, WaitKind::Recv | WaitKind::RecvCompletion)
    }
}

/// Why a process becomes runnable ([`NodePolicy::enqueue`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnqueueReason {
    /// Its job was admitted on the node.
    Admitted,
    /// The NIC interrupt woke it: a message, an acknowledgement or a send
    /// completion satisfied the wait it blocked in.
    Woken,
    /// Its disk burst ([`cosched_model::program::Op::Io`]) completed.
    IoDone,
    /// Its pages were read back from disk.
    PagedIn,
}

/// Why a process leaves the runnable set ([`NodePolicy::dequeue`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DequeueReason {
    /// It blocks in a wait of this kind (immediately, or after spinning).
    Blocked(WaitKind),
    /// It starts a disk burst and sleeps until the disk is done.
    Io,
    /// It was picked with pages missing and sleeps until they are read back.
    PageIn,
    /// Its program ended.
    Finished,
    /// A background process stopped by the engine when the foreground ended.
    Stopped,
}

bitflags::bitflags! {
    /// The optional ops a policy implements among those the engine calls only on
    /// request ([`NodePolicy::ops`]). A set of flags: combine with `|`.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct Ops: u8 {
        const ENQUEUE = 1;
        const DEQUEUE = 1 << 1;
        const RUNNING = 1 << 2;
        const STOPPING = 1 << 3;
        const TICK = 1 << 4;
        const ON_ACK = 1 << 5;
        const WAIT_END = 1 << 6;
    }
}

impl Ops {
    /// None of them (the default).
    pub const NONE: Ops = Ops::empty();
    /// Every op above.
    pub const ALL: Ops = Ops::all();
    /// Each op above with its name, in declaration order.
    pub const NAMED: [(Ops, &'static str); 7] = [
        (Ops::ENQUEUE, "enqueue"),
        (Ops::DEQUEUE, "dequeue"),
        (Ops::RUNNING, "running"),
        (Ops::STOPPING, "stopping"),
        (Ops::TICK, "tick"),
        (Ops::ON_ACK, "on_ack"),
        (Ops::WAIT_END, "on_wait_end"),
    ];
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
    /// Poll the condition in a loop that calls `sched_yield` between polls (Open
    /// MPI's `mpi_yield_when_idle`). Linux's CFS/EEVDF `yield_task_fair` returns at
    /// once when the process is alone on its run queue, and otherwise only moves it
    /// behind the other runnable tasks (EEVDF: its deadline one slice later), so:
    /// while no other process of its node is runnable it spins on its CPU; when one
    /// is (at the wait's start, or one becomes runnable while it spins) it gives up
    /// its CPU at once, without an interrupt. Off its CPU it sleeps for the native
    /// scheduler's purposes until its condition holds (it becomes runnable again
    /// without an interrupt, and notices at its next dispatch) or until a CPU of its
    /// node would be idle (it spins there again).
    Yield,
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
    /// Sets how much longer a process spinning in a wait spins before it blocks:
    /// it spins until now + the given time, then blocks (zero: it blocks at once,
    /// cutting the spin; more than its wait mode allowed: the spin is extended; a
    /// process that waits in [`WaitMode::Spin`] becomes spin-then-block). Applies
    /// to a process that waits (told to
    /// [`on_wait_begin`](NodePolicy::on_wait_begin)) and is not blocked; the
    /// change holds until the wait ends. Otherwise it is an
    /// [`ActionError::NotSpinning`]. Implicit coscheduling's conditional spin.
    SpinFor(Pid, SimTime),
}

impl NodeAction {
    /// The process the action is aimed at.
    pub fn pid(self) -> Pid {
        match self {
            NodeAction::Boost(p)
            | NodeAction::BoostUntilRun(p)
            | NodeAction::Unboost(p)
            | NodeAction::Interrupt(p)
            | NodeAction::SpinFor(p, _) => p,
        }
    }
}

/// Why a mechanism refused a [`NodeAction`].
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum ActionError {
    /// The process is not on the policy's node (or does not exist).
    #[error("process {0} is not on this node")]
    NotOnNode(Pid),
    /// The process has ended.
    #[error("process {0} has ended")]
    Finished(Pid),
    /// [`NodeAction::SpinFor`] for a process that is not spinning in a wait.
    #[error("process {0} is not spinning in a wait")]
    NotSpinning(Pid),
}

/// Refused actions by kind ([`ActionError`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ActionErrorCounts {
    pub not_on_node: u64,
    pub finished: u64,
    pub not_spinning: u64,
}

impl ActionErrorCounts {
    /// Counts one refused action.
    pub fn add(&mut self, e: ActionError) {
        match e {
            ActionError::NotOnNode(_) => self.not_on_node += 1,
            ActionError::Finished(_) => self.finished += 1,
            ActionError::NotSpinning(_) => self.not_spinning += 1,
        }
    }
    /// Every refused action.
    pub fn total(&self) -> u64 {
        self.not_on_node + self.finished + self.not_spinning
    }
}

/// What ended a wait ([`WaitEnd::by`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitEndCause {
    /// The awaited message, acknowledgement or completion arrived while the
    /// process spun on a CPU.
    Spinning,
    /// It arrived while the process was blocked: the NIC interrupt woke it.
    Woken,
    /// It arrived while the process was runnable but off its CPU (preempted
    /// while spinning); the process noticed when it was dispatched again.
    Dispatched,
}

/// How a wait went ([`NodePolicy::on_wait_end`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitEnd {
    pub kind: WaitKind,
    /// From the wait's start to now.
    pub waited: SimTime,
    /// CPU time the process spent spinning in this wait.
    pub spun: SimTime,
    /// Whether it blocked during the wait.
    pub blocked: bool,
    pub by: WaitEndCause,
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
    /// The job `p` belongs to (the mechanism's job index), if the host knows it.
    fn job_of(&self, _p: Pid) -> Option<u32> {
        None
    }
    /// How long `p` has been in its current wait (one told to
    /// [`on_wait_begin`](NodePolicy::on_wait_begin)); `None` when it does not
    /// wait or the host cannot tell.
    fn waited(&self, _p: Pid) -> Option<SimTime> {
        None
    }
    /// CPU time `p` has used so far (computing and spinning), if the host can tell.
    fn cpu_time(&self, _p: Pid) -> Option<SimTime> {
        None
    }
}

/// A node-level scheduling policy. One instance per node.
pub trait NodePolicy: Send {
    /// Canonical name with parameters.
    fn name(&self) -> String;

    /// The ops among `enqueue`, `dequeue`, `running`, `stopping`, `tick`,
    /// `on_ack` and `on_wait_end` that this policy implements: the engine calls
    /// only those (read once, when the run starts). Default: none.
    fn ops(&self) -> Ops {
        Ops::NONE
    }

    /// How `p`, running on this node, waits for `kind` (asked at the start of
    /// each wait, before [`on_wait_begin`](NodePolicy::on_wait_begin); an
    /// adaptive policy may answer from what it learnt). Default: spin (NLS).
    fn wait_mode(&mut self, _view: &dyn NodeView, _p: Pid, _kind: WaitKind) -> WaitMode {
        WaitMode::Spin
    }

    /// SchedAsst's recommendation for a free CPU, asked each time the node's native
    /// scheduler picks a process (the native scheduler checks it for fairness and
    /// may refuse it; a process that is not runnable is ignored).
    fn recommend(&mut self, _view: &dyn NodeView) -> Option<Pid> {
        None
    }

    /// `p` becomes runnable (joins the runnable set) for `why`. Called before the
    /// native scheduler queues it. Actions are deferred (module doc). Only with
    /// [`Ops::ENQUEUE`].
    fn enqueue(
        &mut self,
        _view: &dyn NodeView,
        _p: Pid,
        _why: EnqueueReason,
        _out: &mut Vec<NodeAction>,
    ) {
        default_op();
    }

    /// `p` leaves the runnable set for `why` (after [`NodePolicy::stopping`] if it
    /// was running). Actions are deferred. Only with [`Ops::DEQUEUE`].
    fn dequeue(
        &mut self,
        _view: &dyn NodeView,
        _p: Pid,
        _why: DequeueReason,
        _out: &mut Vec<NodeAction>,
    ) {
        default_op();
    }

    /// `p` was just dispatched on a CPU of the node (the view shows it running).
    /// Actions are deferred. Only with [`Ops::RUNNING`].
    fn running(&mut self, _view: &dyn NodeView, _p: Pid, _out: &mut Vec<NodeAction>) {
        default_op();
    }

    /// `p` was just taken off its CPU: preempted, at the end of its slice, or
    /// because it blocks or ends (`Stop::Blocked`, followed by
    /// [`NodePolicy::dequeue`] with the precise reason). The view no longer shows it
    /// running. Actions are deferred. Only with [`Ops::STOPPING`].
    fn stopping(&mut self, _view: &dyn NodeView, _p: Pid, _why: Stop, _out: &mut Vec<NodeAction>) {
        default_op();
    }

    /// The node's OS timer interrupt, every timer period of the node's
    /// OS model (on the same boundaries as the Linux 2.4 model's counter
    /// sampling), while the node holds processes. Actions take effect at once. Only
    /// with [`Ops::TICK`].
    fn tick(&mut self, _view: &dyn NodeView, _out: &mut Vec<NodeAction>) {
        default_op();
    }

    /// A message arrived in `p`'s buffer; `running` tells whether `p` is on a CPU.
    /// Actions take effect at once.
    fn on_message(
        &mut self,
        _view: &dyn NodeView,
        _p: Pid,
        _running: bool,
        _out: &mut Vec<NodeAction>,
    ) {
    }

    /// The NIC acknowledgement of one of `p`'s blocking sends arrived; `running`
    /// tells whether `p` is on a CPU (a sender spinning for it) or not (blocked on
    /// it, or preempted while spinning). Called before the engine checks whether
    /// the acknowledgement ends `p`'s wait (so a blocked sender is still blocked in
    /// the view). Actions take effect at once. Only with [`Ops::ON_ACK`].
    fn on_ack(
        &mut self,
        _view: &dyn NodeView,
        _p: Pid,
        _running: bool,
        _out: &mut Vec<NodeAction>,
    ) {
        default_op();
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

    /// A wait of `p` told to [`on_wait_begin`](NodePolicy::on_wait_begin) ended
    /// (its condition holds; `end` says how it went). Actions at the next
    /// scheduling point, deferred when `end.by` is
    /// [`WaitEndCause::Dispatched`]. Only with [`Ops::WAIT_END`].
    fn on_wait_end(
        &mut self,
        _view: &dyn NodeView,
        _p: Pid,
        _end: &WaitEnd,
        _out: &mut Vec<NodeAction>,
    ) {
        default_op();
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

    /// The periodic mechanism (PB's endpoint scan, CC's most-messages pick): every
    /// `period` while the node holds processes. One chain of timers per node, started
    /// when the node gets a process while no timer of it is pending; a timer that
    /// fires on an empty node is not re-armed, and a node that empties and refills
    /// before its pending timer fires keeps that chain.
    fn on_timer(&mut self, _view: &dyn NodeView, _out: &mut Vec<NodeAction>) {}

    /// Internal state, one line, for the engine's deadlock and time-limit reports
    /// (empty: nothing to report).
    fn dump(&self) -> String {
        String::new()
    }
}

thread_local! {
    /// Set by the default body of an op gated by [`Ops`] ([`undeclared_ops`]).
    static DEFAULT_OP: Cell<bool> = const { Cell::new(false) };
}

/// Marks that the default (empty) body of a gated op ran.
fn default_op() {
    DEFAULT_OP.with(|c| c.set(true));
}

/// The gated ops ([`Ops`]) whose declaration in [`NodePolicy::ops`] disagrees
/// with what `policy` implements: `(name, implemented)` for an op implemented
/// but not declared (`true`: the engine would never call it) or declared but
/// not implemented (`false`: a cost for nothing). Calls every gated op once on
/// `view` with process `p` (a conformance check for tests and hosts, on a
/// fresh instance: the calls may change the policy's state).
pub fn undeclared_ops(
    policy: &mut dyn NodePolicy,
    view: &dyn NodeView,
    p: Pid,
) -> Vec<(&'static str, bool)> {
    let declared = policy.ops();
    let mut out = Vec::new();
    let kind = WaitKind::Recv;
    let end = WaitEnd {
        kind,
        waited: SimTime::ZERO,
        spun: SimTime::ZERO,
        blocked: false,
        by: WaitEndCause::Spinning,
    };
    for (op, name) in Ops::NAMED {
        let mut acts = Vec::new();
        DEFAULT_OP.with(|c| c.set(false));
        match name {
            "enqueue" => policy.enqueue(view, p, EnqueueReason::Woken, &mut acts),
            "dequeue" => policy.dequeue(view, p, DequeueReason::Blocked(kind), &mut acts),
            "running" => policy.running(view, p, &mut acts),
            "stopping" => policy.stopping(view, p, Stop::Preempted, &mut acts),
            "tick" => policy.tick(view, &mut acts),
            "on_ack" => policy.on_ack(view, p, false, &mut acts),
            _ => policy.on_wait_end(view, p, &end, &mut acts),
        }
        let implemented = !DEFAULT_OP.with(|c| c.replace(false));
        if implemented != declared.contains(op) {
            out.push((name, implemented));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    struct OneProcess;
    impl NodeView for OneProcess {
        fn now(&self) -> SimTime {
            SimTime::ZERO
        }
        fn processes(&self) -> &[Pid] {
            &[0]
        }
        fn is_running(&self, _p: Pid) -> bool {
            false
        }
        fn unconsumed(&self, _p: Pid) -> usize {
            1
        }
    }

    /// Implements `running` and `on_wait_end`, declares `on_wait_end` and `tick`.
    struct Mismatched;
    impl NodePolicy for Mismatched {
        fn name(&self) -> String {
            "mismatched".into()
        }
        fn ops(&self) -> Ops {
            Ops::WAIT_END | Ops::TICK
        }
        fn running(&mut self, _v: &dyn NodeView, _p: Pid, _o: &mut Vec<NodeAction>) {}
        fn on_wait_end(
            &mut self,
            _v: &dyn NodeView,
            _p: Pid,
            _e: &WaitEnd,
            _o: &mut Vec<NodeAction>,
        ) {
        }
    }

    #[test]
    fn undeclared_and_unimplemented_ops_are_found() {
        assert_eq!(
            undeclared_ops(&mut Mismatched, &OneProcess, 0),
            [("running", true), ("tick", false)]
        );
        struct Plain;
        impl NodePolicy for Plain {
            fn name(&self) -> String {
                "plain".into()
            }
        }
        assert!(undeclared_ops(&mut Plain, &OneProcess, 0).is_empty());
    }

    #[test]
    fn every_op_has_a_name_and_all_holds_them() {
        let mut all = Ops::NONE;
        for (op, _) in Ops::NAMED {
            assert!(!all.contains(op) || op == Ops::NONE);
            all |= op;
        }
        assert_eq!(all, Ops::ALL);
    }
}
