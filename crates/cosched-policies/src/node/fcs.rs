//! FCS: flexible coscheduling (Frachtenberg, Feitelson, Petrini, Fernandez,
//! "Flexible CoScheduling: Mitigating Load Imbalance and Improving Utilization
//! of Heterogeneous Resources", IPDPS 2003; "Adaptive Parallel Job Scheduling
//! with Flexible Coscheduling", IEEE TPDS 16(11), 2005), its node part.
//!
//! FCS monitors each process's computation granularity and communication
//! behaviour and uses coscheduling only for the processes that need it; the
//! others fill the CPU time coscheduling would leave idle. The classification is
//! per process, not per job (so a job's slow, load-imbalanced processes are told
//! apart from its others). This policy is FCS's per-node part:
//! - **Measures** (per process, over its last `window` waits): the granularity,
//!   the CPU time it uses between the end of one wait and the start of the next
//!   (the view's `cpu_time`; wall time when the host cannot tell), and the wait
//!   time, how long each wait lasted (`on_wait_end`).
//! - **Classes** (the papers' three): *CS* (coscheduled) when fine-grained
//!   (mean granularity < `gran_ms`) and its waits are short (mean wait <=
//!   `comm_us`): it synchronizes often and its peers answer in time, so it gains
//!   from running with them; *F* (frustrated) when fine-grained but its waits are
//!   long: it needs coscheduling but does not get its benefit (load imbalance,
//!   a slow peer); *DC* (don't care) when coarse-grained (mean granularity >=
//!   `gran_ms`): it synchronizes too rarely to care. Every process starts as CS
//!   (the papers' initial class) and is reclassified after every `window` waits.
//! - **Local scheduling by class**: CS processes are coscheduled, F processes
//!   get preference over DC, DC processes are fillers. Without the papers'
//!   global strobe (gang slots belong to the process-level cluster scheduler, not
//!   to a node policy), coscheduling of CS is approximated the demand-driven way:
//!   a message for a CS process that is not running boosts it until it runs, and
//!   a CS waiter spin-blocks for up to `comm_us` (its reply is expected within
//!   that). An F waiter spin-blocks for `f_spin_us` (an implicit-coscheduling
//!   baseline: a round trip plus two context switches) and gives its CPU to
//!   others; a DC waiter blocks at once. At each pick the policy recommends a
//!   runnable CS process that is not running, else an F one (lowest pid first);
//!   DC processes run when the native scheduler picks them by itself. The native
//!   scheduler's fairness rule keeps the final word.
//!
//! Parameters (the papers' numeric thresholds are not reproduced here; these are
//! assumptions, with their reasons):
//! - `gran_ms` (10): coarse-grained from this mean granularity on: one native
//!   time slice (Linux 2.4's 10 ms tick, the seeds' platform), so a process that
//!   computes a whole slice between synchronizations loses little when its peers
//!   are descheduled.
//! - `comm_us` (300): the longest mean wait of a process that communicates in
//!   time: the seeds' spin-block time (seed 001 §4, "e.g. 300us"), a wait a
//!   coscheduled peer answers within; also the CS spin.
//! - `f_spin_us` (29.4): the F spin, the `ics` baseline on `choi2004` (2 x 9.7
//!   us round trip + 2 x 5 us context switch).
//! - `window` (8): waits per classification (at least 1).

use crate::node::boost_on_message;
use crate::node::as_us;
use crate::node::sb::micros;
use crate::registry::{ParamInfo, PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::node::{
    DequeueReason, EnqueueReason, NodeAction, NodePolicy, NodeView, Ops, Pid, WaitEnd, WaitKind,
    WaitMode,
};
use cosched_des::SimTime;

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "fcs",
        level: "node",
        summary: "Flexible coscheduling: each process classified from its granularity and wait time as CS (coscheduled: spin-block, boosted on messages, recommended first), F (frustrated: short spin, preferred filler) or DC (don't care: blocks, filler).",
        params: vec![
            ParamInfo {
                name: "gran_ms",
                kind: "float",
                default: "10",
                doc: "Mean CPU time between waits from which a process is coarse-grained (DC), milliseconds.",
            },
            ParamInfo {
                name: "comm_us",
                kind: "float",
                default: "300",
                doc: "Longest mean wait of a CS process, microseconds; also its spin before blocking.",
            },
            ParamInfo {
                name: "f_spin_us",
                kind: "float",
                default: "29.4",
                doc: "Spin of an F process before it blocks, microseconds (the ics baseline on choi2004).",
            },
            ParamInfo {
                name: "window",
                kind: "int",
                default: "8",
                doc: "Waits per classification.",
            },
        ],
    }
}

