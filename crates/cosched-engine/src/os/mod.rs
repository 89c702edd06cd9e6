//! Native OS CPU scheduler models of a node (the "native scheduler" of the seeds).
//!
//! A [`NativeScheduler`] owns the runnable set of one node and decides which
//! process a free CPU runs next and for how long. The process-level node runtime
//! drives it with the calls below; a coscheduling policy (the seeds' SchedAsst)
//! may pass a *recommendation* to [`NativeScheduler::pick`] or ask for a priority
//! boost, and the native scheduler decides whether its fairness rules allow it.
//!
//! Protocol (the runtime's obligations):
//! - [`add`](NativeScheduler::add) once per process placed on the node, before anything else;
//!   [`exit`](NativeScheduler::exit) once when it ends.
//! - A process is in exactly one of: runnable (after `enqueue`), running (returned
//!   by `pick`, until `stop`), or sleeping (after `stop` with [`Stop::Blocked`]).
//! - [`stop`](NativeScheduler::stop) reports how long the process ran since it was
//!   picked; a preempted or expired process is `enqueue`d again by the runtime.
//! - [`set_nice`](NativeScheduler::set_nice) right after `add` for a process whose
//!   nice value is not 0 (the value never changes afterwards).
//!
//! Nice values (-20 to 19, 0 by default): [`linux24`] uses the kernel's per-nice base
//! quantum and goodness term, [`cfs`] the kernel's weight table, [`mlfq`] Solaris TS's
//! user priority, [`eevdf`] the cfs weight table; [`rr`] ignores them.
//!
//! Models: [`linux24`] (epoch/counter goodness), [`cfs`] (fair, virtual runtime),
//! [`eevdf`] (EEVDF: eligibility, deadlines ended at ticks, lag placement, delayed
//! dequeue, slice protection),
//! [`mlfq`] (Solaris TS dispatch table), [`rr`] (strict round robin). Built by
//! name with [`build`].

pub mod cfs;
pub mod eevdf;
pub mod linux24;
pub mod mlfq;
pub mod rr;

use cosched_des::{RngStream, SimTime};
pub use cosched_model::node::OsConfig;

pub use cosched_contract::node::{Pid, Stop};

/// Why a process becomes runnable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// It was just created.
    New,
    /// It slept (blocked) for this long and was woken.
    Woken { slept: SimTime },
    /// It was running and was preempted before its slice ended.
    Preempted,
    /// It was running and used its whole slice.
    Expired,
}

/// A scheduling decision for a free CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pick {
    pub pid: Pid,
    /// How long it may run before the scheduler wants the CPU back.
    pub slice: SimTime,
    /// Whether the recommendation passed to `pick` was followed.
    pub followed_hint: bool,
}

/// A node's native CPU scheduler.
pub trait NativeScheduler: Send {
    /// Canonical name with parameters.
    fn name(&self) -> String;
    /// Registers a process (sleeping, not yet runnable).
    fn add(&mut self, p: Pid, now: SimTime);
    /// Forgets a process that ended (it is not runnable nor running).
    fn exit(&mut self, p: Pid);
    /// Sets the nice value (-20 to 19) of `p`, just added and not yet runnable.
    /// Default: ignored (a model without priorities).
    fn set_nice(&mut self, _p: Pid, _nice: i32) {}
    /// The CPU about to be filled by the next [`pick`](NativeScheduler::pick) last ran
    /// `last` (its address space is still loaded there). Default: ignored (Linux 2.4
    /// gives that process a +1 goodness bonus).
    fn set_active_mm(&mut self, _last: Option<Pid>) {}
    /// Makes `p` runnable.
    fn enqueue(&mut self, p: Pid, how: Wake, now: SimTime);
    /// Takes `p` out of the runnable set without running it (it blocks while queued).
    fn remove(&mut self, p: Pid, now: SimTime);
    /// Chooses and dequeues the process a free CPU runs next. `hint` is a coscheduling
    /// policy's recommendation; it is followed only if it is runnable and the
    /// scheduler's fairness rule allows it (each model documents its rule).
    fn pick(&mut self, now: SimTime, hint: Option<Pid>) -> Option<Pick>;
    /// The running process `p` stops after running `ran` since it was picked.
    fn stop(&mut self, p: Pid, ran: SimTime, why: Stop, now: SimTime);
    /// Whether the newly woken `woken` should preempt `running`, which has run
    /// `ran` since it was picked.
    fn should_preempt(&self, woken: Pid, running: Pid, ran: SimTime) -> bool;
    /// Raises `p`'s priority until [`unboost`](NativeScheduler::unboost) (HYBRID) or until it
    /// next runs (DCS, PB, CC), as far as the model's fairness rule allows.
    fn boost(&mut self, p: Pid, now: SimTime);
    /// Restores `p`'s normal priority.
    fn unboost(&mut self, p: Pid);
    /// Number of runnable (queued) processes.
    fn runnable(&self) -> usize;
    /// Internal state, for debugging.
    fn dump(&self) -> String;
}

