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
    TimeOverflow { time: SimTime, job: i64, index: usize },
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

#[derive(Debug, Clone, Copy)]
enum Internal {
    End(JobId),
    Timer,
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
// Longer than the function-length cap (clippy.toml): the job-level event loop; to be split into setup, loop and records.
#[allow(clippy::too_many_lines)]
pub fn simulate(
    workload: &Workload,
    platform: &Platform,
    policy: &mut dyn ClusterPolicy,
    opts: &SimOptions,
) -> Result<SimOutput, EngineError> {
    platform.validate()?;
    let jobs = &workload.jobs;
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
    let total = platform.total_procs();
    let ppn = platform.procs_per_node;
    let streams = RngStreams::new(opts.seed);
    let mut alloc = Allocator::new(total, opts.placement, &streams);
    let mut queue: EventQueue<Internal> = EventQueue::new();
    let mut state = vec![State::Pending; jobs.len()];
    let mut records: Vec<JobRecord> = vec![
        JobRecord {
            start: None,
            end: None,
            status: JobStatus::Rejected,
            alloc: Vec::new(),
            nodes: 0
        };
        jobs.len()
    ];
    let mut stats = EngineStats::default();
    let policy_name = policy.name();
    let mut next_submit = 0usize;
    let mut waiting = 0usize;
    let mut events: Vec<Event> = Vec::new();
    let mut decisions: Vec<Decision> = Vec::new();
    let mut timer: Option<(SimTime, cosched_des::EventId)> = None;
    let mut idle_calls: u64 = 0;
    let mut running = 0usize;

    loop {
        let t_sub = jobs.get(next_submit).map(|j| j.submit);
        let t_q = queue.peek_time();
        let now = match (t_sub, t_q) {
            (None, None) => break,
            (Some(a), None) | (None, Some(a)) => a,
            (Some(a), Some(b)) => a.min(b),
        };
        if cosched_des::interrupt::requested() {
            return Err(EngineError::Interrupted { time: now });
        }
        let unfinished = || waiting + running + (jobs.len() - next_submit);
        if now > opts.time_limit {
            return Err(EngineError::TimeLimit {
                limit: opts.time_limit,
                time: now,
                policy: policy_name,
                unfinished: unfinished(),
            });
        }
        if stats.events > opts.event_limit {
            return Err(EngineError::EventLimit {
                limit: opts.event_limit,
                time: now,
                policy: policy_name,
                unfinished: unfinished(),
            });
        }
        queue.advance_to(now).expect("instants are increasing");
        events.clear();
        let per_event = opts.event_order == EventOrder::PerEvent;
        let mut timer_fired = false;
        let mut ended = 0usize;
        while let Some(ev) = queue.pop_at(now) {
            match ev.event {
                Internal::End(j) => {
                    if !per_event {
                        finish(j, now, &mut alloc, &mut records, &mut state, &mut running);
                    }
                    ended += 1;
                    events.push(if records[j.idx()].status == JobStatus::Killed {
                        Event::Killed(j)
                    } else {
                        Event::Completed(j)
                    });
                }
                Internal::Timer => timer_fired = true,
            }
        }
        while next_submit < jobs.len() && jobs[next_submit].submit == now {
            let j = JobId(next_submit as u32);
            next_submit += 1;
            if jobs[j.idx()].procs > total {
                state[j.idx()] = State::Done; // rejected: can never run on this machine
                continue;
            }
            state[j.idx()] = State::Queued;
            waiting += 1;
            events.push(Event::Submitted(j));
        }
        if per_event {
            // Submissions before completions.
            events.rotate_left(ended);
        }
        if timer_fired {
            timer = None;
            events.push(Event::Timer);
        }
        if events.is_empty() {
            continue;
        }
        let calls = if per_event { events.len() } else { 1 };
        for call in 0..calls {
            let batch = if per_event {
                let e = &events[call..call + 1];
                if let Event::Completed(j) | Event::Killed(j) = e[0] {
                    finish(j, now, &mut alloc, &mut records, &mut state, &mut running);
                }
                e
            } else {
                &events[..]
            };
            stats.policy_calls += 1;
            stats.events += batch.len() as u64;
            decisions.clear();
            {
                let view = View {
                    jobs,
                    records: &records,
                    now,
                    total,
                    free: alloc.free_count(),
                };
                policy.on_events(batch, &view, &mut decisions);
            }
            for d in decisions.drain(..) {
                let invalid = |source: DecisionError, d: &Decision| EngineError::InvalidDecision {
                    time: now,
                    policy: policy_name.clone(),
                    decision: format!("{d:?}"),
                    source,
                };
                let queued = |j: JobId| -> Result<&JobSpec, DecisionError> {
                    let spec = jobs.get(j.idx()).ok_or(DecisionError::UnknownJob(j.0))?;
                    match state[j.idx()] {
                        State::Queued => Ok(spec),
                        s => Err(DecisionError::NotQueued {
                            job: spec.source_id,
                            state: s.as_str(),
                        }),
                    }
                };
                match &d {
                    Decision::Start(j) | Decision::StartOn(j, _) => {
                        let j = *j;
                        let spec = queued(j).map_err(|e| invalid(e, &d))?;
                        let ranges = match &d {
                            Decision::StartOn(_, procs) => {
                                check_exact(spec, procs, &alloc).map_err(|e| invalid(e, &d))?;
                                alloc.allocate_exact(procs)
                            }
                            _ => {
                                if spec.procs > alloc.free_count() {
                                    let e = DecisionError::InsufficientProcessors {
                                        job: spec.source_id,
                                        need: spec.procs,
                                        free: alloc.free_count(),
                                    };
                                    return Err(invalid(e, &d));
                                }
                                alloc.allocate(spec.procs)
                            }
                        };
                        let run = spec.effective_runtime();
                        let end = now.checked_add(run).ok_or(EngineError::TimeOverflow {
                            time: now,
                            job: spec.source_id,
                            index: j.idx(),
                        })?;
                        let rec = &mut records[j.idx()];
                        rec.start = Some(now);
                        rec.status = if run < spec.runtime {
                            JobStatus::Killed
                        } else {
                            JobStatus::Completed
                        };
                        rec.nodes = node_count(&ranges, ppn);
                        rec.alloc = ranges;
                        state[j.idx()] = State::Running;
                        waiting -= 1;
                        running += 1;
                        idle_calls = 0;
                        queue
                            .schedule(end, Internal::End(j))
                            .expect("runtime >= 0");
                    }
                    Decision::Reject(j) => {
                        queued(*j).map_err(|e| invalid(e, &d))?;
                        state[j.idx()] = State::Done;
                        waiting -= 1;
                        idle_calls = 0;
                    }
                    Decision::WakeAt(t) => {
                        if *t < now {
                            return Err(invalid(DecisionError::WakeInPast { at: *t, now }, &d));
                        }
                        // One pending timer at a time: the earliest request wins.
                        if timer.is_none_or(|(cur, _)| *t < cur) {
                            if let Some((_, old)) = timer.take() {
                                queue.cancel(old);
                            }
                            timer = Some((
                                *t,
                                queue.schedule(*t, Internal::Timer).expect("checked above"),
                            ));
                        }
                    }
                }
                stats.decisions += 1;
            }
            if waiting > 0 && running == 0 {
                idle_calls += 1;
                if idle_calls > NO_PROGRESS_LIMIT {
                    return Err(EngineError::NoProgress {
                        time: now,
                        policy: policy_name,
                        calls: idle_calls,
                        waiting,
                        dump: policy.dump(),
                    });
                }
            }
        }
        if waiting > 0 && next_submit == jobs.len() && queue.is_empty() {
            return Err(EngineError::Stalled {
                time: now,
                policy: policy_name,
                waiting,
                dump: policy.dump(),
            });
        }
    }
    Ok(SimOutput {
        records,
        stats,
        policy: policy_name,
    })
}

/// Book-keeping of a job's end: frees its processors and records the instant.
fn finish(
    j: JobId,
    now: SimTime,
    alloc: &mut Allocator,
    records: &mut [JobRecord],
    state: &mut [State],
    running: &mut usize,
) {
    let rec = &mut records[j.idx()];
    alloc.release(&rec.alloc);
    *running -= 1;
    rec.end = Some(now);
    state[j.idx()] = State::Done;
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
