//! EEVDF with `RUN_TO_PARITY` slice protection (Linux 6.6 and later; the rule
//! below follows `kernel/sched/fair.c` of 6.12+).
//!
//! Algorithm: the fair-share accounting is the [`cfs`](super::cfs) model's (virtual
//! runtime charged `ran * 1024 / weight`, the runnable process of least virtual
//! runtime picked first, a recommendation or boost followed only when it is owed
//! CPU), wrapped with wake-up granularity 0 (EEVDF has none: `pick_eevdf` takes the
//! eligible entity of earliest deadline). What EEVDF changes is when a process gives
//! up its CPU:
//! - a slice ends at the first timer tick at or after dispatch + `slice` (the
//!   deadline is checked in `update_curr` -> `update_deadline`, run at each tick by
//!   `task_tick_fair`; without the HRTICK feature nothing ends a slice between ticks),
//!   and every process gets the same `slice` of real time whatever its weight
//!   (`se->deadline = se->vruntime + calc_delta_fair(se->slice, se)`);
//! - a woken process that is not boosted preempts the running one
//!   (`check_preempt_wakeup_fair` -> `pick_eevdf`) only once the running one's
//!   protection has ended: `RUN_TO_PARITY` (`set_protect_slice` at the pick,
//!   `protect_slice` in `pick_eevdf`) keeps the running entity until its deadline,
//!   i.e. until that first tick; from then on a woken process that is owed CPU
//!   (virtual runtime below the running one's) preempts at once;
//! - a process running alone is not picked again when its slice ends
//!   (`update_curr` reschedules only with more than one runnable entity), so its
//!   protection lapses: the runtime re-picks it at each slice end, and such a pick
//!   (it expired with nothing else runnable and is picked again at the same instant)
//!   grants no new protection;
//! - a boosted process (the seeds' DCS/PB/CC boost) preempts as soon as it is owed
//!   CPU, protection or not: `pick_eevdf` drops the running entity (and with it the
//!   protection) once it is no longer eligible, and against a boosted, heavily
//!   weighted entity the running one stops being eligible when its virtual runtime
//!   passes the boosted one's (docs/real.md, "DCS: the boost's reschedule check").
//!
//! A woken process's credit: the cfs model's bounded sleeper credit with the bound
//! set to the kernel's lag limit `max(2 * slice, TICK_NSEC)` (`update_entity_lag`).
//! Not modelled: lag-exact placement (`place_entity`), delayed dequeue, the
//! eligibility of a non-boosted running process.
//!
//! Parameters (`OsConfig::Eevdf`): `slice_ms`, the base slice
//! (`sysctl_sched_base_slice` = 0.75 ms, scaled by `1 + ilog2(min(CPUs, 8))` under
//! the default `SCHED_TUNABLESCALING_LOG`, `get_update_sysctl_factor`: 1.5 ms on
//! 2 CPUs); `tick_ms`, the timer period (4 ms at HZ = 250, the default `CONFIG_HZ`,
//! `kernel/Kconfig.hz`). The tick's phase is the node's ([`super::build_on_node`]).

use super::cfs::Cfs;
use super::{slot, NativeScheduler, Pick, Pid, Stop, Wake};
use cosched_des::SimTime;

/// Per-process protection state.
#[derive(Clone, Copy, Debug, Default)]
struct Guard {
    /// Run time since the last pick during which a non-boosted wake-up does not preempt, ns.
    protected_ns: i64,
    /// Expired with nothing else runnable, at this time (ns): a pick at the same
    /// instant continues its run and grants no new protection.
    alone_at: Option<i64>,
}

/// EEVDF with slice protection, over the cfs model's accounting.
pub struct Eevdf {
    inner: Cfs,
    slice: i64,
    tick: i64,
    phase: i64,
    guards: Vec<Guard>,
    boosted: Vec<bool>,
}

