//! Property tests on random workloads for every batch policy: the properties
//! every policy must have run on each cluster-level policy of the registry (a
//! newly registered policy is covered without a change here); the properties of
//! one algorithm (reservation logs) on that policy.

mod common;
use common::*;
use cosched_des::SimTime;
use cosched_engine::{ClusterPolicy, JobStatus};
use cosched_model::{JobId, Workload};
use cosched_policies::conservative::Conservative;
use cosched_policies::easy::Easy;
use cosched_policies::fcfs::Fcfs;
use cosched_policies::{build, catalog};
use proptest::prelude::*;

/// (machine procs, workload, kill mode)
fn arb_case() -> impl Strategy<Value = (u32, Workload, bool)> {
    (1u32..=16, any::<bool>()).prop_flat_map(|(m, kill)| {
        let jobs = proptest::collection::vec(
            (
                0i64..60,
                1u32..=m + 2,
                0i64..40,
                prop_oneof![Just(None), (0i64..60).prop_map(Some)],
            ),
            0..30,
        );
        jobs.prop_map(move |mut js| {
            js.sort_by_key(|j| j.0);
            let specs = js
                .into_iter()
                .enumerate()
                .map(|(i, (sub, p, rt, req))| {
                    job(i as i64, sub, p, rt, req.map(|r: i64| r.max(1)), kill)
                })
                .collect();
            (m, workload(specs), kill)
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn fcfs_starts_in_submit_order((m, w, _k) in arb_case()) {
        let out = run(&w, m, &mut Fcfs::default());
        let starts: Vec<SimTime> = out.records.iter().filter(|r| r.status != JobStatus::Rejected)
            .map(|r| r.start.unwrap()).collect();
        prop_assert!(starts.windows(2).all(|p| p[0] <= p[1]), "{starts:?}");
    }

    #[test]
    fn easy_never_delays_the_head_reservation((m, w, _k) in arb_case()) {
        let mut p = Easy::with_reservation_log();
        let out = run(&w, m, &mut p);
        for &(j, at, reserved) in p.reservation_log() {
            let start = out.records[j.idx()].start.unwrap();
            prop_assert!(start <= reserved, "job {} reserved at {} (made at {}) started at {}", j.0, reserved, at, start);
        }
    }

    #[test]
    fn conservative_never_delays_a_reservation((m, w, _k) in arb_case()) {
        let mut p = Conservative::with_reservation_log();
        let out = run(&w, m, &mut p);
        let mut last: std::collections::HashMap<JobId, SimTime> = Default::default();
        for &(j, _at, reserved) in p.reservation_log() {
            if let Some(&prev) = last.get(&j) {
                prop_assert!(reserved <= prev, "job {} moved later: {} -> {}", j.0, prev, reserved);
            }
            last.insert(j, reserved);
        }
        for (i, r) in out.records.iter().enumerate() {
            if let Some(start) = r.start {
                prop_assert_eq!(Some(&start), last.get(&JobId(i as u32)), "job {} started off its reservation", i);
            }
        }
    }

    #[test]
    fn every_policy_yields_a_valid_schedule((m, w, _k) in arb_case()) {
        // `run` checks: no over-commit, start >= submit, exact (or killed) runtimes,
        // every job ends exactly once or is rejected.
        for (name, mut p) in registered() {
            let out = run(&w, m, p.as_mut());
            for (spec, r) in w.jobs.iter().zip(&out.records) {
                prop_assert_eq!(r.status == JobStatus::Rejected, spec.procs > m, "{}", name);
            }
        }
    }

    #[test]
    fn conservative_search_shortcuts_change_nothing((m, w, _k) in arb_case()) {
        same_as_the_reference(&w, m)?;
    }

    #[test]
    fn the_first_job_starts_at_its_submission((m, w, _k) in arb_case()) {
        // On an empty machine every policy starts the first job that fits the machine at once.
        for (name, mut p) in registered() {
            let out = run(&w, m, p.as_mut());
            if let Some((spec, r)) = w.jobs.iter().zip(&out.records).find(|(s, _)| s.procs <= m) {
                prop_assert_eq!(r.start, Some(spec.submit), "{}", name);
            }
        }
    }
}

/// Every cluster-level policy of the registry, built with its defaults.
fn registered() -> Vec<(&'static str, Box<dyn ClusterPolicy>)> {
    let all: Vec<_> = catalog()
        .into_iter()
        .filter(|i| i.level == "cluster")
        .map(|i| {
            (
                i.name,
                build(i.name).expect("a registered policy builds with its defaults"),
            )
        })
        .collect();
    assert!(
        all.len() >= 3,
        "the registry lists fcfs, easy and conservative at least"
    );
    all
}

/// Conservative backfilling with its search shortcuts gives the same schedule and
/// makes the same reservations as the plain reference.
fn same_as_the_reference(w: &Workload, m: u32) -> Result<(), TestCaseError> {
    let mut fast = Conservative::with_reservation_log();
    let mut slow = Conservative::reference();
    let a = run(w, m, &mut fast);
    let b = run(w, m, &mut slow);
    prop_assert_eq!(a.records, b.records);
    prop_assert_eq!(fast.reservation_log(), slow.reservation_log());
    Ok(())
}

/// Long queues with estimates above the run times: many early ends, so many
/// compressions in which most queued jobs cannot move.
fn arb_long_queue() -> impl Strategy<Value = (u32, Workload)> {
    (4u32..=64).prop_flat_map(|m| {
        let jobs = proptest::collection::vec((0i64..300, 1u32..=m, 1i64..60, 0i64..120), 50..250);
        jobs.prop_map(move |mut js| {
            js.sort_by_key(|j| j.0);
            let specs = js
                .into_iter()
                .enumerate()
                .map(|(i, (sub, p, rt, over))| job(i as i64, sub, p, rt, Some(rt + over), false))
                .collect();
            (m, workload(specs))
        })
    })
}

/// Jobs arriving in a few bursts, with run times from a short list and estimates
/// a little above them: several early ends at the same instant, and given-back
/// stretches that end before most reservations, so the searches are cut short by
/// them and by the stretches later parts of moved reservations give back.
fn arb_bursts() -> impl Strategy<Value = (u32, Workload)> {
    (2u32..=16).prop_flat_map(|m| {
        let jobs = proptest::collection::vec(
            (
                0i64..4,
                1u32..=m,
                prop_oneof![Just(5i64), Just(10), Just(20), Just(40)],
                0i64..8,
            ),
            20..120,
        );
        jobs.prop_map(move |mut js| {
            js.sort_by_key(|j| j.0);
            let specs = js
                .into_iter()
                .enumerate()
                .map(|(i, (burst, p, rt, over))| {
                    job(i as i64, burst * 15, p, rt, Some(rt + over), false)
                })
                .collect();
            (m, workload(specs))
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn conservative_shortcuts_match_the_reference_on_long_queues((m, w) in arb_long_queue()) {
        same_as_the_reference(&w, m)?;
    }

    #[test]
    fn conservative_shortcuts_match_the_reference_on_bursts((m, w) in arb_bursts()) {
        same_as_the_reference(&w, m)?;
    }
}
