//! ICS: implicit coscheduling (Arpaci-Dusseau, Culler, Mainwaring, "Scheduling
//! with Implicit Information in Distributed Systems", SIGMETRICS 1998).
//!
//! Algorithm: two-phase spin-block waiting, with no message from the scheduler of
//! another node. Each local scheduler infers from the waits of its own processes
//! whether their peers are scheduled: a reply that comes back within a round trip
//! means the peer runs, so the waiter keeps its CPU; no reply means the peer is
//! descheduled, so the waiter blocks and lets another job run.
//! - **Baseline spin** (the paper's first phase): every wait spins for
//!   `rtt + 2 x switch` before blocking: the round-trip time of a request whose
//!   receiver is scheduled, plus the cost of blocking, a context switch out and
//!   one back in (the paper's competitive argument: spinning at least as long as
//!   blocking would cost loses at most a factor of two).
//! - **Conditional spin** (the paper's refinement: "spin time should be increased
//!   when a process is receiving messages"): while a waiting process spins on its
//!   CPU, each message that lands for it (whether or not it is the awaited one)
//!   extends the spin to at least `cond` from the arrival, so a process keeps its
//!   CPU as long as messages keep arriving at intervals shorter than `cond`
//!   ([`NodeAction::SpinFor`]); when the interval exceeds `cond` it blocks.
//! - Fairness between jobs is the native scheduler's (the paper relies on the
//!   Solaris time-sharing scheduler's priority boost of woken processes); ICS adds
//!   no boost, no interrupt and no recommendation.
//!
//! Parameters (microseconds, finite, >= 0):
//! - `rtt_us` (19.4): the round-trip time of a small message between scheduled
//!   processes. Default: twice the one-way time of the `choi2004` platform, the
//!   seeds' cluster (seed 000 §5.1: 9.7 us one way); set it to the platform's
//!   `2 x (send_overhead_us + latency_us + recv_overhead_us)`.
//! - `switch_us` (5): the context-switch cost; the baseline counts it twice.
//!   Default: `choi2004`'s `context_switch_us` (assumption G-OS-2).
//! - `cond_us` (default: the baseline spin): the conditional spin's interval
//!   threshold. The paper compares the interval between arrivals with the spin
//!   threshold; by default it is the baseline spin.

use crate::node::as_us;
use crate::node::sb::micros;
use crate::registry::{ParamInfo, PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::node::{NodeAction, NodePolicy, NodeView, Pid, WaitKind, WaitMode};
use cosched_des::SimTime;

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "ics",
        level: "node",
        summary: "Implicit coscheduling: two-phase spin-block waits (spin rtt + 2 context switches, then block); messages arriving while a process spins extend its spin.",
        params: vec![
            ParamInfo {
                name: "rtt_us",
                kind: "float",
                default: "19.4",
                doc: "Round-trip time of a small message between scheduled processes, microseconds (choi2004: 2 x 9.7 us, seed 000 §5.1).",
            },
            ParamInfo {
                name: "switch_us",
                kind: "float",
                default: "5",
                doc: "Context-switch cost, microseconds; the baseline spin counts it twice (choi2004's context_switch_us).",
            },
            ParamInfo {
                name: "cond_us",
                kind: "float",
                default: "rtt_us + 2 x switch_us",
                doc: "Conditional spin: a message arriving while a process spins keeps it spinning at least this long, microseconds.",
            },
        ],
    }
}

pub fn build(spec: &PolicySpec) -> Result<Box<dyn NodePolicy>, RegistryError> {
    spec.expect_only(&["rtt_us", "switch_us", "cond_us"])?;
    let rtt = micros(spec, "rtt_us", 19.4)?;
    let switch = micros(spec, "switch_us", 5.0)?;
    let baseline = rtt + SimTime(2 * switch.as_ns());
    let cond = micros(spec, "cond_us", baseline.as_ns() as f64 / 1000.0)?;
    Ok(Box::new(Ics { rtt, switch, cond }))
}

pub struct Ics {
    pub rtt: SimTime,
    pub switch: SimTime,
    pub cond: SimTime,
}

impl Ics {
    /// The first phase's spin: a round trip plus blocking's two context switches.
    pub fn baseline(&self) -> SimTime {
        self.rtt + SimTime(2 * self.switch.as_ns())
    }
}

impl NodePolicy for Ics {
    fn name(&self) -> String {
        format!(
            "ics[rtt_us={},switch_us={},cond_us={}]",
            as_us(self.rtt),
            as_us(self.switch),
            as_us(self.cond)
        )
    }
    fn wait_mode(&mut self, _view: &dyn NodeView, _p: Pid, _kind: WaitKind) -> WaitMode {
        WaitMode::SpinBlock(self.baseline())
    }
    fn on_message(
        &mut self,
        view: &dyn NodeView,
        p: Pid,
        running: bool,
        out: &mut Vec<NodeAction>,
    ) {
        if !running {
            return;
        }
        if let Some(waited) = view.waited(p) {
            // Never shorter than what is left of the baseline spin.
            let left = self.baseline() - waited;
            out.push(NodeAction::SpinFor(p, self.cond.max(left)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::fake::View;
    use crate::registry::build_node;

    #[test]
    fn spins_a_round_trip_and_two_switches_then_extends_on_arrivals() {
        let mut ics = build_node("ics").unwrap();
        assert_eq!(ics.name(), "ics[rtt_us=19.4,switch_us=5,cond_us=29.4]");
        let base = WaitMode::SpinBlock(SimTime::from_ns(29_400));
        for k in [WaitKind::Recv, WaitKind::SendAck] {
            assert_eq!(crate::node::fake::wait_mode(ics.as_mut(), k), base);
        }
        let mut ics = build_node("ics[rtt_us=10,switch_us=5,cond_us=50]").unwrap();
        let mut out = Vec::new();
        // Spinning for 5 us: a message extends the spin to 50 us from now.
        let v = View::new(&[(0, true, 1)]).waiting(0, SimTime::from_us(5));
        ics.on_message(&v, 0, true, &mut out);
        assert_eq!(out, [NodeAction::SpinFor(0, SimTime::from_us(50))]);
        // Not running (blocked or preempted) or not waiting: nothing.
        out.clear();
        ics.on_message(&v, 0, false, &mut out);
        ics.on_message(&View::new(&[(0, true, 1)]), 0, true, &mut out);
        assert!(out.is_empty());
        // A conditional interval shorter than what is left of the baseline keeps the baseline.
        let mut ics = build_node("ics[rtt_us=100,switch_us=0,cond_us=10]").unwrap();
        let v = View::new(&[(0, true, 1)]).waiting(0, SimTime::from_us(30));
        ics.on_message(&v, 0, true, &mut out);
        assert_eq!(out, [NodeAction::SpinFor(0, SimTime::from_us(70))]);
        assert!(build_node("ics[cond_us=-1]").is_err());
    }
}
