//! Checks every finished run must pass before its results are returned. A
//! violation is a bug of an engine (or of the arithmetic of extreme input that
//! slipped past validation): the run fails with [`Error::Run`] (exit code 1)
//! instead of writing impossible numbers.
//!
//! - every job that ran on processors: `submit <= start <= end`;
//! - every completed or killed job runs at least its dedicated time (its effective
//!   runtime: time sharing stretches execution, nothing shrinks it);
//! - utilization is a finite number in `[0, 1]`.

use crate::Error;
use cosched_engine::metrics::Summary;
use cosched_engine::{JobStatus, SimOutput};
use cosched_model::Workload;

/// Relative slack of the utilization check (rounding of the f64 sums).
const UTILIZATION_SLACK: f64 = 1e-9;

/// Checks `out` (the records of `workload`'s jobs) and its summary.
pub fn check(workload: &Workload, out: &SimOutput, summary: &Summary) -> Result<(), Error> {
    let fail = |msg: String| {
        Err(Error::Run(format!(
            "engine invariant violated ({}): {msg}",
            out.policy
        )))
    };
    for (spec, rec) in workload.jobs.iter().zip(&out.records) {
        let (Some(start), Some(end)) = (rec.start, rec.end) else {
            if rec.status != JobStatus::Rejected {
                return fail(format!(
                    "job {} ran but has no start or end",
                    spec.source_id
                ));
            }
            continue;
        };
        if rec.alloc.is_empty() {
            // Never placed: a process-level background job the foreground outlived
            // is shown from the run's end to the run's end.
            continue;
        }
        if start < spec.submit {
            return fail(format!(
                "job {} starts at {start}, before its submission at {}",
                spec.source_id, spec.submit
            ));
        }
        if end < start {
            return fail(format!(
                "job {} ends at {end}, before its start at {start}",
                spec.source_id
            ));
        }
        if end - start < spec.effective_runtime() {
            return fail(format!(
                "job {} executes {} but needs at least its dedicated time {}",
                spec.source_id,
                end - start,
                spec.effective_runtime()
            ));
        }
    }
    let u = summary.utilization;
    if !(u.is_finite() && (0.0..=1.0 + UTILIZATION_SLACK).contains(&u)) {
        return fail(format!("utilization {u} is not between 0 and 1"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_des::SimTime;
    use cosched_engine::JobRecord;
    use cosched_model::JobSpec;

    fn setup(start: i64, end: i64, util: f64) -> Result<(), Error> {
        let s = SimTime::from_secs;
        let w = Workload {
            jobs: vec![JobSpec {
                source_id: 7,
                submit: s(10),
                runtime: s(5),
                procs: 1,
                requested: None,
                estimate: s(5),
                kill_after: None,
            }],
            ..Default::default()
        };
        let out = SimOutput {
            records: vec![JobRecord {
                start: Some(s(start)),
                end: Some(s(end)),
                status: JobStatus::Completed,
                alloc: vec![(0, 1)],
                nodes: 1,
            }],
            stats: Default::default(),
            policy: "p".into(),
        };
        let summary = Summary {
            utilization: util,
            ..Default::default()
        };
        check(&w, &out, &summary)
    }

    #[test]
    fn each_invariant_is_checked() {
        assert!(setup(10, 15, 1.0).is_ok());
        assert!(setup(12, 30, 0.5).is_ok());
        let msg = |r: Result<(), Error>| r.unwrap_err().to_string();
        assert!(msg(setup(9, 15, 0.5)).contains("before its submission"));
        assert!(msg(setup(12, 11, 0.5)).contains("before its start"));
        assert!(msg(setup(12, 16, 0.5)).contains("dedicated time"));
        assert!(msg(setup(10, 15, 1.4052)).contains("utilization 1.4052"));
        assert!(msg(setup(10, 15, f64::NAN)).contains("utilization NaN"));
    }
}
