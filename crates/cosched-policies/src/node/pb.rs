//! PB: periodic boost (Nagar, Banerjee, Sivasubramaniam and Das, "Alternatives to
//! coscheduling a network of workstations", JPDC 59(2), 1999; seed 000 §2.3, seed
//! 001 Table 1), in the seeds' framework.
//!
//! Algorithm: every wait spins (seed 001 Table 1: receiver "Spin-only,
//! Boosting", sender "Spin-only"). Every `period_us` (on the node's timer ticks:
//! "Timer" below) a periodic mechanism scans
//! the endpoints of the node's processes round-robin, starting after the process
//! it selected last, and selects the first one that is not running and has
//! unconsumed messages (seed 000 §2.3: "a periodic mechanism checks the endpoints
//! of the parallel processes in a round-robin fashion and boosts the priority of
//! one of the processes with un-consumed messages based on some selection
//! criteria"). A running process is never displaced: the process that is
//! running keeps the CPU, and the selected one is the one the scheduler takes
//! when it next chooses. This selection rule is an assumption (G-SCH-3), stated
//! from the seeds' words and the framework below, not from Nagar et al.: their
//! paper's text could not be consulted. What could be found of it is its abstract
//! (Penn State's research portal,
//! <https://pennstate.pure.elsevier.com/en/publications/alternatives-to-coscheduling-a-network-of-workstations>,
//! and Semantic Scholar, paper c913651b3a4f0c9bc3f2c1d853f633412ed6ea8b): PB is one of
//! five schemes it introduces (with PB + spin-block, spin-yield, PB + spin-yield and
//! DCS + spin-yield) in a 3 x 3 design space of actions on "waiting for a message"
//! and "arrival of a message", implemented for Solaris 2.5.1 on UltraSPARC
//! workstations connected by Myrinet. The abstract states no selection criterion,
//! period or boost size, and a search for the paper's text and for its SPAA 1999
//! companion ("A closer look at coscheduling approaches for a network of
//! workstations") found neither, so the rule is unchanged.
//!
//! Delivery: the seeds' framework (seed 000 §3: "Every time the local Linux
//! scheduler is invoked by the system, before making a selection from its own
//! runqueue, the SchedAsst selects the next process to run based on certain
//! criteria, and returns its recommendation to the native scheduler") makes the
//! selection a *recommendation* ([`NodePolicy::recommend`]), taken at the node's
//! next scheduling point (a slice that ends, a process that blocks or ends, a
//! wake-up preemption by the native scheduler's own rule) and followed only as
//! the native scheduler's fairness rule allows (Linux 2.4: while the process has
//! counter left). It never preempts anything, so a process of the same job (or
//! any other) keeps its CPU until its own scheduling point, and no interrupt is
//! raised (the mechanism is a kernel timer, not the NIC). The recommendation
//! stands until the selected process runs, has no unconsumed message, leaves the
//! node, or the next period selects again.
//!
//! Consequence on spin-only jobs (docs/models/pb-lockstep.md): at an epoch boundary
//! the recommendation overrides the native choice (the process that ran last), by
//! each node's own message state, so the nodes fall out of phase; with spin waits and
//! no preemption nothing brings them back (2 x CG A: 97-100 s against NLS's 2.8 s).
//!
//! Timer: the scan is a kernel timer, so it runs on the node's OS timer ticks, not
//! at exact instants. Linux 2.4 keeps a timer's expiry in jiffies and runs the
//! expired timers from the timer bottom half after a tick (kernel/timer.c:
//! `do_timer` marks `TIMER_BH`, `timer_bh` calls `run_timer_list`, which runs every
//! timer whose `expires` is at or before `jiffies`); a handler that re-arms itself
//! with `mod_timer(t, jiffies + k)` runs again k ticks later. So the scan runs at
//! the first tick of the node at or after the previous scan plus `period_us`
//! (the first at the first tick at or after the node's first tick plus
//! `period_us`): every ceil(period / tick) ticks, and every tick for a period
//! shorter than one. It uses the `tick` op (the node's OS timer, with the node's
//! own phase), not the engine's exact `on_timer` chain.
//!
//! Parameters: `period_us` (10000): not stated by the seeds; one Linux 2.4 timer
//! tick (HZ = 100), the natural granularity of a kernel activity (assumption
//! G-SCH-3 in docs/models/seed-parameters.md).

