//! A CFS-like fair scheduler (Linux 2.6.23 to 6.5; EEVDF's successor keeps its
//! fairness goal).
//!
//! Algorithm: every process has a virtual runtime that grows by the CPU time it
//! uses scaled by `1024 / weight`, its weight given by its nice value through the
//! kernel's table (`sched_prio_to_weight`, `kernel/sched/core.c`: nice 0 weighs 1024,
//! each nice step about 1.25x; nice 10 weighs 110, so two CPU-bound processes of nice 0
//! and 10 share a CPU 1024 : 110). A free CPU runs the runnable process
//! with the smallest virtual runtime, for its weight's share of the period
//! (`sched_slice`: `period * weight / total runnable weight`, the period being
//! `latency`, or `runnable * min_granularity` when more than
//! `latency / min_granularity` processes are runnable); with equal weights this is
//! `latency / runnable` but at least `min_granularity`. A process keeps its virtual runtime while it sleeps,
//! but on waking it is placed no earlier than `min_vruntime - latency / 2` (bounded
//! sleeper credit); a new process starts at `min_vruntime`. A woken process
//! preempts the running one if its virtual runtime is smaller by more than
//! `wakeup_granularity`.
//!
//! Coscheduling hooks and their fairness rule (CFS's "next buddy"): a
//! recommendation or a boosted process is run first only if its virtual runtime
//! is within `wakeup_granularity` of the smallest one.
//!
//! A boost's preemption (the rule of the real boost on Linux 6.x, docs/real.md
//! "DCS: the boost's reschedule check"): a boosted process preempts the running
//! one as soon as it is owed CPU, i.e. when its virtual runtime is not above the
//! running process's (EEVDF's eligibility, lag >= 0, for two processes of a CPU),
//! with no wake-up granularity: the real agent raises the rank's weight and asks
//! the kernel for a reschedule check, which preempts exactly when the boosted rank
//! is eligible. A boosted process that is not owed CPU at the boost waits for
//! the next scheduling point of the CPU (the running slice's end, or a wake-up or
//! block there), where the fairness rule above decides. The real check is
//! repeated on the agent's schedule (every 250 us at first), so the real boost
//! also takes effect when the rank *becomes* owed CPU during the running slice;
//! the engine asks [`NativeScheduler::should_preempt`] again on that schedule on
//! platforms with `boost_recheck = "agent"` (`process/hooks.rs`). One difference
//! stays: the real weight (64x) makes the boosted rank's following slice longer
//! (the model's boost is a flag, not a weight).
//!
//! Slice spread (optional): real CPUs do not end their slices at the same instants
//! (timer ticks, interrupts and other tasks move each boundary), so two nodes that
//! start alike drift out of step. With `slice_cv` > 0 each slice granted is
//! `sched_slice` times a log-normal factor `exp(sigma z - sigma^2 / 2)` of mean 1 and
//! coefficient of variation `slice_cv` (`sigma^2 = ln(1 + slice_cv^2)`, `z` a standard
//! normal by Box-Muller from two uniforms of the node's seeded stream), at least 1 ns.
//! The factor changes only the slice's length, not the fairness accounting (the
//! virtual runtime is charged what was run). Source of the value: a measurement of
//! the real slice lengths on the machine being modelled (`cosched-detour pair`,
//! real-vs-sim's calibration); 0 by default (no draw, every slice exactly `sched_slice`).
//!
//! Parameters: `latency_ms` (6), `min_granularity_ms` (0.75), `wakeup_granularity_ms` (1),
//! Linux's defaults for one CPU; `slice_cv` (0).

use super::{slot, NativeScheduler, Pick, Pid, Stop, Wake};
use cosched_des::{RngStream, SimTime};
pub use cosched_model::node::{
    default_latency_ms, default_min_granularity_ms, default_wakeup_granularity_ms,
};
use rand::Rng;

/// The kernel's `sched_prio_to_weight`, nice -20 to 19.
pub const NICE_TO_WEIGHT: [i64; 40] = [
    88761, 71755, 56483, 46273, 36291, // -20
    29154, 23254, 18705, 14949, 11916, // -15
    9548, 7620, 6100, 4904, 3906, // -10
    3121, 2501, 1991, 1586, 1277, // -5
    1024, 820, 655, 526, 423, // 0
    335, 272, 215, 172, 137, // 5
    110, 87, 70, 56, 45, // 10
    36, 29, 23, 18, 15, // 15
];

/// The weight of nice 0.
const NICE_0: i64 = 1024;

/// The weight of a nice value (clamped to -20..=19).
pub fn weight_of(nice: i32) -> i64 {
    NICE_TO_WEIGHT[(nice.clamp(-20, 19) + 20) as usize]
}

