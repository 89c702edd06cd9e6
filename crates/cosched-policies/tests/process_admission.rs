//! Process-level admission policies run by the process engine on tiny
//! scenarios worked out by hand.

mod common;

use common::{compute, proc_platform, Spin};
use cosched_des::SimTime;
use cosched_engine::process::admit::AdmissionFactory;
use cosched_engine::process::{simulate_processes, ProcJob, ProcOptions, ProcOutput};
use cosched_policies::process::batch::{admission, BatchParams};

fn run(jobs: &[ProcJob], admission: Option<AdmissionFactory>) -> ProcOutput {
    let opts = ProcOptions {
        admission,
        ..Default::default()
    };
    simulate_processes(&proc_platform(4), jobs, &|| Box::new(Spin), &opts).expect("run")
}

#[test]
fn easy_backfills_a_short_job_without_delaying_the_head() {
    // Job 0 holds 2 nodes 100 ms; job 1 (4 nodes) waits for it: its reservation
    // is at 100 ms; job 2 (2 nodes, 50 ms) ends before it and backfills at 0;
    // job 3 (2 nodes, 200 ms) would delay it and waits.
    let jobs = vec![
        compute(2, 100),
        compute(4, 50),
        compute(2, 50),
        compute(2, 200),
    ];
    let est: Vec<SimTime> = [100, 50, 50, 200].map(SimTime::from_ms).to_vec();
    let ms = SimTime::from_ms;
    let starts = |o: &ProcOutput| o.jobs.iter().map(|r| r.start).collect::<Vec<_>>();
    let fcfs = run(&jobs, None);
    assert_eq!(starts(&fcfs), [ms(0), ms(100), ms(150), ms(150)], "FCFS order");
    let b = BatchParams {
        backfill: true,
        ..BatchParams::STRICT
    };
    let easy = run(
        &jobs,
        Some(AdmissionFactory::new(move || admission(&b, Some(&est)))),
    );
    assert_eq!(starts(&easy), [ms(0), ms(100), ms(0), ms(150)], "job 2 backfilled");
    for out in [&fcfs, &easy] {
        // MPL 1: two jobs sharing a node never overlap in time.
        for (a, ra) in out.jobs.iter().enumerate() {
            for rb in &out.jobs[a + 1..] {
                if ra.nodes.iter().any(|n| rb.nodes.contains(n)) {
                    assert!(ra.end <= rb.start || rb.end <= ra.start);
                }
            }
        }
    }
}

#[test]
fn easy_without_an_estimate_is_a_typed_error() {
    let b = BatchParams {
        backfill: true,
        ..BatchParams::STRICT
    };
    let opts = ProcOptions {
        admission: Some(AdmissionFactory::new(move || admission(&b, Some(&[])))),
        ..Default::default()
    };
    let e = simulate_processes(&proc_platform(4), &[compute(1, 1)], &|| Box::new(Spin), &opts)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid admission decision: admission policy: easy: no runtime estimate for job 0"
    );
}

#[test]
fn the_batch_scheme_without_backfilling_is_fcfs_strict_or_not() {
    let name = |strict| {
        let b = BatchParams {
            strict,
            ..BatchParams::STRICT
        };
        admission(&b, None).name()
    };
    assert_eq!(name(true), "fcfs");
    assert_eq!(name(false), "fcfs[strict=false]");
}
