//! DCS: dynamic coscheduling (Sobalvarro et al.; seed 000 §2.3 and §4, seed 001 Table 1).
//!
//! Algorithm: every wait spins (seed 001 Table 1: receiver "Spin-only, Boost a
//! priority", sender "Spin-only"). When a message arrives for a process that is
//! not running, the NIC raises an interrupt for it (seed 000 §4: "If the message
//! is not destined for the current running process, the NIC raises an interrupt
//! for an appropriate process") and its priority is boosted until it next runs
//! (assumptions G-SCH-1 and G-SCH-5 in docs/models/seed-parameters.md). The boost takes effect
//! at once through the native scheduler's wake-up preemption rule, which still
//! enforces its fairness rule (under Linux 2.4 a boost counts only while the
//! process has counter left in the epoch, seed 000 §5.2). The interrupt costs the
//! platform's `interrupt_us` of CPU (assumption G-OS-3) and is counted in
//! `ProcCounters::policy_interrupts`. Nothing happens at collectives.
//!
//! Parameters: none.

use crate::node::{boost_on_message, build_without_params, without_params};
use crate::registry::{PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::node::Pid;
use cosched_contract::node::{NodeAction, NodePolicy, NodeView, WaitKind, WaitMode};

pub fn info() -> PolicyInfo {
    without_params("dcs", "Dynamic coscheduling: spin waits; a message for a process that is not running interrupts and boosts it.")
}

pub fn build(spec: &PolicySpec) -> Result<Box<dyn NodePolicy>, RegistryError> {
    build_without_params(spec, Dcs)
}

pub struct Dcs;

impl NodePolicy for Dcs {
    fn name(&self) -> String {
        "dcs".into()
    }
    fn wait_mode(&mut self, _view: &dyn NodeView, _p: Pid, _kind: WaitKind) -> WaitMode {
        WaitMode::Spin
    }
    fn on_message(
        &mut self,
        _view: &dyn NodeView,
        p: Pid,
        running: bool,
        out: &mut Vec<NodeAction>,
    ) {
        boost_on_message(p, running, true, out);
    }
}