use crate::registry::{ParamInfo, PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::node::Pid;
use cosched_contract::node::{NodeAction, NodePolicy, NodeView, Ops, WaitKind, WaitMode};
use cosched_des::SimTime;

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "pb",
        level: "node",
        summary: "Periodic boost: spin waits; at the first OS tick after each period_us recommend, round-robin, one waiting process with unconsumed messages, taken at the next scheduling point.",
        params: vec![ParamInfo {
            name: "period_us",
            kind: "float",
            default: "10000",
            doc: "Scan period, microseconds, rounded up to the node's OS ticks (assumption G-SCH-3: one 10 ms Linux 2.4 tick).",
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
        next: None,
        due: None,
    }))
}

pub struct Pb {
    pub period: SimTime,
    /// The process selected last (the scan resumes after it).
    last: Option<Pid>,
    /// The standing recommendation.
    next: Option<Pid>,
    /// The scan runs at the first tick at or after this (`None` before the node's
    /// first tick).
    due: Option<SimTime>,
}

impl Pb {
    /// The endpoint scan: the first process after the last selected one, round
    /// robin, that is not running and has unconsumed messages becomes the standing
    /// recommendation (none if no process qualifies).
    fn scan(&mut self, view: &dyn NodeView) {
        let procs = view.processes();
        let n = procs.len();
        let start = match self.last {
            // Resume after the last selected one (or where it stood, if it left).
            Some(l) => procs.iter().position(|&p| p > l).unwrap_or(0),
            None => 0,
        };
        self.next = (0..n)
            .map(|k| procs[(start + k) % n])
            .find(|&p| !view.is_running(p) && view.unconsumed(p) > 0);
        if self.next.is_some() {
            self.last = self.next;
        }
    }
}

impl NodePolicy for Pb {
    fn name(&self) -> String {
        format!("pb[period_us={}]", self.period.as_ns() as f64 / 1000.0)
    }
    fn wait_mode(&mut self, _view: &dyn NodeView, _p: Pid, _kind: WaitKind) -> WaitMode {
        WaitMode::Spin
    }
    fn ops(&self) -> Ops {
        Ops::RUNNING | Ops::TICK
    }
    fn tick(&mut self, view: &dyn NodeView, _out: &mut Vec<NodeAction>) {
        let now = view.now();
        match self.due {
            None => self.due = Some(now + self.period),
            Some(due) if now >= due => {
                self.due = Some(now + self.period);
                self.scan(view);
            }
            Some(_) => {}
        }
    }
    fn recommend(&mut self, view: &dyn NodeView) -> Option<Pid> {
        if let Some(p) = self.next {
            if !view.processes().contains(&p) || view.is_running(p) || view.unconsumed(p) == 0 {
                self.next = None;
            }
        }
        self.next
    }
    fn running(&mut self, _view: &dyn NodeView, p: Pid, _out: &mut Vec<NodeAction>) {
        if self.next == Some(p) {
            self.next = None;
        }
    }
    fn dump(&self) -> String {
        format!(
            "last selected: {:?}, recommended: {:?}, next scan at the first tick at or after {:?}",
            self.last, self.next, self.due
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::fake::View;
    use crate::registry::build_node;

    /// A fake view at time `now`.
    struct At<'a>(&'a View, SimTime);

    impl NodeView for At<'_> {
        fn now(&self) -> SimTime {
            self.1
        }
        fn processes(&self) -> &[Pid] {
            self.0.processes()
        }
        fn is_running(&self, p: Pid) -> bool {
            self.0.is_running(p)
        }
        fn unconsumed(&self, p: Pid) -> usize {
            self.0.unconsumed(p)
        }
    }

