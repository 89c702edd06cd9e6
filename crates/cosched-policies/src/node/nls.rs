//! NLS: native local scheduling.
//!
//! Algorithm: no coscheduling at all. Every wait (receiver, sender, non-blocking
//! completion) spins on the CPU until the condition holds or the native OS
//! scheduler takes the CPU away; no recommendation, no boost. The seeds' baseline
//! (seed 001 Table 1: receiver spin, sender spin).
//!
//! Parameters: none.

use crate::registry::{ParamInfo, PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::node::{NodePolicy, NodeView, Pid, WaitKind, WaitMode};

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "nls",
        level: "node",
        summary: "Native local scheduling: spin waits, no boosts; the OS scheduler alone decides.",
        params: Vec::<ParamInfo>::new(),
    }
}

pub fn build(spec: &PolicySpec) -> Result<Box<dyn NodePolicy>, RegistryError> {
    spec.expect_only(&[])?;
    Ok(Box::new(Nls))
}

pub struct Nls;

impl NodePolicy for Nls {
    fn name(&self) -> String {
        "nls".into()
    }
    fn wait_mode(&mut self, _view: &dyn NodeView, _p: Pid, _kind: WaitKind) -> WaitMode {
        WaitMode::Spin
    }
}