#[derive(Clone, Debug)]
struct Proc {
    vruntime: i64,
    boosted: bool,
    weight: i64,
}

impl Default for Proc {
    fn default() -> Self {
        Self {
            vruntime: 0,
            boosted: false,
            weight: NICE_0,
        }
    }
}

pub struct Cfs {
    latency: i64,
    min_gran: i64,
    wakeup_gran: i64,
    procs: Vec<Proc>,
    queue: Vec<Pid>,
    min_vruntime: i64,
    running: usize,
    /// Total weight of the running processes.
    running_weight: i64,
    /// The slice spread: the log-normal's sigma and the node's stream (None: none).
    spread: Option<(f64, RngStream)>,
}

/// The log-normal sigma of a factor of mean 1 and coefficient of variation `cv`.
pub fn lognormal_sigma(cv: f64) -> f64 {
    (1.0 + cv * cv).ln().sqrt()
}

/// The log-normal factor of mean 1 and log-standard deviation `sigma` for the
/// uniforms `u1` in (0, 1] and `u2` in [0, 1) (Box-Muller: `z = sqrt(-2 ln u1) cos(2 pi u2)`).
pub fn lognormal_factor(sigma: f64, u1: f64, u2: f64) -> f64 {
    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    (sigma * z - sigma * sigma / 2.0).exp()
}

