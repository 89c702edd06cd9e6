//! HYBRID coscheduling (seed 001 §4, seed 000 §4; seed 001 Table 1).
//!
//! Algorithm: every wait, at sender and receiver, blocks at once if the operation
//! is not complete (seed 001 §4: "an immediate blocking is used at a sender and a
//! receiver"); the NIC interrupt wakes the process. When a process enters a
//! collective operation its priority is boosted, and it is restored when the
//! process leaves it (seed 001 §4: "when a parallel process enters a collective
//! communication phase (e.g. MPI Bcast, MPI Barrier, etc), its priority is boosted
//! until it leaves the communication phase. At the end of communication, its
//! priority is lowered to its original value."). Nested collective markers keep
//! the boost until the outermost one ends. No boost in point-to-point operations
//! (seed 000 §4: "We do not insert the boosting code in point-to-point MPI
//! functions") and no interrupts beyond the wake-ups: the boost is set by the MPI
//! library, not the NIC. The native scheduler counts the boost only as its
//! fairness rule allows (Linux 2.4: while the process has counter left in the
//! epoch; assumption G-SCH-5).
//!
//! Parameters: none.

use crate::node::{build_without_params, without_params};
use crate::registry::{PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::node::Pid;
use cosched_contract::node::{NodeAction, NodePolicy, NodeView, WaitKind, WaitMode};
use std::collections::BTreeMap;

pub fn info() -> PolicyInfo {
    without_params("hybrid", "HYBRID: immediate blocking; priority boosted inside collectives only.")
}

pub fn build(spec: &PolicySpec) -> Result<Box<dyn NodePolicy>, RegistryError> {
    build_without_params(spec, Hybrid::default())
}

#[derive(Default)]
pub struct Hybrid {
    /// Collective nesting depth of each process inside one.
    depth: BTreeMap<Pid, u32>,
}

impl NodePolicy for Hybrid {
    fn name(&self) -> String {
        "hybrid".into()
    }
    fn wait_mode(&mut self, _view: &dyn NodeView, _p: Pid, _kind: WaitKind) -> WaitMode {
        WaitMode::Block
    }
    fn on_collective(
        &mut self,
        _view: &dyn NodeView,
        p: Pid,
        enter: bool,
        out: &mut Vec<NodeAction>,
    ) {
        if enter {
            let d = self.depth.entry(p).or_insert(0);
            *d += 1;
            if *d == 1 {
                out.push(NodeAction::Boost(p));
            }
        } else if let Some(d) = self.depth.get_mut(&p) {
            *d -= 1;
            if *d == 0 {
                self.depth.remove(&p);
                out.push(NodeAction::Unboost(p));
            }
        }
    }
    fn dump(&self) -> String {
        format!("inside collectives: {:?}", self.depth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::fake::View;

    #[test]
    fn boost_spans_the_outermost_collective() {
        let mut h = Hybrid::default();
        let v = View::new(&[(2, true, 0)]);
        let mut step = |enter| {
            let mut out = Vec::new();
            h.on_collective(&v, 2, enter, &mut out);
            out
        };
        assert_eq!(step(true), [NodeAction::Boost(2)]);
        assert_eq!(step(true), []);
        assert_eq!(step(false), []);
        assert_eq!(step(false), [NodeAction::Unboost(2)]);
        assert_eq!(
            crate::node::fake::wait_mode(&mut h, WaitKind::Recv),
            WaitMode::Block
        );
        assert_eq!(
            crate::node::fake::wait_mode(&mut h, WaitKind::SendAck),
            WaitMode::Block
        );
    }
}
