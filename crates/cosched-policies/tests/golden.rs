//! Golden scenarios: small workloads whose schedules are worked out by hand.
//! A change to any expected schedule here is a change of algorithm.

mod common;
use common::*;
use cosched_policies::build;

fn sched(policy: &str, w: &cosched_model::Workload, procs: u32) -> Vec<(i64, i64)> {
    let mut p = build(policy).unwrap();
    spans(&run(w, procs, p.as_mut()))
}

/// Machine of 10 processors.
/// A: t=0, 6 procs, 10 s.   B: t=1, 8 procs, 10 s.   C: t=2, 9 procs, 10 s.   D: t=3, 2 procs, 25 s.
///
/// EASY: at t=3 the head B has shadow time 10 (A's end) with 10-8 = 2 extra processors;
/// D ends at 28 > 10 but needs only 2 <= extra, so D is backfilled at 3. B runs [10,20);
/// at 20 only 8 are free (D holds 2) and C (9) waits for D's end at 28.
/// Conservative: C holds a reservation [20,30) leaving 1 free processor, so D (2 procs,
/// 25 s) fits nowhere before 30: no backfilling, and C is not delayed.
/// FCFS: same as conservative here.
fn classic() -> cosched_model::Workload {
    workload(vec![
        job(1, 0, 6, 10, Some(10), false),
        job(2, 1, 8, 10, Some(10), false),
        job(3, 2, 9, 10, Some(10), false),
        job(4, 3, 2, 25, Some(25), false),
    ])
}

#[test]
fn easy_backfills_a_short_job_that_conservative_does_not() {
    let w = classic();
    assert_eq!(
        sched("easy", &w, 10),
        vec![(0, 10), (10, 20), (28, 38), (3, 28)]
    );
    assert_eq!(
        sched("conservative", &w, 10),
        vec![(0, 10), (10, 20), (20, 30), (30, 55)]
    );
    assert_eq!(
        sched("fcfs", &w, 10),
        vec![(0, 10), (10, 20), (20, 30), (30, 55)]
    );
}

/// A: t=0, 6 procs, runs 10 s but requested 100 s.  B: t=1, 8 procs, 10 s.  E: t=3, 4 procs, 20 s.
///
/// Exact estimates: B's shadow is 10 with 2 extra; E (ends 23, 4 procs) cannot backfill;
/// A ends at 10, B runs [10,20), E runs [20,40).
/// Requested estimates (A estimated at 100): B's shadow is 100, E ends at 23 <= 100 and is
/// backfilled at 3; when A really ends at 10 only 6 are free, so B waits for E: [23,33).
#[test]
fn an_inaccurate_estimate_changes_the_easy_schedule() {
    let over = workload(vec![
        job(1, 0, 6, 10, Some(100), false),
        job(2, 1, 8, 10, Some(10), false),
        job(3, 3, 4, 20, Some(20), false),
    ]);
    let exact = workload(vec![
        job(1, 0, 6, 10, Some(10), false),
        job(2, 1, 8, 10, Some(10), false),
        job(3, 3, 4, 20, Some(20), false),
    ]);
    assert_eq!(sched("easy", &exact, 10), vec![(0, 10), (10, 20), (20, 40)]);
    assert_eq!(sched("easy", &over, 10), vec![(0, 10), (23, 33), (3, 23)]);
    // Conservative gives E the reservation [3,23) too (B is reserved at 100 by the estimate),
    // and after A's early end the compression moves B to E's end.
    assert_eq!(
        sched("conservative", &over, 10),
        vec![(0, 10), (23, 33), (3, 23)]
    );
}

/// Conservative compression: an early completion moves reservations earlier, in queue order.
/// Machine 4. A: t=0, 4 procs, runs 5 s, requested 50 s. B: t=1, 4 procs, 10 s. C: t=2, 2 procs, 10 s.
/// Reservations at t=2: B [50,60), C [60,70). A ends at 5: B moves to [5,15), C to [15,25).
#[test]
fn conservative_compresses_after_an_early_end() {
    let w = workload(vec![
        job(1, 0, 4, 5, Some(50), false),
        job(2, 1, 4, 10, Some(10), false),
        job(3, 2, 2, 10, Some(10), false),
    ]);
    assert_eq!(
        sched("conservative", &w, 4),
        vec![(0, 5), (5, 15), (15, 25)]
    );
    assert_eq!(sched("easy", &w, 4), vec![(0, 5), (5, 15), (15, 25)]);
}

/// Kill at the estimate: A requested 5 s but needs 10 s; it is killed at 5.
#[test]
fn kill_at_estimate() {
    let w = workload(vec![
        job(1, 0, 4, 10, Some(5), true),
        job(2, 0, 4, 3, Some(3), true),
    ]);
    let mut p = build("fcfs").unwrap();
    let out = run(&w, 4, p.as_mut());
    assert_eq!(spans(&out), vec![(0, 5), (5, 8)]);
    assert_eq!(out.records[0].status, cosched_engine::JobStatus::Killed);
    assert_eq!(out.records[1].status, cosched_engine::JobStatus::Completed);
}

/// FCFS head-of-line blocking: a small job waits behind a big one even if it fits.
#[test]
fn fcfs_blocks_behind_the_head() {
    let w = workload(vec![
        job(1, 0, 3, 10, None, false),
        job(2, 1, 4, 5, None, false),
        job(3, 2, 1, 1, None, false),
    ]);
    assert_eq!(sched("fcfs", &w, 4), vec![(0, 10), (10, 15), (15, 16)]);
    assert_eq!(sched("easy", &w, 4), vec![(0, 10), (10, 15), (2, 3)]);
}