impl Eevdf {
    pub fn new(slice: SimTime, tick: SimTime) -> Self {
        // The cfs model's credit is latency / 2: the lag limit max(2 slice, tick).
        let limit = (2 * slice.as_ns()).max(tick.as_ns());
        Self {
            inner: Cfs::new(SimTime(2 * limit), slice, SimTime::ZERO),
            slice: slice.as_ns(),
            tick: tick.as_ns().max(1),
            phase: 0,
            guards: Vec::new(),
            boosted: Vec::new(),
        }
    }

    /// Puts the timer's boundaries at `phase + i * tick`.
    pub fn with_phase(mut self, phase: SimTime) -> Self {
        self.phase = phase.as_ns().rem_euclid(self.tick);
        self
    }

    /// The first tick at or after `t`, ns.
    fn tick_at_or_after(&self, t: i64) -> i64 {
        let k = (t - self.phase).div_euclid(self.tick);
        let at = self.phase + k * self.tick;
        if at < t {
            at + self.tick
        } else {
            at
        }
    }

    pub fn vruntime(&self, p: Pid) -> SimTime {
        self.inner.vruntime(p)
    }
}

impl NativeScheduler for Eevdf {
    fn name(&self) -> String {
        format!(
            "eevdf[slice_ms={},tick_ms={}]",
            self.slice as f64 / 1e6,
            self.tick as f64 / 1e6
        )
    }

    fn add(&mut self, p: Pid, now: SimTime) {
        self.inner.add(p, now);
        *slot(&mut self.guards, p) = Guard::default();
        *slot(&mut self.boosted, p) = false;
    }

    fn exit(&mut self, p: Pid) {
        self.inner.exit(p);
    }

    fn set_nice(&mut self, p: Pid, nice: i32) {
        self.inner.set_nice(p, nice);
    }

    fn enqueue(&mut self, p: Pid, how: Wake, now: SimTime) {
        if how != Wake::Expired {
            self.guards[p as usize].alone_at = None;
        }
        self.inner.enqueue(p, how, now);
    }

    fn remove(&mut self, p: Pid, now: SimTime) {
        self.guards[p as usize].alone_at = None;
        self.inner.remove(p, now);
    }

    fn pick(&mut self, now: SimTime, hint: Option<Pid>) -> Option<Pick> {
        let mut pick = self.inner.pick(now, hint)?;
        self.boosted[pick.pid as usize] = false;
        let t = now.as_ns();
        let end = self.tick_at_or_after(t + self.slice);
        let g = &mut self.guards[pick.pid as usize];
        g.protected_ns = if g.alone_at.take() == Some(t) {
            0
        } else {
            end - t
        };
        pick.slice = SimTime((end - t).max(1));
        Some(pick)
    }

    fn stop(&mut self, p: Pid, ran: SimTime, why: Stop, now: SimTime) {
        let alone = why == Stop::Expired && self.inner.runnable() == 0;
        self.guards[p as usize].alone_at = alone.then_some(now.as_ns());
        self.inner.stop(p, ran, why, now);
    }

    fn should_preempt(&self, woken: Pid, running: Pid, ran: SimTime) -> bool {
        let protected = ran.as_ns() < self.guards[running as usize].protected_ns;
        (self.boosted[woken as usize] || !protected)
            && self.inner.should_preempt(woken, running, ran)
    }

    fn boost(&mut self, p: Pid, now: SimTime) {
        self.boosted[p as usize] = true;
        self.inner.boost(p, now);
    }

    fn unboost(&mut self, p: Pid) {
        self.boosted[p as usize] = false;
        self.inner.unboost(p);
    }

    fn runnable(&self) -> usize {
        self.inner.runnable()
    }

    fn dump(&self) -> String {
        format!("{} over {}", self.name(), self.inner.dump())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: i64) -> SimTime {
        SimTime::from_ms(x)
    }

    /// A spinner (0) and a sleeper (1), 4 ms slice and tick; the spinner picked at 0.
    fn pair() -> Eevdf {
        let mut s = Eevdf::new(ms(4), ms(4));
        s.add(0, SimTime::ZERO);
        s.add(1, SimTime::ZERO);
        s.enqueue(0, Wake::New, SimTime::ZERO);
        s
    }

