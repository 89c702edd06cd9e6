//! Conservative backfilling (Mu'alem and Feitelson 2001).
//!
//! Algorithm: every queued job holds a reservation in an availability
//! [`Profile`] built from the running jobs' estimated ends and the earlier
//! jobs' reservations.
//! - On arrival, a job gets the earliest slot (start, start + estimate) where
//!   enough processors are free given every existing reservation; it never
//!   moves an earlier job.
//! - When a job ends before its estimate, the processors it leaves are given
//!   back to the profile and the schedule is compressed: in queue order, each
//!   job's reservation is removed and re-made at the earliest slot. Its old slot
//!   is still free at that point, so no reservation ever moves later.
//! - Jobs whose reservation starts now are started. A job therefore starts
//!   early only into a hole that delays no reservation.
//!
//! Search shortcuts (same schedule as the plain scan of [`Conservative::reference`]):
//! a job is searched for only from the first step that can hold it, and from the
//! reservation of a recent job that could not move and needs no more processors
//! for no longer; and only up to its horizon, the latest end of the processors
//! given back since the start of the last compression (a window that is feasible
//! now but was not at the job's last try holds a point where processors were
//! given back, so it starts before that end).
//!
//! Parameters: none.

use crate::profile::{Mark, Profile, Records};
use crate::registry::{ParamInfo, PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::cluster::{ClusterPolicy, ClusterView, Decision, Event};
use cosched_des::SimTime;
use cosched_model::JobId;

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "conservative",
        level: "cluster",
        summary: "Conservative backfilling: every queued job holds a reservation; a job starts early only if it delays none.",
        params: Vec::<ParamInfo>::new(),
    }
}

pub fn build(spec: &PolicySpec) -> Result<Box<dyn ClusterPolicy>, RegistryError> {
    spec.expect_only(&[])?;
    Ok(Box::new(Conservative::default()))
}

/// A queued job: its reserved start, processors and slot length, and marks of
/// its reservation's first and last steps in the profile (where to look for
/// them again).
#[derive(Clone, Copy)]
struct Queued {
    job: JobId,
    start: SimTime,
    need: u32,
    dur: SimTime,
    start_mark: Mark,
    end_mark: Mark,
}

#[derive(Default)]
pub struct Conservative {
    profile: Option<Profile>,
    /// Queued jobs in submission order.
    queue: Vec<Queued>,
    /// The earliest reservation in the queue after the last pass.
    next_start: SimTime,
    /// Estimated end of each running job, indexed by job.
    est_end: Vec<SimTime>,
    log: Option<Vec<(JobId, SimTime, SimTime)>>,
    /// Scratch records of the profile's running maximum.
    records: Records,
    /// Scratch list of jobs that could not move in the current pass.
    failed: Vec<Failed>,
    /// The latest end of the processors given back by the moves of the last
    /// compression, or of this one while it runs (`SimTime::ZERO` when none).
    moved_end: SimTime,
    /// The latest end of the processors given back since the start of the last
    /// compression (see the horizon in the placing walk).
    gained: SimTime,
    /// Use the plain scan for every job (the reference the pruned search is tested against).
    plain: bool,
}

impl Conservative {
    /// A policy that records every reservation made: (job, instant, reserved start).
    pub fn with_reservation_log() -> Self {
        Self {
            log: Some(Vec::new()),
            ..Default::default()
        }
    }

    /// The same policy without the search shortcuts (slow; for tests).
    pub fn reference() -> Self {
        Self {
            log: Some(Vec::new()),
            plain: true,
            ..Default::default()
        }
    }

    pub fn reservation_log(&self) -> &[(JobId, SimTime, SimTime)] {
        self.log.as_deref().unwrap_or(&[])
    }

    /// Length of a job's slot in the profile: its estimate, and at least one
    /// nanosecond so that a zero-length job still holds its processors at its start.
    fn slot(view: &dyn ClusterView, j: JobId) -> SimTime {
        view.job(j).estimate.max(SimTime(1))
    }
}

/// A job that could not move: (need, slot, reservation, mark of the
/// reservation's first step).
type Failed = (u32, SimTime, SimTime, Mark);

