//! The engine validates every decision and reports a typed error for invalid ones.

use cosched_des::SimTime;
use cosched_engine::{
    simulate, ClusterPolicy, ClusterView, Decision, DecisionError, EngineError, Event, SimOptions,
};
use cosched_model::{JobId, JobSpec, Platform, Workload};

fn job(id: i64, submit: i64, procs: u32, runtime: i64) -> JobSpec {
    let rt = SimTime::from_secs(runtime);
    JobSpec {
        source_id: id,
        submit: SimTime::from_secs(submit),
        runtime: rt,
        procs,
        requested: None,
        estimate: rt,
        kill_after: None,
    }
}

/// A policy that replays a script: at its n-th call it pushes `script[n]`.
struct Scripted(Vec<Vec<Decision>>, usize);

impl ClusterPolicy for Scripted {
    fn name(&self) -> String {
        "scripted".into()
    }
    fn on_events(&mut self, _e: &[Event], _v: &dyn ClusterView, out: &mut Vec<Decision>) {
        if let Some(d) = self.0.get(self.1) {
            out.extend(d.iter().cloned());
        }
        self.1 += 1;
    }
    fn dump(&self) -> String {
        format!("call {}", self.1)
    }
}

fn run(jobs: Vec<JobSpec>, procs: u32, script: Vec<Vec<Decision>>) -> Result<(), EngineError> {
    let w = Workload {
        jobs,
        ..Default::default()
    };
    simulate(
        &w,
        &Platform::new(procs, 1),
        &mut Scripted(script, 0),
        &SimOptions::default(),
    )
    .map(|_| ())
}

fn decision_error(r: Result<(), EngineError>) -> DecisionError {
    match r {
        Err(EngineError::InvalidDecision { source, .. }) => source,
        other => panic!("expected an invalid decision, got {other:?}"),
    }
}

#[test]
fn starting_on_busy_processors_is_refused() {
    let r = run(
        vec![job(1, 0, 2, 10), job(2, 0, 2, 10)],
        4,
        vec![vec![
            Decision::StartOn(JobId(0), vec![0, 1]),
            Decision::StartOn(JobId(1), vec![1, 2]),
        ]],
    );
    assert_eq!(
        decision_error(r),
        DecisionError::ProcessorBusy { job: 2, proc: 1 }
    );
}

#[test]
fn starting_without_enough_processors_is_refused() {
    let r = run(
        vec![job(1, 0, 3, 10), job(2, 0, 2, 10)],
        4,
        vec![vec![Decision::Start(JobId(0)), Decision::Start(JobId(1))]],
    );
    assert_eq!(
        decision_error(r),
        DecisionError::InsufficientProcessors {
            job: 2,
            need: 2,
            free: 1
        }
    );
}

#[test]
fn starting_twice_is_refused() {
    let r = run(
        vec![job(1, 0, 1, 10)],
        4,
        vec![vec![Decision::Start(JobId(0)), Decision::Start(JobId(0))]],
    );
    assert_eq!(
        decision_error(r),
        DecisionError::NotQueued {
            job: 1,
            state: "running"
        }
    );
}

#[test]
fn starting_an_unsubmitted_or_unknown_job_is_refused() {
    let r = run(
        vec![job(1, 0, 1, 10), job(2, 5, 1, 10)],
        4,
        vec![vec![Decision::Start(JobId(1))]],
    );
    assert_eq!(
        decision_error(r),
        DecisionError::NotQueued {
            job: 2,
            state: "not submitted"
        }
    );
    let r = run(
        vec![job(1, 0, 1, 10)],
        4,
        vec![vec![Decision::Start(JobId(9))]],
    );
    assert_eq!(decision_error(r), DecisionError::UnknownJob(9));
}

#[test]
fn wrong_processor_sets_are_refused() {
    let r = run(
        vec![job(1, 0, 2, 10)],
        4,
        vec![vec![Decision::StartOn(JobId(0), vec![0])]],
    );
    assert_eq!(
        decision_error(r),
        DecisionError::WrongProcessorCount {
            job: 1,
            given: 1,
            need: 2
        }
    );
    let r = run(
        vec![job(1, 0, 2, 10)],
        4,
        vec![vec![Decision::StartOn(JobId(0), vec![0, 7])]],
    );
    assert_eq!(
        decision_error(r),
        DecisionError::NoSuchProcessor {
            job: 1,
            proc: 7,
            total: 4
        }
    );
    let r = run(
        vec![job(1, 0, 2, 10)],
        4,
        vec![vec![Decision::StartOn(JobId(0), vec![3, 3])]],
    );
    assert_eq!(
        decision_error(r),
        DecisionError::ProcessorBusy { job: 1, proc: 3 }
    );
}

