//! Admission of jobs to nodes: the engine's side of the process-level
//! admission contract ([`cosched_contract::admission`]). The run's
//! [`AdmissionPolicy`] decides which queued job starts when; the engine answers
//! its questions about the nodes, validates each start and carries it out
//! (placement by the run's rule, [`place::choose_nodes`]). Without a policy the
//! reference admission, strict FCFS under the MPL, decides. Gang mode admits
//! through its slot policy instead ([`super::slots`]).

use super::{kb, place, ProcError, Sim};
use cosched_contract::admission::{
    AdmissionControl, AdmissionError, AdmissionEvent, AdmissionPolicy,
};
use cosched_des::SimTime;
use cosched_rules::admission::Fcfs;
use std::sync::Arc;

/// Builds the admission policy of each run ([`super::ProcOptions::admission`]).
#[derive(Clone)]
pub struct AdmissionFactory(pub Arc<dyn Fn() -> Box<dyn AdmissionPolicy> + Send + Sync>);

impl AdmissionFactory {
    pub fn new(f: impl Fn() -> Box<dyn AdmissionPolicy> + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }
}

/// Prints without calling the factory: building a policy to learn its name
/// could run arbitrary code (a Python policy's constructor) just to print the
/// options.
impl std::fmt::Debug for AdmissionFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AdmissionFactory").finish_non_exhaustive()
    }
}

/// The admission policy of a run: the options' one, else the reference FCFS.
///
/// Under a slot policy there is none: the check chooses which contract admits
/// (a slot policy places each job in a row of its own matrix, so it also says
/// when the job starts, through its `Admit` decisions), a mode of the mechanism
/// fixed for the whole run; which job starts when stays the policy's decision
/// in both modes.
pub(super) fn policy_of(opts: &super::ProcOptions) -> Option<Box<dyn AdmissionPolicy>> {
    if opts.slots.is_some() {
        return None;
    }
    Some(match &opts.admission {
        Some(f) => (f.0)(),
        None => Box::new(Fcfs::default()),
    })
}

impl AdmissionControl for Sim<'_> {
    fn now(&self) -> SimTime {
        self.q.now()
    }
    fn nodes(&self) -> u32 {
        self.plat.nodes
    }
    fn nodes_needed(&self, job: usize) -> u32 {
        self.jobs[job].nodes_needed()
    }
    fn eligible(&self, job: usize) -> Vec<u32> {
        (0..self.plat.nodes)
            .filter(|&n| self.has_room(job, n))
            .collect()
    }
    fn idle(&self) -> Vec<u32> {
        (0..self.plat.nodes)
            .filter(|&n| self.nodes[n as usize].load == 0)
            .collect()
    }
    fn start(&mut self, job: usize, among: &[u32]) -> Result<(), AdmissionError> {
        self.check_start(job, among, |n| self.has_room(job, n))?;
        let (size, rpn) = (self.jobs[job].nodes_needed(), self.jobs[job].ranks_per_node);
        let chosen = self.choose_nodes(among, size as usize, true);
        let ranks = self.jobs[job].program.size() as usize;
        let per_rank: Vec<u32> = (0..ranks).map(|r| chosen[r / rpn as usize]).collect();
        let now = self.q.now();
        self.start_job(job, per_rank, now);
        Ok(())
    }
    /// One pending wake-up ([`AdmissionControl::wake_at`]): a request earlier
    /// than the pending one replaces it (the replaced event, still queued, is
    /// ignored when it fires: `Ev::AdmitWake` carries its generation).
    fn wake_at(&mut self, at: SimTime) -> Result<(), AdmissionError> {
        let now = self.q.now();
        if at < now {
            return Err(AdmissionError::WakeInPast { at, now });
        }
        if self.admit_wake.is_some_and(|(p, _)| p <= at) {
            return Ok(());
        }
        let gen = self.admit_wakes;
        self.admit_wakes += 1;
        self.admit_wake = Some((at, gen));
        self.q
            .schedule(at, super::Ev::AdmitWake { gen })
            .map_err(|_| AdmissionError::WakeInPast { at, now })?;
        Ok(())
    }
}

