//! NLS: native local scheduling.
//!
//! Algorithm: no coscheduling at all. Every wait (receiver, sender, non-blocking
//! completion) spins on the CPU until the condition holds or the native OS
//! scheduler takes the CPU away; no recommendation, no boost. The seeds' baseline
//! (seed 001 Table 1: receiver spin, sender spin).
//!
//! Parameters: none.

use crate::node::{build_without_params, without_params};
use crate::registry::{PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::node::{NodePolicy, NodeView, Pid, WaitKind, WaitMode};

pub fn info() -> PolicyInfo {
    without_params("nls", "Native local scheduling: spin waits, no boosts; the OS scheduler alone decides.")
}

pub fn build(spec: &PolicySpec) -> Result<Box<dyn NodePolicy>, RegistryError> {
    build_without_params(spec, Nls)
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
