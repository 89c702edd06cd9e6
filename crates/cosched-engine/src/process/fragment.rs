//! The fragment time of gang runs (flexible gang, seed 003 §2-3): the CPU time
//! processes hold outside their own row's slot (alternate scheduling, a slot
//! yielded by a blocked owner, I/O interrupts, fragment filling). Summary entry
//! `process.measures.gang_fragment` (docs/formats/summary.md).
//!
//! An observer ([`super::observe`]) of every gang run: when a process leaves a
//! CPU after holding it for `ran`, the whole of `ran` is fragment time if the
//! slot policy's matrix has an active row and the process's job is not in it
//! (a job outside the matrix counts too). No parameters.

use super::observe::{Measures, Observer, Probe, Signal, Signals, TotalNs};

/// The report's entry name in [`Measures`] (summary `process.measures`).
pub const NAME: &str = "gang_fragment";

/// The fragment time counted so far.
#[derive(Clone, Debug, Default)]
pub struct Fragment {
    total_ns: i64,
}

impl Observer for Fragment {
    fn signals(&self) -> Signals {
        Signals::RELEASED
    }

    fn on(&mut self, s: &Signal<'_>, probe: &Probe<'_, '_>) {
        let Signal::Released { pid, ran, .. } = *s else {
            return;
        };
        let job = probe.job_of(pid);
        let outside = probe
            .matrix()
            .is_some_and(|m| m.active().is_some() && m.row_of(job) != m.active());
        if outside {
            self.total_ns += ran.as_ns();
        }
    }

    fn report(self: Box<Self>, _probe: &Probe<'_, '_>, into: &mut Measures) {
        into.put(NAME, TotalNs(self.total_ns));
    }
}
