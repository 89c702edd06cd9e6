//! Process-level admission policies run by the process engine on tiny
//! scenarios worked out by hand.

mod common;

use common::{compute, proc_platform, Spin};
use cosched_des::SimTime;
use cosched_engine::process::admit::AdmissionFactory;
use cosched_engine::process::{simulate_processes, ProcJob, ProcOptions, ProcOutput};
use cosched_policies::process::batch::{admission, BatchParams};

/// The message of the error that stops a run of `job` alone on `nodes` nodes.
fn error_of(nodes: u32, job: ProcJob, opts: &ProcOptions) -> String {
    simulate_processes(&proc_platform(nodes), &[job], &|| Box::new(Spin), opts)
        .unwrap_err()
        .to_string()
}

fn run(jobs: &[ProcJob], admission: Option<AdmissionFactory>) -> ProcOutput {
    let opts = ProcOptions {
        admission,
        ..Default::default()
    };
    simulate_processes(&proc_platform(4), jobs, &|| Box::new(Spin), &opts).expect("run")
}

#[test]
fn easy_backfills_a_short_job_without_delaying_the_head() {
    // Process-level `easy` (`batch[backfill=easy]`) is the job-level EASY
    // hosted. 4 nodes. Job 0 holds 2 nodes 100 ms; job 1 (4 nodes) waits for
    // it: its reservation is at 100 ms; job 2 (2 nodes, 50 ms) ends before it
    // and backfills at 0; job 3 (2 nodes, 200 ms) would delay it and waits.
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
    assert_eq!(
        starts(&fcfs),
        [ms(0), ms(100), ms(150), ms(150)],
        "FCFS order"
    );
    let easy = run(&jobs, Some(hosted("easy", est)));
    assert_eq!(
        starts(&easy),
        [ms(0), ms(100), ms(0), ms(150)],
        "job 2 backfilled"
    );
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
    let opts = ProcOptions {
        admission: Some(hosted("easy", Vec::new())),
        ..Default::default()
    };
    assert_eq!(
        error_of(4, compute(1, 1), &opts),
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
        admission(&b).name()
    };
    assert_eq!(name(true), "fcfs");
    assert_eq!(name(false), "fcfs[strict=false,max_starve_s=86400]");
    let off = BatchParams {
        strict: false,
        max_starve: None,
    };
    assert_eq!(admission(&off).name(), "fcfs[strict=false]");
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
        };
        let out = run(&jobs, Some(AdmissionFactory::new(move || admission(&b))));
        out.jobs.iter().map(|r| r.start).collect::<Vec<_>>()
    };
    assert_eq!(starts(ms(50)), [ms(0), ms(300), ms(0), ms(350)]);
    assert_eq!(
        starts(SimTime::from_secs(86_400)),
        [ms(0), ms(300), ms(0), ms(100)]
    );
}

/// The job-level policy `make` builds, hosted as the admission
/// (`cosched_policies::process::hosted`), with estimates `est`.
fn hosting(
    make: impl Fn() -> Box<dyn cosched_contract::cluster::ClusterPolicy> + Send + Sync + 'static,
    est: Vec<SimTime>,
) -> ProcOptions {
    ProcOptions {
        admission: Some(AdmissionFactory::new(move || {
            Box::new(cosched_policies::process::hosted::Hosted::new(
                make(),
                est.clone(),
            ))
        })),
        ..Default::default()
    }
}

/// A job-level policy from the registry hosted as the admission.
fn hosted(policy: &'static str, est: Vec<SimTime>) -> AdmissionFactory {
    let opts = hosting(
        move || cosched_policies::build(policy).expect("registered"),
        est,
    );
    opts.admission.expect("set")
}

/// `p` ranks computing `ms` each, submitted at `at_ms`.
fn compute_at(p: u32, ms: i64, at_ms: i64) -> ProcJob {
    let mut j = compute(p, ms);
    j.submit = SimTime::from_ms(at_ms);
    j
}

