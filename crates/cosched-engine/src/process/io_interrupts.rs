//! I/O interrupts of gang runs, per job (seed 003 §3: flexible gang lets a
//! process woken by its disk completion take a CPU at once, "interrupting"
//! the process that ran there, to cut the I/O-bound job's slowdown).
//!
//! An observer ([`super::observe`]) of every gang run. At each
//! [`Signal::IoInterrupt`] it counts one `interrupting` for the job of the
//! woken process and one `interrupted` for the job of the process it took the
//! CPU from (the same job counts both when a process takes a CPU from its own
//! job's). Their totals both equal the run's `gang_io_preemptions` counter.
//! No parameters. Summary entry `process.measures.io_interrupts`
//! (docs/formats/summary.md).

use super::observe::{Measure, Measures, Observer, Probe, Signal, Signals};
use serde::Serialize;

/// The report's entry name in [`Measures`] (summary `process.measures`).
pub const NAME: &str = "io_interrupts";

/// One job's I/O interrupts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct JobInterrupts {
    /// Its processes, woken by their disk, took a CPU at once.
    pub interrupting: u64,
    /// Its running processes lost their CPU to such a process.
    pub interrupted: u64,
}

/// The I/O interrupts of each job (the report).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IoInterrupts {
    pub jobs: Vec<JobInterrupts>,
}

impl IoInterrupts {
    /// The observer of a run of `jobs` jobs.
    pub fn new(jobs: usize) -> Self {
        Self {
            jobs: vec![JobInterrupts::default(); jobs],
        }
    }
}

/// One job's I/O interrupts in the summary.
#[derive(Serialize)]
struct JobSummary {
    job: usize,
    interrupting: u64,
    interrupted: u64,
}

impl Measure for IoInterrupts {
    /// `{"jobs": [...]}`, one object per job in job order.
    fn summary(&self) -> serde_json::Value {
        let jobs: Vec<JobSummary> = self
            .jobs
            .iter()
            .enumerate()
            .map(|(job, n)| JobSummary {
                job,
                interrupting: n.interrupting,
                interrupted: n.interrupted,
            })
            .collect();
        serde_json::json!({ "jobs": jobs })
    }
}

impl Observer for IoInterrupts {
    fn signals(&self) -> Signals {
        Signals::IO_INTERRUPT
    }

    fn on(&mut self, s: &Signal<'_>, probe: &Probe<'_, '_>) {
        if let Signal::IoInterrupt { pid, victim, .. } = *s {
            self.jobs[probe.job_of(pid)].interrupting += 1;
            self.jobs[probe.job_of(victim)].interrupted += 1;
        }
    }

    fn report(self: Box<Self>, _probe: &Probe<'_, '_>, into: &mut Measures) {
        into.put(NAME, *self);
    }
}
