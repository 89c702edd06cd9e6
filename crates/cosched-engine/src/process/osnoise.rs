//! OS noise: the CPU time the node's periodic timer interrupt takes from the
//! process that runs when it fires.
//!
//! Mechanism: every tick boundary of the node's OS timer (the same phased
//! boundaries as the native scheduler's counter sampling, [`crate::os::timer_tick`])
//! that falls while a process computes takes `d` of CPU from it: the compute burst
//! lasts `d` longer. Each `d` is drawn uniformly in `[0.5, 1.5] x mean` from the
//! process's seeded stream `"os-noise/{job}/{rank}"`, the spread of the source's
//! measurement (below). The ticks a burst meets are counted from the instant it
//! starts as if it ran without a break: a burst preempted midway may meet one tick
//! more or fewer than on the CPU (at most `d` per preemption). Spin waits are not
//! charged (a spinning process makes no progress either way), nor are message
//! overheads and context switches. Daemons are not modelled (no published per-node
//! figure for the seeds' Linux 2.4 clusters was found).
//!
//! Parameter: the platform's `os_noise_tick_us`, the mean CPU time per tick.
//! Source of the presets' 10 us (Linux, IA32): D. Tsafrir, "The context-switch
//! overhead inflicted by hardware interrupts (and the enigma of do-nothing loops)",
//! ExpCS 2007 (FCRC 2007): on Linux "the overall overhead is found to be 0.5-1.5% at
//! 1000 Hz, linearly proportional to the tick rate", i.e. 5 to 15 us of CPU per
//! tick, direct and indirect (cache) costs together; 10 us is the middle of that
//! range and the draws span it. At the seeds' HZ = 100 this is 0.1% of the CPU.
//! 0 turns the noise off (the run is then identical to one without this module).

use cosched_des::{RngStream, SimTime};
use rand::Rng;

/// The OS noise of one run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OsNoise {
    /// Mean CPU time per tick, ns (0: no noise).
    mean_ns: f64,
    /// The OS timer's period, ns.
    tick: i64,
}

impl OsNoise {
    pub(crate) fn new(mean_us: f64, tick: SimTime) -> Self {
        Self {
            mean_ns: mean_us * 1000.0,
            tick: tick.as_ns(),
        }
    }

    /// Whether it adds anything.
    pub(crate) fn is_on(&self) -> bool {
        self.mean_ns > 0.0
    }

