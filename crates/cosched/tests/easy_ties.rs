//! EASY backfilling on an excerpt of the real SDSC-SP2 trace, where two running
//! jobs end at the head's shadow time (the trace is read from `shared/data/traces`
//! beside the repository, or `$COSCHED_TRACES`; without it the test fails and says
//! where the trace is looked for, as the other tests of the real traces do).
//!
//! Derivation: lines with run time <= 0, allocated processors <= 0 or submit
//! time < 0 are dropped; the estimate is the requested time raised to at least
//! the run time (the default overrun rule). At t = 1,059,825 job 581 (8
//! processors, estimate 64,800 s) arrives with 9 processors free; the head, job
//! 578, needs 64; jobs 562 and 564 (11 processors each) both end at the shadow
//! time 1,087,527, so 80 processors are free then and 16 are extra: job 581 fits
//! in them and starts at once (counting only one of the two tied jobs would give
//! 5 extra processors and make it wait until 1,068,371).

use cosched::engine::{simulate, SimOptions};
use cosched::model::swf::{self, field};
use cosched::model::WorkloadOptions;
use cosched::platform_of;
use std::path::PathBuf;

fn trace(file: &str) -> PathBuf {
    let dir = std::env::var_os("COSCHED_TRACES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/data/traces"
            ))
        });
    let p = dir.join(file);
    assert!(
        p.exists(),
        "trace {} not found: put shared/data/traces beside the repository or set COSCHED_TRACES",
        p.display()
    );
    p
}

#[test]
fn sdsc_sp2_job_581_backfills_into_the_tied_extra_processors() {
    let path = trace("SDSC-SP2-1998-4.2-cln.swf.gz");
    let mut t = swf::read_swf(&path).unwrap();
    t.records.retain(|r| {
        let f = &r.fields;
        f[field::RUN_TIME] > 0.0 && f[field::ALLOCATED_PROCS] > 0.0 && f[field::SUBMIT_TIME] >= 0.0
    });
    // Jobs submitted after job 581 cannot change a decision made at its arrival.
    t.records.retain(|r| r.fields[field::JOB_NUMBER] <= 581.0);
    let (w, m) = swf::to_workload(&t, &WorkloadOptions::default(), None).unwrap();
    let platform = platform_of(&m);
    assert_eq!(platform.total_procs(), 128);
    let mut easy = cosched::policies::build("easy").unwrap();
    let out = simulate(&w, &platform, easy.as_mut(), &SimOptions::default()).unwrap();
    let at = |id: i64| {
        let k = w.jobs.iter().position(|j| j.source_id == id).unwrap();
        let r = &out.records[k];
        (
            r.start.unwrap().as_secs_f64() as i64,
            (r.start.unwrap() + w.jobs[k].estimate).as_secs_f64() as i64,
        )
    };
    // The scenario: 562 and 564 end (by estimate) together at 1,087,527.
    assert_eq!(at(562).1, 1_087_527);
    assert_eq!(at(564).1, 1_087_527);
    assert_eq!(at(581).0, 1_059_825);
}