    /// One OS tick at `ms` milliseconds; the recommendation after it. A tick never
    /// acts at once.
    fn tick_at(pb: &mut dyn NodePolicy, v: &View, ms: i64) -> Option<Pid> {
        let at = At(v, SimTime::from_ms(ms));
        let mut out = Vec::new();
        pb.tick(&at, &mut out);
        assert!(out.is_empty(), "unexpected actions {out:?}");
        pb.recommend(&at)
    }

    #[test]
    fn scans_round_robin_skipping_running_and_empty_endpoints() {
        let mut pb = build_node("pb").unwrap();
        // No exact timer: the scan runs on the node's OS ticks.
        assert_eq!(pb.period(), None);
        assert!(pb.ops().contains(Ops::TICK));
        let v = View::new(&[(3, false, 1), (5, false, 2), (8, false, 1)]);
        // Nothing is recommended before the first scan: the node's first tick (0 ms)
        // only starts the period; with the default 10 ms period every later tick scans.
        assert_eq!(pb.recommend(&v), None);
        assert_eq!(tick_at(pb.as_mut(), &v, 0), None);
        let order: Vec<_> = (1..=4).map(|k| tick_at(pb.as_mut(), &v, 10 * k)).collect();
        assert_eq!(order, [Some(3), Some(5), Some(8), Some(3)]);
        // 5 runs, 8 has nothing: after 3 the scan wraps around to 3 again.
        let v = View::new(&[(3, false, 1), (5, true, 2), (8, false, 0)]);
        assert_eq!(tick_at(pb.as_mut(), &v, 50), Some(3));
        let v = View::new(&[(3, true, 1), (5, false, 0)]);
        assert_eq!(tick_at(pb.as_mut(), &v, 60), None);
    }

    #[test]
    fn the_scan_runs_at_the_first_tick_at_or_after_each_period() {
        // Ticks every 10 ms at phase 3 ms. Process 3 always waits with a message, and
        // is dispatched right after each recommendation (which withdraws it), so a
        // recommendation shows exactly the ticks at which a scan ran. By hand:
        // - period 25 ms: the first tick (3) sets the scan at or after 28; it runs at
        //   33 (next at or after 58), 63 (88), 93: every ceil(25 / 10) = 3 ticks,
        //   like a kernel timer re-armed 3 jiffies ahead;
        // - period 10 ms: at or after 13, which is a tick: every tick from 13 on;
        // - period 2 ms: at or after 5: every tick from 13 on (a timer cannot run
        //   between ticks).
        let v = View::new(&[(3, false, 1)]);
        let scans = |spec: &str| {
            let mut pb = build_node(spec).unwrap();
            let mut at = Vec::new();
            for ms in (3..=103).step_by(10) {
                if tick_at(pb.as_mut(), &v, ms) == Some(3) {
                    at.push(ms);
                    pb.running(&At(&v, SimTime::from_ms(ms)), 3, &mut Vec::new());
                }
            }
            at
        };
        assert_eq!(scans("pb[period_us=25000]"), [33, 63, 93]);
        let every_tick: Vec<i64> = (13..=103).step_by(10).collect();
        assert_eq!(scans("pb[period_us=10000]"), every_tick);
        assert_eq!(scans("pb[period_us=2000]"), every_tick);
    }

    #[test]
    fn the_recommendation_stands_until_the_process_runs_or_has_nothing() {
        let mut pb = build_node("pb").unwrap();
        let v = View::new(&[(3, false, 1), (5, false, 2)]);
        assert_eq!(tick_at(pb.as_mut(), &v, 0), None);
        assert_eq!(tick_at(pb.as_mut(), &v, 10), Some(3));
        // Asked again at a later scheduling point: still 3.
        assert_eq!(pb.recommend(&v), Some(3));
        // 3 consumed its message meanwhile: withdrawn.
        let v0 = View::new(&[(3, false, 0), (5, false, 2)]);
        assert_eq!(pb.recommend(&v0), None);
        // Selected again, then dispatched: withdrawn.
        assert_eq!(tick_at(pb.as_mut(), &v, 20), Some(5));
        let mut out = Vec::new();
        pb.running(&v, 5, &mut out);
        assert!(out.is_empty());
        assert_eq!(pb.recommend(&v), None);
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
