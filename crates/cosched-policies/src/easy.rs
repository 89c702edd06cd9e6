//! EASY backfilling (Lifka 1995; Mu'alem and Feitelson 2001).
//!
//! Algorithm, run at every instant with events:
//! 1. Start queue heads (submission order) while they fit in the free processors.
//! 2. If a head remains, give it a reservation: walk the running jobs by estimated
//!    end (start + estimate), adding their processors to the free count, until
//!    the head fits. That instant is the *shadow time*; the processors free at
//!    the shadow time (counting every job whose estimated end is at or before
//!    it, including ties ending at the shadow time itself) beyond the head's
//!    need are the *extra* processors.
//! 3. Backfill: scan the rest of the queue in order and start any job that fits
//!    in the free processors now and either ends (by its estimate) no later than
//!    the shadow time, or uses no more than the extra processors (which are then
//!    consumed). Such a job cannot delay the head's reservation.
//!
//! The scheduler only sees estimates (see the run's estimate options); a
//! running job's estimated end is never before its real end, so the head's
//! reservation is a guarantee.
//!
//! Parameters: none.

use crate::registry::{ParamInfo, PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::cluster::{ClusterPolicy, ClusterView, Decision, Event};
use cosched_des::SimTime;
use cosched_model::JobId;
use std::collections::BTreeSet;

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "easy",
        level: "cluster",
        summary: "EASY backfilling: the queue head gets a reservation; later jobs may start if they do not delay it.",
        params: Vec::<ParamInfo>::new(),
    }
}

pub fn build(spec: &PolicySpec) -> Result<Box<dyn ClusterPolicy>, RegistryError> {
    spec.expect_only(&[])?;
    Ok(Box::new(Easy::default()))
}

#[derive(Default)]
pub struct Easy {
    queue: Vec<JobId>,
    /// Running jobs by (estimated end, job).
    running: BTreeSet<(SimTime, JobId)>,
    /// Estimated end of each running job, indexed by job.
    est_end: Vec<SimTime>,
    /// When enabled, every reservation given: (job, instant, reserved start).
    log: Option<Vec<(JobId, SimTime, SimTime)>>,
}

impl Easy {
    /// An EASY policy that records every reservation it gives (for tests and debugging).
    pub fn with_reservation_log() -> Self {
        Self {
            log: Some(Vec::new()),
            ..Default::default()
        }
    }

    /// The recorded reservations: (job, instant it was computed, reserved start).
    pub fn reservation_log(&self) -> &[(JobId, SimTime, SimTime)] {
        self.log.as_deref().unwrap_or(&[])
    }

    fn start(&mut self, j: JobId, view: &dyn ClusterView, out: &mut Vec<Decision>) {
        let end = view.now().saturating_add(view.job(j).estimate);
        if self.est_end.len() <= j.idx() {
            self.est_end.resize(j.idx() + 1, SimTime::ZERO);
        }
        self.est_end[j.idx()] = end;
        self.running.insert((end, j));
        out.push(Decision::Start(j));
    }
}

impl ClusterPolicy for Easy {
    fn name(&self) -> String {
        "easy".into()
    }

    fn on_events(&mut self, events: &[Event], view: &dyn ClusterView, out: &mut Vec<Decision>) {
        for e in events {
            match *e {
                Event::Submitted(j) => self.queue.push(j),
                Event::Completed(j) | Event::Killed(j) => {
                    self.running.remove(&(self.est_end[j.idx()], j));
                }
                Event::Timer => {}
            }
        }
        let now = view.now();
        let mut free = view.free_procs();
        // 1. Start heads while they fit.
        let mut head = 0;
        while head < self.queue.len() {
            let j = self.queue[head];
            let need = view.job(j).procs;
            if need > free {
                break;
            }
            free -= need;
            self.start(j, view, out);
            head += 1;
        }
        self.queue.drain(..head);
        if self.queue.is_empty() || free == 0 {
            return;
        }
        // 2. Shadow time and extra processors for the head.
        let h = self.queue[0];
        let need = view.job(h).procs;
        // Every job ending by the shadow time counts, including those that end
        // at the shadow time itself after the one that made the head fit.
        let mut avail = free;
        let mut shadow: Option<SimTime> = None;
        for &(end, j) in &self.running {
            let end = end.max(now);
            if shadow.is_some_and(|s| end > s) {
                break;
            }
            avail += view.job(j).procs;
            if shadow.is_none() && avail >= need {
                shadow = Some(end);
            }
        }
        let mut extra = if shadow.is_some() { avail - need } else { 0 };
        let shadow = shadow.unwrap_or(SimTime::MAX);
        if let Some(log) = &mut self.log {
            log.push((h, now, shadow));
        }
        // 3. Backfill.
        let mut started = Vec::new();
        for (k, &j) in self.queue.iter().enumerate().skip(1) {
            if free == 0 {
                break;
            }
            let spec = view.job(j);
            if spec.procs > free {
                continue;
            }
            let ends_in_time = now.saturating_add(spec.estimate) <= shadow;
            if ends_in_time || spec.procs <= extra {
                if !ends_in_time {
                    extra -= spec.procs;
                }
                free -= spec.procs;
                started.push(k);
            }
        }
        for &k in &started {
            let j = self.queue[k];
            self.start(j, view, out);
        }
        if !started.is_empty() {
            let mut k = 0;
            let mut next = started.iter().peekable();
            self.queue.retain(|_| {
                let drop = next.peek() == Some(&&k);
                if drop {
                    next.next();
                }
                k += 1;
                !drop
            });
        }
    }

    fn dump(&self) -> String {
        format!(
            "easy: {} queued (head {:?}), {} running",
            self.queue.len(),
            self.queue.first(),
            self.running.len()
        )
    }
}
