//! The reference process-level admission: [`Fcfs`], first come first served
//! under the multiprogramming level, the admission a mechanism uses when the
//! run names no other (as [`crate::gang::Ousterhout`] is the one gang matrix),
//! and [`walk_queue`], its one pass over a queue, shared with the admission
//! policies that keep a queue of their own (`cosched-policies`).
//!
//! The contract it implements ([`AdmissionPolicy`], [`AdmissionControl`]) is
//! in `cosched_contract::admission`.

use cosched_contract::admission::{
    AdmissionControl, AdmissionError, AdmissionEvent, AdmissionPolicy,
};

/// First come, first served under the multiprogramming level: the queue head
/// starts as soon as [`AdmissionControl::eligible`] offers the nodes it needs.
/// Strict (`strict = true`, the default): the head blocks the queue. Not
/// strict (OpenPBS `strict_ordering: false`, its scheduler's default): a job
/// that does not fit keeps its place and every later job that fits starts now.
#[derive(Clone, Debug)]
pub struct Fcfs {
    strict: bool,
    queue: std::collections::VecDeque<usize>,
}

impl Fcfs {
    pub fn new(strict: bool) -> Self {
        Self {
            strict,
            queue: Default::default(),
        }
    }
}

/// One first-come-first-served pass over `queue` (in order; `job` gives an
/// entry's job): each job whose nodes [`AdmissionControl::eligible`] offers
/// starts now and leaves the queue; a job that does not fit keeps its place,
/// and the pass ends there when `hold(k, entry)` (its queue position and
/// entry) says it holds every later job, else goes on with the next one.
/// Strict FCFS holds at every position, OpenPBS's non-strict order at none.
///
/// A start only fills nodes, so a job passed over stays unable to start in
/// this pass: one pass over the queue suffices.
pub fn walk_queue<T>(
    queue: &mut std::collections::VecDeque<T>,
    job: impl Fn(&T) -> usize,
    ctl: &mut dyn AdmissionControl,
    hold: impl Fn(usize, &T) -> bool,
) -> Result<(), AdmissionError> {
    let mut k = 0;
    while let Some(e) = queue.get(k) {
        let j = job(e);
        let eligible = ctl.eligible(j);
        if eligible.len() < ctl.nodes_needed(j) as usize {
            if hold(k, e) {
                return Ok(());
            }
            k += 1;
            continue;
        }
        queue.remove(k);
        ctl.start(j, &eligible)?;
    }
    Ok(())
}

impl Default for Fcfs {
    fn default() -> Self {
        Self::new(true)
    }
}

impl AdmissionPolicy for Fcfs {
    fn name(&self) -> String {
        if self.strict {
            "fcfs"
        } else {
            "fcfs[strict=false]"
        }
        .into()
    }
    fn on_events(
        &mut self,
        events: &[AdmissionEvent],
        ctl: &mut dyn AdmissionControl,
    ) -> Result<(), AdmissionError> {
        for e in events {
            if let AdmissionEvent::Arrived(j) = *e {
                self.queue.push_back(j);
            }
        }
        let strict = self.strict;
        walk_queue(&mut self.queue, |&j| j, ctl, |_, _| strict)
    }
    fn dump(&self) -> String {
        format!("queued: {:?}", self.queue)
    }
}