/// Builds a node's native scheduler whose timer (for the tick-driven models:
/// [`linux24`], [`eevdf`]) has its boundaries at `phase + i * tick`; `rng` is the node's own
/// stream for the models that draw (CFS with a slice spread, `slice_cv` > 0).
pub fn build_on_node(cfg: &OsConfig, phase: SimTime, rng: RngStream) -> Box<dyn NativeScheduler> {
    match *cfg {
        OsConfig::Linux24 {
            tick_ms,
            base_ticks,
        } => Box::new(
            linux24::Linux24::new(SimTime::from_secs_f64(tick_ms / 1000.0), base_ticks)
                .with_phase(phase),
        ),
        OsConfig::Eevdf { slice_ms, tick_ms } => {
            Box::new(eevdf_of(slice_ms, tick_ms).with_phase(phase))
        }
        OsConfig::Cfs { slice_cv, .. } if slice_cv > 0.0 => {
            Box::new(cfs_of(cfg).with_slice_spread(slice_cv, rng))
        }
        _ => build(cfg),
    }
}

/// The CFS model of `cfg` (a `Cfs` config), without slice spread.
fn cfs_of(cfg: &OsConfig) -> cfs::Cfs {
    let ms = |x: f64| SimTime::from_secs_f64(x / 1000.0);
    match *cfg {
        OsConfig::Cfs {
            latency_ms,
            min_granularity_ms,
            wakeup_granularity_ms,
            ..
        } => cfs::Cfs::new(
            ms(latency_ms),
            ms(min_granularity_ms),
            ms(wakeup_granularity_ms),
        ),
        _ => unreachable!("cfs_of is called with a Cfs config"),
    }
}

/// The EEVDF model of `slice_ms` and `tick_ms` (timer phase 0).
fn eevdf_of(slice_ms: f64, tick_ms: f64) -> eevdf::Eevdf {
    let ms = |x: f64| SimTime::from_secs_f64(x / 1000.0);
    eevdf::Eevdf::new(ms(slice_ms), ms(tick_ms))
}

/// The period of the node's OS timer interrupt (the `tick` op of node policies):
/// - Linux 2.4: `tick_ms` (10 ms, HZ = 100), the boundaries at which the model
///   charges counters;
/// - CFS: 4 ms, HZ = 250, the default `CONFIG_HZ` of Linux since 2.6.13
///   (`kernel/Kconfig.hz`); the CFS model itself accounts run time exactly and needs
///   no tick;
/// - EEVDF: `tick_ms` (4 ms by default, HZ = 250), where its slices end;
/// - Solaris TS (MLFQ): 10 ms, the default clock rate `hz = 100` of Solaris
///   (`clock()` runs `ts_tick` at each tick, `ts_update` once a second);
/// - round robin: 10 ms (HZ = 100, as the Linux kernels of the seeds).
pub fn timer_tick(cfg: &OsConfig) -> SimTime {
    match *cfg {
        OsConfig::Linux24 { tick_ms, .. } | OsConfig::Eevdf { tick_ms, .. } => {
            SimTime::from_secs_f64(tick_ms / 1000.0)
        }
        OsConfig::Cfs { .. } => SimTime::from_ms(4),
        OsConfig::Mlfq { .. } | OsConfig::Rr { .. } => SimTime::from_ms(10),
    }
}

