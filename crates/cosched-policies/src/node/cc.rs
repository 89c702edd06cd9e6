//! CC: co-ordinated coscheduling (Agarwal et al.; seed 000 §2.3, seed 001 Table 1).
//!
//! Algorithm (seed 000 §2.3 and seed 001 Table 1, CC row: receiver and sender
//! "Spin-Block, Boost a Priority"):
//! - every wait (receiver, sender waiting for the NIC acknowledgement, `Wait` for
//!   non-blocking operations) spins for at most `spin_us`, then blocks and is
//!   woken by the NIC interrupt ("the sender spins for a pre-determined amount of
//!   time waiting for an acknowledge from the NIC. On the receiver side, a process
//!   waits for a message arrival within the spin time. If a message does not
//!   arrive within this time, the process is blocked and registered for an
//!   interrupt from the NIC");
//! - a message arriving for a process that is not running interrupts and boosts it
//!   until it next runs, as in DCS (receiver "Boost a Priority"; the interrupt costs
//!   the platform's `interrupt_us`, assumption G-OS-3; when the message wakes a
//!   blocked process, that wake-up is the interrupt);
//! - at the sender (seed 001 Table 1, sender "Spin-Block, Boost a Priority"): when
//!   the NIC acknowledgement of a blocking send (a rendezvous: an eager send is
//!   complete at once and has none) arrives for a sender that is not
//!   running (it blocked after its spin, or was preempted while spinning), the NIC
//!   interrupts it and its priority is boosted until it next runs (`on_ack`;
//!   counted in `ProcCounters::ack_boosts`); when the acknowledgement wakes the
//!   blocked sender, that wake-up is the interrupt (assumptions G-SCH-1 and G-SCH-5). The boost
//!   takes effect at once through the native scheduler's wake-up preemption rule;
//! - every `period_us`, the process with the most unconsumed incoming messages
//!   that is not running (ties: lowest pid) is recommended to run next ("In a
//!   regular interval, a process that has the largest number of un-consumed
//!   incoming message, is scheduled to run next"); the recommendation stands until
//!   the next period or until that process runs or has no unconsumed message, and
//!   the native scheduler follows it only as its fairness rule allows.
//!
//! Parameters: `spin_us` (300): seed 001 §5.2, "In CC and SB, a parallel process
//! spins for a fixed time (e.g. 300us)" (assumption G-SCH-2, also for the sender);
//! `period_us` (10000): the "regular interval" is not stated; one Linux 2.4 tick
//! (assumption G-SCH-4).
//!
//! GM's blocking scheme, reported with CC and SB as "almost identical" (seed 000
//! §5.2), is not a separate policy: see the SB module doc (it is `block`).

use crate::node::boost_on_message;
use crate::registry::{ParamInfo, PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::node::Pid;
use cosched_contract::node::{NodeAction, NodePolicy, NodeView, Ops, WaitKind, WaitMode};
use cosched_des::SimTime;

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "cc",
        level: "node",
        summary: "Co-ordinated coscheduling: spin-block waits, boost on message arrival, periodic most-messages recommendation.",
        params: vec![
            ParamInfo {
                name: "spin_us",
                kind: "float",
                default: "300",
                doc: "Spin time before blocking, sender and receiver, microseconds (seed 001 §5.2: e.g. 300 us).",
            },
            ParamInfo {
                name: "period_us",
                kind: "float",
                default: "10000",
                doc: "Interval of the most-messages recommendation, microseconds (assumption G-SCH-4: one 10 ms tick).",
            },
        ],
    }
}

pub fn build(spec: &PolicySpec) -> Result<Box<dyn NodePolicy>, RegistryError> {
    spec.expect_only(&["spin_us", "period_us"])?;
    Ok(Box::new(Cc {
        spin: super::sb::micros(spec, "spin_us", 300.0)?,
        period: super::pb::period(spec, 10_000.0)?,
        next: None,
    }))
}

pub struct Cc {
    pub spin: SimTime,
    pub period: SimTime,
    /// The current recommendation.
    next: Option<Pid>,
}