pub fn build(spec: &PolicySpec) -> Result<Box<dyn NodePolicy>, RegistryError> {
    spec.expect_only(&["gran_ms", "comm_us", "f_spin_us", "window"])?;
    let window: u32 = spec.get("window", 8)?;
    if window == 0 {
        return Err(RegistryError::BadValue {
            policy: spec.name.clone(),
            param: "window".into(),
            value: "0".into(),
            msg: "must be at least 1".into(),
        });
    }
    let gran_us = micros(spec, "gran_ms", 10.0)?.as_ns() as f64;
    Ok(Box::new(Fcs {
        gran: SimTime((gran_us * 1000.0).round() as i64),
        comm: micros(spec, "comm_us", 300.0)?,
        f_spin: micros(spec, "f_spin_us", 29.4)?,
        window,
        procs: Vec::new(),
    }))
}

/// FCS's process classes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Class {
    /// Coscheduled: fine-grained, communicates in time.
    #[default]
    Cs,
    /// Frustrated: fine-grained, but waits long.
    F,
    /// Don't care: coarse-grained.
    Dc,
}

/// What the policy knows of one process.
#[derive(Clone, Copy, Debug, Default)]
struct Stat {
    class: Class,
    runnable: bool,
    /// CPU (or wall) time at the end of its last wait.
    mark: Option<SimTime>,
    gran_n: u32,
    gran_ns: i64,
    wait_n: u32,
    wait_ns: i64,
}

pub struct Fcs {
    pub gran: SimTime,
    pub comm: SimTime,
    pub f_spin: SimTime,
    pub window: u32,
    procs: Vec<Stat>,
}

fn clock(view: &dyn NodeView, p: Pid) -> SimTime {
    view.cpu_time(p).unwrap_or_else(|| view.now())
}

impl Fcs {
    fn stat(&mut self, p: Pid) -> &mut Stat {
        let i = p as usize;
        if self.procs.len() <= i {
            self.procs.resize(i + 1, Stat::default());
        }
        &mut self.procs[i]
    }

    /// The class of `p` (CS until classified).
    pub fn class(&self, p: Pid) -> Class {
        self.procs.get(p as usize).map_or(Class::Cs, |s| s.class)
    }

    fn classify(&mut self, p: Pid) {
        let (gran, comm) = (self.gran.as_ns(), self.comm.as_ns());
        let s = self.stat(p);
        let mean = |sum: i64, n: u32| sum / i64::from(n.max(1));
        s.class = if s.gran_n > 0 && mean(s.gran_ns, s.gran_n) >= gran {
            Class::Dc
        } else if mean(s.wait_ns, s.wait_n) <= comm {
            Class::Cs
        } else {
            Class::F
        };
        *s = Stat {
            class: s.class,
            runnable: s.runnable,
            mark: s.mark,
            ..Stat::default()
        };
    }
}