/// The latest reservation among the failed jobs that dominate a job needing
/// `need` processors for `dur` reserved at `old` (no more processors, no longer,
/// reserved no later), with its mark, or `SimTime(i64::MIN)` when none does;
/// `None` when one of them is reserved at or after `horizon`, so the job cannot
/// move. The latest failures are read first: a job is most often dominated by
/// the one just before it in the queue.
fn failure_bound(
    failed: &[Failed],
    need: u32,
    dur: SimTime,
    old: SimTime,
    horizon: SimTime,
) -> Option<(SimTime, Mark)> {
    let mut bound = (SimTime(i64::MIN), Mark::FIRST);
    for &(n, d, o, m) in failed.iter().rev() {
        if n <= need && d <= dur && o <= old {
            if o >= horizon {
                return None;
            }
            if o > bound.0 {
                bound = (o, m);
            }
        }
    }
    Some(bound)
}

impl ClusterPolicy for Conservative {
    fn name(&self) -> String {
        "conservative".into()
    }

    #[expect(
        clippy::too_many_lines,
        reason = "the conservative backfilling pass over one batch of events (reservations kept, moved, given up), one algorithm in sequence"
    )]
    fn on_events(&mut self, events: &[Event], view: &dyn ClusterView, out: &mut Vec<Decision>) {
        let now = view.now();
        let profile = self
            .profile
            .get_or_insert_with(|| Profile::new(now, view.total_procs()));
        profile.advance(now);
        let mut compress = false;
        // The latest end of the processors given back in this batch.
        let mut released_end = SimTime::ZERO;
        let first_new = self.queue.len();
        for e in events {
            match *e {
                Event::Completed(j) | Event::Killed(j) => {
                    let est_end = self.est_end[j.idx()];
                    if est_end > now {
                        profile.release(now, est_end - now, view.job(j).procs);
                        released_end = released_end.max(est_end);
                        compress = true;
                    }
                }
                Event::Submitted(j) => self.queue.push(Queued {
                    job: j,
                    start: SimTime::MAX,
                    need: view.job(j).procs,
                    dur: Self::slot(view, j),
                    start_mark: Mark::FIRST,
                    end_mark: Mark::FIRST,
                }),
                Event::Timer => {}
            }
        }
        let upto = if compress { 0 } else { first_new };
        // Running maximum of free processors, to skip jobs that cannot fit anywhere
        // before their reservation. Computed lazily, and after each change cut back
        // to the steps the change left untouched.
        let records = &mut self.records;
        records.clear();
        // The latest jobs that could not move: (need, slot, reservation), each kept while
        // no processors were given back before its reservation (reservations and the
        // first part of a move only take processors). A job needing at least as many
        // processors for at least as long, reserved no earlier, cannot start before such
        // a job's reservation either: on [t, old) the two searches see the same free
        // counts, or fewer.
        let failed = &mut self.failed;
        failed.clear();
        // The latest end of the processors given back since the start of the last
        // compression: by its moves, this batch's releases and this pass's moves.
        if compress {
            self.gained = std::mem::take(&mut self.moved_end).max(released_end);
        }
        for k in upto..self.queue.len() {
            let Queued {
                job: j,
                start: old,
                need,
                dur,
                start_mark,
                end_mark,
            } = self.queue[k];
            let t = if old == SimTime::MAX {
                let found = profile.earliest_at(now, need, dur);
                // A reservation only takes processors: every failed job still fails.
                let placed = profile.reserve_found(found, dur, need);
                records.truncate(placed.changed);
                self.queue[k].start_mark = placed.start;
                self.queue[k].end_mark = placed.end;
                found.start
            } else if self.plain {
                match profile.earlier_than(now, need, dur, old) {
                    Some(t) => {
                        profile.release(old, dur, need);
                        profile.reserve(t, dur, need);
                        t
                    }
                    None => continue,
                }
            } else {
                // The horizon. At its last try (placed, moved, or found unable to
                // move, in the last compression or since) the job had no feasible
                // window starting in [now, old) with its own slot given back.
                // Since then only the moves after it in that compression, this
                // batch's releases and the moves before it in this pass have given
                // processors back, each on a stretch ending by `self.gained`; the
                // rest only took processors. A window feasible now but not then
                // holds a point whose free count rose, so it starts before
                // `self.gained`: the earliest feasible start, if any, is before
                // `horizon`, and a search that finds none before `horizon` finds
                // none before `old`.
                let horizon = old.min(self.gained);
                // Both tests only reject jobs that cannot move and change no
                // state, so their order does not change the schedule. The test
                // against the failed jobs goes first: it is cheap when the list
                // is short, and where the queue holds many similar jobs it rules
                // out most of them (on CEA-Curie, 8.6 M of the 15.9 M visits are
                // ruled out by it and not by the first-fit test, 2.4 M by the
                // first-fit test).
                let Some((bound, bound_mark)) = failure_bound(failed, need, dur, old, horizon)
                else {
                    continue;
                };
                let Some(first) = profile.first_fit_before_lazy(records, need, horizon) else {
                    continue;
                };
                // The profile starts at `now`, so only a bound can start the search later.
                let (from, first) = if bound > now {
                    (bound, profile.step_index_near(first, bound_mark, bound))
                } else {
                    (now, first)
                };
                match profile.earlier_before(first, from, need, dur, old, horizon) {
                    Some(found) => {
                        let t = found.start;
                        let placed = profile.move_found(old, found, dur, need, end_mark);
                        records.truncate(placed.changed);
                        self.queue[k].start_mark = placed.start;
                        self.queue[k].end_mark = placed.end;
                        // The move gives processors back only from the later of its
                        // new end and its old start on: a failed job reserved no
                        // later than that still fails.
                        let gain = old.max(t.saturating_add(dur));
                        failed.retain(|f| f.2 <= gain);
                        let end = old.saturating_add(dur);
                        self.gained = self.gained.max(end);
                        self.moved_end = self.moved_end.max(end);
                        t
                    }
                    None => {
                        // The 4 latest failures, oldest first.
                        if failed.len() == 4 {
                            failed.remove(0);
                        }
                        failed.push((need, dur, old, start_mark));
                        continue;
                    }
                }
            };
            self.queue[k].start = t;
            if let Some(log) = &mut self.log {
                log.push((j, now, t));
            }
        }
        // Start the jobs whose reservation is now. Without a compression the older
        // jobs kept their reservations: when none of them starts now, only the new
        // jobs need a look.
        let from = if !compress && self.next_start > now {
            first_new
        } else {
            0
        };
        let mut next_wake = if from == 0 {
            SimTime::MAX
        } else {
            self.next_start
        };
        let mut kept = from;
        for k in from..self.queue.len() {
            let q = self.queue[k];
            if q.start == now {
                let j = q.job;
                if self.est_end.len() <= j.idx() {
                    self.est_end.resize(j.idx() + 1, SimTime::ZERO);
                }
                self.est_end[j.idx()] = now.saturating_add(q.dur);
                out.push(Decision::Start(j));
            } else {
                next_wake = next_wake.min(q.start);
                self.queue[kept] = q;
                kept += 1;
            }
        }
        self.queue.truncate(kept);
        self.next_start = next_wake;
        // Reservations start at some job's estimated end, which is an event when
        // estimates are exact; the wake-up covers the other cases.
        if next_wake != SimTime::MAX {
            out.push(Decision::WakeAt(next_wake));
        }
    }

    fn dump(&self) -> String {
        let q: Vec<String> = self
            .queue
            .iter()
            .take(10)
            .map(|q| format!("{}@{}", q.job.0, q.start))
            .collect();
        format!(
            "conservative: {} queued; first reservations: {}",
            self.queue.len(),
            q.join(" ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Failed jobs (need, slot, reservation): A (4, 10, 20), B (2, 5, 30), C (8, 10, 5).
    /// - A job of 4 for 10 reserved at 40 is dominated by A (4 <= 4, 10 <= 10,
    ///   20 <= 40) and B, not C (8 > 4). With horizon 25, B's reservation 30 is
    ///   at or after it: the job cannot move, none. With horizon 35: the later of
    ///   20 and 30, 30.
    /// - A job of 3: only B dominates (A needs 4 > 3): 30.
    /// - A job of 1: none dominates: the sentinel `i64::MIN`.
    /// - A job reserved at 25: B (30 > 25) does not dominate; A does: 20.
    /// - A job of 4 for 4: A's and B's slots (10, 5) are longer, C needs 8: none.
    #[test]
    fn failure_bound_by_hand() {
        let s = SimTime::from_secs;
        let failed: Vec<Failed> = [(4, s(10), s(20)), (2, s(5), s(30)), (8, s(10), s(5))]
            .into_iter()
            .map(|(n, d, o)| (n, d, o, Mark::FIRST))
            .collect();
        let bound = |need, dur, old, horizon| {
            failure_bound(&failed, need, dur, old, horizon).map(|(b, _)| b)
        };
        assert_eq!(bound(4, s(10), s(40), s(25)), None);
        assert_eq!(bound(4, s(10), s(40), s(35)), Some(s(30)));
        assert_eq!(bound(3, s(10), s(40), s(35)), Some(s(30)));
        assert_eq!(bound(1, s(10), s(40), s(35)), Some(SimTime(i64::MIN)));
        assert_eq!(bound(4, s(10), s(25), s(25)), Some(s(20)));
        assert_eq!(bound(4, s(4), s(40), s(35)), Some(SimTime(i64::MIN)));
    }
}