#[test]
fn conservative_at_process_level_reserves_for_every_queued_job() {
    // 2 nodes, MPL 1, exact estimates. At 0: job 0 (1 node, 100 ms) starts;
    // job 1 (2 nodes, 50 ms) cannot: its reservation is at 100 ms (job 0's end),
    // [100, 150). Job 2 (1 node, 150 ms) fits on the free node now but would
    // run to 150 > 100 and delay job 1: conservative reserves it after job 1,
    // at 150. (EASY gives the same here: job 2 ends after the shadow time 100
    // and the extra nodes at 100 are 2 - 2 = 0.) Ends: 100, 150, 300.
    let ms = SimTime::from_ms;
    let jobs = vec![compute(1, 100), compute(2, 50), compute(1, 150)];
    let est = vec![ms(100), ms(50), ms(150)];
    let opts = ProcOptions {
        admission: Some(hosted("conservative", est.clone())),
        ..Default::default()
    };
    let out = simulate_processes(&proc_platform(2), &jobs, &|| Box::new(Spin), &opts).unwrap();
    let span = |o: &ProcOutput| o.jobs.iter().map(|r| (r.start, r.end)).collect::<Vec<_>>();
    assert_eq!(
        span(&out),
        [(ms(0), ms(100)), (ms(100), ms(150)), (ms(150), ms(300))]
    );
    // Job 2 shortened to 100 ms (estimate 100): it ends at 100, not after job
    // 1's reservation at 100, so it backfills at 0 on the free node: [0, 100).
    let jobs = vec![compute(1, 100), compute(2, 50), compute(1, 100)];
    let est = vec![ms(100), ms(50), ms(100)];
    let opts = ProcOptions {
        admission: Some(hosted("conservative", est)),
        ..Default::default()
    };
    let out = simulate_processes(&proc_platform(2), &jobs, &|| Box::new(Spin), &opts).unwrap();
    assert_eq!(
        span(&out),
        [(ms(0), ms(100)), (ms(100), ms(150)), (ms(0), ms(100))]
    );
}

#[test]
fn a_hosted_job_level_decision_that_cannot_apply_is_a_typed_error() {
    use cosched_contract::cluster::{ClusterPolicy, ClusterView, Decision, Event};
    /// Rejects every job it is told of.
    struct Rejector;
    impl ClusterPolicy for Rejector {
        fn name(&self) -> String {
            "rejector".into()
        }
        fn on_events(&mut self, events: &[Event], _: &dyn ClusterView, out: &mut Vec<Decision>) {
            for e in events {
                if let Event::Submitted(j) = *e {
                    out.push(Decision::Reject(j));
                }
            }
        }
    }
    let opts = hosting(|| Box::new(Rejector), vec![SimTime::from_ms(1)]);
    assert_eq!(
        error_of(2, compute(1, 1), &opts),
        "invalid admission decision: rejector: decision Reject(JobId(0)) cannot apply at process level: \
         a process-level job cannot be rejected"
    );
}

#[test]
fn a_hosted_wake_up_reaches_the_policy_as_a_timer() {
    use cosched_contract::cluster::{ClusterPolicy, ClusterView, Decision, Event};
    /// Holds every job until a timer at 30 ms, then starts the queue in order.
    #[derive(Default)]
    struct Later {
        queue: Vec<cosched_model::JobId>,
    }
    impl ClusterPolicy for Later {
        fn name(&self) -> String {
            "later".into()
        }
        fn on_events(&mut self, events: &[Event], v: &dyn ClusterView, out: &mut Vec<Decision>) {
            for e in events {
                match *e {
                    Event::Submitted(j) => self.queue.push(j),
                    Event::Timer => out.extend(self.queue.drain(..).map(Decision::Start)),
                    _ => {}
                }
            }
            if v.now() < SimTime::from_ms(30) {
                // At 0: 40 is pending, then 30 replaces it (earlier). At 5: both
                // are dropped (30, pending, is no later). One timer fires: 30.
                out.push(Decision::WakeAt(SimTime::from_ms(40)));
                out.push(Decision::WakeAt(SimTime::from_ms(30)));
            }
        }
    }
    let opts = hosting(|| Box::new(Later::default()), vec![SimTime::from_ms(1); 2]);
    // Two 1-node jobs of 10 ms on 2 nodes: both start at the timer, 30 ms, and
    // end at 40 ms; the replaced 40 ms wake-up is stale and never reaches the
    // policy (no job is started twice, which the engine would refuse).
    let out = simulate_processes(
        &proc_platform(2),
        &[compute(1, 10), compute_at(1, 10, 5)],
        &|| Box::new(Spin),
        &opts,
    )
    .unwrap();
    let ms = SimTime::from_ms;
    let span = out
        .jobs
        .iter()
        .map(|r| (r.start, r.end))
        .collect::<Vec<_>>();
    assert_eq!(span, [(ms(30), ms(40)), (ms(30), ms(40))]);
    // A wake-up in the past is refused.
    struct Past;
    impl ClusterPolicy for Past {
        fn name(&self) -> String {
            "past".into()
        }
        fn on_events(&mut self, _: &[Event], v: &dyn ClusterView, out: &mut Vec<Decision>) {
            if v.now() > SimTime::ZERO {
                out.push(Decision::WakeAt(SimTime::ZERO));
            }
        }
    }
    let opts = hosting(|| Box::new(Past), vec![SimTime::from_ms(1)]);
    // The job arrives at 5 ms; told of it then, the policy asks for 0.
    assert_eq!(
        error_of(1, compute_at(1, 1, 5), &opts),
        "invalid admission decision: wake-up at 0.000000000s is before now (0.005000000s)"
    );
}