impl NodePolicy for Fcs {
    fn name(&self) -> String {
        format!(
            "fcs[gran_ms={},comm_us={},f_spin_us={},window={}]",
            as_us(self.gran) / 1000.0,
            as_us(self.comm),
            as_us(self.f_spin),
            self.window
        )
    }
    fn ops(&self) -> Ops {
        Ops::ENQUEUE | Ops::DEQUEUE | Ops::WAIT_END
    }
    fn wait_mode(&mut self, _view: &dyn NodeView, p: Pid, _kind: WaitKind) -> WaitMode {
        match self.class(p) {
            Class::Cs => WaitMode::SpinBlock(self.comm),
            Class::F => WaitMode::SpinBlock(self.f_spin),
            Class::Dc => WaitMode::Block,
        }
    }
    fn recommend(&mut self, view: &dyn NodeView) -> Option<Pid> {
        let ready = |c: Class| {
            view.processes().iter().copied().find(|&p| {
                let s = self.procs.get(p as usize);
                s.is_some_and(|s| s.runnable && s.class == c) && !view.is_running(p)
            })
        };
        ready(Class::Cs).or_else(|| ready(Class::F))
    }
    fn enqueue(
        &mut self,
        _v: &dyn NodeView,
        p: Pid,
        _why: EnqueueReason,
        _o: &mut Vec<NodeAction>,
    ) {
        self.stat(p).runnable = true;
    }
    fn dequeue(
        &mut self,
        _v: &dyn NodeView,
        p: Pid,
        _why: DequeueReason,
        _o: &mut Vec<NodeAction>,
    ) {
        self.stat(p).runnable = false;
    }
    fn on_wait_begin(
        &mut self,
        view: &dyn NodeView,
        p: Pid,
        _k: WaitKind,
        _o: &mut Vec<NodeAction>,
    ) {
        let now = clock(view, p);
        let s = self.stat(p);
        if let Some(m) = s.mark {
            s.gran_n += 1;
            s.gran_ns += (now - m).as_ns().max(0);
        }
    }
    fn on_wait_end(
        &mut self,
        view: &dyn NodeView,
        p: Pid,
        end: &WaitEnd,
        _o: &mut Vec<NodeAction>,
    ) {
        let now = clock(view, p);
        let window = self.window;
        let s = self.stat(p);
        s.mark = Some(now);
        s.wait_n += 1;
        s.wait_ns += end.waited.as_ns();
        if s.wait_n >= window {
            self.classify(p);
        }
    }
    fn on_message(
        &mut self,
        _view: &dyn NodeView,
        p: Pid,
        running: bool,
        out: &mut Vec<NodeAction>,
    ) {
        if self.class(p) == Class::Cs {
            boost_on_message(p, running, false, out);
        }
    }
    fn dump(&self) -> String {
        let count = |c| self.procs.iter().filter(|s| s.class == c).count();
        format!(
            "classes (by pid slot): {} CS, {} F, {} DC",
            count(Class::Cs),
            count(Class::F),
            count(Class::Dc)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::fake::View;
    use cosched_contract::node::WaitEndCause;

    fn fcs() -> Fcs {
        Fcs {
            gran: SimTime::from_ms(10),
            comm: SimTime::from_us(300),
            f_spin: SimTime::from_ns(29_400),
            window: 2,
            procs: Vec::new(),
        }
    }

    /// Two waits of `p`: `compute` of CPU before each, each lasting `wait`.
    fn two_waits(f: &mut Fcs, p: Pid, compute: SimTime, wait: SimTime) {
        let mut out = Vec::new();
        let mut cpu = f
            .procs
            .get(p as usize)
            .and_then(|s| s.mark)
            .unwrap_or(SimTime::ZERO);
        for _ in 0..2 {
            cpu += compute;
            f.on_wait_begin(
                &View::new(&[(p, true, 0)]).cpu(p, cpu),
                p,
                WaitKind::Recv,
                &mut out,
            );
            let end = WaitEnd {
                kind: WaitKind::Recv,
                waited: wait,
                spun: SimTime::ZERO,
                blocked: true,
                by: WaitEndCause::Woken,
            };
            f.on_wait_end(&View::new(&[(p, true, 0)]).cpu(p, cpu), p, &end, &mut out);
        }
        assert!(out.is_empty());
    }

    #[test]
    fn classifies_by_granularity_and_wait_time() {
        let mut f = fcs();
        assert_eq!(f.class(0), Class::Cs, "every process starts as CS");
        // Fine-grained (1 ms), short waits (100 us): CS.
        two_waits(&mut f, 0, SimTime::from_ms(1), SimTime::from_us(100));
        assert_eq!(f.class(0), Class::Cs);
        // Fine-grained, long waits (the first wait of the window has no granularity
        // sample before the first mark; the mean is over the samples there are): F.
        two_waits(&mut f, 0, SimTime::from_ms(1), SimTime::from_ms(2));
        assert_eq!(f.class(0), Class::F);
        // Coarse-grained (20 ms between waits): DC, whatever its waits.
        two_waits(&mut f, 0, SimTime::from_ms(20), SimTime::from_us(10));
        assert_eq!(f.class(0), Class::Dc);
        // Wait modes by class.
        let v = View::new(&[(0, true, 0), (1, true, 0), (2, true, 0)]);
        two_waits(&mut f, 1, SimTime::from_ms(1), SimTime::from_ms(2));
        assert_eq!(f.wait_mode(&v, 0, WaitKind::Recv), WaitMode::Block);
        assert_eq!(
            f.wait_mode(&v, 1, WaitKind::Recv),
            WaitMode::SpinBlock(SimTime::from_ns(29_400))
        );
        assert_eq!(
            f.wait_mode(&v, 2, WaitKind::Recv),
            WaitMode::SpinBlock(SimTime::from_us(300))
        );
    }

    #[test]
    fn recommends_cs_then_f_never_dc_and_boosts_cs_on_messages() {
        let mut f = fcs();
        two_waits(&mut f, 0, SimTime::from_ms(20), SimTime::from_us(10)); // DC
        two_waits(&mut f, 1, SimTime::from_ms(1), SimTime::from_ms(2)); // F
        let mut out = Vec::new();
        let v = View::new(&[(0, false, 0), (1, false, 0), (2, false, 0)]);
        for p in 0..3 {
            f.enqueue(&v, p, EnqueueReason::Woken, &mut out);
        }
        assert_eq!(f.recommend(&v), Some(2), "CS first");
        f.dequeue(&v, 2, DequeueReason::Blocked(WaitKind::Recv), &mut out);
        assert_eq!(f.recommend(&v), Some(1), "then F");
        f.dequeue(&v, 1, DequeueReason::Finished, &mut out);
        assert_eq!(f.recommend(&v), None, "DC is a filler");
        for p in 0..3 {
            f.on_message(&v, p, false, &mut out);
        }
        assert_eq!(out, [NodeAction::BoostUntilRun(2)]);
        assert!(crate::registry::build_node("fcs[window=0]").is_err());
        assert_eq!(
            crate::registry::build_node("fcs").unwrap().name(),
            "fcs[gran_ms=10,comm_us=300,f_spin_us=29.4,window=8]"
        );
    }
}
