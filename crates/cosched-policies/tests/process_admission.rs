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
    assert_eq!(name(false), "fcfs[strict=false,max_starve_s=86400]");
    let off = BatchParams {
        strict: false,
        max_starve: None,
        ..BatchParams::STRICT
    };
    assert_eq!(admission(&off, None).name(), "fcfs[strict=false]");
}

#[test]
fn a_starving_job_holds_the_nodes_under_non_strict_order() {
    // 4 nodes. At 0: job 0 (2 nodes, 100 ms) starts, job 1 (4 nodes, 50 ms)
    // waits, job 2 (2 nodes, 300 ms) passes it (non-strict order). At 100 ms
    // job 0 ends and job 3 (2 nodes, 50 ms) arrives. With max_starve 50 ms
    // job 1 (waited 100 ms) is starving: job 3 may not take the freed nodes;
    // job 1 starts when job 2 ends (300 ms), job 3 after it (350 ms). With
    // OpenPBS's default 24 h nobody starves: job 3 starts at 100 ms.
    let ms = SimTime::from_ms;
    let mut jobs = vec![compute(2, 100), compute(4, 50), compute(2, 300)];
    use cosched_model::program::{Builder, Op};
    let mut b = Builder::new(2);
    b.all(Op::Compute { ns: 50_000_000 });
    jobs.push(ProcJob::new(b.build("compute", 10.0), ms(100)));
    let starts = |max_starve: SimTime| {
        let b = BatchParams {
            strict: false,
            max_starve: Some(max_starve),
            ..BatchParams::STRICT
        };
        let out = run(&jobs, Some(AdmissionFactory::new(move || admission(&b, None))));
        out.jobs.iter().map(|r| r.start).collect::<Vec<_>>()
    };
    assert_eq!(starts(ms(50)), [ms(0), ms(300), ms(0), ms(350)]);
    assert_eq!(starts(SimTime::from_secs(86_400)), [ms(0), ms(300), ms(0), ms(100)]);
}
