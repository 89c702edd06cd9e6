//! Time processes spend in their waits, per job: how much of it they spun on
//! a CPU and how much they slept off every CPU (blocked).
//!
//! An observer ([`super::observe`]) of the runs that ask for it
//! (`ProcOptions::measure_waits`; a configuration's `metrics.wait_time`):
//! following every wait costs the engine a few percent of its instructions,
//! so runs do without it by default. A wait is one
//! told to the node policy's `on_wait_begin` (a blocking receive, a blocking
//! send's acknowledgement, a `Wait` on non-blocking operations; not a disk
//! burst). At [`Signal::WaitBegan`] it counts the wait for the process's job;
//! at [`Signal::WaitEnded`] it adds the wait's length (from its start to the
//! moment its condition was noticed), the CPU time the process spun in it and
//! the time it slept in it (blocked, or parked by a yielding wait; a page
//! fault taken in the wait counts too): the process's blocked time
//! (`Probe::slept_ns`) at the end less at the start. The rest of a wait's length is time
//! the process was runnable but off its CPU, or on its CPU paying an
//! interrupt or a context switch. No parameters. Summary entry
//! `process.measures.wait_time` (docs/formats/summary.md).

use super::observe::{Measure, Measures, Observer, Probe, Signal, Signals};
use serde::Serialize;

/// The report's entry name in [`Measures`] (summary `process.measures`).
pub const NAME: &str = "wait_time";

/// One job's waits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct JobWaits {
    /// Waits begun.
    pub waits: u64,
    /// Waits ended (a wait still open when the run ended, e.g. of a stopped
    /// background process, is begun and not ended).
    pub ended: u64,
    /// Ended waits that blocked at least once.
    pub blocked_waits: u64,
    /// Length of the ended waits, ns.
    pub wait_ns: i64,
    /// CPU time spun in them, ns.
    pub spin_ns: i64,
    /// Time slept in them, ns.
    pub blocked_ns: i64,
}

/// The waits of each job (the report).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WaitTime {
    pub jobs: Vec<JobWaits>,
    /// Per process: its blocked time when its current wait began
    /// (`Probe::slept_ns`).
    slept_at: Vec<i64>,
}

impl WaitTime {
    /// The observer of a run of `jobs` jobs.
    pub fn new(jobs: usize) -> Self {
        Self {
            jobs: vec![JobWaits::default(); jobs],
            slept_at: Vec::new(),
        }
    }
}

/// One job's waits in the summary, seconds.
#[derive(Serialize)]
struct JobSummary {
    job: usize,
    waits: u64,
    ended: u64,
    blocked_waits: u64,
    wait_s: f64,
    spin_s: f64,
    blocked_s: f64,
}

impl Measure for WaitTime {
    /// `{"jobs": [...]}`, one object per job in job order.
    fn summary(&self) -> serde_json::Value {
        let s = |ns: i64| ns as f64 / 1e9;
        let jobs: Vec<JobSummary> = self
            .jobs
            .iter()
            .enumerate()
            .map(|(job, w)| JobSummary {
                job,
                waits: w.waits,
                ended: w.ended,
                blocked_waits: w.blocked_waits,
                wait_s: s(w.wait_ns),
                spin_s: s(w.spin_ns),
                blocked_s: s(w.blocked_ns),
            })
            .collect();
        serde_json::json!({ "jobs": jobs })
    }
}

impl Observer for WaitTime {
    fn signals(&self) -> Signals {
        Signals::WAIT_BEGAN | Signals::WAIT_ENDED
    }

    fn on(&mut self, s: &Signal<'_>, probe: &Probe<'_, '_>) {
        match *s {
            Signal::WaitBegan { pid, .. } => {
                self.jobs[probe.job_of(pid)].waits += 1;
                let k = pid as usize;
                if self.slept_at.len() <= k {
                    self.slept_at.resize(k + 1, 0);
                }
                self.slept_at[k] = probe.slept_ns(pid);
            }
            Signal::WaitEnded { pid, end } => {
                let slept = probe.slept_ns(pid) - self.slept_at[pid as usize];
                let w = &mut self.jobs[probe.job_of(pid)];
                w.ended += 1;
                w.blocked_waits += u64::from(end.blocked);
                w.wait_ns += end.waited.as_ns();
                w.spin_ns += end.spun.as_ns();
                w.blocked_ns += slept;
            }
            _ => {}
        }
    }

