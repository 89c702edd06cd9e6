//! Admission scenarios of placement and queue order, worked out by hand.

use super::policy::NodePolicy;
use super::tests::{check_work, linux, platform, Block};
use super::*;
use cosched_model::program::Builder;

fn cpu(p: u32, ms: i64) -> Program {
    let mut b = Builder::new(p);
    b.all(Op::Compute { ns: ms * 1_000_000 });
    b.barrier();
    b.build("cpu", 1.0)
}

fn at(p: Program, ms: i64) -> ProcJob {
    ProcJob::new(p, SimTime::from_ms(ms))
}

fn run(nodes: u32, jobs: &[ProcJob], opts: ProcOptions) -> ProcOutput {
    let plat = platform(nodes, linux());
    let make: &dyn Fn() -> Box<dyn NodePolicy> = &|| Box::new(Block);
    let out = simulate_processes(&plat, jobs, make, &opts).expect("run");
    check_work(&plat, jobs, &out);
    out
}

#[test]
fn packing_places_a_new_job_on_the_emptiest_contiguous_nodes() {
    // 6 nodes, MPL 3. Job 0 (2 ranks, 1 s) at t=0 takes nodes 0-1. Job 1 (2 ranks)
    // at t=10 ms: nodes 0-1 are below the MPL, but layer 0 (empty nodes 2-5) has
    // room: the emptiest contiguous pair, the lowest-numbered of the empty ones,
    // 2-3 (the old first fit below the MPL stacked it on 0-1). Job 2 (4 ranks) at
    // t=20 ms: layer 0 has only nodes 4-5, layer 1 (load <= 1) has all six; the
    // contiguous runs of 4 are 0-3 (load 4), 1-4 (3), 2-5 (2): 2-5.
    let jobs = [
        at(cpu(2, 1000), 0),
        at(cpu(2, 1000), 10),
        at(cpu(4, 1000), 20),
    ];
    let opts = ProcOptions {
        mpl: 3,
        ..Default::default()
    };
    let out = run(6, &jobs, opts);
    assert_eq!(out.jobs[0].nodes, vec![0, 1]);
    assert_eq!(out.jobs[1].nodes, vec![2, 3]);
    assert_eq!(out.jobs[2].nodes, vec![2, 3, 4, 5]);
    // NO PACKING draws among the eligible nodes: distinct, and the run is seeded.
    let random = ProcOptions {
        mpl: 3,
        placement: Placement::Random,
        seed: 5,
        ..Default::default()
    };
    let a = run(6, &jobs, random.clone());
    assert_eq!(a.jobs, run(6, &jobs, random).jobs);
    for j in &a.jobs {
        let mut n = j.nodes.clone();
        n.dedup();
        assert_eq!(n.len(), j.nodes.len());
    }
}

#[test]
fn non_strict_order_starts_a_later_job_that_fits() {
    // 4 nodes, MPL 1 (batch). Job 0 (2 ranks, 1 s) at 0 on nodes 0-1; job 1 (4 ranks)
    // at 10 ms cannot start before job 0 ends; job 2 (2 ranks, 100 ms) at 20 ms fits
    // on nodes 2-3 now.
    let jobs = [
        at(cpu(2, 1000), 0),
        at(cpu(4, 500), 10),
        at(cpu(2, 100), 20),
    ];
    let strict = run(4, &jobs, ProcOptions::default());
    let loose = run(
        4,
        &jobs,
        ProcOptions {
            admission: Some(admit::AdmissionFactory::new(|| {
                Box::new(cosched_rules::admission::Fcfs::new(false))
            })),
            ..Default::default()
        },
    );
    let s = |o: &ProcOutput, k: usize| o.jobs[k].start.as_secs_f64();
    // Strict FCFS: job 2 waits behind job 1, which waits for job 0 (about 1 s) and
    // runs about 0.5 s: job 2 starts after about 1.5 s.
    assert!(
        s(&strict, 1) > 0.99 && s(&strict, 1) < 1.1,
        "{}",
        s(&strict, 1)
    );
    assert!(s(&strict, 2) > 1.49, "{}", s(&strict, 2));
    // Non-strict: job 2 starts at its submission (20 ms) on nodes 2-3; job 1 still
    // starts when job 0 ends (job 2 ended long before), not later.
    assert_eq!(loose.jobs[2].start, SimTime::from_ms(20));
    assert_eq!(loose.jobs[2].nodes, vec![2, 3]);
    assert!(
        s(&loose, 1) > 0.99 && s(&loose, 1) < 1.1,
        "{}",
        s(&loose, 1)
    );
}

/// Starts the job after the one that arrived, on every node.
struct Eager;
impl cosched_contract::admission::AdmissionPolicy for Eager {
    fn name(&self) -> String {
        "eager".into()
    }
    fn on_events(
        &mut self,
        events: &[AdmissionEvent],
        ctl: &mut dyn cosched_contract::admission::AdmissionControl,
    ) -> Result<(), cosched_contract::admission::AdmissionError> {
        if let [AdmissionEvent::Arrived(j)] = events {
            let all: Vec<u32> = (0..ctl.nodes()).collect();
            ctl.start(j + 1, &all)?;
        }
        Ok(())
    }
}

#[test]
fn a_start_the_engine_cannot_carry_out_stops_the_run_with_a_typed_error() {
    // Job 1 is submitted at 10 ms: at 0 it is not waiting for admission.
    let jobs = [at(cpu(2, 100), 0), at(cpu(2, 100), 10)];
    let opts = ProcOptions {
        admission: Some(admit::AdmissionFactory::new(|| Box::new(Eager))),
        ..Default::default()
    };
    let e =
        simulate_processes(&platform(4, linux()), &jobs, &|| Box::new(Block), &opts).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid admission decision: job 1 cannot start: it is not waiting for admission"
    );
}