/// Builds a native scheduler (timer phase 0, no random draw: a CFS slice spread
/// needs a node's stream, [`build_on_node`]).
pub fn build(cfg: &OsConfig) -> Box<dyn NativeScheduler> {
    let ms = |x: f64| SimTime::from_secs_f64(x / 1000.0);
    match *cfg {
        OsConfig::Linux24 {
            tick_ms,
            base_ticks,
        } => Box::new(linux24::Linux24::new(ms(tick_ms), base_ticks)),
        OsConfig::Cfs { .. } => Box::new(cfs_of(cfg)),
        OsConfig::Eevdf { slice_ms, tick_ms } => Box::new(eevdf_of(slice_ms, tick_ms)),
        OsConfig::Mlfq { quantum_scale } => Box::new(mlfq::Mlfq::solaris_ts(quantum_scale)),
        OsConfig::Rr { quantum_ms } => Box::new(rr::RoundRobin::new(ms(quantum_ms))),
    }
}

/// Dense per-pid storage grown on demand.
pub(crate) fn slot<T: Default>(v: &mut Vec<T>, p: Pid) -> &mut T {
    let i = p as usize;
    if v.len() <= i {
        v.resize_with(i + 1, T::default);
    }
    &mut v[i]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_models() -> Vec<OsConfig> {
        vec![
            OsConfig::Linux24 {
                tick_ms: 10.0,
                base_ticks: 6,
            },
            OsConfig::Cfs {
                latency_ms: 6.0,
                min_granularity_ms: 0.75,
                wakeup_granularity_ms: 1.0,
                slice_cv: 0.0,
            },
            OsConfig::Eevdf {
                slice_ms: 0.75,
                tick_ms: 4.0,
            },
            OsConfig::Mlfq { quantum_scale: 1.0 },
            OsConfig::Rr { quantum_ms: 50.0 },
        ]
    }

    /// Two nodes' EEVDF schedulers built by `build_on_node` (slice 0.75 ms, tick 4 ms), one
    /// with its timer at phase 1 ms, the other at 3 ms; two spinners on each, the first
    /// picked at 0. By hand: node A's ticks fall at 1, 5, 9 ms, so 0 + 0.75 ends at 1 ms
    /// and the next pick (1 ms) at 1.75 -> 5 ms; node B's at 3, 7, 11 ms: 0.75 -> 3 ms,
    /// then 3.75 -> 7 ms. Their slices end 2 ms apart, each node on its own ticks.
    #[test]
    fn each_node_ends_eevdf_slices_on_its_own_tick_phase() {
        let cfg = OsConfig::Eevdf {
            slice_ms: 0.75,
            tick_ms: 4.0,
        };
        let streams = cosched_des::RngStreams::new(1);
        let ends = |phase_ms: i64| {
            let mut s = build_on_node(&cfg, SimTime::from_ms(phase_ms), streams.stream("n"));
            for p in 0..2 {
                s.add(p, SimTime::ZERO);
                s.enqueue(p, Wake::New, SimTime::ZERO);
            }
            let mut now = SimTime::ZERO;
            let mut out = Vec::new();
            for _ in 0..2 {
                let pk = s.pick(now, None).unwrap();
                now += pk.slice;
                out.push(now);
                s.stop(pk.pid, pk.slice, Stop::Expired, now);
                s.enqueue(pk.pid, Wake::Expired, now);
            }
            out
        };
        assert_eq!(ends(1), [SimTime::from_ms(1), SimTime::from_ms(5)]);
        assert_eq!(ends(3), [SimTime::from_ms(3), SimTime::from_ms(7)]);
        // Phase 0 (what `build` gives): 0.75 -> the tick at 4 ms, then 4.75 -> 8 ms.
        assert_eq!(ends(0), [SimTime::from_ms(4), SimTime::from_ms(8)]);
    }

    /// One CPU, `n` CPU-bound processes, `horizon` of simulated time, a context-switch
    /// cost charged to nobody. Returns the CPU time each process got.
    fn share(cfg: &OsConfig, n: u32, horizon: SimTime, switch: SimTime) -> Vec<i64> {
        let mut s = build(cfg);
        let mut got = vec![0i64; n as usize];
        for p in 0..n {
            s.add(p, SimTime::ZERO);
            s.enqueue(p, Wake::New, SimTime::ZERO);
        }
        let mut now = SimTime::ZERO;
        while now < horizon {
            let pk = s.pick(now, None).expect("always runnable");
            assert!(pk.slice > SimTime::ZERO, "{}: empty slice", s.name());
            now += switch;
            let ran = pk.slice.min(horizon - now).max(SimTime::ZERO);
            now += ran;
            got[pk.pid as usize] += ran.as_ns();
            s.stop(pk.pid, ran, Stop::Expired, now);
            s.enqueue(pk.pid, Wake::Expired, now);
        }
        got
    }

    #[test]
    fn cpu_bound_processes_share_a_cpu_within_two_percent() {
        for cfg in all_models() {
            for n in [2u32, 3] {
                let got = share(&cfg, n, SimTime::from_secs(600), SimTime::from_us(5));
                let total: i64 = got.iter().sum();
                for g in &got {
                    let frac = *g as f64 / total as f64;
                    assert!(
                        (frac - 1.0 / n as f64).abs() < 0.02,
                        "{cfg:?} n={n}: shares {got:?}"
                    );
                }
            }
        }
    }

    /// A process that computes 5 ms then sleeps 20 ms, against a CPU hog: under every
    /// model with priorities, the sleeper's wake-ups preempt the hog, so it is never
    /// delayed by more than a short slice; under round robin it waits for the hog's quantum.
    #[test]
    fn interactive_process_is_favoured_except_by_round_robin() {
        for cfg in all_models() {
            let mut s = build(&cfg);
            let (hog, io) = (0u32, 1u32);
            s.add(hog, SimTime::ZERO);
            s.add(io, SimTime::ZERO);
            s.enqueue(hog, Wake::New, SimTime::ZERO);
            let mut now = SimTime::ZERO;
            let mut delays = Vec::new();
            let mut wake_at = SimTime::from_ms(20);
            let (mut running, mut ran_since) = (s.pick(now, None).unwrap(), now);
            for _ in 0..400 {
                // Advance to the sleeper's wake-up, cutting the hog's slices as needed.
                while ran_since + running.slice <= wake_at {
                    now = ran_since + running.slice;
                    s.stop(running.pid, running.slice, Stop::Expired, now);
                    s.enqueue(running.pid, Wake::Expired, now);
                    running = s.pick(now, None).unwrap();
                    ran_since = now;
                }
                now = wake_at;
                s.enqueue(
                    io,
                    Wake::Woken {
                        slept: SimTime::from_ms(20),
                    },
                    now,
                );
                let start = if s.should_preempt(io, running.pid, now - ran_since) {
                    s.stop(running.pid, now - ran_since, Stop::Preempted, now);
                    s.enqueue(running.pid, Wake::Preempted, now);
                    now
                } else {
                    let end = ran_since + running.slice;
                    s.stop(running.pid, running.slice, Stop::Expired, end);
                    s.enqueue(running.pid, Wake::Expired, end);
                    end
                };
                // The next pick at `start` should be the sleeper in the favouring models.
                let pk = s.pick(start, None).unwrap();
                let io_start = if pk.pid == io {
                    start
                } else {
                    // Let the other process use its slice first.
                    let end = start + pk.slice;
                    s.stop(pk.pid, pk.slice, Stop::Expired, end);
                    s.enqueue(pk.pid, Wake::Expired, end);
                    let again = s.pick(end, None).unwrap();
                    assert_eq!(again.pid, io);
                    end
                };
                delays.push((io_start - wake_at).as_ns());
                let burst = SimTime::from_ms(5);
                now = io_start + burst;
                s.stop(io, burst, Stop::Blocked, now);
                wake_at = now + SimTime::from_ms(20);
                running = s.pick(now, None).unwrap();
                ran_since = now;
            }
            let mean_ms = delays.iter().sum::<i64>() as f64 / delays.len() as f64 / 1e6;
            match cfg {
                OsConfig::Rr { .. } => {
                    assert!(mean_ms > 5.0, "{cfg:?}: mean wake-up delay {mean_ms} ms")
                }
                _ => assert!(mean_ms < 1.0, "{cfg:?}: mean wake-up delay {mean_ms} ms"),
            }
        }
    }
}
