//! EEVDF, entity by entity, as `kernel/sched/fair.c` of Linux 6.12 to 6.18 runs it
//! (features at their defaults: `PLACE_LAG`, `PLACE_DEADLINE_INITIAL`, `RUN_TO_PARITY`,
//! `DELAY_DEQUEUE`, `DELAY_ZERO`; no HRTICK).
//!
//! Algorithm. Every process `i` of weight `w_i` (the cfs table,
//! [`weight_of`](super::cfs::weight_of)) has a virtual runtime `v_i` (charged
//! `ran * 1024 / w_i`), a virtual deadline `d_i` and, while it sleeps, a lag `vlag_i`.
//! `V` is the weighted mean of the virtual runtimes of the processes on the run queue
//! (queued, running and delayed; `avg_vruntime`).
//! - **Eligible** (`entity_eligible`): `v_i <= V` (it is owed CPU, lag `V - v_i >= 0`).
//! - **Pick** (`pick_eevdf`): the eligible process of earliest deadline; on equal
//!   deadlines a queued process goes before the one that just ran (`entity_before` is
//!   strict and the running entity is only taken when strictly earlier). A pick sets the
//!   picked process's protection `vprot = d_i` (`set_protect_slice`, every process having
//!   the base slice).
//! - **Deadline** (`update_deadline`, at each `update_curr`: every timer tick, and every
//!   wake-up or stop on the CPU): once `v_i >= d_i`, `d_i = v_i + slice * 1024 / w_i`; at
//!   a tick with another process on the queue the CPU is rescheduled. So a slice ends at
//!   the first tick at which the virtual runtime has reached the deadline (without the
//!   HRTICK feature nothing ends it between ticks).
//! - **Sleep** (`dequeue_entity`, `update_entity_lag`): a process that blocks while
//!   eligible leaves the queue with `vlag = clamp(V - v, ±limit)`, `limit = max(2 slice,
//!   tick) * 1024 / w`. One that blocks while not eligible (it ran ahead) stays on the
//!   queue, *delayed* (`DELAY_DEQUEUE`): it still weighs in `V` and is dequeued when it
//!   is picked, i.e. once it is eligible with the earliest deadline, its lag then cut to
//!   0 (`DELAY_ZERO`).
//! - **Wake-up** (`place_entity`): `v = V - vlag * (W + w) / W` (`W` the weight already
//!   on the queue: adding the process moves `V`, the scaling keeps its lag `vlag` after
//!   the move), `d = v + slice * 1024 / w`; a new process has `vlag` 0 and half a slice
//!   to its first deadline (`PLACE_DEADLINE_INITIAL`). A delayed process that wakes is
//!   put back as it is (`requeue_delayed_entity`), placed at `V` if its lag has become
//!   positive (`DELAY_ZERO`).
//! - **Wake-up preemption** (`check_preempt_wakeup_fair`): the woken process preempts
//!   when a pick made now would choose it, the running process being kept while it is
//!   eligible and protected (`v < vprot`) or eligible with a strictly earlier deadline.
//! - A process whose slice ends and that is picked again at once (it runs alone, or it
//!   is still the pick) is not switched out, so `set_next_entity` does not run and its
//!   protection stays lapsed: the runtime's re-pick at the same instant grants none.
//! - A boosted process (the seeds' DCS/PB/CC boost, the real agent's weight raise and
//!   reschedule check, docs/real.md "DCS: the boost's reschedule check") preempts as soon
//!   as its virtual runtime is not above the running process's, and a recommendation or a
//!   boosted process is picked first when it is eligible (the kernel's `->next` buddy is
//!   taken when eligible, `PICK_BUDDY`). The test is made at the boost, at the CPU's
//!   scheduling points and, on platforms with `boost_recheck = "agent"`, at each of the
//!   agent's re-checks (`process/hooks.rs`).
//!
//! Differences from the kernel: one run queue per node (the kernel's are per CPU); a
//! slice's end is fixed when it is picked (the first tick at which its virtual runtime
//! reaches its deadline), so a deadline renewed by a wake-up in the middle of the slice
//! does not move it; a process blocked while queued (a gang freeze) leaves at once with
//! its lag; group scheduling (autogroup, cgroups) is not modelled.
//!
//! Parameters (`OsConfig::Eevdf`): `slice_ms`, the base slice
//! (`sysctl_sched_base_slice` = 0.75 ms in 6.6, 0.70 ms in current mainline, scaled by
//! `1 + ilog2(min(CPUs, 8))` under the default `SCHED_TUNABLESCALING_LOG`,
//! `get_update_sysctl_factor`: 1.5 or 1.4 ms on 2 CPUs); `tick_ms`, the timer period (4 ms at HZ = 250, the default `CONFIG_HZ`,
//! `kernel/Kconfig.hz`). The tick's phase is the node's ([`super::build_on_node`]).

