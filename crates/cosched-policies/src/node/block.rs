//! BLOCK: blocking waits, no coscheduling; with `spin_us`, GM's own blocking scheme.
//!
//! Algorithm: every wait (receiver, sender completion, non-blocking completion)
//! spins for `spin_us` (0: none, the default) and then gives up the CPU; the NIC
//! interrupt wakes the process and the native OS scheduler decides when it runs.
//! No recommendation, no boost. With `spin_us = 0` it is the comparison point
//! between NLS (spin) and the blocking-based schemes: HYBRID without its
//! collective boosts.
//!
//! GM's blocking scheme (seed 000 §5.1: CC/SB and HYBRID "use the blocking
//! mechanism of GM"; §5.2: "the blocking scheme available with GM") is
//! `block[spin_us=1000]`: MPICH-GM's blocking receive mode waits in
//! `gm_blocking_receive()`, which "polls for receives for one millisecond before
//! sleeping the process" (GM API reference, `gm_blocking_receive.c`, GM 2.0.8
//! doxygen; GM's `gm.h` contrasts `gm_blocking_receive_no_spin()`, which "sleeps
//! the current thread immediately"). Assumption G-SCH-10: GM 1.6.3 (the seeds'
//! version) spins for the same millisecond.
//!
//! Parameters: `spin_us` (0): spin time before blocking, microseconds.

use crate::registry::{ParamInfo, PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::node::{NodePolicy, NodeView, Pid, WaitKind, WaitMode};
use cosched_des::SimTime;

/// GM's spin before sleeping in `gm_blocking_receive()`, microseconds.
pub const GM_SPIN_US: f64 = 1000.0;

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "block",
        level: "node",
        summary: "Blocking waits woken by the NIC interrupt, after an optional spin (GM's scheme: spin_us=1000); no boosts.",
        params: vec![ParamInfo {
            name: "spin_us",
            kind: "float",
            default: "0",
            doc: "Spin time before blocking, microseconds (0: immediate blocking; GM's gm_blocking_receive: 1000).",
        }],
    }
}

pub fn build(spec: &PolicySpec) -> Result<Box<dyn NodePolicy>, RegistryError> {
    spec.expect_only(&["spin_us"])?;
    Ok(Box::new(Block {
        spin: super::sb::micros(spec, "spin_us", 0.0)?,
    }))
}

pub struct Block {
    pub spin: SimTime,
}

impl NodePolicy for Block {
    fn name(&self) -> String {
        if self.spin == SimTime::ZERO {
            "block".into()
        } else {
            format!("block[spin_us={}]", super::as_us(self.spin))
        }
    }
    fn wait_mode(&mut self, _view: &dyn NodeView, _p: Pid, _kind: WaitKind) -> WaitMode {
        if self.spin == SimTime::ZERO {
            WaitMode::Block
        } else {
            WaitMode::SpinBlock(self.spin)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::build_node;

    #[test]
    fn block_blocks_at_once_and_gm_spins_a_millisecond_first() {
        let mut b = build_node("block").unwrap();
        assert_eq!(b.name(), "block");
        assert_eq!(
            crate::node::fake::wait_mode(b.as_mut(), WaitKind::Recv),
            WaitMode::Block
        );
        let mut gm = build_node(&format!("block[spin_us={GM_SPIN_US}]")).unwrap();
        assert_eq!(gm.name(), "block[spin_us=1000]");
        for kind in [WaitKind::Recv, WaitKind::SendAck, WaitKind::RecvCompletion] {
            assert_eq!(
                crate::node::fake::wait_mode(gm.as_mut(), kind),
                WaitMode::SpinBlock(SimTime::from_ms(1))
            );
        }
    }
}
