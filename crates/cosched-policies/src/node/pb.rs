//! PB: periodic boost (Nagar et al.; seed 000 §2.3, seed 001 Table 1).
//!
//! Algorithm: every wait spins (seed 001 Table 1: receiver "Spin-only,
//! Boosting", sender "Spin-only"). Every `period_us` a periodic mechanism scans
//! the endpoints of the node's processes round-robin, starting after the process
//! it boosted last, and boosts the first one that is not running and has
//! unconsumed messages (seed 000 §2.3: "a periodic mechanism checks the endpoints
//! of the parallel processes in a round-robin fashion and boosts the priority of
//! one of the processes with un-consumed messages"). The boost lasts until the
//! process next runs and takes effect at once through the native scheduler's
//! wake-up preemption rule, which enforces its fairness rule (assumptions
//! G-SCH-1 and G-SCH-5). Each boost is delivered like DCS's: an interrupt costing the
//! platform's `interrupt_us` (seed 001 §5.2 names "frequent interrupts from a NIC
//! to the CPU to boost the process's priority in CC, DCS and PB"; assumption
//! G-OS-3), counted in `ProcCounters::policy_interrupts`.
//!
//! Parameters: `period_us` (10000): not stated by the seeds; one Linux 2.4 timer
//! tick (HZ = 100), the natural granularity of a kernel activity (assumption
//! G-SCH-3 in docs/models/seed-parameters.md).

use crate::registry::{ParamInfo, PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::node::Pid;
use cosched_contract::node::{NodeAction, NodePolicy, NodeView, WaitKind, WaitMode};
use cosched_des::SimTime;

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "pb",
        level: "node",
        summary: "Periodic boost: spin waits; every period_us boost, round-robin, one waiting process with unconsumed messages.",
        params: vec![ParamInfo {
            name: "period_us",
            kind: "float",
            default: "10000",
            doc: "Scan period, microseconds (assumption G-SCH-3: one 10 ms Linux 2.4 tick).",
        }],
    }
}

/// A positive, finite microsecond parameter.
pub(crate) fn period(spec: &PolicySpec, default: f64) -> Result<SimTime, RegistryError> {
    let t = super::sb::micros(spec, "period_us", default)?;
    if t.as_ns() <= 0 {
        return Err(RegistryError::BadValue {
            policy: spec.name.clone(),
            param: "period_us".into(),
            value: spec.params.get("period_us").cloned().unwrap_or_default(),
            msg: "must be at least 0.001 (1 ns)".into(),
        });
    }
    Ok(t)
}

pub fn build(spec: &PolicySpec) -> Result<Box<dyn NodePolicy>, RegistryError> {
    spec.expect_only(&["period_us"])?;
    Ok(Box::new(Pb {
        period: period(spec, 10_000.0)?,
        last: None,
    }))
}

pub struct Pb {
    pub period: SimTime,
    /// The process boosted last (the scan resumes after it).
    last: Option<Pid>,
}

impl NodePolicy for Pb {
    fn name(&self) -> String {
        format!("pb[period_us={}]", self.period.as_ns() as f64 / 1000.0)
    }
    fn wait_mode(&mut self, _view: &dyn NodeView, _p: Pid, _kind: WaitKind) -> WaitMode {
        WaitMode::Spin
    }
    fn period(&self) -> Option<SimTime> {
        Some(self.period)
    }
    fn on_timer(&mut self, view: &dyn NodeView, out: &mut Vec<NodeAction>) {
        let procs = view.processes();
        let n = procs.len();
        let start = match self.last {
            // Resume after the last boosted one (or where it stood, if it left).
            Some(l) => procs.iter().position(|&p| p > l).unwrap_or(0),
            None => 0,
        };
        let pick = (0..n)
            .map(|k| procs[(start + k) % n])
            .find(|&p| !view.is_running(p) && view.unconsumed(p) > 0);
        if let Some(p) = pick {
            self.last = Some(p);
            out.push(NodeAction::Interrupt(p));
            out.push(NodeAction::BoostUntilRun(p));
        }
    }
    fn dump(&self) -> String {
        format!("last boosted: {:?}", self.last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::fake::View;
    use crate::registry::build_node;

    fn boosted(pb: &mut dyn NodePolicy, v: &View) -> Option<Pid> {
        let mut out = Vec::new();
        pb.on_timer(v, &mut out);
        match out.as_slice() {
            [] => None,
            [NodeAction::Interrupt(a), NodeAction::BoostUntilRun(b)] if a == b => Some(*a),
            other => panic!("unexpected actions {other:?}"),
        }
    }

    #[test]
    fn scans_round_robin_skipping_running_and_empty_endpoints() {
        let mut pb = build_node("pb").unwrap();
        assert_eq!(pb.period(), Some(SimTime::from_ms(10)));
        let v = View::new(&[(3, false, 1), (5, false, 2), (8, false, 1)]);
        let order: Vec<_> = (0..4).map(|_| boosted(pb.as_mut(), &v)).collect();
        assert_eq!(order, [Some(3), Some(5), Some(8), Some(3)]);
        // 5 runs, 8 has nothing: after 3 the scan wraps around to 3 again.
        let v = View::new(&[(3, false, 1), (5, true, 2), (8, false, 0)]);
        assert_eq!(boosted(pb.as_mut(), &v), Some(3));
        let v = View::new(&[(3, true, 1), (5, false, 0)]);
        assert_eq!(boosted(pb.as_mut(), &v), None);
    }

    #[test]
    fn period_must_be_positive() {
        assert!(build_node("pb[period_us=0]").is_err());
        assert!(build_node("pb[period_us=-1]").is_err());
        assert!(build_node("pb[period_us=x]").is_err());
        assert_eq!(
            build_node("pb[period_us=2000]").unwrap().name(),
            "pb[period_us=2000]"
        );
    }
}
