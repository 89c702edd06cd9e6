//! The job-level cluster engine.
//!
//! Time advances from instant to instant. At each instant the engine delivers,
//! in this order: completions (jobs whose end falls now, in the order their ends
//! were scheduled), submissions (in workload order), and at most one timer
//! event. Jobs that need more processors than the machine has are rejected at
//! submission and never reach the policy. The policy is then called once with
//! all of the instant's events and its decisions are validated and applied.
//!
//! With [`EventOrder::PerEvent`] (opt-in, for comparison with simulators that
//! schedule after every event, such as pyss) the policy is instead called once
//! per event, each call's decisions applied before the next event: first the
//! instant's submissions, then its completions (a completed job's processors are
//! freed only when its completion is delivered), then the timer.
//!
//! When no event remains but jobs are still waiting, the policy has stalled:
//! the run stops with [`EngineError::Stalled`] and the policy's `dump()`.
//!
//! Two watchdogs bound a run whose policy keeps it going (e.g. one that keeps
//! asking to be woken up): past [`SimOptions::time_limit`] the run stops with
//! [`EngineError::TimeLimit`], after [`SimOptions::event_limit`] events delivered
//! to the policy with [`EngineError::EventLimit`]. Both are checked at every
//! instant, before the policy is called.

use crate::alloc::{node_count, Allocator, Range};
use crate::policy::{ClusterPolicy, ClusterView, Decision, DecisionError, Event};
use cosched_des::{EventQueue, RngStreams, SimTime};
use cosched_model::{EventOrder, JobId, JobSpec, Placement, Platform, Workload};
use thiserror::Error;

/// Engine options.
#[derive(Clone, Debug)]
pub struct SimOptions {
    pub placement: Placement,
    pub seed: u64,
    /// One policy call per instant (default) or per event.
    pub event_order: EventOrder,
    /// The run stops with [`EngineError::TimeLimit`] at an instant past this time
    /// (default: [`SimTime::MAX`], i.e. only the range of simulated time).
    pub time_limit: SimTime,
    /// The run stops with [`EngineError::EventLimit`] once more events than this
    /// have been delivered to the policy (default [`DEFAULT_EVENT_LIMIT`]).
    pub event_limit: u64,
}

/// Default of [`SimOptions::event_limit`] (the configuration's job-level default of
/// `limits.max_events`): a run delivers two events per job (submission and end) plus
/// the policy's wake-ups, so real traces (a few million jobs) stay far below it.
pub const DEFAULT_EVENT_LIMIT: u64 = 200_000_000;

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            placement: Placement::default(),
            seed: 0,
            event_order: EventOrder::default(),
            time_limit: SimTime::MAX,
            event_limit: DEFAULT_EVENT_LIMIT,
        }
    }
}

/// How a job ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobStatus {
    Completed,
    Killed,
    Rejected,
    /// Real execution only: the job's program crashed or exited non-zero.
    Failed,
}

impl JobStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Completed => "completed",
            JobStatus::Killed => "killed",
            JobStatus::Rejected => "rejected",
            JobStatus::Failed => "failed",
        }
    }
}

/// The outcome of one job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRecord {
    pub start: Option<SimTime>,
    pub end: Option<SimTime>,
    pub status: JobStatus,
    /// Processor ranges the job ran on (empty if rejected).
    pub alloc: Vec<Range>,
    /// Distinct nodes the job ran on.
    pub nodes: u32,
}

impl JobRecord {
    /// The record of a job that has not started (yet), with the status it gets
    /// if it never does.
    pub(crate) fn unstarted(status: JobStatus) -> Self {
        Self {
            start: None,
            end: None,
            status,
            alloc: Vec::new(),
            nodes: 0,
        }
    }
}

/// Counters of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Instants at which the policy was called.
    pub policy_calls: u64,
    /// Events delivered to the policy.
    pub events: u64,
    /// Decisions applied.
    pub decisions: u64,
}

