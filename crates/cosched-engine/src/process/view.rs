//! What a node policy sees of its node during an op ([`View`], the engine's
//! [`NodeView`]) and when the actions it returns take effect ([`Apply`]). Reads
//! the run's state only.

use super::state::{Node, PState, Proc};
use crate::os::Pid;
use cosched_contract::node::NodeView;
use cosched_des::SimTime;

/// When a policy's actions take effect ([`super::policy`] module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Apply {
    /// A boost of a runnable process may preempt at once; the node is rescheduled.
    Now,
    /// No preemption; the node is rescheduled (ops called while a process executes).
    NextPoint,
    /// Priorities change; no preemption, no rescheduling (ops called during a CPU
    /// hand-over: `enqueue`, `dequeue`, `running`, `stopping`).
    Deferred,
}

/// What a node policy sees of its node during an op.
pub(super) struct View<'s, 'a> {
    pub(super) now: SimTime,
    pub(super) node: &'s Node,
    pub(super) procs: &'s [Proc<'a>],
}

impl NodeView for View<'_, '_> {
    fn now(&self) -> SimTime {
        self.now
    }
    fn processes(&self) -> &[Pid] {
        &self.node.procs
    }
    fn is_running(&self, p: Pid) -> bool {
        matches!(self.procs[p as usize].state, PState::Running(_))
    }
    fn unconsumed(&self, p: Pid) -> usize {
        let q = &self.procs[p as usize];
        q.mailbox.len() + q.rts.len()
    }
    fn job_of(&self, p: Pid) -> Option<u32> {
        self.procs.get(p as usize).map(|q| q.job as u32)
    }
    fn waited(&self, p: Pid) -> Option<SimTime> {
        let w = self.procs.get(p as usize)?.wait?;
        w.kind.map(|_| self.now - w.since)
    }
    fn cpu_time(&self, p: Pid) -> Option<SimTime> {
        let q = self.procs.get(p as usize)?;
        // A running process is accounted lazily: add what it ran since.
        let since = match q.state {
            PState::Running(cpu) if self.node.procs.contains(&p) => (self.now
                - self.node.cpus[cpu as usize].since)
                .as_ns()
                .max(0),
            _ => 0,
        };
        Some(SimTime(q.cpu_ns + since))
    }
}