use super::cfs::weight_of;
use super::{slot, NativeScheduler, Pick, Pid, Stop, Wake};
use cosched_des::SimTime;

/// The weight of nice 0.
const NICE_0: i64 = 1024;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum State {
    #[default]
    Asleep,
    Queued,
    Running,
    /// Blocked while not eligible: still on the queue until picked (`DELAY_DEQUEUE`).
    Delayed,
}

/// One process's scheduling entity.
#[derive(Clone, Copy, Debug)]
struct Entity {
    state: State,
    weight: i64,
    /// Virtual runtime, ns, as of `at`.
    v: i64,
    /// Virtual deadline, ns.
    d: i64,
    /// Lag kept while asleep, ns of virtual time.
    vlag: i64,
    /// The protection's end in virtual time (`vprot`).
    vprot: i64,
    /// When `v` was last brought up to date (running), ns.
    at: i64,
    /// When it was picked (running), ns.
    picked_at: i64,
    /// Its slice expired at this time (ns): a pick of it at the same instant continues
    /// its run and grants no new protection.
    expired_at: Option<i64>,
    /// Stopped (expired or preempted) at this time: on equal deadlines it goes after the others.
    prev_at: Option<i64>,
    boosted: bool,
}

impl Default for Entity {
    fn default() -> Self {
        Self {
            state: State::Asleep,
            weight: NICE_0,
            v: 0,
            d: 0,
            vlag: 0,
            vprot: 0,
            at: 0,
            picked_at: 0,
            expired_at: None,
            prev_at: None,
            boosted: false,
        }
    }
}

/// EEVDF with lag placement, delayed dequeue and slice protection.
pub struct Eevdf {
    slice: i64,
    tick: i64,
    phase: i64,
    procs: Vec<Entity>,
    /// Queued and delayed processes, in the order they joined.
    queue: Vec<Pid>,
    /// The last `V` of a non-empty queue (a queue that empties keeps it).
    last_avg: i64,
}