impl Sim<'_> {
    /// Checks a start of job `job` on its nodes among `among`: the job waits
    /// for admission, `among` is ascending, each of its nodes exists and has
    /// `room` for it, and there are enough of them.
    pub(super) fn check_start(
        &self,
        job: usize,
        among: &[u32],
        room: impl Fn(u32) -> bool,
    ) -> Result<(), AdmissionError> {
        let queued = job < self.jobs.len()
            && self.records[job].is_none()
            && self.jobs[job].submit <= self.q.now();
        if !queued {
            return Err(AdmissionError::NotQueued(job));
        }
        let sorted = among.windows(2).all(|w| w[0] < w[1]);
        if let Some(&node) = among
            .iter()
            .find(|&&n| n >= self.plat.nodes || !sorted || !room(n))
        {
            return Err(AdmissionError::NoRoom { job, node });
        }
        let size = self.jobs[job].nodes_needed();
        if (among.len() as u32) < size {
            return Err(AdmissionError::TooFew {
                job,
                need: size,
                offered: among.len() as u32,
            });
        }
        Ok(())
    }

    /// Whether node `n` has room for `ranks_per_node` more processes of job `j`
    /// (and their memory, with memory-aware admission).
    fn has_room(&self, j: usize, n: u32) -> bool {
        let rpn = self.jobs[j].ranks_per_node;
        let need = kb(self.jobs[j].program.memory_mb) * i64::from(rpn);
        let nd = &self.nodes[n as usize];
        nd.load + rpn <= self.opts.mpl
            && (!self.opts.memory_aware || nd.committed_kb + need <= kb(self.plat.job_memory_mb))
    }

    /// Tells the admission (the policy, or gang's slot policy) what happened now and
    /// carries out its starts. A start the engine refuses stops the run.
    pub(super) fn admit(&mut self, event: AdmissionEvent, now: SimTime) {
        let Some(mut policy) = self.admission.take() else {
            // No admission policy: either a slot policy admits (the same event
            // goes to its contract's op; see `policy_of`), or the admission
            // policy is out deciding.
            if self.slots.is_none() {
                // A job ended while the admission policy was deciding (a start
                // ran a job to its end at once): it is told when it returns.
                self.admit_later.push(event);
                return;
            }
            return match event {
                AdmissionEvent::Arrived(j) => self.slot_arrival(j, now),
                AdmissionEvent::Ended(_) => self.slot_next(now),
                // Only an admission policy asks for wake-ups.
                AdmissionEvent::Timer => {}
            };
        };
        let mut next = Some(event);
        while let Some(event) = next {
            if let Err(e) = policy.on_events(&[event], self) {
                self.failure.get_or_insert(ProcError::Admission(e));
                break;
            }
            next = (!self.admit_later.is_empty()).then(|| self.admit_later.remove(0));
        }
        self.admission = Some(policy);
    }

    /// The admission wake-up's event fired. Only the pending wake-up is
    /// delivered (one it replaced is stale), and only as the last event of its
    /// instant, as the job-level engine delivers its timer after the
    /// instant's completions and submissions: while another event is due now,
    /// it goes back in the queue behind it.
    pub(super) fn admit_wake_fired(&mut self, gen: u64, now: SimTime) {
        if self.admit_wake != Some((now, gen)) {
            return;
        }
        let due_now =
            self.q.peek_time() == Some(now) || self.segs.peek().is_some_and(|(t, _, _)| t == now);
        if due_now {
            // Cannot fail: `now` is not in the past.
            let _ = self.q.schedule(now, super::Ev::AdmitWake { gen });
            return;
        }
        self.admit_wake = None;
        self.admit(AdmissionEvent::Timer, now);
    }

    /// `size` of the `eligible` nodes (sorted), by the run's placement rule
    /// ([`place::choose_nodes`]; PACKING fills the least-loaded layer first).
    /// A gang row is itself the layer: `by_load = false` places within it by
    /// first fit, whatever the other rows hold.
    pub(super) fn choose_nodes(
        &mut self,
        eligible: &[u32],
        size: usize,
        by_load: bool,
    ) -> Vec<u32> {
        let nodes = &self.nodes;
        place::choose_nodes(
            self.opts.placement,
            eligible,
            size,
            |n| if by_load { nodes[n as usize].load } else { 0 },
            &mut self.rng,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn debug_prints_without_building_a_policy() {
        // The factory counts its calls: formatting it (alone and inside the
        // options) leaves the count at 0; calling it once makes it 1, which
        // shows the counter would see a call.
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&calls);
        let factory = AdmissionFactory::new(move || {
            seen.fetch_add(1, Ordering::SeqCst);
            Box::new(Fcfs::default())
        });
        assert_eq!(format!("{factory:?}"), "AdmissionFactory(..)");
        let opts = super::super::ProcOptions {
            admission: Some(factory.clone()),
            ..Default::default()
        };
        assert!(format!("{opts:?}").contains("AdmissionFactory(..)"));
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        let _ = (factory.0)();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
