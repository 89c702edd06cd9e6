//! SB: spin-block (Arpaci-Dusseau et al., Nagar et al.; seed 000 §2.3, seed 001 Table 1).
//!
//! Algorithm: a receiver waiting for a message spins for at most `spin_us`, then
//! blocks and is woken by the NIC interrupt (seed 000 §2.3: "a process waiting for
//! a message spins for a fixed amount of time before blocking itself"). The
//! mechanism applies to receive completions only (seed 000 §3: GM's completion
//! queue was divided "into a send completion queue and a receive completion queue"
//! and the SB mechanism used "only for the recv completion queue"), so:
//! - a blocking receive, and a `Wait` with a posted non-blocking receive whose
//!   message has not arrived (`WaitKind::RecvCompletion`), spin-block;
//! - a sender waiting for the NIC acknowledgement of a blocking send, and a `Wait`
//!   with only non-blocking sends outstanding (`WaitKind::SendCompletion`), spin
//!   (seed 001 Table 1: sender "Spin-only").
//!
//! No boost, no recommendation, nothing at collectives.
//!
//! Parameters: `spin_us` (300): seed 001 §4 and §5.2, "spins for a fixed time
//! (e.g. 300us)" (assumption G-SCH-2: the example value is the one used).
//!
//! GM's own blocking scheme: seed 000 §5.1 says CC/SB and HYBRID are built on
//! "the blocking mechanism of GM", and seed 000 §5.2 reports "the blocking scheme
//! available with GM" as almost identical to CC and SB without describing it
//! further. The seeds give it no spin time and no boost, so it is modelled by the
//! existing `block` policy (immediate blocking, no boosts); SB differs from it only
//! by spinning up to `spin_us` at the receiver and by spinning at the sender.

use crate::registry::{ParamInfo, PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::node::{NodePolicy, NodeView, Pid, WaitKind, WaitMode};
use cosched_des::SimTime;

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "sb",
        level: "node",
        summary: "Spin-block: a receiver spins up to spin_us then blocks; a sender spins.",
        params: vec![ParamInfo {
            name: "spin_us",
            kind: "float",
            default: "300",
            doc: "Receiver spin time before blocking, microseconds (seed 001 §4: e.g. 300 us).",
        }],
    }
}

/// Parses a non-negative, finite microsecond parameter into a `SimTime`.
/// The largest time parameter of a node policy, microseconds (1000 s: far beyond any
/// spin, period or interval of the seeds, and small enough that a run's time
/// arithmetic with it stays within the nanosecond range).
pub(crate) const MAX_MICROS: f64 = 1e9;

pub(crate) fn micros(spec: &PolicySpec, key: &str, default: f64) -> Result<SimTime, RegistryError> {
    let v: f64 = spec.get(key, default)?;
    if !(v.is_finite() && (0.0..=MAX_MICROS).contains(&v)) {
        return Err(RegistryError::BadValue {
            policy: spec.name.clone(),
            param: key.to_string(),
            value: spec.params.get(key).cloned().unwrap_or_default(),
            msg: format!("must be a finite number between 0 and {MAX_MICROS:e}"),
        });
    }
    Ok(SimTime((v * 1000.0).round() as i64))
}

pub fn build(spec: &PolicySpec) -> Result<Box<dyn NodePolicy>, RegistryError> {
    spec.expect_only(&["spin_us"])?;
    Ok(Box::new(Sb {
        spin: micros(spec, "spin_us", 300.0)?,
    }))
}

pub struct Sb {
    pub spin: SimTime,
}

impl NodePolicy for Sb {
    fn name(&self) -> String {
        format!("sb[spin_us={}]", self.spin.as_ns() as f64 / 1000.0)
    }
    fn wait_mode(&mut self, _view: &dyn NodeView, _p: Pid, kind: WaitKind) -> WaitMode {
        if kind.is_receive() {
            WaitMode::SpinBlock(self.spin)
        } else {
            WaitMode::Spin
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::build_node;

    #[test]
    fn spin_block_only_on_the_receive_side() {
        let mut sb = build_node("sb[spin_us=50]").unwrap();
        let sb_wait = WaitMode::SpinBlock(SimTime::from_us(50));
        assert_eq!(
            crate::node::fake::wait_mode(sb.as_mut(), WaitKind::Recv),
            sb_wait
        );
        assert_eq!(
            crate::node::fake::wait_mode(sb.as_mut(), WaitKind::RecvCompletion),
            sb_wait
        );
        assert_eq!(
            crate::node::fake::wait_mode(sb.as_mut(), WaitKind::SendAck),
            WaitMode::Spin
        );
        assert_eq!(
            crate::node::fake::wait_mode(sb.as_mut(), WaitKind::SendCompletion),
            WaitMode::Spin
        );
    }
}