/// A job larger than the machine is rejected at submission and never reaches the policy.
#[test]
fn oversized_jobs_are_rejected() {
    let w = workload(vec![
        job(1, 0, 5, 10, None, false),
        job(2, 0, 2, 1, None, false),
    ]);
    let mut p = build("easy").unwrap();
    let out = run(&w, 4, p.as_mut());
    assert_eq!(out.records[0].status, cosched_engine::JobStatus::Rejected);
    assert_eq!(spans(&out), vec![(-1, -1), (0, 1)]);
}

/// Running jobs that end at the same instant all count at the shadow time.
/// Machine of 10 processors. A: t=0, 4 procs, 10 s.  B: t=0, 4 procs, 10 s.
/// H: t=1, 5 procs, 10 s.  D: t=2, 2 procs, 30 s.
///
/// EASY at t=1: H needs 5 with 2 free; A's end at 10 makes it fit, and B ends at 10
/// too, so 2 + 4 + 4 = 10 are free at the shadow time 10 and the extra processors
/// are 10 - 5 = 5 (not 6 - 5 = 1, which counting A alone would give). At t=2, D
/// (2 procs, ends at 32 > 10) fits in the 2 free processors and the 5 extra ones:
/// it starts at 2. H runs [10,20) on 8 free processors.
/// Conservative: the profile has 2 free on [2,10), 5 on [10,20) (H's reservation)
/// and 10 after, so D's earliest slot is [2,32) too.
#[test]
fn jobs_ending_together_all_count_at_the_shadow_time() {
    let w = workload(vec![
        job(1, 0, 4, 10, Some(10), false),
        job(2, 0, 4, 10, Some(10), false),
        job(3, 1, 5, 10, Some(10), false),
        job(4, 2, 2, 30, Some(30), false),
    ]);
    let want = vec![(0, 10), (0, 10), (10, 20), (2, 32)];
    assert_eq!(sched("easy", &w, 10), want);
    assert_eq!(sched("conservative", &w, 10), want);
    // Without B the extra processors are 6 - 5 = 1 < 2 and D waits for H's start.
    let w = workload(vec![
        job(1, 0, 4, 10, Some(10), false),
        job(2, 0, 4, 10, Some(20), false),
        job(3, 1, 5, 10, Some(10), false),
        job(4, 2, 2, 30, Some(30), false),
    ]);
    assert_eq!(
        sched("easy", &w, 10),
        vec![(0, 10), (0, 10), (10, 20), (10, 40)]
    );
}

/// The opt-in per-event order: one policy call per event, submissions before
/// completions at the same instant, a completion's processors freed when it is delivered.
/// Machine of 10. A: t=0, 6 procs, runs 10 s, requested 50 s.  H: t=1, 10 procs, 10 s.
/// B: t=10, 4 procs, 30 s.
///
/// Per instant (default), at t=10 the policy sees A's end and B's arrival together:
/// 10 free, H starts [10,20) and B waits for it: [20,50).
/// Per event, B's arrival comes first, while A still holds 6 processors: H does not
/// fit, its shadow time is A's estimated end 50, and B (ends at 40 <= 50) is
/// backfilled into the 4 free processors at 10. A's end then leaves 6 free: H waits
/// for B's end and runs [40,50).
/// FCFS never starts B before H, so both orders give it the same schedule.
#[test]
fn per_event_order_delivers_submissions_before_completions() {
    use cosched_engine::{check::check_schedule, simulate, SimOptions};
    use cosched_model::{EventOrder, Platform};
    let w = workload(vec![
        job(1, 0, 6, 10, Some(50), false),
        job(2, 1, 10, 10, Some(10), false),
        job(3, 10, 4, 30, Some(30), false),
    ]);
    let run = |policy: &str, order: EventOrder| {
        let p = Platform::new(10, 1);
        let mut pol = build(policy).unwrap();
        let opts = SimOptions {
            event_order: order,
            ..Default::default()
        };
        let out = simulate(&w, &p, pol.as_mut(), &opts).unwrap();
        check_schedule(&w, &p, &out).unwrap();
        (spans(&out), out.stats.policy_calls)
    };
    // Instants with events: 0, 1, 10 (A's end and B's arrival), 20 or 40, 50.
    assert_eq!(
        run("easy", EventOrder::PerInstant),
        (vec![(0, 10), (10, 20), (20, 50)], 5)
    );
    // One more call at t=10 (two events there).
    assert_eq!(
        run("easy", EventOrder::PerEvent),
        (vec![(0, 10), (40, 50), (10, 40)], 6)
    );
    assert_eq!(
        run("fcfs", EventOrder::PerInstant).0,
        vec![(0, 10), (10, 20), (20, 50)]
    );
    assert_eq!(
        run("fcfs", EventOrder::PerEvent).0,
        vec![(0, 10), (10, 20), (20, 50)]
    );
}

/// The classic workload without strict order: at t=3 the queue is B (8, waits), C (9,
/// waits), D (2): D fits in the 4 free processors and starts at 3, whatever it delays
/// (no reservation). At 10 (A ends) only 8 are free (D holds 2): B (8) starts. At 20
/// B ends, 8 free, C (9) waits for D's end at 28.
#[test]
fn fcfs_without_strict_order_starts_every_job_that_fits() {
    let w = classic();
    assert_eq!(
        sched("fcfs[strict=false]", &w, 10),
        vec![(0, 10), (10, 20), (28, 38), (3, 28)]
    );
    // Strict order is the default.
    assert_eq!(sched("fcfs[strict=true]", &w, 10), sched("fcfs", &w, 10));
}
