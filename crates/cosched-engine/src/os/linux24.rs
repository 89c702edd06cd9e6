//! Linux 2.4 scheduler (SCHED_OTHER): epochs, counters and goodness.
//!
//! Algorithm (Linux 2.4 `kernel/sched.c`, see docs/models/seed-parameters.md §1.3.2).
//! Line numbers below are those of the 2.4.17 `kernel/sched.c` and `kernel/fork.c`
//! (repository rickgaiser/linux-2.4.17-ps2), the 2.4 source nearest to seed 000's
//! 2.4.7-10 that could be read (2.4.7's own file was not at hand; later 2.4 kernels
//! moved `add_to_runqueue` to the list's tail, 2.4.17 still has the head):
//! - every process has a `counter`: the CPU time it may still use in the current
//!   epoch, in whole ticks; the node's timer interrupt takes one tick from the
//!   running process's counter at every tick boundary (the kernel's sampling: a
//!   process that runs between two boundaries is not charged), and the process is
//!   preempted at the boundary where its counter reaches 0. Each node's timer has
//!   its own phase (boundaries at `phase + i * tick`; nodes boot at different
//!   times), drawn by the process engine per node;
//! - `goodness(p) = 0` if its counter is spent, else `ceil(counter / tick) + 20 - nice`,
//!   plus 1 when `p`'s address space is the one loaded on the CPU (sched.c:272-273,
//!   `if (p->mm == this_mm || !p->mm) weight += 1;`, with `this_mm = prev->active_mm`):
//!   the process that ran last on that CPU ([`NativeScheduler::set_active_mm`]; every
//!   process of a job has its own address space). The SMP processor-affinity bonus
//!   is not modelled;
//! - the run queue is the kernel's list: a woken or new process is put at its
//!   head (sched.c:419, `add_to_runqueue`: `list_add(&p->run_list, &runqueue_head)`,
//!   "This has to add the process to the _beginning_ of the run-queue"); a process
//!   that is preempted or uses up its counter is never taken off the list and
//!   keeps its place; a process that blocks leaves it (`del_from_runqueue`). A
//!   free CPU runs the process of highest goodness, the first in list order among
//!   equals (sched.c:719, `if (weight > c)`), for at most its remaining counter;
//! - when every runnable process has spent its counter, the epoch ends and EVERY
//!   process of the node, runnable or sleeping, gets `counter = counter / 2 + base(nice)`
//!   (sched.c:731, `p->counter = (p->counter >> 1) + NICE_TO_TICKS(p->nice)`),
//!   so a process that slept carries up to twice its base slice into the next epoch;
//! - the per-nice base quantum is the kernel's
//!   `NICE_TO_TICKS(nice) = TICK_SCALE(20 - nice) + 1` ticks (sched.c:74), where
//!   `TICK_SCALE(x)` is `x >> 2` for HZ < 200, `x >> 1` for HZ < 400, `x` for
//!   HZ < 800, `x << 1` for HZ < 1600 and `x << 2` above (sched.c:62-72). The model
//!   takes HZ = 1 s / `tick_ms` (HZ = 100 with the default 10 ms tick: nice -20, 0,
//!   10, 19 give 11, 6, 3 and 1 ticks; nice 0 is 6 ticks = 60 ms, which the source's
//!   comment calls "around 50ms or so"). `base_ticks` replaces the nice-0 value (6
//!   at HZ = 100) and the other nice values keep the kernel's offsets from it:
//!   `base(nice) = max(1, base_ticks + NICE_TO_TICKS(nice) - NICE_TO_TICKS(0))` ticks,
//!   which is exactly `NICE_TO_TICKS(nice)` with the default `base_ticks = 6`;
//! - a forked child gets half its parent's counter, rounded up, and the parent keeps
//!   the other half (fork.c:711-712, `p->counter = (current->counter + 1) >> 1;
//!   current->counter >>= 1;`). A job's process is forked by the node's launcher
//!   daemon, which sleeps between launches: its counter is the sleeper's value
//!   after many epochs (`c = c / 2 + base(0)` iterated from `base(0)` until it
//!   stops changing: 11 ticks for base 6), so a new process starts with
//!   `(11 + 1) / 2 = 6` ticks ([`launch_counter_ticks`]). A nice value set after
//!   the fork changes the goodness term and the next epochs' quantum, not the
//!   counter already given (2.4.17 `kernel/sys.c:235`, `set_one_prio`: `p->nice = niceval;` only);
//! - a woken process preempts the running one when its goodness exceeds the
//!   running process's, counting the running process's same-address-space +1
//!   (sched.c:405, `if (preemption_goodness(tsk, p, this_cpu) > 0)`, where
//!   `preemption_goodness` compares both against `prev->active_mm`): without the
//!   bonuses, the woken process must lead by 2.
//!
//! Coscheduling hooks and their fairness rule (seed 000 §5.2: "once the process
//! uses its share of time slots, it can no longer be scheduled until all other
//! processes also expire their time slots in the current epoch"): a recommendation
//! is followed, and a boost (+1000 goodness) counts, only while the process still
//! has counter in this epoch.
//!
//! When a boost takes effect: Linux 2.4 looks for a preemption only where it sets
//! `need_resched`: a wake-up (`reschedule_idle`, sched.c, through
//! `preemption_goodness`) and the tick that spends the running process's counter
//! (`update_process_times`); a priority change alone sets nothing
//! (`set_one_prio`, sys.c, above). The seeds' DCS boost comes with the NIC's
//! interrupt for the process (seed 000 §4), handled in the kernel by the SchedAsst
//! module; that it marks the running process `need_resched`, so that `schedule()`
//! runs on the interrupt's return (`ret_from_intr`) and goodness, boost counted,
//! decides at once, is assumption G-SCH-1 (docs/models/seed-parameters.md). So a
//! boost here takes effect at once through [`NativeScheduler::should_preempt`]
//! (goodness with the boost against the running process's); the CFS model's
//! boost preempts only a process owed CPU (today's kernel with the real agent's
//! reschedule check, cfs.rs).
//!
//! Parameters: `tick_ms` (10, HZ = 100), `base_ticks` (6: NICE_TO_TICKS(0) at HZ = 100).
//! A process's nice value comes from its job ([`NativeScheduler::set_nice`]; default 0).

