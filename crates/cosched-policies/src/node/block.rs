//! BLOCK: immediate blocking, no coscheduling.
//!
//! Algorithm: every wait (receiver, sender acknowledgement, non-blocking
//! completion) gives up the CPU at once; the NIC interrupt wakes the process and
//! the native OS scheduler decides when it runs. No recommendation, no boost. The
//! comparison point between NLS (spin) and the blocking-based schemes: it is
//! HYBRID without its collective boosts.
//!
//! Parameters: none.

use crate::registry::{ParamInfo, PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::node::{NodePolicy, NodeView, Pid, WaitKind, WaitMode};

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "block",
        level: "node",
        summary: "Immediate blocking waits woken by the NIC interrupt; no boosts.",
        params: Vec::<ParamInfo>::new(),
    }
}

pub fn build(spec: &PolicySpec) -> Result<Box<dyn NodePolicy>, RegistryError> {
    spec.expect_only(&[])?;
    Ok(Box::new(Block))
}

pub struct Block;

impl NodePolicy for Block {
    fn name(&self) -> String {
        "block".into()
    }
    fn wait_mode(&mut self, _view: &dyn NodeView, _p: Pid, _kind: WaitKind) -> WaitMode {
        WaitMode::Block
    }
}
