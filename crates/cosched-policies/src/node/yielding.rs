//! YIELD: every wait polls and calls `sched_yield` between polls (Open MPI's
//! `mpi_yield_when_idle`); no coscheduling.
//!
//! Algorithm: every wait (receiver, sender completion, non-blocking completion) is
//! a [`WaitMode::Yield`] wait: the process spins while no other process of its
//! node is runnable and gives its CPU to any that is, without an interrupt (see
//! [`WaitMode::Yield`] for the engine's rule). No recommendation, no boost.
//!
//! Source: Open MPI's progress loop calls `sched_yield()` when a poll found no
//! event and `mpi_yield_when_idle` is set (`opal/runtime/opal_progress.c`,
//! `opal_progress()`; Open MPI 4.1's FAQ "What is the difference between the
//! aggressive and degraded modes?"). Linux: `sched_yield(2)` ("If the calling
//! thread is the only thread in the highest priority list at that time, it will
//! continue to run after a call to sched_yield()"); CFS/EEVDF's
//! `yield_task_fair()` (kernel/sched/fair.c, Linux 6.6 and later) returns at once
//! when the run queue holds only the caller and otherwise pushes the caller's
//! deadline one slice later, so the next pick prefers any other eligible task;
//! before EEVDF it marked the caller the CFS "skip buddy", to the same effect.
//! The process is charged only the CPU it uses while it polls alone (its polls
//! between other tasks' slices are not charged).
//!
//! Parameters: none.

use crate::node::{build_without_params, without_params};
use crate::registry::{PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::node::{NodePolicy, NodeView, Pid, WaitKind, WaitMode};

pub fn info() -> PolicyInfo {
    without_params("yield", "Yielding waits (poll + sched_yield, Open MPI's mpi_yield_when_idle): the CPU goes to any other runnable process; no boosts.")
}

pub fn build(spec: &PolicySpec) -> Result<Box<dyn NodePolicy>, RegistryError> {
    build_without_params(spec, Yield)
}

pub struct Yield;

impl NodePolicy for Yield {
    fn name(&self) -> String {
        "yield".into()
    }
    fn wait_mode(&mut self, _view: &dyn NodeView, _p: Pid, _kind: WaitKind) -> WaitMode {
        WaitMode::Yield
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::fake;

    #[test]
    fn every_wait_yields() {
        let mut p = Yield;
        for k in [
            WaitKind::Recv,
            WaitKind::SendAck,
            WaitKind::RecvCompletion,
            WaitKind::SendCompletion,
        ] {
            assert_eq!(fake::wait_mode(&mut p, k), WaitMode::Yield);
        }
    }
}