/// Everything a run produces; `records[i]` belongs to `workload.jobs[i]`.
#[derive(Clone, Debug)]
pub struct SimOutput {
    pub records: Vec<JobRecord>,
    pub stats: EngineStats,
    pub policy: String,
}

#[derive(Debug, Error)]
pub enum EngineError {
    #[error("at t={time}: policy {policy} made an invalid decision {decision}: {source}")]
    InvalidDecision {
        time: SimTime,
        policy: String,
        decision: String,
        source: DecisionError,
    },
    #[error("policy {policy} stalled at t={time}: {waiting} job(s) still waiting and nothing left to happen; policy state:\n{dump}")]
    Stalled {
        time: SimTime,
        policy: String,
        waiting: usize,
        dump: String,
    },
    #[error("invalid platform: {0}")]
    Platform(#[from] cosched_model::PlatformError),
    #[error("workload is not sorted by submit time at job index {0}")]
    Unsorted(usize),
    #[error("invalid parameters: {0}")]
    Params(String),
    #[error("job {job} (index {index}): estimate {estimate} is shorter than its runtime {runtime} and the job is not killed at it; policies rely on estimates being upper bounds")]
    EstimateBelowRuntime {
        job: i64,
        index: usize,
        estimate: SimTime,
        runtime: SimTime,
    },
    #[error("at t={time}: job {job} (index {index}) would end beyond the representable simulated time (about 9.2e9 s)")]
    TimeOverflow {
        time: SimTime,
        job: i64,
        index: usize,
    },
    #[error("interrupted at t={time}")]
    Interrupted { time: SimTime },
    #[error("time limit {limit} reached at t={time} under policy {policy} with {unfinished} job(s) unfinished")]
    TimeLimit {
        limit: SimTime,
        time: SimTime,
        policy: String,
        unfinished: usize,
    },
    #[error("event limit {limit} reached at t={time} under policy {policy} with {unfinished} job(s) unfinished")]
    EventLimit {
        limit: u64,
        time: SimTime,
        policy: String,
        unfinished: usize,
    },
    #[error("policy {policy} made no progress at t={time}: {calls} calls without starting or rejecting a job while {waiting} wait; policy state:\n{dump}")]
    NoProgress {
        time: SimTime,
        policy: String,
        calls: u64,
        waiting: usize,
        dump: String,
    },
}

/// Consecutive policy calls, with jobs waiting and nothing running, after which a
/// policy that neither starts nor rejects a job is declared stuck.
const NO_PROGRESS_LIMIT: u64 = 1_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Pending,
    Queued,
    Running,
    Done,
}

impl State {
    fn as_str(self) -> &'static str {
        match self {
            State::Pending => "not submitted",
            State::Queued => "queued",
            State::Running => "running",
            State::Done => "finished",
        }
    }
}

struct View<'a> {
    jobs: &'a [JobSpec],
    records: &'a [JobRecord],
    now: SimTime,
    total: u32,
    free: u32,
}

impl ClusterView for View<'_> {
    fn now(&self) -> SimTime {
        self.now
    }
    fn total_procs(&self) -> u32 {
        self.total
    }
    fn free_procs(&self) -> u32 {
        self.free
    }
    fn job(&self, id: JobId) -> &JobSpec {
        &self.jobs[id.idx()]
    }
    fn start_time(&self, id: JobId) -> Option<SimTime> {
        self.records[id.idx()].start
    }
}

/// Runs `policy` over `workload` on `platform` until every job has ended.
pub fn simulate(
    workload: &Workload,
    platform: &Platform,
    policy: &mut dyn ClusterPolicy,
    opts: &SimOptions,
) -> Result<SimOutput, EngineError> {
    platform.validate()?;
    check_workload(&workload.jobs)?;
    let mut run = Run::new(&workload.jobs, platform, policy.name(), opts);
    let per_event = opts.event_order == EventOrder::PerEvent;
    while let Some(now) = run.next_instant() {
        run.check_limits(now)?;
        run.queue.advance_to(now).expect("instants are increasing");
        if run.collect_events(now, per_event) {
            run.deliver(now, per_event, policy)?;
            run.check_stalled(now, policy)?;
        }
    }
    Ok(SimOutput {
        records: run.records,
        stats: run.stats,
        policy: run.policy_name,
    })
}