use super::{slot, NativeScheduler, Pick, Pid, Stop, Wake};
use cosched_des::SimTime;
pub use cosched_model::node::{default_base_ticks, default_tick_ms};

/// Goodness added to a boosted process that still has counter.
const BOOST: i64 = 1000;

#[derive(Clone, Default, Debug)]
struct Proc {
    known: bool,
    counter: i64,
    boosted: bool,
    /// When it was last picked.
    since: i64,
    /// Nice value, -20 to 19.
    nice: i32,
    /// On the kernel's run-queue list (runnable or running).
    on_list: bool,
    /// Runnable and not running: a candidate for `pick`.
    ready: bool,
}

/// The kernel's `NICE_TO_TICKS(nice)` at `hz` timer interrupts per second (2.4
/// `kernel/sched.c`: `TICK_SCALE(20 - nice) + 1`).
pub fn nice_to_ticks(nice: i32, hz: i64) -> i64 {
    let x = i64::from(20 - nice.clamp(-20, 19));
    let scaled = match hz {
        ..200 => x >> 2,
        200..400 => x >> 1,
        400..800 => x,
        800..1600 => x << 1,
        _ => x << 2,
    };
    scaled + 1
}

/// `fork()`'s split of the parent's counter (ticks): `(child, parent)` =
/// `((c + 1) >> 1, c >> 1)` (2.4 `kernel/fork.c`).
pub fn fork_split(parent_ticks: i64) -> (i64, i64) {
    ((parent_ticks + 1) >> 1, parent_ticks >> 1)
}

/// The counter of a process that has slept through many epochs, ticks: the
/// epoch rule `c = (c >> 1) + base` iterated from `base` until it stops changing.
pub fn sleeper_ticks(base_ticks: i64) -> i64 {
    let mut c = base_ticks;
    loop {
        let next = (c >> 1) + base_ticks;
        if next == c {
            return c;
        }
        c = next;
    }
}