/// One log-normal factor of mean 1 and log-standard deviation `sigma`, two draws of `rng`.
pub fn spread_factor(sigma: f64, rng: &mut RngStream) -> f64 {
    let u1: f64 = 1.0 - rng.gen::<f64>();
    let u2: f64 = rng.gen();
    lognormal_factor(sigma, u1, u2)
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
            running_weight: 0,
            spread: None,
        }
    }

    /// Spreads every slice by a log-normal factor of mean 1 and coefficient of
    /// variation `cv`, drawn from `rng` (see the module notes). `cv` 0: no spread.
    pub fn with_slice_spread(mut self, cv: f64, rng: RngStream) -> Self {
        self.spread = (cv > 0.0).then(|| (lognormal_sigma(cv), rng));
        self
    }

    /// Virtual time of `ran` of CPU for `p` (`calc_delta_fair`).
    fn virtual_of(&self, p: Pid, ran: i64) -> i64 {
        let w = self.procs[p as usize].weight;
        if w == NICE_0 {
            ran
        } else {
            (i128::from(ran) * i128::from(NICE_0) / i128::from(w)) as i64
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
        let spread = match &self.spread {
            // The coefficient of variation back from sigma.
            Some((sigma, _)) => format!(",slice_cv={}", ((sigma * sigma).exp() - 1.0).sqrt()),
            None => String::new(),
        };
        format!(
            "cfs[latency_ms={},min_granularity_ms={},wakeup_granularity_ms={}{spread}]",
            self.latency as f64 / 1e6,
            self.min_gran as f64 / 1e6,
            self.wakeup_gran as f64 / 1e6
        )
    }

    fn add(&mut self, p: Pid, _now: SimTime) {
        *slot(&mut self.procs, p) = Proc {
            vruntime: self.min_vruntime,
            boosted: false,
            weight: NICE_0,
        };
    }

    fn set_nice(&mut self, p: Pid, nice: i32) {
        self.procs[p as usize].weight = weight_of(nice);
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
        let total: i64 = self.running_weight
            + self
                .queue
                .iter()
                .map(|&q| self.procs[q as usize].weight)
                .sum::<i64>();
        let pid = self.queue.remove(k);
        self.procs[pid as usize].boosted = false;
        self.min_vruntime = self.min_vruntime.max(left);
        self.running += 1;
        let w = self.procs[pid as usize].weight;
        self.running_weight += w;
        // sched_slice: the period (latency, stretched to min_granularity per runnable
        // process beyond latency / min_granularity of them) in proportion to weight.
        let period = self.latency.max(n * self.min_gran);
        let mut slice =
            ((i128::from(period) * i128::from(w) / i128::from(total.max(1))) as i64).max(1);
        if let Some((sigma, rng)) = self.spread.as_mut() {
            slice = ((slice as f64 * spread_factor(*sigma, rng)).round() as i64).max(1);
        }
        Some(Pick {
            pid,
            slice: SimTime(slice),
            followed_hint: followed,
        })
    }

    fn stop(&mut self, p: Pid, ran: SimTime, _why: Stop, _now: SimTime) {
        self.running -= 1;
        self.running_weight -= self.procs[p as usize].weight;
        self.procs[p as usize].vruntime += self.virtual_of(p, ran.as_ns());
        let own = self.procs[p as usize].vruntime;
        let floor = self.leftmost().map_or(own, |(_, left)| left.min(own));
        self.min_vruntime = self.min_vruntime.max(floor);
    }

    fn should_preempt(&self, woken: Pid, running: Pid, ran: SimTime) -> bool {
        let r = self.procs[running as usize].vruntime + self.virtual_of(running, ran.as_ns());
        let w = &self.procs[woken as usize];
        if w.boosted {
            // Owed CPU: the boost's reschedule check (module notes).
            r >= w.vruntime
        } else {
            r - w.vruntime > self.wakeup_gran
        }
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
                format!("{p}(v={}us,w={})", s.vruntime / 1000, s.weight)
            })
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
    fn nice_weighs_virtual_time_and_slices() {
        assert_eq!(
            (weight_of(0), weight_of(10), weight_of(-20)),
            (1024, 110, 88761)
        );
        let mut s = Cfs::new(ms(6), SimTime::from_us(750), ms(1));
        for p in 0..2 {
            s.add(p, SimTime::ZERO);
        }
        s.set_nice(1, 10);
        s.enqueue(0, Wake::New, SimTime::ZERO);
        s.enqueue(1, Wake::New, SimTime::ZERO);
        // Slices in proportion to weight: 6 ms x 1024 / 1134 and 6 ms x 110 / 1134.
        let a = s.pick(SimTime::ZERO, None).unwrap();
        assert_eq!((a.pid, a.slice.as_ns()), (0, 6_000_000 * 1024 / 1134));
        s.stop(0, ms(1), Stop::Expired, ms(1));
        s.enqueue(0, Wake::Expired, ms(1));
        assert_eq!(s.vruntime(0), ms(1));
        let b = s.pick(ms(1), None).unwrap();
        assert_eq!((b.pid, b.slice.as_ns()), (1, 6_000_000 * 110 / 1134));
        s.stop(1, ms(1), Stop::Expired, ms(2));
        // 1 ms of CPU is 1024 / 110 ms of virtual time at nice 10.
        assert_eq!(s.vruntime(1).as_ns(), 1_000_000 * 1024 / 110);
    }

    /// Two nodes, each one CPU with two CPU-bound processes, run slice after slice.
    /// Returns each node's slice boundaries over `n` slices.
    fn boundaries(cv: f64, n: usize) -> Vec<Vec<i64>> {
        let streams = cosched_des::RngStreams::new(7);
        (0..2)
            .map(|k| {
                let mut s = Cfs::new(ms(6), SimTime::from_us(750), ms(1))
                    .with_slice_spread(cv, streams.stream(&format!("cfs-slice/{k}")));
                s.add(0, SimTime::ZERO);
                s.add(1, SimTime::ZERO);
                s.enqueue(0, Wake::New, SimTime::ZERO);
                s.enqueue(1, Wake::New, SimTime::ZERO);
                let mut now = SimTime::ZERO;
                (0..n)
                    .map(|_| {
                        let pk = s.pick(now, None).unwrap();
                        now += pk.slice;
                        s.stop(pk.pid, pk.slice, Stop::Expired, now);
                        s.enqueue(pk.pid, Wake::Expired, now);
                        now.as_ns()
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn the_lognormal_factor_by_hand() {
        // u1 = e^(-1/2), u2 = 0: z = sqrt(-2 x -1/2) x cos 0 = 1; factor = e^(sigma - sigma^2 / 2).
        let sigma = lognormal_sigma(0.5); // sqrt(ln 1.25) = 0.4724
        assert!((sigma - 1.25f64.ln().sqrt()).abs() < 1e-15);
        let f = lognormal_factor(sigma, (-0.5f64).exp(), 0.0);
        assert!(
            (f - (sigma - sigma * sigma / 2.0).exp()).abs() < 1e-12,
            "{f}"
        );
        // u2 = 1/4: cos(pi / 2) = 0, z = 0: the factor is the median e^(-sigma^2 / 2) = 1 / sqrt(1.25).
        let f = lognormal_factor(sigma, 0.3, 0.25);
        assert!((f - 1.0 / 1.25f64.sqrt()).abs() < 1e-12, "{f}");
        // Mean 1 and coefficient of variation 0.5 over many draws.
        let mut rng = cosched_des::RngStreams::new(1).stream("x");
        let v: Vec<f64> = (0..200_000)
            .map(|_| spread_factor(sigma, &mut rng))
            .collect();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64).sqrt();
        assert!(
            (mean - 1.0).abs() < 0.01 && (sd / mean - 0.5).abs() < 0.01,
            "mean {mean} cv {}",
            sd / mean
        );
    }

    #[test]
    fn a_slice_spread_moves_each_nodes_slice_boundaries_by_its_own_draws() {
        // No spread: two processes share 6 ms of latency, every slice is 3 ms on both
        // nodes, so the boundaries coincide at 3, 6, 9, ... ms.
        let b = boundaries(0.0, 8);
        let want: Vec<i64> = (1..=8).map(|i| i * 3_000_000).collect();
        assert_eq!(b, vec![want.clone(), want]);
        // Spread 0.3: slice i of node k is 3 ms x the i-th factor of stream "cfs-slice/k".
        let b = boundaries(0.3, 8);
        let streams = cosched_des::RngStreams::new(7);
        let sigma = lognormal_sigma(0.3);
        for (k, got) in b.iter().enumerate() {
            let mut rng = streams.stream(&format!("cfs-slice/{k}"));
            let mut t = 0i64;
            let want: Vec<i64> = (0..8)
                .map(|_| {
                    t += (3_000_000.0 * spread_factor(sigma, &mut rng)).round() as i64;
                    t
                })
                .collect();
            assert_eq!(got, &want, "node {k}");
        }
        // The nodes' streams differ, so no boundary after the start coincides.
        assert!(b[0].iter().zip(&b[1]).all(|(x, y)| x != y), "{b:?}");
        // Fairness is kept: the virtual runtimes are charged what ran, so over many
        // slices both processes of a node get about half the CPU.
        let mut s = Cfs::new(ms(6), SimTime::from_us(750), ms(1))
            .with_slice_spread(0.3, streams.stream("cfs-slice/0"));
        let mut got = [0i64; 2];
        for p in 0..2 {
            s.add(p, SimTime::ZERO);
            s.enqueue(p, Wake::New, SimTime::ZERO);
        }
        let mut now = SimTime::ZERO;
        while now < SimTime::from_secs(60) {
            let pk = s.pick(now, None).unwrap();
            now += pk.slice;
            got[pk.pid as usize] += pk.slice.as_ns();
            s.stop(pk.pid, pk.slice, Stop::Expired, now);
            s.enqueue(pk.pid, Wake::Expired, now);
        }
        let frac = got[0] as f64 / (got[0] + got[1]) as f64;
        assert!((frac - 0.5).abs() < 0.01, "{got:?}");
    }

    #[test]
    fn a_boost_preempts_when_the_boosted_process_is_owed_cpu_else_waits_for_the_slice_end() {
        // Two processes of one CPU, 6 ms latency: slices of 3 ms.
        let mut s = Cfs::new(ms(6), SimTime::from_us(750), ms(1));
        for p in 0..2 {
            s.add(p, SimTime::ZERO);
            s.enqueue(p, Wake::New, SimTime::ZERO);
        }
        // 0 runs its 3 ms slice (v0 = 3 ms), then 1 runs.
        let a = s.pick(SimTime::ZERO, None).unwrap();
        assert_eq!((a.pid, a.slice), (0, ms(3)));
        s.stop(0, ms(3), Stop::Expired, ms(3));
        s.enqueue(0, Wake::Expired, ms(3));
        let b = s.pick(ms(3), None).unwrap();
        assert_eq!(b.pid, 1);
        // 1 has run 2 ms of its slice (v1 = 2 ms < v0 = 3 ms): 0 is not owed CPU,
        // a boost of 0 does not preempt; 1 keeps the CPU to its slice's end.
        s.boost(0, ms(5));
        assert!(!s.should_preempt(0, 1, ms(2)));
        // At 3 ms of its slice v1 = 3 ms = v0: 0 is owed CPU (lag 0) and preempts.
        assert!(s.should_preempt(0, 1, ms(3)));
        // Without the boost the wake-up rule needs a lead of more than the
        // wake-up granularity (1 ms): not at 3 ms, nor at 4 ms, but past it.
        s.unboost(0);
        assert!(!s.should_preempt(0, 1, ms(3)));
        assert!(!s.should_preempt(0, 1, ms(4)));
        assert!(s.should_preempt(0, 1, SimTime::from_us(4_001)));
        // The boost ends when the process is picked: 1 stops at its slice's end,
        // 0 (boosted, v0 = v1 = 3 ms) is picked first and is no longer boosted.
        s.boost(0, ms(6));
        s.stop(1, ms(3), Stop::Expired, ms(6));
        s.enqueue(1, Wake::Expired, ms(6));
        assert_eq!(s.pick(ms(6), None).unwrap().pid, 0);
        assert!(!s.procs[0].boosted);
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
