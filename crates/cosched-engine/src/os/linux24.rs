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
//! - `goodness(p) = 0` if its counter is spent, else `ceil(counter / tick) + 20 - nice`;
//!   a free CPU runs the runnable process of highest goodness (ties: the one queued
//!   first), for at most its remaining counter;
//! - when every runnable process has spent its counter, the epoch ends and EVERY
//!   process of the node, runnable or sleeping, gets `counter = counter / 2 + base`
//!   (in whole ticks, as the kernel's integer `counter >> 1`),
//!   so a process that slept carries up to twice the base slice into the next epoch;
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
//! Every process has nice 0.

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
}

pub struct Linux24 {
    tick: i64,
    /// The node timer's phase: tick boundaries fall at `phase + i * tick`.
    phase: i64,
    base: i64,
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

    fn goodness_of(&self, counter: i64, boosted: bool) -> i64 {
        if counter <= 0 {
            0
        } else {
            let ticks = (counter + self.tick - 1) / self.tick;
            ticks + 20 + if boosted { BOOST } else { 0 }
        }
    }

    fn goodness(&self, p: Pid) -> i64 {
        let s = &self.procs[p as usize];
        self.goodness_of(s.counter, s.boosted)
    }

    fn new_epoch(&mut self) {
        self.epochs += 1;
        let tick = self.tick;
        for s in self.procs.iter_mut().filter(|s| s.known) {
            s.counter = (s.counter.max(0) / tick / 2) * tick + self.base;
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
        };
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
        if let Some(h) = hint {
            if let Some(k) = self.queue.iter().position(|&q| q == h) {
                if self.procs[h as usize].counter > 0 {
                    return Some(Pick {
                        followed_hint: true,
                        ..self.take(k, now)
                    });
                }
            }
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
            self.new_epoch();
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
        let g_run = self.goodness_of(r.counter - charged, r.boosted);
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
                format!(
                    "{p}(c={}ms,g={})",
                    self.procs[p as usize].counter / 1_000_000,
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