/// The counter a job's process starts with, ticks: half the counter of the
/// sleeping launcher daemon that forks it (module doc).
pub fn launch_counter_ticks(base_ticks: i64) -> i64 {
    fork_split(sleeper_ticks(base_ticks)).0
}

pub struct Linux24 {
    tick: i64,
    /// The node timer's phase: tick boundaries fall at `phase + i * tick`.
    phase: i64,
    /// Base quantum of a nice-0 process, ns.
    base: i64,
    /// Timer interrupts per second (1 s / tick, rounded).
    hz: i64,
    procs: Vec<Proc>,
    /// The kernel's run-queue list in order: runnable and running processes.
    list: Vec<Pid>,
    /// The process whose address space the CPU about to pick has loaded.
    active_mm: Option<Pid>,
    epochs: u64,
}

impl Linux24 {
    pub fn new(tick: SimTime, base_ticks: u32) -> Self {
        assert!(
            tick.as_ns() > 0 && base_ticks > 0,
            "validated by the caller"
        );
        Self {
            tick: tick.as_ns(),
            phase: 0,
            base: tick.as_ns() * base_ticks as i64,
            hz: (1e9 / tick.as_ns() as f64).round() as i64,
            procs: Vec::new(),
            list: Vec::new(),
            active_mm: None,
            epochs: 0,
        }
    }

    /// The same scheduler on a node whose timer boundaries fall at `phase + i * tick`.
    pub fn with_phase(mut self, phase: SimTime) -> Self {
        self.phase = phase.as_ns().rem_euclid(self.tick);
        self
    }

    /// Tick boundaries `b` with `from < b <= to`.
    fn ticks_between(&self, from: i64, to: i64) -> i64 {
        (to - self.phase).div_euclid(self.tick) - (from - self.phase).div_euclid(self.tick)
    }

    /// The counter of `p` (remaining CPU time in this epoch).
    pub fn counter(&self, p: Pid) -> SimTime {
        SimTime(self.procs[p as usize].counter)
    }

    /// Number of epoch recomputations so far.
    pub fn epochs(&self) -> u64 {
        self.epochs
    }

    /// The base quantum of a process of nice `nice`, ns (module doc).
    pub fn base_of(&self, nice: i32) -> i64 {
        let d = nice_to_ticks(nice, self.hz) - nice_to_ticks(0, self.hz);
        (self.base + d * self.tick).max(self.tick)
    }

    /// Goodness of a counter, boost and nice value, with the same-address-space
    /// bonus `mm` (0 or 1) when the counter is not spent.
    fn goodness_of(&self, counter: i64, boosted: bool, nice: i32, mm: i64) -> i64 {
        if counter <= 0 {
            0
        } else {
            let ticks = (counter + self.tick - 1) / self.tick;
            ticks + 20 - i64::from(nice) + mm + if boosted { BOOST } else { 0 }
        }
    }

    /// Goodness of `p` on the CPU about to pick (its address space loaded or not).
    fn goodness(&self, p: Pid) -> i64 {
        let s = &self.procs[p as usize];
        let mm = i64::from(self.active_mm == Some(p));
        self.goodness_of(s.counter, s.boosted, s.nice, mm)
    }

    fn new_epoch(&mut self) {
        self.epochs += 1;
        let tick = self.tick;
        for k in 0..self.procs.len() {
            if !self.procs[k].known {
                continue;
            }
            let base = self.base_of(self.procs[k].nice);
            let s = &mut self.procs[k];
            s.counter = (s.counter.max(0) / tick / 2) * tick + base;
        }
    }

    /// Marks `pid` running; it may run until the tick boundary at which its
    /// counter is used up. It keeps its place on the list.
    fn take(&mut self, pid: Pid, now: SimTime) -> Pick {
        let now = now.as_ns();
        let ticks = (self.procs[pid as usize].counter + self.tick - 1) / self.tick;
        let first = self.phase + ((now - self.phase).div_euclid(self.tick) + 1) * self.tick;
        let s = &mut self.procs[pid as usize];
        s.since = now;
        s.ready = false;
        Pick {
            pid,
            slice: SimTime(first + (ticks - 1).max(0) * self.tick - now),
            followed_hint: false,
        }
    }