#[test]
fn wake_up_in_the_past_is_refused() {
    let r = run(
        vec![job(1, 5, 1, 10)],
        4,
        vec![vec![Decision::WakeAt(SimTime::from_secs(1))]],
    );
    assert_eq!(
        decision_error(r),
        DecisionError::WakeInPast {
            at: SimTime::from_secs(1),
            now: SimTime::from_secs(5)
        }
    );
}

#[test]
fn error_message_names_time_policy_and_decision() {
    let r = run(
        vec![job(1, 0, 3, 10), job(2, 0, 2, 10)],
        4,
        vec![vec![Decision::Start(JobId(0)), Decision::Start(JobId(1))]],
    );
    let msg = r.unwrap_err().to_string();
    assert_eq!(msg, "at t=0.000000000s: policy scripted made an invalid decision Start(JobId(1)): job 2 needs 2 processors but only 1 are free");
}

#[test]
fn a_policy_that_never_starts_a_job_is_reported_as_stalled() {
    let r = run(vec![job(1, 0, 1, 10)], 4, vec![]);
    match r {
        Err(EngineError::Stalled { waiting, dump, .. }) => {
            assert_eq!(waiting, 1);
            assert_eq!(dump, "call 1");
        }
        other => panic!("expected a stall, got {other:?}"),
    }
}

#[test]
fn timers_are_delivered_and_can_start_jobs() {
    // Start the job at the timer, 7 s after its submission.
    let w = Workload {
        jobs: vec![job(1, 0, 1, 10)],
        ..Default::default()
    };
    let mut p = Scripted(
        vec![
            vec![Decision::WakeAt(SimTime::from_secs(7))],
            vec![Decision::Start(JobId(0))],
        ],
        0,
    );
    let out = simulate(&w, &Platform::new(1, 1), &mut p, &SimOptions::default()).unwrap();
    assert_eq!(out.records[0].start, Some(SimTime::from_secs(7)));
    assert_eq!(out.records[0].end, Some(SimTime::from_secs(17)));
}

/// A scripted policy that also records each call's instant and events.
struct Recording(Scripted, Vec<(SimTime, Vec<Event>)>);

impl ClusterPolicy for Recording {
    fn name(&self) -> String {
        "recording".into()
    }
    fn on_events(&mut self, e: &[Event], v: &dyn ClusterView, out: &mut Vec<Decision>) {
        self.1.push((v.now(), e.to_vec()));
        self.0.on_events(e, v, out);
    }
}

/// One pending wake-up at a time, the earliest request winning, delivered after
/// the instant's other events. Job A (1 proc, 10 s) and job B (1 proc, 3 s,
/// submitted at 10) on 1 processor. At 0 the policy starts A and asks for
/// wake-ups at 20, 10 and 15: only 10 stays. At 10, A's end, B's submission and
/// the timer come in one call, in that order; the policy starts B and asks for
/// 12 then 11: only 11 stays. At 11 the timer alone; at 13 B's end alone (the
/// requests for 20, 15 and 12 were dropped, so no call at 12, 15 or 20).
#[test]
fn the_earliest_wake_up_wins_and_comes_after_the_instants_events() {
    let w = Workload {
        jobs: vec![job(1, 0, 1, 10), job(2, 10, 1, 3)],
        ..Default::default()
    };
    let s = SimTime::from_secs;
    let script = vec![
        vec![
            Decision::Start(JobId(0)),
            Decision::WakeAt(s(20)),
            Decision::WakeAt(s(10)),
            Decision::WakeAt(s(15)),
        ],
        vec![
            Decision::Start(JobId(1)),
            Decision::WakeAt(s(12)),
            Decision::WakeAt(s(11)),
        ],
    ];
    let mut p = Recording(Scripted(script, 0), Vec::new());
    simulate(&w, &Platform::new(1, 1), &mut p, &SimOptions::default()).unwrap();
    assert_eq!(
        p.1,
        vec![
            (s(0), vec![Event::Submitted(JobId(0))]),
            (
                s(10),
                vec![
                    Event::Completed(JobId(0)),
                    Event::Submitted(JobId(1)),
                    Event::Timer
                ]
            ),
            (s(11), vec![Event::Timer]),
            (s(13), vec![Event::Completed(JobId(1))]),
        ]
    );
}

#[test]
fn unsorted_workloads_are_refused() {
    let r = run(vec![job(1, 5, 1, 1), job(2, 0, 1, 1)], 4, vec![]);
    assert!(matches!(r, Err(EngineError::Unsorted(1))));
}

#[test]
fn estimates_shorter_than_runtimes_are_refused_unless_killed() {
    let mut j = job(7, 0, 1, 10);
    j.estimate = SimTime::from_secs(5);
    let r = run(vec![j.clone()], 4, vec![vec![Decision::Start(JobId(0))]]);
    assert!(
        matches!(
            r,
            Err(EngineError::EstimateBelowRuntime {
                job: 7,
                index: 0,
                ..
            })
        ),
        "{r:?}"
    );
    j.kill_after = Some(SimTime::from_secs(5));
    assert!(run(vec![j], 4, vec![vec![Decision::Start(JobId(0))]]).is_ok());
}