/// The workload's own checks: sorted by submit time, and every estimate an upper
/// bound of its runtime unless the job is killed at it.
fn check_workload(jobs: &[JobSpec]) -> Result<(), EngineError> {
    if let Some(i) = jobs.windows(2).position(|w| w[1].submit < w[0].submit) {
        return Err(EngineError::Unsorted(i + 1));
    }
    if let Some((index, j)) = jobs
        .iter()
        .enumerate()
        .find(|(_, j)| j.kill_after.is_none() && j.estimate < j.runtime)
    {
        return Err(EngineError::EstimateBelowRuntime {
            job: j.source_id,
            index,
            estimate: j.estimate,
            runtime: j.runtime,
        });
    }
    Ok(())
}

/// The earlier of two instants, either of which may be missing.
#[inline]
fn earlier(a: Option<SimTime>, b: Option<SimTime>) -> Option<SimTime> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The state of a run between two instants.
struct Run<'a> {
    jobs: &'a [JobSpec],
    opts: &'a SimOptions,
    policy_name: String,
    total: u32,
    ppn: u32,
    alloc: Allocator,
    /// Job ends, by (time, order of scheduling).
    queue: EventQueue<JobId>,
    state: Vec<State>,
    records: Vec<JobRecord>,
    stats: EngineStats,
    /// The first job not submitted yet.
    next_submit: usize,
    /// Jobs queued (submitted, not started nor rejected).
    waiting: usize,
    running: usize,
    /// The events of the current instant.
    events: Vec<Event>,
    decisions: Vec<Decision>,
    /// The pending wake-up. It is kept outside the queue: it is delivered
    /// after the instant's other events whatever its order among them.
    timer: Option<SimTime>,
    /// Consecutive policy calls with jobs waiting and nothing running.
    idle_calls: u64,
}

impl<'a> Run<'a> {
    fn new(
        jobs: &'a [JobSpec],
        platform: &Platform,
        policy_name: String,
        opts: &'a SimOptions,
    ) -> Self {
        let total = platform.total_procs();
        let streams = RngStreams::new(opts.seed);
        Self {
            jobs,
            opts,
            policy_name,
            total,
            ppn: platform.procs_per_node,
            alloc: Allocator::new(total, opts.placement, &streams),
            queue: EventQueue::new(),
            state: vec![State::Pending; jobs.len()],
            records: vec![JobRecord::unstarted(JobStatus::Rejected); jobs.len()],
            stats: EngineStats::default(),
            next_submit: 0,
            waiting: 0,
            events: Vec::new(),
            decisions: Vec::new(),
            timer: None,
            idle_calls: 0,
            running: 0,
        }
    }

    /// The next instant: the earliest of the next submission, the next job end
    /// and the pending wake-up; `None` when none is left.
    fn next_instant(&mut self) -> Option<SimTime> {
        let t_sub = self.jobs.get(self.next_submit).map(|j| j.submit);
        earlier(earlier(t_sub, self.queue.peek_time()), self.timer)
    }

    /// The watchdogs, checked at every instant before the policy is called.
    fn check_limits(&self, now: SimTime) -> Result<(), EngineError> {
        if cosched_des::interrupt::requested() {
            return Err(EngineError::Interrupted { time: now });
        }
        let unfinished = || self.waiting + self.running + (self.jobs.len() - self.next_submit);
        if now > self.opts.time_limit {
            return Err(EngineError::TimeLimit {
                limit: self.opts.time_limit,
                time: now,
                policy: self.policy_name.clone(),
                unfinished: unfinished(),
            });
        }
        if self.stats.events > self.opts.event_limit {
            return Err(EngineError::EventLimit {
                limit: self.opts.event_limit,
                time: now,
                policy: self.policy_name.clone(),
                unfinished: unfinished(),
            });
        }
        Ok(())
    }