    /// The extra time of a compute burst of `ns` that starts at `start` on a node
    /// whose tick boundaries fall at `phase + i * tick`: one draw per boundary the
    /// burst, lengthened by the draws before it, runs past.
    pub(crate) fn extra(
        &self,
        ns: i64,
        start: SimTime,
        phase: SimTime,
        rng: &mut RngStream,
    ) -> i64 {
        if !self.is_on() || ns <= 0 {
            return 0;
        }
        let (tick, phase) = (self.tick, phase.as_ns());
        let next_boundary = |t: i64| phase + ((t - phase).div_euclid(tick) + 1) * tick;
        let (mut pos, mut left, mut extra) = (start.as_ns(), ns, 0i64);
        loop {
            let b = next_boundary(pos);
            if pos + left <= b {
                return extra;
            }
            left -= b - pos;
            let d = (self.mean_ns * rng.gen_range(0.5..1.5)).round() as i64;
            extra += d;
            pos = b + d;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_des::RngStreams;

    fn ms(x: i64) -> SimTime {
        SimTime::from_ms(x)
    }

    #[test]
    fn zero_noise_adds_nothing() {
        let mut rng = RngStreams::new(1).stream("os-noise/0/0");
        let n = OsNoise::new(0.0, ms(10));
        assert_eq!(n.extra(1_000_000_000, SimTime::ZERO, ms(3), &mut rng), 0);
    }

    #[test]
    fn one_draw_per_tick_crossed() {
        let n = OsNoise::new(10.0, ms(10));
        // Boundaries at 3, 13, 23, ... ms. A 5 ms burst from 4 ms crosses none; one
        // from 0 to 5 ms crosses 3 ms once; 100 ms from 0 crosses 3, 13, ..., 93:
        // ten draws, each in [5, 15] us.
        let mut rng = RngStreams::new(1).stream("os-noise/0/0");
        assert_eq!(n.extra(5_000_000, ms(4), ms(3), &mut rng), 0);
        let one = n.extra(5_000_000, SimTime::ZERO, ms(3), &mut rng);
        assert!((5_000..=15_000).contains(&one), "{one}");
        let ten = n.extra(100_000_000, SimTime::ZERO, ms(3), &mut rng);
        assert!((50_000..=150_000).contains(&ten), "{ten}");
        // The same stream gives the same draws.
        let mut a = RngStreams::new(7).stream("os-noise/1/2");
        let mut b = RngStreams::new(7).stream("os-noise/1/2");
        assert_eq!(
            n.extra(1_000_000_000, ms(1), ms(3), &mut a),
            n.extra(1_000_000_000, ms(1), ms(3), &mut b)
        );
    }

    #[test]
    fn a_long_burst_grows_by_the_mean_noise_fraction() {
        // 100 s at 10 us per 10 ms tick: 10,000 ticks of mean 10 us = 0.1% (+0.1 s),
        // within 1% of it (the draws' standard deviation over 10,000 ticks is
        // 10 us / sqrt(12) * 100 = 0.29 ms).
        let n = OsNoise::new(10.0, ms(10));
        let mut rng = RngStreams::new(3).stream("os-noise/0/0");
        let extra = n.extra(100_000_000_000, SimTime::ZERO, SimTime::ZERO, &mut rng);
        assert!((extra - 100_000_000).abs() < 1_000_000, "{extra}");
    }

    /// The default policy: spin waits, no hooks.
    struct Spin;
    impl crate::process::policy::NodePolicy for Spin {
        fn name(&self) -> String {
            "spin".into()
        }
    }

    /// One process computing 10 s alone on a one-node `choi2004` with `noise_us`.
    fn alone(noise_us: f64, seed: u64) -> crate::process::ProcOutput {
        use crate::process::{simulate_processes, ProcJob, ProcOptions};
        use cosched_model::node::NodePlatform;
        use cosched_model::program::{Builder, Op};
        let plat = NodePlatform {
            nodes: 1,
            os_noise_tick_us: noise_us,
            boost_recheck: Default::default(),
            ..NodePlatform::preset("choi2004").unwrap()
        };
        let mut b = Builder::new(1);
        b.all(Op::Compute { ns: 10_000_000_000 });
        let jobs = [ProcJob::new(b.build("ten", 1.0), SimTime::ZERO)];
        let opts = ProcOptions {
            seed,
            ..Default::default()
        };
        simulate_processes(&plat, &jobs, &|| Box::new(Spin), &opts).unwrap()
    }

    #[test]
    fn a_process_alone_runs_longer_by_the_noise_fraction() {
        // choi2004: 5 us context switch at the first dispatch; 10 ms ticks.
        let switch = 5_000;
        let quiet = alone(0.0, 1);
        assert_eq!(quiet.proc_end[0].as_ns(), 10_000_000_000 + switch);
        // 10 us per tick: 1,000 ticks (+1 for the ticks the noise itself runs into)
        // of mean 10 us = +10 ms, the 0.1% of the source at HZ = 100; the sum of
        // 1,000 draws has a standard deviation of 10 us / sqrt(12) * sqrt(1000) = 91 us.
        let noisy = alone(10.0, 1);
        let extra = noisy.proc_end[0].as_ns() - 10_000_000_000 - switch;
        assert!((extra - 10_000_000).abs() < 500_000, "extra {extra} ns");
        // Same seed, same run; another seed, other draws.
        assert_eq!(alone(10.0, 1).proc_end, noisy.proc_end);
        assert_ne!(alone(10.0, 2).proc_end, noisy.proc_end);
        // Five times the noise, five times the extra time.
        let five = alone(50.0, 1).proc_end[0].as_ns() - 10_000_000_000 - switch;
        assert!((five - 50_000_000).abs() < 2_500_000, "extra {five} ns");
    }
}