    /// The recommendation, if it is runnable and has counter left.
    fn hinted(&self, hint: Option<Pid>) -> Option<Pid> {
        let h = hint?;
        let s = self.procs.get(h as usize)?;
        (s.ready && s.counter > 0).then_some(h)
    }

    /// The runnable process of highest goodness, the first on the list among
    /// equals, with its goodness.
    fn best(&self) -> Option<(i64, Pid)> {
        let mut best: Option<(i64, Pid)> = None;
        for &q in &self.list {
            if !self.procs[q as usize].ready {
                continue;
            }
            let g = self.goodness(q);
            if best.is_none_or(|(b, _)| g > b) {
                best = Some((g, q));
            }
        }
        best
    }

    fn unlist(&mut self, p: Pid) {
        self.list.retain(|&q| q != p);
        let s = &mut self.procs[p as usize];
        s.on_list = false;
        s.ready = false;
    }
}

impl NativeScheduler for Linux24 {
    fn name(&self) -> String {
        format!(
            "linux24[tick_ms={},base_ticks={}]",
            self.tick as f64 / 1e6,
            self.base / self.tick
        )
    }

    fn add(&mut self, p: Pid, _now: SimTime) {
        let counter = launch_counter_ticks(self.base / self.tick) * self.tick;
        *slot(&mut self.procs, p) = Proc {
            known: true,
            counter,
            ..Proc::default()
        };
    }

    fn set_nice(&mut self, p: Pid, nice: i32) {
        self.procs[p as usize].nice = nice.clamp(-20, 19);
    }

    fn exit(&mut self, p: Pid) {
        self.list.retain(|&q| q != p);
        self.procs[p as usize] = Proc::default();
    }

    fn set_active_mm(&mut self, last: Option<Pid>) {
        self.active_mm = last;
    }

    fn enqueue(&mut self, p: Pid, _how: Wake, _now: SimTime) {
        let s = &mut self.procs[p as usize];
        debug_assert!(s.known && !s.ready);
        s.ready = true;
        if !s.on_list {
            // Woken or new: `add_to_runqueue` puts it at the head. A preempted or
            // expired process never left the list and keeps its place.
            s.on_list = true;
            self.list.insert(0, p);
        }
    }

    fn remove(&mut self, p: Pid, _now: SimTime) {
        self.unlist(p);
    }

    fn pick(&mut self, now: SimTime, hint: Option<Pid>) -> Option<Pick> {
        let (g, mut pid) = self.best()?;
        if let Some(h) = self.hinted(hint) {
            return Some(Pick {
                followed_hint: true,
                ..self.take(h, now)
            });
        }
        if g == 0 {
            // Every runnable counter is spent: the kernel recalculates and repeats the
            // selection, and SchedAsst is consulted again before it (seed 000 §3:
            // "every time the local Linux scheduler is invoked"), so the
            // recommendation now has counter left.
            self.new_epoch();
            if let Some(h) = self.hinted(hint) {
                return Some(Pick {
                    followed_hint: true,
                    ..self.take(h, now)
                });
            }
            let (g, q) = self.best().expect("still runnable");
            debug_assert!(g > 0);
            pid = q;
        }
        Some(self.take(pid, now))
    }

    fn stop(&mut self, p: Pid, ran: SimTime, why: Stop, now: SimTime) {
        let charged = self.ticks_between(now.as_ns() - ran.as_ns(), now.as_ns()) * self.tick;
        let s = &mut self.procs[p as usize];
        s.counter = (s.counter - charged).max(0);
        if why == Stop::Blocked {
            // `schedule()` takes a process that sleeps off the list.
            self.unlist(p);
        }
    }

    fn should_preempt(&self, woken: Pid, running: Pid, ran: SimTime) -> bool {
        let r = &self.procs[running as usize];
        let charged = self.ticks_between(r.since, r.since + ran.as_ns()) * self.tick;
        // Both against the running process's address space: it gets the +1.
        let g_run = self.goodness_of(r.counter - charged, r.boosted, r.nice, 1);
        let w = &self.procs[woken as usize];
        let g_woken = self.goodness_of(w.counter, w.boosted, w.nice, 0);
        g_woken - g_run > 0
    }