    /// Builds the instant's events in delivery order (module doc); returns
    /// whether there is any. Per instant, ended jobs are finished here; per
    /// event, when their completion is delivered.
    fn collect_events(&mut self, now: SimTime, per_event: bool) -> bool {
        self.events.clear();
        let mut ended = 0usize;
        while let Some(ev) = self.queue.pop_at(now) {
            let j = ev.event;
            if !per_event {
                self.finish(j, now);
            }
            ended += 1;
            self.events
                .push(if self.records[j.idx()].status == JobStatus::Killed {
                    Event::Killed(j)
                } else {
                    Event::Completed(j)
                });
        }
        while self.next_submit < self.jobs.len() && self.jobs[self.next_submit].submit == now {
            let j = JobId(self.next_submit as u32);
            self.next_submit += 1;
            if self.jobs[j.idx()].procs > self.total {
                self.state[j.idx()] = State::Done; // rejected: can never run on this machine
                continue;
            }
            self.state[j.idx()] = State::Queued;
            self.waiting += 1;
            self.events.push(Event::Submitted(j));
        }
        if per_event {
            // Submissions before completions.
            self.events.rotate_left(ended);
        }
        if self.timer == Some(now) {
            self.timer = None;
            self.events.push(Event::Timer);
        }
        !self.events.is_empty()
    }

