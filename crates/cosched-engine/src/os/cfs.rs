//! A CFS-like fair scheduler (Linux 2.6.23 to 6.5; EEVDF's successor keeps its
//! fairness goal).
//!
//! Algorithm: every process has a virtual runtime that grows by the CPU time it
//! uses (all processes have the same weight). A free CPU runs the runnable process
//! with the smallest virtual runtime, for a slice of `latency / runnable` but at
//! least `min_granularity`. A process keeps its virtual runtime while it sleeps,
//! but on waking it is placed no earlier than `min_vruntime - latency / 2` (bounded
//! sleeper credit); a new process starts at `min_vruntime`. A woken process
//! preempts the running one if its virtual runtime is smaller by more than
//! `wakeup_granularity`.
//!
//! Coscheduling hooks and their fairness rule (CFS's "next buddy"): a
//! recommendation or a boosted process is run first only if its virtual runtime
//! is within `wakeup_granularity` of the smallest one.
//!
//! Parameters: `latency_ms` (6), `min_granularity_ms` (0.75), `wakeup_granularity_ms` (1),
//! Linux's defaults for one CPU.

use super::{slot, NativeScheduler, Pick, Pid, Stop, Wake};
use cosched_des::SimTime;
pub use cosched_model::node::{
    default_latency_ms, default_min_granularity_ms, default_wakeup_granularity_ms,
};

#[derive(Clone, Default, Debug)]
struct Proc {
    vruntime: i64,
    boosted: bool,
}

pub struct Cfs {
    latency: i64,
    min_gran: i64,
    wakeup_gran: i64,
    procs: Vec<Proc>,
    queue: Vec<Pid>,
    min_vruntime: i64,
    running: usize,
}

impl Cfs {
    pub fn new(latency: SimTime, min_granularity: SimTime, wakeup_granularity: SimTime) -> Self {
        Self {
            latency: latency.as_ns(),
            min_gran: min_granularity.as_ns(),
            wakeup_gran: wakeup_granularity.as_ns(),
            procs: Vec::new(),
            queue: Vec::new(),
            min_vruntime: 0,
            running: 0,
        }
    }

    pub fn vruntime(&self, p: Pid) -> SimTime {
        SimTime(self.procs[p as usize].vruntime)
    }

    fn leftmost(&self) -> Option<(usize, i64)> {
        self.queue
            .iter()
            .enumerate()
            .map(|(k, &q)| (k, self.procs[q as usize].vruntime))
            .min_by_key(|&(k, v)| (v, k))
    }

    fn fair_enough(&self, p: Pid, leftmost: i64) -> bool {
        self.procs[p as usize].vruntime <= leftmost + self.wakeup_gran
    }
}

impl NativeScheduler for Cfs {
    fn name(&self) -> String {
        format!(
            "cfs[latency_ms={},min_granularity_ms={},wakeup_granularity_ms={}]",
            self.latency as f64 / 1e6,
            self.min_gran as f64 / 1e6,
            self.wakeup_gran as f64 / 1e6
        )
    }

    fn add(&mut self, p: Pid, _now: SimTime) {
        *slot(&mut self.procs, p) = Proc {
            vruntime: self.min_vruntime,
            boosted: false,
        };
    }

    fn exit(&mut self, p: Pid) {
        self.queue.retain(|&q| q != p);
    }

    fn enqueue(&mut self, p: Pid, how: Wake, _now: SimTime) {
        let min = self.min_vruntime;
        let half = self.latency / 2;
        let s = &mut self.procs[p as usize];
        match how {
            Wake::New => s.vruntime = s.vruntime.max(min),
            Wake::Woken { .. } => s.vruntime = s.vruntime.max(min - half),
            Wake::Preempted | Wake::Expired => {}
        }
        self.queue.push(p);
    }

    fn remove(&mut self, p: Pid, _now: SimTime) {
        self.queue.retain(|&q| q != p);
    }

    fn pick(&mut self, _now: SimTime, hint: Option<Pid>) -> Option<Pick> {
        let (mut k, left) = self.leftmost()?;
        let mut followed = false;
        let candidate = hint.filter(|h| self.queue.contains(h)).or_else(|| {
            self.queue
                .iter()
                .copied()
                .find(|&q| self.procs[q as usize].boosted)
        });
        if let Some(c) = candidate.filter(|&c| self.fair_enough(c, left)) {
            k = self.queue.iter().position(|&q| q == c).expect("queued");
            followed = Some(c) == hint;
        }
        let n = (self.queue.len() + self.running) as i64;
        let pid = self.queue.remove(k);
        self.procs[pid as usize].boosted = false;
        self.min_vruntime = self.min_vruntime.max(left);
        self.running += 1;
        let slice = (self.latency / n.max(1)).max(self.min_gran);
        Some(Pick {
            pid,
            slice: SimTime(slice),
            followed_hint: followed,
        })
    }

    fn stop(&mut self, p: Pid, ran: SimTime, _why: Stop, _now: SimTime) {
        self.running -= 1;
        self.procs[p as usize].vruntime += ran.as_ns();
        let own = self.procs[p as usize].vruntime;
        let floor = self.leftmost().map_or(own, |(_, left)| left.min(own));
        self.min_vruntime = self.min_vruntime.max(floor);
    }

    fn should_preempt(&self, woken: Pid, running: Pid, ran: SimTime) -> bool {
        let r = self.procs[running as usize].vruntime + ran.as_ns();
        r - self.procs[woken as usize].vruntime > self.wakeup_gran
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
            .map(|&p| format!("{p}(v={}us)", self.procs[p as usize].vruntime / 1000))
            .collect();
        format!(
            "{} min_vruntime={}us runnable=[{}]",
            self.name(),
            self.min_vruntime / 1000,
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
    fn sleeper_credit_is_bounded() {
        let mut s = Cfs::new(ms(6), SimTime::from_us(750), ms(1));
        s.add(0, SimTime::ZERO);
        s.add(1, SimTime::ZERO);
        s.enqueue(0, Wake::New, SimTime::ZERO);
        // 0 runs alone for a long time; 1 sleeps.
        for i in 0..100 {
            let pk = s.pick(ms(i * 6), None).unwrap();
            s.stop(pk.pid, pk.slice, Stop::Expired, ms(i * 6 + 6));
            s.enqueue(pk.pid, Wake::Expired, ms(i * 6 + 6));
        }
        s.enqueue(1, Wake::Woken { slept: ms(600) }, ms(600));
        // 1 is placed at min_vruntime - latency/2, not at 0: it gets a 3 ms lead, not 600 ms.
        assert_eq!(s.vruntime(0) - s.vruntime(1), ms(3));
        assert!(s.should_preempt(1, 0, SimTime::ZERO));
    }
}