    #[test]
    fn a_wake_up_inside_the_protected_slice_waits_for_the_tick() {
        let mut s = pair();
        // Dispatched at 0: protected to the first tick at or after 0 + 4 ms = 4 ms.
        let a = s.pick(SimTime::ZERO, None).unwrap();
        assert_eq!((a.pid, a.slice), (0, ms(4)));
        // The sleeper wakes at 1 ms: v1 = max(0, min_vruntime 0 - 8 ms) = 0 < the
        // spinner's 1 ms, so it is owed CPU, but the spinner has run 1 ms < 4 ms.
        s.enqueue(1, Wake::Woken { slept: ms(1) }, ms(1));
        assert!(!s.should_preempt(1, 0, ms(1)));
        // At 4 ms the slice ends; v0 = 4 ms > v1 = 0: the sleeper runs at 4 ms, held 4 - 1 = 3 ms.
        s.stop(0, ms(4), Stop::Expired, ms(4));
        s.enqueue(0, Wake::Expired, ms(4));
        assert_eq!(s.pick(ms(4), None).unwrap().pid, 1);
    }

    #[test]
    fn a_process_running_alone_loses_its_protection_and_a_wake_up_preempts_at_once() {
        let mut s = pair();
        // The spinner runs alone from 0: slices end at 4, 8, ..., 20 ms and it is
        // picked again at each, without new protection (it expired alone).
        let mut now = SimTime::ZERO;
        let first = s.pick(now, None).unwrap();
        let mut slice = first.slice;
        for _ in 0..5 {
            now += slice;
            s.stop(0, slice, Stop::Expired, now);
            s.enqueue(0, Wake::Expired, now);
            let pk = s.pick(now, None).unwrap();
            assert_eq!(pk.pid, 0);
            slice = pk.slice;
        }
        assert_eq!(now, ms(20));
        // The sleeper wakes at 20 ms, 20 ms after the spinner's dispatch: v1 = max(0,
        // 20 - 8) = 12 ms < v0 = 20 ms, no protection left: it preempts at once (held 0).
        s.enqueue(1, Wake::Woken { slept: ms(20) }, ms(20));
        assert!(s.should_preempt(1, 0, SimTime::ZERO));
    }

    #[test]
    fn a_boosted_wake_up_preempts_at_once_inside_the_protected_slice() {
        let mut s = pair();
        s.pick(SimTime::ZERO, None).unwrap();
        s.enqueue(1, Wake::Woken { slept: ms(1) }, ms(1));
        // As in the first case, but boosted (DCS): v1 = 0 <= v0 = 1 ms, owed CPU, it
        // preempts at 1 ms although the spinner is protected to 4 ms.
        s.boost(1, ms(1));
        assert!(s.should_preempt(1, 0, ms(1)));
        // The boost ends when it is picked: the next protected wake-up waits again.
        s.stop(0, ms(1), Stop::Preempted, ms(1));
        s.enqueue(0, Wake::Preempted, ms(1));
        assert_eq!(s.pick(ms(1), None).unwrap().pid, 1);
        assert!(!s.boosted[1]);
    }

    #[test]
    fn slices_end_at_the_first_tick_after_the_base_slice() {
        // Slice 0.75 ms, tick 4 ms, phase 1 ms: ticks at 1, 5, 9, ... ms.
        let mut s = Eevdf::new(SimTime::from_us(750), ms(4)).with_phase(ms(1));
        for p in 0..2 {
            s.add(p, SimTime::ZERO);
            s.enqueue(p, Wake::New, SimTime::ZERO);
        }
        // Picked at 0: 0 + 0.75 ms -> the tick at 1 ms; picked at 1 ms: 1.75 -> 5 ms.
        let a = s.pick(SimTime::ZERO, None).unwrap();
        assert_eq!(a.slice, ms(1));
        s.stop(a.pid, ms(1), Stop::Expired, ms(1));
        s.enqueue(a.pid, Wake::Expired, ms(1));
        let b = s.pick(ms(1), None).unwrap();
        assert_ne!(b.pid, a.pid);
        assert_eq!(b.slice, ms(4));
        assert_eq!(s.name(), "eevdf[slice_ms=0.75,tick_ms=4]");
    }
}
