//! Linux 2.4 scheduler (SCHED_OTHER): epochs, counters and goodness.
//!
//! Algorithm (Linux 2.4 `kernel/sched.c`, see docs/models/seed-parameters.md §1.3.2):
//! - every process has a `counter`: the CPU time it may still use in the current
//!   epoch, in whole ticks; the node's timer interrupt takes one tick from the
//!   running process's counter at every tick boundary (the kernel's sampling: a
//!   process that runs between two boundaries is not charged), and the process is
//!   preempted at the boundary where its counter reaches 0. Each node's timer has
//!   its own phase (boundaries at `phase + i * tick`; nodes boot at different
//!   times), drawn by the process engine per node;
//! - `goodness(p) = 0` if its counter is spent, else `ceil(counter / tick) + 20 - nice`
//!   (the kernel's `weight = p->counter; ... weight += 20 - p->nice;`, without the
//!   SMP processor-affinity and same-`mm` bonuses); a free CPU runs the runnable
//!   process of highest goodness (ties: the one queued first), for at most its
//!   remaining counter;
//! - when every runnable process has spent its counter, the epoch ends and EVERY
//!   process of the node, runnable or sleeping, gets `counter = counter / 2 + base(nice)`
//!   (in whole ticks, as the kernel's integer `counter >> 1`),
//!   so a process that slept carries up to twice its base slice into the next epoch;
//! - the per-nice base quantum is the kernel's
//!   `NICE_TO_TICKS(nice) = TICK_SCALE(20 - nice) + 1` ticks, where `TICK_SCALE(x)`
//!   is `x >> 2` for HZ < 200, `x >> 1` for HZ < 400, `x` for HZ < 800, `x << 1` for
//!   HZ < 1600 and `x << 2` above (2.4 `kernel/sched.c`). The model takes
//!   HZ = 1 s / `tick_ms` (HZ = 100 with the default 10 ms tick: nice -20, 0, 10, 19
//!   give 11, 6, 3 and 1 ticks). `base_ticks` replaces the nice-0 value (6 at
//!   HZ = 100) and the other nice values keep the kernel's offsets from it:
//!   `base(nice) = max(1, base_ticks + NICE_TO_TICKS(nice) - NICE_TO_TICKS(0))` ticks,
//!   which is exactly `NICE_TO_TICKS(nice)` with the default `base_ticks = 6`;
//! - a woken process preempts the running one when its goodness exceeds the
//!   running process's by more than 1.
//!
//! Coscheduling hooks and their fairness rule (seed 000 §5.2: "once the process
//! uses its share of time slots, it can no longer be scheduled until all other
//! processes also expire their time slots in the current epoch"): a recommendation
//! is followed, and a boost (+1000 goodness) counts, only while the process still
//! has counter in this epoch.
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

pub struct Linux24 {
    tick: i64,
    /// The node timer's phase: tick boundaries fall at `phase + i * tick`.
    phase: i64,
    /// Base quantum of a nice-0 process, ns.
    base: i64,
    /// Timer interrupts per second (1 s / tick, rounded).
    hz: i64,
    procs: Vec<Proc>,
    /// Runnable processes in queue order.
    queue: Vec<Pid>,
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
            queue: Vec::new(),
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

    fn goodness_of(&self, counter: i64, boosted: bool, nice: i32) -> i64 {
        if counter <= 0 {
            0
        } else {
            let ticks = (counter + self.tick - 1) / self.tick;
            ticks + 20 - i64::from(nice) + if boosted { BOOST } else { 0 }
        }
    }