/// Asks to be woken up now, forever, without starting anything.
struct WakeNowForever;
impl ClusterPolicy for WakeNowForever {
    fn name(&self) -> String {
        "wake-now".into()
    }
    fn on_events(&mut self, _e: &[Event], v: &dyn ClusterView, out: &mut Vec<Decision>) {
        out.push(Decision::WakeAt(v.now()));
    }
}

#[test]
fn a_policy_that_spins_without_progress_is_stopped() {
    let w = Workload {
        jobs: vec![job(1, 0, 1, 10)],
        ..Default::default()
    };
    let r = simulate(
        &w,
        &Platform::new(1, 1),
        &mut WakeNowForever,
        &SimOptions::default(),
    );
    assert!(
        matches!(r, Err(EngineError::NoProgress { waiting: 1, .. })),
        "{r:?}"
    );
}

/// Starts every job it is told about, then asks to be woken `step` after every call,
/// for ever: the run never ends by itself while a job runs.
struct WakeEvery(SimTime);

impl ClusterPolicy for WakeEvery {
    fn name(&self) -> String {
        "wake-every".into()
    }
    fn on_events(&mut self, e: &[Event], v: &dyn ClusterView, out: &mut Vec<Decision>) {
        for ev in e {
            if let Event::Submitted(j) = ev {
                out.push(Decision::Start(*j));
            }
        }
        out.push(Decision::WakeAt(v.now() + self.0));
    }
}

fn wake_every(step: SimTime, opts: &SimOptions) -> Result<(), EngineError> {
    // One job of 1000 s: with a wake-up every 1 s the run delivers its submission
    // (t=0), timers at t=1..999 and, at t=1000, its end plus a timer.
    let w = Workload {
        jobs: vec![job(1, 0, 1, 1000)],
        ..Default::default()
    };
    simulate(&w, &Platform::new(1, 1), &mut WakeEvery(step), opts).map(|_| ())
}

#[test]
fn the_event_limit_stops_a_policy_that_keeps_waking_up() {
    // Events delivered by instant t (t < 1000): 1 submission + t timers. The check
    // runs at each instant before the call: at t=10, 10 events were delivered (> 9).
    let opts = SimOptions {
        event_limit: 9,
        ..Default::default()
    };
    match wake_every(SimTime::from_secs(1), &opts) {
        Err(EngineError::EventLimit {
            limit: 9,
            time,
            unfinished: 1,
            policy,
        }) => {
            assert_eq!(time, SimTime::from_secs(10));
            assert_eq!(policy, "wake-every");
        }
        other => panic!("expected the event limit, got {other:?}"),
    }
    // A wake-up at the same instant, for ever, while a job runs: the no-progress
    // watchdog does not apply (a job is running), the event limit does.
    let opts = SimOptions {
        event_limit: 1000,
        ..Default::default()
    };
    match wake_every(SimTime::ZERO, &opts) {
        Err(EngineError::EventLimit { time, .. }) => assert_eq!(time, SimTime::ZERO),
        other => panic!("expected the event limit, got {other:?}"),
    }
    // The same run with room for its 1 + 999 + 2 events ends normally.
    let opts = SimOptions {
        event_limit: 1002,
        ..Default::default()
    };
    // After the job ended the policy still asks for a wake-up at every call, so it
    // never ends on its own: the limit trips at the first instant after 1002 events.
    assert!(matches!(
        wake_every(SimTime::from_secs(1), &opts),
        Err(EngineError::EventLimit { unfinished: 0, .. })
    ));
}

#[test]
fn the_time_limit_stops_a_run_past_it() {
    let opts = SimOptions {
        time_limit: SimTime::from_secs(100),
        ..Default::default()
    };
    match wake_every(SimTime::from_secs(7), &opts) {
        // Instants 0, 7, ..., 98, then 105 > 100.
        Err(EngineError::TimeLimit {
            limit,
            time,
            unfinished: 1,
            ..
        }) => {
            assert_eq!(limit, SimTime::from_secs(100));
            assert_eq!(time, SimTime::from_secs(105));
        }
        other => panic!("expected the time limit, got {other:?}"),
    }
    // A well-behaved run ending exactly at the limit is not stopped.
    let w = Workload {
        jobs: vec![job(1, 0, 1, 100)],
        ..Default::default()
    };
    let mut p = Scripted(vec![vec![Decision::Start(JobId(0))]], 0);
    simulate(&w, &Platform::new(1, 1), &mut p, &opts).unwrap();
}