    fn boost(&mut self, p: Pid, _now: SimTime) {
        self.procs[p as usize].boosted = true;
    }

    fn unboost(&mut self, p: Pid) {
        self.procs[p as usize].boosted = false;
    }

    fn runnable(&self) -> usize {
        self.list
            .iter()
            .filter(|&&q| self.procs[q as usize].ready)
            .count()
    }

    fn dump(&self) -> String {
        let q: Vec<String> = self
            .list
            .iter()
            .filter(|&&p| self.procs[p as usize].ready)
            .map(|&p| {
                let s = &self.procs[p as usize];
                format!(
                    "{p}(c={}ms,nice={},g={})",
                    s.counter / 1_000_000,
                    s.nice,
                    self.goodness(p)
                )
            })
            .collect();
        format!(
            "{} epochs={} runnable=[{}]",
            self.name(),
            self.epochs,
            q.join(" ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: i64) -> SimTime {
        SimTime::from_ms(x)
    }

    /// `p`, picked at `at - ran`, runs out its slice at `at` and queues again.
    fn expire(s: &mut Linux24, p: Pid, ran: SimTime, at: SimTime) {
        s.stop(p, ran, Stop::Expired, at);
        s.enqueue(p, Wake::Expired, at);
    }

    #[test]
    fn epoch_recomputes_sleepers_too() {
        let mut s = Linux24::new(ms(10), 6);
        for p in 0..2 {
            s.add(p, SimTime::ZERO);
        }
        // Only 0 is runnable; 1 sleeps.
        s.enqueue(0, Wake::New, SimTime::ZERO);
        let pk = s.pick(SimTime::ZERO, None).unwrap();
        assert_eq!((pk.pid, pk.slice), (0, ms(60)));
        s.stop(0, ms(60), Stop::Expired, ms(60));
        s.enqueue(0, Wake::Expired, ms(60));
        // Counter spent: a new epoch gives 0 -> 0/2 + 60 and the sleeper 1 -> 60/2 + 60.
        let pk = s.pick(ms(60), None).unwrap();
        assert_eq!(pk.pid, 0);
        assert_eq!(s.counter(0), ms(60));
        assert_eq!(s.counter(1), ms(90));
        assert_eq!(s.epochs(), 1);
    }

    #[test]
    fn woken_sleeper_preempts_a_cpu_hog() {
        let mut s = Linux24::new(ms(10), 6);
        for p in 0..2 {
            s.add(p, SimTime::ZERO);
        }
        s.enqueue(0, Wake::New, SimTime::ZERO);
        s.pick(SimTime::ZERO, None).unwrap();
        // 1 wakes after 0 has run 30 ms: goodness 6+20 vs 3+20.
        assert!(s.should_preempt(1, 0, ms(30)));
        // After only 5 ms: 6+20 vs ceil(5.5)=6 ... +20: no.
        assert!(!s.should_preempt(1, 0, ms(5)));
    }

    #[test]
    fn hints_need_counter_left() {
        let mut s = Linux24::new(ms(10), 6);
        for p in 0..2 {
            s.add(p, SimTime::ZERO);
            s.enqueue(p, Wake::New, SimTime::ZERO);
        }
        let pk = s.pick(SimTime::ZERO, Some(1)).unwrap();
        assert_eq!((pk.pid, pk.followed_hint), (1, true));
        s.stop(1, ms(60), Stop::Expired, ms(60));
        s.enqueue(1, Wake::Expired, ms(60));
        // 1 has spent its counter: the recommendation is refused, 0 runs.
        let pk = s.pick(ms(60), Some(1)).unwrap();
        assert_eq!((pk.pid, pk.followed_hint), (0, false));
    }

    #[test]
    fn nice_sets_the_base_quantum_and_the_goodness() {
        // NICE_TO_TICKS at HZ = 100 and HZ = 1000.
        let t: Vec<i64> = [-20, 0, 10, 19].map(|n| nice_to_ticks(n, 100)).into();
        assert_eq!(t, [11, 6, 3, 1]);
        assert_eq!(nice_to_ticks(0, 1000), 41);
        let mut s = Linux24::new(ms(10), 6);
        for p in 0..2 {
            s.add(p, SimTime::ZERO);
        }
        s.set_nice(1, 10);
        // Nice set after the fork: the counter is still the launcher's half.
        assert_eq!((s.counter(0), s.counter(1)), (ms(60), ms(60)));
        s.enqueue(1, Wake::New, SimTime::ZERO);
        s.enqueue(0, Wake::New, SimTime::ZERO);
        // Goodness 6 + 20 against 6 + 20 - 10.
        let pk = s.pick(SimTime::ZERO, None).unwrap();
        assert_eq!((pk.pid, pk.slice), (0, ms(60)));
        expire(&mut s, 0, ms(60), ms(60));
        let pk = s.pick(ms(60), None).unwrap();
        assert_eq!((pk.pid, pk.slice), (1, ms(60)));
        expire(&mut s, 1, ms(60), ms(120));
        // The epoch gives each its own base.
        s.pick(ms(120), None).unwrap();
        assert_eq!((s.counter(0), s.counter(1)), (ms(60), ms(30)));
        // base_ticks replaces NICE_TO_TICKS(0); other nice values keep their offsets.
        let s5 = Linux24::new(ms(10), 5);
        assert_eq!(
            (s5.base_of(0), s5.base_of(10), s5.base_of(19)),
            (50_000_000, 20_000_000, 10_000_000)
        );
    }

    #[test]
    fn a_recommendation_refused_for_a_spent_counter_is_followed_after_the_epoch() {
        let mut s = Linux24::new(ms(10), 6);
        for p in 0..2 {
            s.add(p, SimTime::ZERO);
            s.enqueue(p, Wake::New, SimTime::ZERO);
        }
        for (t, p) in [(0, 0), (60, 1)] {
            let pk = s.pick(ms(t), Some(p)).unwrap();
            expire(&mut s, pk.pid, ms(60), ms(t + 60));
        }
        // Both spent: the epoch is recomputed and the recommendation (1, queued
        // second) is followed.
        let pk = s.pick(ms(120), Some(1)).unwrap();
        assert_eq!((pk.pid, pk.followed_hint, s.epochs()), (1, true, 1));
    }

    #[test]
    fn boost_only_while_counter_remains() {
        let mut s = Linux24::new(ms(10), 6);
        for p in 0..3 {
            s.add(p, SimTime::ZERO);
        }
        s.enqueue(0, Wake::New, SimTime::ZERO);
        s.enqueue(1, Wake::New, SimTime::ZERO);
        s.boost(1, SimTime::ZERO);
        assert_eq!(s.pick(SimTime::ZERO, None).unwrap().pid, 1);
        s.stop(1, ms(60), Stop::Expired, ms(60));
        s.enqueue(1, Wake::Expired, ms(60));
        // Boosted but spent: 0 (unboosted, with counter) runs first.
        assert_eq!(s.pick(ms(60), None).unwrap().pid, 0);
    }

    #[test]
    fn sixty_ms_slice_at_nice_0() {
        // NICE_TO_TICKS(0) at HZ = 100: (20 >> 2) + 1 = 6 ticks of 10 ms.
        assert_eq!(nice_to_ticks(0, 100), 6);
        let mut s = Linux24::new(ms(10), cosched_model::node::default_base_ticks());
        s.add(0, SimTime::ZERO);
        s.enqueue(0, Wake::New, SimTime::ZERO);
        let pk = s.pick(SimTime::ZERO, None).unwrap();
        assert_eq!(pk.slice, ms(60));
        assert_eq!(s.base_of(0), 60_000_000);
    }

    #[test]
    fn a_forked_child_gets_half_its_parents_counter() {
        // fork(): child (c + 1) >> 1, parent c >> 1.
        assert_eq!(fork_split(6), (3, 3));
        assert_eq!(fork_split(11), (6, 5));
        // A sleeping launcher: 6 -> 3 + 6 = 9 -> 4 + 6 = 10 -> 5 + 6 = 11 -> 11.
        assert_eq!(sleeper_ticks(6), 11);
        assert_eq!(launch_counter_ticks(6), 6);
        // Base 5: 5 -> 7 -> 8 -> 9 -> 9, child (9 + 1) >> 1 = 5.
        assert_eq!((sleeper_ticks(5), launch_counter_ticks(5)), (9, 5));
        // Base 20: 20 -> 30 -> 35 -> 37 -> 38 -> 39 -> 39, child 20.
        assert_eq!((sleeper_ticks(20), launch_counter_ticks(20)), (39, 20));
        let mut s = Linux24::new(ms(10), 20);
        s.add(0, SimTime::ZERO);
        assert_eq!(s.counter(0), ms(200));
        let mut s = Linux24::new(ms(10), 1);
        // Base 1: 1 -> 1, child (1 + 1) >> 1 = 1.
        s.add(0, SimTime::ZERO);
        assert_eq!(s.counter(0), ms(10));
    }

    #[test]
    fn woken_processes_go_to_the_head_of_the_run_queue() {
        let mut s = Linux24::new(ms(10), 6);
        for p in 0..3 {
            s.add(p, SimTime::ZERO);
        }
        // 0 then 1 then 2 are woken: the list is 2, 1, 0; equal goodness: 2 runs.
        for p in 0..3 {
            s.enqueue(p, Wake::New, SimTime::ZERO);
        }
        let pk = s.pick(SimTime::ZERO, None).unwrap();
        assert_eq!(pk.pid, 2);
        // 2 is preempted after 5 ms (no tick charged): it keeps its place at the
        // head, and with the same goodness and its address space loaded it runs again.
        s.stop(2, ms(5), Stop::Preempted, ms(5));
        s.enqueue(2, Wake::Preempted, ms(5));
        s.set_active_mm(Some(2));
        assert_eq!(s.pick(ms(5), None).unwrap().pid, 2);
        // 2 blocks; on another CPU's view (nothing loaded) 1 is first among equals.
        // (It blocks at 9 ms, before the tick at 10 ms: still 6 ticks.)
        s.stop(2, ms(4), Stop::Blocked, ms(9));
        s.set_active_mm(None);
        assert_eq!(s.pick(ms(9), None).unwrap().pid, 1);
        // 2 wakes: back at the head, before 0.
        s.enqueue(2, Wake::Woken { slept: ms(1) }, ms(11));
        s.set_active_mm(None);
        assert_eq!(s.pick(ms(11), None).unwrap().pid, 2);
    }

    #[test]
    fn same_mm_bonus_favours_the_process_that_ran_last() {
        let mut s = Linux24::new(ms(10), 6);
        for p in 0..2 {
            s.add(p, SimTime::ZERO);
        }
        s.enqueue(0, Wake::New, SimTime::ZERO);
        s.enqueue(1, Wake::New, SimTime::ZERO); // list: 1, 0
                                                // 0 ran last on this CPU: goodness 6 + 20 + 1 against 1's 6 + 20.
        s.set_active_mm(Some(0));
        assert_eq!(s.pick(SimTime::ZERO, None).unwrap().pid, 0);
        // 0 runs 10 ms (one tick: counter 5) and is preempted: 5 + 20 + 1 = 26
        // against 1's 26: equal, and 1 is first on the list.
        s.stop(0, ms(10), Stop::Preempted, ms(10));
        s.enqueue(0, Wake::Preempted, ms(10));
        s.set_active_mm(Some(0));
        assert_eq!(s.pick(ms(10), None).unwrap().pid, 1);
    }

    #[test]
    fn wake_up_preemption_counts_the_running_process_mm_bonus() {
        let mut s = Linux24::new(ms(10), 6);
        for p in 0..2 {
            s.add(p, SimTime::ZERO);
        }
        s.enqueue(0, Wake::New, SimTime::ZERO);
        s.pick(SimTime::ZERO, None).unwrap();
        // After 10 ms the running 0 has 5 ticks: 5 + 20 + 1 = 26 against the woken
        // 1's 6 + 20 = 26: no preemption (the kernel needs a positive difference).
        assert!(!s.should_preempt(1, 0, ms(10)));
        // After 20 ms: 4 + 20 + 1 = 25 < 26: preempt.
        assert!(s.should_preempt(1, 0, ms(20)));
    }
}