    fn goodness(&self, p: Pid) -> i64 {
        let s = &self.procs[p as usize];
        self.goodness_of(s.counter, s.boosted, s.nice)
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

    /// Dequeues the `k`-th runnable process; it may run until the tick boundary at
    /// which its counter is used up.
    fn take(&mut self, k: usize, now: SimTime) -> Pick {
        let pid = self.queue.remove(k);
        let now = now.as_ns();
        let ticks = (self.procs[pid as usize].counter + self.tick - 1) / self.tick;
        let first = self.phase + ((now - self.phase).div_euclid(self.tick) + 1) * self.tick;
        self.procs[pid as usize].since = now;
        Pick {
            pid,
            slice: SimTime(first + (ticks - 1).max(0) * self.tick - now),
            followed_hint: false,
        }
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
        *slot(&mut self.procs, p) = Proc {
            known: true,
            counter: self.base,
            boosted: false,
            since: 0,
            nice: 0,
        };
    }

    fn set_nice(&mut self, p: Pid, nice: i32) {
        let nice = nice.clamp(-20, 19);
        let base = self.base_of(nice);
        let s = &mut self.procs[p as usize];
        s.nice = nice;
        s.counter = base;
    }

    fn exit(&mut self, p: Pid) {
        self.queue.retain(|&q| q != p);
        self.procs[p as usize] = Proc::default();
    }

    fn enqueue(&mut self, p: Pid, _how: Wake, _now: SimTime) {
        debug_assert!(self.procs[p as usize].known && !self.queue.contains(&p));
        self.queue.push(p);
    }

    fn remove(&mut self, p: Pid, _now: SimTime) {
        self.queue.retain(|&q| q != p);
    }

    fn pick(&mut self, now: SimTime, hint: Option<Pid>) -> Option<Pick> {
        if self.queue.is_empty() {
            return None;
        }
        // The recommendation, if it is runnable and has counter left.
        let hinted = |s: &Self| {
            let h = hint?;
            let k = s.queue.iter().position(|&q| q == h)?;
            (s.procs[h as usize].counter > 0).then_some(k)
        };
        if let Some(k) = hinted(self) {
            return Some(Pick {
                followed_hint: true,
                ..self.take(k, now)
            });
        }
        let best = |s: &Self| {
            let mut best = (0i64, 0usize);
            for (k, &q) in s.queue.iter().enumerate() {
                let g = s.goodness(q);
                if g > best.0 {
                    best = (g, k);
                }
            }
            best
        };
        let (mut g, mut k) = best(self);
        if g == 0 {
            // Every runnable counter is spent: the kernel recalculates and repeats the
            // selection, and SchedAsst is consulted again before it (seed 000 §3:
            // "every time the local Linux scheduler is invoked"), so the
            // recommendation now has counter left.
            self.new_epoch();
            if let Some(k) = hinted(self) {
                return Some(Pick {
                    followed_hint: true,
                    ..self.take(k, now)
                });
            }
            (g, k) = best(self);
            debug_assert!(g > 0);
        }
        Some(self.take(k, now))
    }

    fn stop(&mut self, p: Pid, ran: SimTime, _why: Stop, now: SimTime) {
        let charged = self.ticks_between(now.as_ns() - ran.as_ns(), now.as_ns()) * self.tick;
        let s = &mut self.procs[p as usize];
        s.counter = (s.counter - charged).max(0);
    }

    fn should_preempt(&self, woken: Pid, running: Pid, ran: SimTime) -> bool {
        let r = &self.procs[running as usize];
        let charged = self.ticks_between(r.since, r.since + ran.as_ns()) * self.tick;
        let g_run = self.goodness_of(r.counter - charged, r.boosted, r.nice);
        self.goodness(woken) - g_run > 1
    }

    fn boost(&mut self, p: Pid, _now: SimTime) {
        self.procs[p as usize].boosted = true;
    }

    fn unboost(&mut self, p: Pid) {
        self.procs[p as usize].boosted = false;
    }

    fn runnable(&self) -> usize {
        self.queue.len()
    }

    fn dump(&self) -> String {
        let q: Vec<String> = self
            .queue
            .iter()
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
        assert_eq!((s.counter(0), s.counter(1)), (ms(60), ms(30)));
        s.enqueue(1, Wake::New, SimTime::ZERO);
        s.enqueue(0, Wake::New, SimTime::ZERO);
        // Goodness 6 + 20 against 3 + 20 - 10.
        let pk = s.pick(SimTime::ZERO, None).unwrap();
        assert_eq!((pk.pid, pk.slice), (0, ms(60)));
        expire(&mut s, 0, ms(60), ms(60));
        let pk = s.pick(ms(60), None).unwrap();
        assert_eq!((pk.pid, pk.slice), (1, ms(30)));
        expire(&mut s, 1, ms(30), ms(90));
        // The epoch gives each its own base again.
        s.pick(ms(90), None).unwrap();
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
}