impl Eevdf {
    pub fn new(slice: SimTime, tick: SimTime) -> Self {
        Self {
            slice: slice.as_ns().max(1),
            tick: tick.as_ns().max(1),
            phase: 0,
            procs: Vec::new(),
            queue: Vec::new(),
            last_avg: 0,
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
        SimTime(self.procs[p as usize].v)
    }

    /// Virtual time of `ns` of real time at weight `w` (`calc_delta_fair`).
    fn fair(ns: i64, w: i64) -> i64 {
        (i128::from(ns) * i128::from(NICE_0) / i128::from(w)) as i64
    }

    /// The running entity `e` brought up to time `to` (`update_curr`): the ticks since
    /// its last update renew its deadline once reached, and so does the update at `to`.
    fn advance(&self, mut e: Entity, to: i64) -> Entity {
        let vslice = Self::fair(self.slice, e.weight);
        let v_at = |e: &Entity, k: i64| e.v + Self::fair(k - e.at, e.weight);
        let first = self.tick_at_or_after(e.at + 1);
        if first <= to {
            let last = first + (to - first) / self.tick * self.tick;
            if vslice <= Self::fair(self.tick, e.weight) && last > first {
                // A deadline is never more than a slice ahead (d <= v + vslice), so when a
                // tick's run passes a slice every tick after the first renews it: the last counts.
                e.d = v_at(&e, last) + vslice;
            } else {
                let mut k = first;
                while k <= to {
                    let vk = v_at(&e, k);
                    if vk >= e.d {
                        e.d = vk + vslice;
                    }
                    k += self.tick;
                }
            }
        }
        e.v = v_at(&e, to);
        e.at = to;
        if e.v >= e.d {
            e.d = e.v + vslice;
        }
        e
    }

    /// `(sum w_i v_i, sum w_i)` over the run queue, with `over` replacing a process's entity.
    fn load(&self, over: Option<(Pid, &Entity)>) -> (i128, i128) {
        let mut sum = (0i128, 0i128);
        for (p, e) in self.procs.iter().enumerate() {
            let e = match over {
                Some((q, o)) if q as usize == p => o,
                _ => e,
            };
            if e.state != State::Asleep {
                sum.0 += i128::from(e.weight) * i128::from(e.v);
                sum.1 += i128::from(e.weight);
            }
        }
        sum
    }

    /// `V`, the weighted mean virtual runtime of the queue (`avg_vruntime`), rounded down.
    fn avg(&self, load: (i128, i128)) -> i64 {
        if load.1 == 0 {
            self.last_avg
        } else {
            load.0.div_euclid(load.1) as i64
        }
    }

    /// `v <= V` exactly (`vruntime_eligible`).
    fn eligible(load: (i128, i128), v: i64) -> bool {
        load.1 == 0 || load.0 >= i128::from(v) * load.1
    }

    /// The queued or delayed process a pick would take now: the eligible one of
    /// earliest deadline, one that just stopped going after the others on a tie.
    fn earliest(&self, load: (i128, i128), now: i64) -> Option<Pid> {
        let key = |p: Pid| {
            let e = &self.procs[p as usize];
            (e.d, e.prev_at == Some(now))
        };
        let eligible = self
            .queue
            .iter()
            .copied()
            .filter(|&p| Self::eligible(load, self.procs[p as usize].v));
        eligible.min_by_key(|&p| key(p)).or_else(|| {
            // Nothing eligible (the owed processes are running elsewhere on the node): the most owed.
            self.queue
                .iter()
                .copied()
                .min_by_key(|&p| (self.procs[p as usize].v, key(p)))
        })
    }

    /// Leaves the queue asleep with the lag it has now (`update_entity_lag`); a delayed
    /// process's positive lag is cut to 0 (`DELAY_ZERO`).
    fn sleep(&mut self, p: Pid) {
        let load = self.load(None);
        let avg = self.avg(load);
        let e = self.procs[p as usize];
        let limit = Self::fair((2 * self.slice).max(self.tick), e.weight);
        let mut vlag = (avg - e.v).clamp(-limit, limit);
        if e.state == State::Delayed {
            vlag = vlag.min(0);
        }
        self.queue.retain(|&q| q != p);
        let e = &mut self.procs[p as usize];
        e.vlag = vlag;
        e.state = State::Asleep;
        self.last_avg = avg;
    }

    /// Places a waking or new process (`place_entity`).
    fn place(&mut self, p: Pid, initial: bool) {
        let load = self.load(None);
        let avg = self.avg(load);
        let e = &mut self.procs[p as usize];
        let mut lag = i128::from(e.vlag);
        if load.1 > 0 && lag != 0 {
            lag = lag * (load.1 + i128::from(e.weight)) / load.1;
        } else {
            lag = 0;
        }
        e.v = avg - lag as i64;
        let vslice = Self::fair(self.slice, e.weight);
        e.d = e.v + if initial { vslice / 2 } else { vslice };
        e.vlag = 0;
    }

    /// Brings every running process up to `now` (the `update_curr` of an event on the node).
    fn update_running(&mut self, now: i64) {
        for k in 0..self.procs.len() {
            if self.procs[k].state == State::Running && self.procs[k].at < now {
                self.procs[k] = self.advance(self.procs[k], now);
            }
        }
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

    fn add(&mut self, p: Pid, _now: SimTime) {
        *slot(&mut self.procs, p) = Entity::default();
    }

    fn exit(&mut self, p: Pid) {
        self.queue.retain(|&q| q != p);
        self.procs[p as usize].state = State::Asleep;
    }

    fn set_nice(&mut self, p: Pid, nice: i32) {
        self.procs[p as usize].weight = weight_of(nice);
    }

    fn enqueue(&mut self, p: Pid, how: Wake, now: SimTime) {
        let t = now.as_ns();
        self.update_running(t);
        let e = self.procs[p as usize];
        match how {
            Wake::New => self.place(p, true),
            Wake::Woken { .. } if e.state == State::Delayed => {
                let positive = self.avg(self.load(None)) > e.v;
                self.queue.retain(|&q| q != p);
                if positive {
                    // Its lag became positive while delayed: placed at V with none (DELAY_ZERO).
                    self.procs[p as usize].state = State::Asleep;
                    self.procs[p as usize].vlag = 0;
                    self.place(p, false);
                }
            }
            Wake::Woken { .. } => self.place(p, false),
            Wake::Preempted | Wake::Expired => {}
        }
        let e = &mut self.procs[p as usize];
        if how != Wake::Expired {
            e.expired_at = None;
        }
        e.state = State::Queued;
        self.queue.push(p);
    }

    fn remove(&mut self, p: Pid, now: SimTime) {
        self.update_running(now.as_ns());
        self.procs[p as usize].expired_at = None;
        self.sleep(p);
    }

    fn pick(&mut self, now: SimTime, hint: Option<Pid>) -> Option<Pick> {
        let t = now.as_ns();
        self.update_running(t);
        let (pid, followed) = loop {
            let load = self.load(None);
            let favoured = hint
                .filter(|h| self.queue.contains(h))
                .or_else(|| {
                    self.queue
                        .iter()
                        .copied()
                        .find(|&q| self.procs[q as usize].boosted)
                })
                .filter(|&c| {
                    self.procs[c as usize].state == State::Queued
                        && Self::eligible(load, self.procs[c as usize].v)
                });
            if let Some(c) = favoured {
                break (c, Some(c) == hint);
            }
            let best = self.earliest(load, t)?;
            if self.procs[best as usize].state == State::Delayed {
                // A delayed process picked is dequeued for good, and the pick is made again.
                self.sleep(best);
                continue;
            }
            break (best, false);
        };
        self.queue.retain(|&q| q != pid);
        let vslice_end = {
            let e = &mut self.procs[pid as usize];
            e.state = State::Running;
            e.boosted = false;
            e.at = t;
            e.picked_at = t;
            e.prev_at = None;
            e.vprot = if e.expired_at.take() == Some(t) {
                e.v
            } else {
                e.d
            };
            e.d - e.v
        };
        // The slice ends at the first tick at which v reaches d (one strictly later if it has).
        let w = self.procs[pid as usize].weight;
        let to_deadline = (i128::from(vslice_end.max(0)) * i128::from(w) + i128::from(NICE_0 - 1))
            / i128::from(NICE_0);
        let end = self.tick_at_or_after(t + (to_deadline as i64).max(1));
        Some(Pick {
            pid,
            slice: SimTime(end - t),
            followed_hint: followed,
        })
    }

    fn stop(&mut self, p: Pid, ran: SimTime, why: Stop, now: SimTime) {
        let t = now.as_ns();
        let e = self.procs[p as usize];
        // Charged what it ran since the pick (less what the updates on the way charged).
        let end = e.picked_at + ran.as_ns();
        let mut e = if end > e.at { self.advance(e, end) } else { e };
        e.at = t;
        // Expired and picked again at once: the kernel does not pick it again, so no new protection.
        e.expired_at = (why == Stop::Expired).then_some(t);
        e.prev_at = Some(t);
        self.procs[p as usize] = e;
        if why != Stop::Blocked {
            // Off the queue until the runtime enqueues it again, at once.
            self.procs[p as usize].state = State::Asleep;
        } else if Self::eligible(self.load(None), e.v) {
            self.sleep(p);
        } else {
            self.procs[p as usize].state = State::Delayed;
            self.queue.push(p);
        }
    }

    fn should_preempt(&self, woken: Pid, running: Pid, ran: SimTime) -> bool {
        let r0 = self.procs[running as usize];
        let r = self.advance(r0, (r0.picked_at + ran.as_ns()).max(r0.at));
        let w = &self.procs[woken as usize];
        if w.boosted {
            // Owed CPU: the boost's reschedule check (module notes).
            return r.v >= w.v;
        }
        let load = self.load(Some((running, &r)));
        let curr_eligible = Self::eligible(load, r.v);
        if curr_eligible && r.v < r.vprot {
            return false;
        }
        let Some(best) = self.earliest(load, -1) else {
            return false;
        };
        let best_d = self.procs[best as usize].d;
        best == woken && !(curr_eligible && r.d < best_d)
    }

    fn boost(&mut self, p: Pid, _now: SimTime) {
        self.procs[p as usize].boosted = true;
    }

    fn unboost(&mut self, p: Pid) {
        self.procs[p as usize].boosted = false;
    }

    fn runnable(&self) -> usize {
        self.queue
            .iter()
            .filter(|&&p| self.procs[p as usize].state == State::Queued)
            .count()
    }

    fn dump(&self) -> String {
        let q: Vec<String> = self
            .queue
            .iter()
            .map(|&p| {
                let e = &self.procs[p as usize];
                format!(
                    "{p}({:?},v={}us,d={}us,w={})",
                    e.state,
                    e.v / 1000,
                    e.d / 1000,
                    e.weight
                )
            })
            .collect();
        format!(
            "{} V={}us queue=[{}]",
            self.name(),
            self.avg(self.load(None)) / 1000,
            q.join(" ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: f64) -> SimTime {
        SimTime::from_secs_f64(x / 1000.0)
    }

    /// Runs `p` from its pick at `from` to `to` and stops it `why`; an expired or
    /// preempted process is queued again.
    fn run(s: &mut Eevdf, p: Pid, from: f64, to: f64, why: Stop) {
        s.stop(p, ms(to - from), why, ms(to));
        match why {
            Stop::Expired => s.enqueue(p, Wake::Expired, ms(to)),
            Stop::Preempted => s.enqueue(p, Wake::Preempted, ms(to)),
            Stop::Blocked => {}
        }
    }

    fn woken() -> Wake {
        Wake::Woken { slept: ms(1.0) }
    }

    /// Two processes of equal weight started together, slice 4 ms, tick 4 ms. By hand:
    /// both new at 0: v = 0, d = 0 + 4 / 2 = 2 ms (half a slice). 0 is picked (equal
    /// deadlines, first queued), its slice ends at the first tick with v >= 2 ms: 4 ms.
    fn started() -> Eevdf {
        let mut s = Eevdf::new(ms(4.0), ms(4.0));
        for p in 0..2 {
            s.add(p, SimTime::ZERO);
            s.enqueue(p, Wake::New, SimTime::ZERO);
        }
        let a = s.pick(SimTime::ZERO, None).unwrap();
        assert_eq!((a.pid, a.slice), (0, ms(4.0)));
        s
    }

    #[test]
    fn a_woken_process_is_placed_by_its_lag_and_preempts_a_running_one_no_longer_eligible() {
        let mut s = started();
        // At 4 ms: v0 = 4, renewed d0 = 4 + 4 = 8. V = (4 + 0) / 2 = 2: 1 is eligible, 0 not.
        run(&mut s, 0, 0.0, 4.0, Stop::Expired);
        let b = s.pick(ms(4.0), None).unwrap();
        assert_eq!((b.pid, b.slice), (1, ms(4.0)));
        // 1 blocks at 5 ms: v1 = 1, V = (4 + 1) / 2 = 2.5, eligible: it sleeps with lag 1.5 ms.
        run(&mut s, 1, 4.0, 5.0, Stop::Blocked);
        assert_eq!(s.procs[1].vlag, ms(1.5).as_ns());
        // 0 alone from 5 ms, protected to vprot = d0 = 8 ms (t = 9 ms); slice to the tick at 12.
        let c = s.pick(ms(5.0), None).unwrap();
        assert_eq!((c.pid, c.slice), (0, ms(7.0)));
        // 1 wakes at 6 ms: v0 = 5 = V; placed at 5 - 1.5 x (1024 + 1024) / 1024 = 2 ms,
        // d1 = 2 + 4 = 6 ms; now V = (5 + 2) / 2 = 3.5, its lag 1.5 ms is kept.
        s.enqueue(1, woken(), ms(6.0));
        assert_eq!((s.vruntime(1), s.procs[1].d), (ms(2.0), ms(6.0).as_ns()));
        // 0 (v 5 > V 3.5) is no longer eligible, so its protection does not hold: 1 preempts.
        assert!(s.should_preempt(1, 0, ms(1.0)));
    }

    #[test]
    fn a_wake_up_without_lag_waits_while_the_running_deadline_is_earlier() {
        // Slice 1.5 ms, tick 4 ms. 0 runs alone from 0 (new: d = 0.75 ms): its slice ends
        // at the tick at 4 ms, where v = 4 >= d renews d = 5.5 ms; picked again at once,
        // without protection (vprot = v = 4).
        let mut s = Eevdf::new(ms(1.5), ms(4.0));
        for p in 0..2 {
            s.add(p, SimTime::ZERO);
        }
        s.enqueue(0, Wake::New, SimTime::ZERO);
        assert_eq!(s.pick(SimTime::ZERO, None).unwrap().slice, ms(4.0));
        run(&mut s, 0, 0.0, 4.0, Stop::Expired);
        assert_eq!(s.pick(ms(4.0), None).unwrap().slice, ms(4.0));
        assert_eq!(
            (s.procs[0].d, s.procs[0].vprot),
            (ms(5.5).as_ns(), ms(4.0).as_ns())
        );
        // 1 (lag 0) wakes at 4.5 ms: v0 = 4.5 < d0 = 5.5, no renewal; 1 at V = 4.5, d1 = 6.
        // Both eligible (4.5 <= 4.5), 0's deadline is earlier: 0 keeps the CPU.
        s.enqueue(1, woken(), ms(4.5));
        assert_eq!(s.procs[1].d, ms(6.0).as_ns());
        assert!(!s.should_preempt(1, 0, ms(0.5)));
        // The tick at 8 ms: v0 = 8, V = (8 + 4.5) / 2 = 6.25: only 1 is eligible; it runs
        // at 8 ms, held 8 - 4.5 = 3.5 ms.
        run(&mut s, 0, 4.0, 8.0, Stop::Expired);
        assert_eq!(s.pick(ms(8.0), None).unwrap().pid, 1);
    }

    #[test]
    fn a_wake_up_without_lag_preempts_once_the_running_deadline_is_renewed() {
        // As above, but 1 wakes at 6 ms: v0 = 6 >= d0 = 5.5, renewed d0 = 7.5; 1 at 6,
        // d1 = 7.5. Equal deadlines: the queued one goes first, so 1 preempts (held 0).
        let mut s = Eevdf::new(ms(1.5), ms(4.0));
        for p in 0..2 {
            s.add(p, SimTime::ZERO);
        }
        s.enqueue(0, Wake::New, SimTime::ZERO);
        s.pick(SimTime::ZERO, None).unwrap();
        run(&mut s, 0, 0.0, 4.0, Stop::Expired);
        s.pick(ms(4.0), None).unwrap();
        s.enqueue(1, woken(), ms(6.0));
        assert_eq!(
            (s.procs[0].d, s.procs[1].d),
            (ms(7.5).as_ns(), ms(7.5).as_ns())
        );
        assert!(s.should_preempt(1, 0, ms(2.0)));
    }

    /// 0 and 1 alternate to 8 ms (by hand: at 4 ms v0 = 4, d0 = 8, 1 picked; at 8 ms
    /// v1 = 4, d1 renewed to 8; V = 4, equal deadlines, 1 just ran: 0 picked, protected
    /// to v = 8, its slice to the tick at 12 ms).
    fn alternated() -> Eevdf {
        let mut s = started();
        run(&mut s, 0, 0.0, 4.0, Stop::Expired);
        s.pick(ms(4.0), None).unwrap();
        run(&mut s, 1, 4.0, 8.0, Stop::Expired);
        let c = s.pick(ms(8.0), None).unwrap();
        assert_eq!((c.pid, c.slice), (0, ms(4.0)));
        s
    }

    #[test]
    fn a_process_blocking_ahead_of_its_share_is_delayed_and_leaves_with_no_lag() {
        let mut s = alternated();
        // 0 blocks at 11 ms: v0 = 7, V = (7 + 4) / 2 = 5.5, not eligible: delayed (it stays
        // in V, not runnable).
        run(&mut s, 0, 8.0, 11.0, Stop::Blocked);
        assert_eq!((s.procs[0].state, s.runnable()), (State::Delayed, 1));
        // 1 runs from 11 ms (d1 = 8, v1 = 4: its slice to the tick at 16 ms). At 16 ms
        // v1 = 9, d1 renewed at the tick to 13; V = (7 + 9) / 2 = 8: 0 is eligible with the
        // earlier deadline (8), so the pick dequeues it, lag 8 - 7 = 1 cut to 0, and picks 1.
        assert_eq!(s.pick(ms(11.0), None).unwrap().slice, ms(5.0));
        run(&mut s, 1, 11.0, 16.0, Stop::Expired);
        assert_eq!(s.pick(ms(16.0), None).unwrap().pid, 1);
        assert_eq!((s.procs[0].state, s.procs[0].vlag), (State::Asleep, 0));
        // 0 wakes at 18 ms: v1 = 11, d1 = 13; 0 placed at V = 11, d0 = 15; 1 eligible,
        // unprotected (picked again at once) and earlier: 0 waits for the tick at 20 ms.
        s.enqueue(0, woken(), ms(18.0));
        assert_eq!(s.vruntime(0), ms(11.0));
        assert!(!s.should_preempt(0, 1, ms(2.0)));
    }

    #[test]
    fn a_delayed_process_woken_before_it_leaves_keeps_its_place() {
        let mut s = alternated();
        run(&mut s, 0, 8.0, 11.0, Stop::Blocked);
        s.pick(ms(11.0), None).unwrap();
        // 0 wakes at 13 ms still delayed: v1 = 6, V = (7 + 6) / 2 = 6.5 < v0 = 7 (lag -0.5):
        // put back as it is (v0 = 7, d0 = 8); 1 is eligible and protected (v1 6 < vprot 8).
        s.enqueue(0, woken(), ms(13.0));
        assert_eq!((s.vruntime(0), s.procs[0].d), (ms(7.0), ms(8.0).as_ns()));
        assert_eq!(s.runnable(), 1);
        assert!(!s.should_preempt(0, 1, ms(2.0)));
    }

    #[test]
    fn a_boosted_wake_up_preempts_once_owed_cpu_inside_the_protected_slice() {
        let mut s = alternated();
        // 1 blocks? No: 1 is queued (v1 = 4); make it a sleeper woken at 9 ms instead.
        s.remove(1, ms(8.0));
        // At 9 ms v0 = 5; 1 left at 8 ms with lag V - v1 = (4 + 4) / 2 - 4 = 0: placed at
        // V = 5 (0 alone), d1 = 9 > d0 = 8, 0 eligible and protected (v0 5 < 8): no preemption.
        s.enqueue(1, woken(), ms(9.0));
        assert!(!s.should_preempt(1, 0, ms(1.0)));
        // Boosted (DCS): v1 = 5 <= v0 = 5, owed CPU: it preempts at once.
        s.boost(1, ms(9.0));
        assert!(s.should_preempt(1, 0, ms(1.0)));
        // The boost ends when it is picked.
        run(&mut s, 0, 8.0, 9.0, Stop::Preempted);
        assert_eq!(s.pick(ms(9.0), None).unwrap().pid, 1);
        assert!(!s.procs[1].boosted);
    }

    #[test]
    fn slices_end_at_the_first_tick_after_the_deadline() {
        // Slice 0.75 ms, tick 4 ms, phase 1 ms: ticks at 1, 5, 9, ... ms. Both new: d = 0.375.
        let mut s = Eevdf::new(SimTime::from_us(750), ms(4.0)).with_phase(ms(1.0));
        for p in 0..2 {
            s.add(p, SimTime::ZERO);
            s.enqueue(p, Wake::New, SimTime::ZERO);
        }
        // Picked at 0: 0.375 -> the tick at 1 ms; the other picked at 1 ms: 1.375 -> 5 ms.
        let a = s.pick(SimTime::ZERO, None).unwrap();
        assert_eq!(a.slice, ms(1.0));
        run(&mut s, a.pid, 0.0, 1.0, Stop::Expired);
        let b = s.pick(ms(1.0), None).unwrap();
        assert_ne!(b.pid, a.pid);
        assert_eq!(b.slice, ms(4.0));
        assert_eq!(s.name(), "eevdf[slice_ms=0.75,tick_ms=4]");
    }

    #[test]
    fn a_lag_is_bounded_by_the_kernel_limit() {
        // Slice 1.5 ms, tick 4 ms: limit max(3, 4) = 4 ms. 0 runs 20 ms alone, then 1 (new at
        // 0, lag 0, never ran) is placed at V; a process with 1 ms of CPU in 20 ms against
        // the other leaves with lag min(V - v, 4 ms).
        let mut s = Eevdf::new(ms(1.5), ms(4.0));
        for p in 0..2 {
            s.add(p, SimTime::ZERO);
            s.enqueue(p, Wake::New, SimTime::ZERO);
        }
        // Picked: 0 (v 0, d 0.75, first queued), its slice to the tick at 4 ms.
        s.pick(SimTime::ZERO, None).unwrap();
        // 1 leaves at 0 while queued: lag V - v1 = 0.
        s.remove(1, SimTime::ZERO);
        let mut t = 0.0;
        for _ in 0..5 {
            run(&mut s, 0, t, t + 4.0, Stop::Expired);
            t += 4.0;
            s.pick(ms(t), None).unwrap();
        }
        // 1 wakes at 20 ms placed at V = v0 = 20 with no lag, runs 1 ms (0 off), blocks:
        // V = (20 + 21) / 2 = 20.5 < 21: delayed, not a 19.5 ms credit.
        s.enqueue(1, woken(), ms(20.0));
        assert_eq!(s.vruntime(1), ms(20.0));
        // 0, picked again at 20 ms, is preempted at once: V = 20, d0 = d1 = 21.5, 1 goes first.
        run(&mut s, 0, 20.0, 20.0, Stop::Preempted);
        assert_eq!(s.pick(ms(20.0), None).unwrap().pid, 1);
        run(&mut s, 1, 20.0, 21.0, Stop::Blocked);
        assert_eq!(s.procs[1].state, State::Delayed);
        // The limit itself: a lag of 10 ms is clamped to 4 ms when it leaves.
        s.procs[0].state = State::Queued;
        s.procs[0].v = s.procs[1].v - ms(20.0).as_ns();
        s.queue.push(0);
        s.sleep(0);
        assert_eq!(s.procs[0].vlag, ms(4.0).as_ns());
    }
}