impl NodePolicy for Cc {
    fn name(&self) -> String {
        format!(
            "cc[spin_us={},period_us={}]",
            self.spin.as_ns() as f64 / 1000.0,
            self.period.as_ns() as f64 / 1000.0
        )
    }
    fn ops(&self) -> Ops {
        Ops::ON_ACK
    }
    fn wait_mode(&mut self, _view: &dyn NodeView, _p: Pid, _kind: WaitKind) -> WaitMode {
        WaitMode::SpinBlock(self.spin)
    }
    fn on_ack(&mut self, _view: &dyn NodeView, p: Pid, running: bool, out: &mut Vec<NodeAction>) {
        boost_on_message(p, running, true, out);
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
    fn period(&self) -> Option<SimTime> {
        Some(self.period)
    }
    fn on_timer(&mut self, view: &dyn NodeView, _out: &mut Vec<NodeAction>) {
        self.next = view
            .processes()
            .iter()
            .copied()
            .filter(|&p| !view.is_running(p) && view.unconsumed(p) > 0)
            .max_by_key(|&p| (view.unconsumed(p), std::cmp::Reverse(p)));
    }
    fn recommend(&mut self, view: &dyn NodeView) -> Option<Pid> {
        if let Some(p) = self.next {
            if !view.processes().contains(&p) || view.is_running(p) || view.unconsumed(p) == 0 {
                self.next = None;
            }
        }
        self.next
    }
    fn dump(&self) -> String {
        format!("recommended: {:?}", self.next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::fake::View;
    use crate::registry::build_node;

    #[test]
    fn recommends_the_waiting_process_with_most_unconsumed_messages() {
        let mut cc = build_node("cc").unwrap();
        let mut out = Vec::new();
        let v = View::new(&[(0, false, 1), (1, false, 3), (2, false, 2), (4, true, 9)]);
        // Nothing recommended before the first period.
        assert_eq!(cc.recommend(&v), None);
        cc.on_timer(&v, &mut out);
        assert!(out.is_empty());
        assert_eq!(cc.recommend(&v), Some(1));
        // Once 1 runs (or has nothing left), the recommendation is withdrawn.
        let v2 = View::new(&[(0, false, 1), (1, true, 3), (2, false, 2), (4, false, 9)]);
        assert_eq!(cc.recommend(&v2), None);
        // The next period follows the counts again; ties go to the lowest pid.
        let v3 = View::new(&[(0, false, 2), (1, false, 2), (2, false, 2)]);
        cc.on_timer(&v3, &mut out);
        assert_eq!(cc.recommend(&v3), Some(0));
    }

    #[test]
    fn waits_spin_block_and_arrivals_for_descheduled_processes_boost() {
        let mut cc = build_node("cc[spin_us=100,period_us=500]").unwrap();
        assert_eq!(cc.name(), "cc[spin_us=100,period_us=500]");
        for k in [
            WaitKind::Recv,
            WaitKind::SendAck,
            WaitKind::RecvCompletion,
            WaitKind::SendCompletion,
        ] {
            assert_eq!(
                crate::node::fake::wait_mode(cc.as_mut(), k),
                WaitMode::SpinBlock(SimTime::from_us(100))
            );
        }
        let v = View::new(&[(0, false, 1), (1, true, 1)]);
        let mut out = Vec::new();
        cc.on_message(&v, 1, true, &mut out);
        assert!(out.is_empty());
        cc.on_message(&v, 0, false, &mut out);
        assert_eq!(
            out,
            [NodeAction::Interrupt(0), NodeAction::BoostUntilRun(0)]
        );
        // The sender side: an acknowledgement for a sender that is not running too.
        assert!(cc.ops().contains(Ops::ON_ACK));
        let mut out = Vec::new();
        cc.on_ack(&v, 1, true, &mut out);
        assert!(out.is_empty());
        cc.on_ack(&v, 0, false, &mut out);
        assert_eq!(
            out,
            [NodeAction::Interrupt(0), NodeAction::BoostUntilRun(0)]
        );
        assert!(build_node("cc[spin_us=-3]").is_err());
        assert!(build_node("cc[period=3]").is_err());
    }
}