    fn check(&self, _probe: &Probe<'_, '_>) -> Result<(), String> {
        for (j, w) in self.jobs.iter().enumerate() {
            if w.ended > w.waits || w.spin_ns + w.blocked_ns > w.wait_ns {
                return Err(format!("wait time of job {j}: {w:?}"));
            }
        }
        Ok(())
    }

    fn report(self: Box<Self>, _probe: &Probe<'_, '_>, into: &mut Measures) {
        into.put(NAME, *self);
    }
}

#[cfg(test)]
mod unit {
    use super::super::testkit::{late_message, SendBy};
    use super::super::tests::{platform, Block, Spin};
    use super::super::{simulate_processes, ProcJob, ProcOptions};
    use super::*;
    use cosched_contract::node::{NodePolicy, NodeView, Pid, WaitKind, WaitMode};
    use cosched_des::SimTime;
    use cosched_model::node::OsConfig;

    /// Spins 2 ms, then blocks.
    struct SpinBlock2ms;
    impl NodePolicy for SpinBlock2ms {
        fn name(&self) -> String {
            "spin-block".into()
        }
        fn wait_mode(&mut self, _v: &dyn NodeView, _p: Pid, _k: WaitKind) -> WaitMode {
            WaitMode::SpinBlock(SimTime::from_ms(2))
        }
    }

    fn waits(policy: fn() -> Box<dyn NodePolicy>) -> JobWaits {
        let job = ProcJob::new(
            late_message(10_000_000, SendBy::Isend).build("late", 1.0),
            SimTime::ZERO,
        );
        let plat = platform(2, OsConfig::default());
        let opts = ProcOptions {
            measure_waits: true,
            ..ProcOptions::default()
        };
        let out = simulate_processes(&plat, &[job], &policy, &opts).unwrap();
        let w = out.measures.get::<WaitTime>(NAME).expect("every run");
        assert_eq!(w.jobs.len(), 1);
        w.jobs[0]
    }

    #[test]
    fn a_receive_s_wait_splits_into_spin_and_sleep() {
        // Rank 0 (node 0) receives at once: its wait begins at 0. Rank 1 (node 1)
        // computes 10 ms, pays the 1 us send overhead of its Isend, the 8 bytes
        // take 8 / 200 MB/s = 40 ns on the link and 7 us of latency: the message
        // is in rank 0's buffer at 10,000,000 + 1,000 + 40 + 7,000 = 10,008,040
        // ns, when the wait ends. Rank 1 never waits (its Isend is not waited
        // for). So one wait of 10,008,040 ns:
        // - spinning: all of it on the CPU, spun 10,008,040, slept 0;
        // - blocking: off the CPU from 0, spun 0, slept 10,008,040, blocked;
        // - spin 2 ms then block: spun 2,000,000, slept 8,008,040, blocked.
        let whole = 10_008_040;
        let w = |waits, blocked_waits, spin_ns, blocked_ns| JobWaits {
            waits,
            ended: waits,
            blocked_waits,
            wait_ns: whole,
            spin_ns,
            blocked_ns,
        };
        assert_eq!(waits(|| Box::new(Spin)), w(1, 0, whole, 0));
        assert_eq!(waits(|| Box::new(Block)), w(1, 1, 0, whole));
        assert_eq!(
            waits(|| Box::new(SpinBlock2ms)),
            w(1, 1, 2_000_000, whole - 2_000_000)
        );
    }

    #[test]
    fn the_summary_gives_each_job_s_waits_in_seconds() {
        let m = WaitTime {
            jobs: vec![JobWaits {
                waits: 2,
                ended: 1,
                blocked_waits: 1,
                wait_ns: 3_000_000,
                spin_ns: 1_000_000,
                blocked_ns: 1_500_000,
            }],
            ..WaitTime::default()
        };
        assert_eq!(
            m.summary().to_string(),
            r#"{"jobs":[{"blocked_s":0.0015,"blocked_waits":1,"ended":1,"job":0,"spin_s":0.001,"wait_s":0.003,"waits":2}]}"#
        );
    }
}