    /// Calls the policy with the instant's events (once, or once per event) and
    /// applies its decisions after each call.
    fn deliver(
        &mut self,
        now: SimTime,
        per_event: bool,
        policy: &mut dyn ClusterPolicy,
    ) -> Result<(), EngineError> {
        let calls = if per_event { self.events.len() } else { 1 };
        for call in 0..calls {
            let batch = if per_event {
                if let Event::Completed(j) | Event::Killed(j) = self.events[call] {
                    self.finish(j, now);
                }
                call..call + 1
            } else {
                0..self.events.len()
            };
            self.stats.policy_calls += 1;
            self.stats.events += batch.len() as u64;
            self.decisions.clear();
            {
                let view = View {
                    jobs: self.jobs,
                    records: &self.records,
                    now,
                    total: self.total,
                    free: self.alloc.free_count(),
                };
                policy.on_events(&self.events[batch], &view, &mut self.decisions);
            }
            let mut decisions = std::mem::take(&mut self.decisions);
            for d in decisions.drain(..) {
                self.apply(&d, now)?;
                self.stats.decisions += 1;
            }
            self.decisions = decisions;
            if self.waiting > 0 && self.running == 0 {
                self.idle_calls += 1;
                if self.idle_calls > NO_PROGRESS_LIMIT {
                    return Err(EngineError::NoProgress {
                        time: now,
                        policy: self.policy_name.clone(),
                        calls: self.idle_calls,
                        waiting: self.waiting,
                        dump: policy.dump(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Nothing is left to happen but jobs still wait: the policy has stalled.
    fn check_stalled(&self, now: SimTime, policy: &dyn ClusterPolicy) -> Result<(), EngineError> {
        if self.waiting > 0
            && self.next_submit == self.jobs.len()
            && self.queue.is_empty()
            && self.timer.is_none()
        {
            return Err(EngineError::Stalled {
                time: now,
                policy: self.policy_name.clone(),
                waiting: self.waiting,
                dump: policy.dump(),
            });
        }
        Ok(())
    }

    /// The error for the invalid decision `d`.
    fn invalid(&self, now: SimTime, source: DecisionError, d: &Decision) -> EngineError {
        EngineError::InvalidDecision {
            time: now,
            policy: self.policy_name.clone(),
            decision: format!("{d:?}"),
            source,
        }
    }

    /// The spec of `j` if it is queued.
    fn queued(&self, j: JobId) -> Result<&'a JobSpec, DecisionError> {
        let spec = self
            .jobs
            .get(j.idx())
            .ok_or(DecisionError::UnknownJob(j.0))?;
        match self.state[j.idx()] {
            State::Queued => Ok(spec),
            s => Err(DecisionError::NotQueued {
                job: spec.source_id,
                state: s.as_str(),
            }),
        }
    }

    /// Validates the decision `d` against the state as updated by the decisions
    /// before it, and applies it.
    fn apply(&mut self, d: &Decision, now: SimTime) -> Result<(), EngineError> {
        match d {
            Decision::Start(j) | Decision::StartOn(j, _) => self.start(*j, d, now),
            Decision::Reject(j) => {
                self.queued(*j).map_err(|e| self.invalid(now, e, d))?;
                self.state[j.idx()] = State::Done;
                self.waiting -= 1;
                self.idle_calls = 0;
                Ok(())
            }
            Decision::WakeAt(t) => {
                if *t < now {
                    return Err(self.invalid(now, DecisionError::WakeInPast { at: *t, now }, d));
                }
                // One pending timer at a time: the earliest request wins.
                if self.timer.is_none_or(|cur| *t < cur) {
                    self.timer = Some(*t);
                }
                Ok(())
            }
        }
    }

    /// Starts `j` (decision `d`: `Start` or `StartOn`) now; its end is scheduled.
    fn start(&mut self, j: JobId, d: &Decision, now: SimTime) -> Result<(), EngineError> {
        let spec = self.queued(j).map_err(|e| self.invalid(now, e, d))?;
        let ranges = match d {
            Decision::StartOn(_, procs) => {
                check_exact(spec, procs, &self.alloc).map_err(|e| self.invalid(now, e, d))?;
                self.alloc.allocate_exact(procs)
            }
            _ => {
                if spec.procs > self.alloc.free_count() {
                    let e = DecisionError::InsufficientProcessors {
                        job: spec.source_id,
                        need: spec.procs,
                        free: self.alloc.free_count(),
                    };
                    return Err(self.invalid(now, e, d));
                }
                self.alloc.allocate(spec.procs)
            }
        };
        let run = spec.effective_runtime();
        let end = now.checked_add(run).ok_or(EngineError::TimeOverflow {
            time: now,
            job: spec.source_id,
            index: j.idx(),
        })?;
        let rec = &mut self.records[j.idx()];
        rec.start = Some(now);
        rec.status = if run < spec.runtime {
            JobStatus::Killed
        } else {
            JobStatus::Completed
        };
        rec.nodes = node_count(&ranges, self.ppn);
        rec.alloc = ranges;
        self.state[j.idx()] = State::Running;
        self.waiting -= 1;
        self.running += 1;
        self.idle_calls = 0;
        self.queue.schedule(end, j).expect("runtime >= 0");
        Ok(())
    }

    /// Book-keeping of a job's end: frees its processors and records the instant.
    fn finish(&mut self, j: JobId, now: SimTime) {
        let rec = &mut self.records[j.idx()];
        self.alloc.release(&rec.alloc);
        self.running -= 1;
        rec.end = Some(now);
        self.state[j.idx()] = State::Done;
    }
}

fn check_exact(spec: &JobSpec, procs: &[u32], alloc: &Allocator) -> Result<(), DecisionError> {
    if procs.len() != spec.procs as usize {
        return Err(DecisionError::WrongProcessorCount {
            job: spec.source_id,
            given: procs.len(),
            need: spec.procs,
        });
    }
    let mut seen = std::collections::HashSet::with_capacity(procs.len());
    for &p in procs {
        if p >= alloc.total() {
            return Err(DecisionError::NoSuchProcessor {
                job: spec.source_id,
                proc: p,
                total: alloc.total(),
            });
        }
        if !alloc.is_free(p) || !seen.insert(p) {
            return Err(DecisionError::ProcessorBusy {
                job: spec.source_id,
                proc: p,
            });
        }
    }
    Ok(())
}