#[test]
fn process_level_easy_decides_on_the_whole_instant() {
    // 2 nodes, exact estimates. Job 0 (1 node, 30 ms) starts at 0; job 1
    // (2 nodes, 10 ms) waits, shadow time 30. At 30 job 0 ends and job 2
    // (1 node, 0 ms) arrives. The engine has the arrival first (queued at the
    // run's start, before the end's event), but EASY is told the instant at
    // once, as at job level: free 2, the head job 1 starts at 30; job 2 no
    // longer fits and starts at job 1's end, 40. Starts 0, 30, 40. (Told of
    // the arrival alone it would have seen 1 free node and shadow time 30 and
    // backfilled job 2 at 30: starts 0, 30, 30.)
    let ms = SimTime::from_ms;
    let jobs = vec![compute(1, 30), compute(2, 10), compute_at(1, 0, 30)];
    let est = vec![ms(30), ms(10), ms(0)];
    let opts = ProcOptions {
        admission: Some(hosted("easy", est)),
        ..Default::default()
    };
    let out = simulate_processes(&proc_platform(2), &jobs, &|| Box::new(Spin), &opts).unwrap();
    let starts: Vec<_> = out.jobs.iter().map(|r| r.start).collect();
    assert_eq!(starts, [ms(0), ms(30), ms(40)]);
}

mod differential {
    //! One implementation at both fidelities: a job-level policy hosted at
    //! process level (MPL 1, single-CPU nodes, compute-only jobs, so a job's
    //! span is its compute time) starts every job when the job-level engine
    //! starts it on the same workload, with the same estimates. Times are
    //! multiples of 10 ms, so arrivals and ends often share an instant; both
    //! tell the policy the whole instant at once.
    use super::*;
    use cosched_engine::{simulate, SimOptions};
    use cosched_model::{JobSpec, Platform, Workload};
    use proptest::prelude::*;

    /// (nodes, jobs: (nodes, runtime in units of 10 ms, submit in units of 10 ms, estimate)):
    /// estimate `None` is the exact runtime, `Some(ms)` is at least the runtime
    /// (the job-level engine refuses a shorter one without a kill; a
    /// process-level job is never killed, and its `request` and `perfect`
    /// estimates are never shorter than its dedicated runtime).
    type Job = (u32, i64, i64, Option<i64>);

    fn arb_case() -> impl Strategy<Value = (u32, Vec<Job>)> {
        (1u32..=6).prop_flat_map(|nodes| {
            let job = (
                1..=nodes,
                0i64..=12,
                0i64..=30,
                proptest::option::of(1i64..=300),
            );
            (Just(nodes), proptest::collection::vec(job, 1..=10))
        })
    }

    /// The start of each job under `policy` at process level and at job level.
    fn starts_at_both_levels(
        policy: &'static str,
        nodes: u32,
        spec: &[Job],
    ) -> (Vec<SimTime>, Vec<SimTime>) {
        let ten = |k: i64| SimTime::from_ms(10 * k);
        let est: Vec<SimTime> = spec
            .iter()
            .map(|&(_, run, _, e)| e.map_or(ten(run), SimTime::from_ms).max(ten(run)))
            .collect();
        let jobs: Vec<ProcJob> = spec
            .iter()
            .map(|&(n, run, at, _)| compute_at(n, 10 * run, 10 * at))
            .collect();
        let opts = ProcOptions {
            admission: Some(hosted(policy, est.clone())),
            ..Default::default()
        };
        let process = simulate_processes(&proc_platform(nodes), &jobs, &|| Box::new(Spin), &opts)
            .unwrap()
            .jobs
            .iter()
            .map(|r| r.start)
            .collect();
        let w = Workload {
            jobs: spec
                .iter()
                .zip(&est)
                .enumerate()
                .map(|(k, (&(n, run, at, _), &e))| JobSpec {
                    source_id: k as i64,
                    submit: ten(at),
                    runtime: ten(run),
                    procs: n,
                    requested: None,
                    estimate: e,
                    kill_after: None,
                })
                .collect(),
            ..Default::default()
        };
        let mut p = cosched_policies::build(policy).unwrap();
        let job = simulate(
            &w,
            &Platform::new(nodes, 1),
            p.as_mut(),
            &SimOptions::default(),
        )
        .unwrap()
        .records
        .iter()
        .map(|r| r.start.unwrap())
        .collect();
        (process, job)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn a_hosted_policy_starts_jobs_when_the_job_level_engine_does((nodes, spec) in arb_case()) {
            let mut spec = spec;
            spec.sort_by_key(|&(_, _, at, _)| at);
            // Every job-level cluster policy of the registry, hosted.
            let cluster = cosched_policies::catalog().into_iter().filter(|i| i.level == "cluster");
            for policy in cluster.map(|i| i.name) {
                let (process, job) = starts_at_both_levels(policy, nodes, &spec);
                prop_assert_eq!(process, job, "{}", policy);
            }
        }
    }
}
