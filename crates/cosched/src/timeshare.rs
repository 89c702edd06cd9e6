//! Job-level time-sharing models selected by policy name (they are engines of their
//! own, not registry policies): `gang[...]` (fluid gang scheduling,
//! `cosched_engine::gang_fluid`) and `timeshare[...]` (MPL-limited sharing with a
//! fitted interference table, `cosched_engine::timeshare_fluid`).
//!
//! - `gang[rows=3,quantum_ms=100,switch_us=1000]`: rows of the Ousterhout matrix (seed 000: MPL 3),
//!   quantum and slot-switch cost, the same parameters and defaults as the process-level
//!   gang scheduler (assumption G-SCH-6 of docs/models/seed-parameters.md); the process-level
//!   option `alternate` has no job-level counterpart.
//! - `timeshare[scheme=hybrid,mpl=3,intensity=medium,table=PATH]`: the node scheme whose fitted
//!   efficiency applies, the MPL, the communication-intensity class every trace job is given
//!   (very-low, low, medium, high; seed 000 Table 1's classes), and an optional table file (default:
//!   the committed `interference.json`).

use crate::{Error, RunResult, Timings};
use cosched_des::SimTime;
use cosched_engine::gang_fluid::{simulate_gang, GangParams};
use cosched_engine::metrics::summarize_busy;
use cosched_engine::timeshare_fluid::{simulate_timeshare, TimeshareParams};
use cosched_model::interference::{self, InterferenceTable, CLASSES};
use cosched_model::{Placement, Platform, Workload};
use cosched_policies::registry::{ParamInfo, PolicyInfo, PolicySpec, RegistryError};
use std::time::Instant;

/// A job-level time-sharing model.
#[derive(Clone, Debug, PartialEq)]
pub enum JobLevelModel {
    Gang(GangParams),
    Timeshare(TimeshareParams),
}

/// Documentation of the two models (listed by `cosched policies`).
pub fn catalog() -> Vec<PolicyInfo> {
    vec![
        PolicyInfo {
            name: "gang",
            level: "cluster (job-level time sharing)",
            summary: "Gang scheduling on traces: an Ousterhout matrix of rows served round robin (fluid model).",
            params: vec![
                ParamInfo { name: "rows", kind: "int", default: "3", doc: "rows of the matrix (MPL)" },
                ParamInfo { name: "quantum_ms", kind: "float", default: "100", doc: "time slice of a row" },
                ParamInfo { name: "switch_us", kind: "float", default: "1000", doc: "cost of a slot switch" },
            ],
        },
        PolicyInfo {
            name: "timeshare",
            level: "cluster (job-level time sharing)",
            summary: "FCFS admission with an MPL; jobs slowed by a node scheme's fitted interference.",
            params: vec![
                ParamInfo { name: "scheme", kind: "string", default: "hybrid", doc: "node-level scheme of the table" },
                ParamInfo { name: "mpl", kind: "int", default: "3", doc: "processes per processor" },
                ParamInfo { name: "intensity", kind: "string", default: "medium", doc: "class of every job: very-low, low, medium, high" },
                ParamInfo { name: "table", kind: "path", default: "(committed)", doc: "interference table file" },
            ],
        },
    ]
}

/// The model a policy name selects, if it names one.
pub fn model_of(
    policy: &str,
    placement: Placement,
    seed: u64,
) -> Result<Option<JobLevelModel>, Error> {
    let spec = match PolicySpec::parse(policy) {
        Ok(s) => s,
        Err(_) => return Ok(None),
    };
    match spec.name.as_str() {
        "gang" => {
            spec.expect_only(&["rows", "quantum_ms", "switch_us"])?;
            let ms = |x: f64| SimTime::from_secs_f64(x / 1e3);
            // The process-level gang scheduler's defaults (G-SCH-6).
            use cosched_contract::process::GangParams as Defaults;
            let rows: u32 = spec
                .get("rows", Defaults::DEFAULT_ROWS)
                .ok()
                .filter(|&r| r >= 1)
                .ok_or_else(|| bad(&spec, "rows", "must be an integer >= 1"))?;
            let q: f64 = spec
                .get("quantum_ms", Defaults::DEFAULT_QUANTUM_MS)
                .ok()
                .filter(|q: &f64| q.is_finite() && *q > 0.0)
                .ok_or_else(|| bad(&spec, "quantum_ms", "must be a number > 0"))?;
            let c: f64 = spec
                .get("switch_us", Defaults::DEFAULT_SWITCH_US)
                .ok()
                .filter(|c: &f64| c.is_finite() && *c >= 0.0)
                .ok_or_else(|| bad(&spec, "switch_us", "must be a number >= 0"))?
                / 1000.0;
            Ok(Some(JobLevelModel::Gang(GangParams {
                rows,
                quantum: ms(q),
                switch: ms(c),
                placement,
                seed,
            })))
        }
        "timeshare" => {
            spec.expect_only(&["scheme", "mpl", "intensity", "table"])?;
            let scheme: String = spec.get("scheme", "hybrid".to_string())?;
            let mpl: u32 = spec.get("mpl", 3)?;
            let intensity: String = spec.get("intensity", "medium".to_string())?;
            if !CLASSES.contains(&intensity.as_str()) {
                return Err(bad(
                    &spec,
                    "intensity",
                    &format!("intensity must be one of {}", CLASSES.join(", ")),
                ));
            }
            let owned;
            let table: &InterferenceTable = match spec.params.get("table") {
                Some(path) => {
                    let text = std::fs::read_to_string(path)
                        .map_err(|e| Error::Invalid(format!("{path}: {e}")))?;
                    owned = interference::parse(&text, path).map_err(Error::Invalid)?;
                    &owned
                }
                None => interference::default_table().map_err(Error::Invalid)?,
            };
            let eff = table
                .efficiency(&scheme, &intensity)
                .map_err(Error::Invalid)?;
            if eff.len() < mpl as usize {
                return Err(bad(
                    &spec,
                    "mpl",
                    &format!("the table covers MPL up to {}", eff.len()),
                ));
            }
            Ok(Some(JobLevelModel::Timeshare(TimeshareParams {
                mpl,
                placement,
                seed,
                efficiency: vec![eff.to_vec()],
                class_of: Vec::new(),
                name: format!("timeshare[scheme={scheme},mpl={mpl},intensity={intensity}]"),
            })))
        }
        _ => Ok(None),
    }
}

/// The job-level policy names accepted besides the registry's, as an unknown-policy
/// error lists them.
pub const JOB_LEVEL_FORMS: &str = "gang[...], timeshare[...], python:module:Class";

/// Builds the registry's cluster policy named by `policy`; an unknown name lists the
/// registry's policies and the job-level models accepted before it ([`model_of`],
/// Python policies).
pub fn build_cluster(
    policy: &str,
) -> Result<Box<dyn cosched_engine::ClusterPolicy>, RegistryError> {
    cosched_policies::build(policy).map_err(|e| match e {
        RegistryError::UnknownPolicy { name, valid } => RegistryError::UnknownPolicy {
            name,
            valid: format!("{valid}, {JOB_LEVEL_FORMS}"),
        },
        e => e,
    })
}

/// A parameter of `spec` that breaks its rule `msg` (its value as given, or
/// `(default)`).
fn bad(spec: &PolicySpec, param: &str, msg: &str) -> Error {
    Error::from(RegistryError::BadValue {
        policy: spec.name.clone(),
        param: param.into(),
        value: spec
            .params
            .get(param)
            .cloned()
            .unwrap_or_else(|| "(default)".into()),
        msg: msg.into(),
    })
}

/// Runs a workload under a job-level time-sharing model.
pub fn run_model(
    workload: &Workload,
    platform: &Platform,
    model: &JobLevelModel,
    bsld_threshold_s: f64,
) -> Result<RunResult, Error> {
    if !(bsld_threshold_s.is_finite() && bsld_threshold_s > 0.0) {
        return Err(Error::Invalid(format!(
            "bounded slowdown threshold must be > 0, got {bsld_threshold_s}"
        )));
    }
    let t1 = Instant::now();
    let (out, busy, rows) = match model {
        JobLevelModel::Gang(p) => {
            let g = simulate_gang(workload, platform, p)?;
            (g.out, g.busy, Some(g.rows))
        }
        JobLevelModel::Timeshare(p) => {
            let (out, busy) = simulate_timeshare(workload, platform, p)?;
            (out, busy, None)
        }
    };
    let simulate_s = t1.elapsed().as_secs_f64();
    let t2 = Instant::now();
    let (mut table, summary) =
        summarize_busy(workload, platform, &out, bsld_threshold_s, Some(&busy));
    crate::invariants::check(workload, &out, &summary)?;
    if let Some(rows) = rows {
        table.gang_row = rows.iter().map(|r| r.map_or(-1, i64::from)).collect();
    }
    Ok(RunResult {
        timeline: Vec::new(),
        table,
        summary,
        platform: platform.clone(),
        warnings: workload.warnings.clone(),
        timings: Timings {
            parse_s: 0.0,
            simulate_s,
            metrics_s: t2.elapsed().as_secs_f64(),
        },
    })
}

#[cfg(test)]
mod tests {
    use cosched_contract::process::GangParams;

    #[test]
    fn bad_gang_parameters_name_the_parameter_and_the_rule() {
        let err = |p: &str| {
            super::model_of(p, Default::default(), 0)
                .err()
                .unwrap()
                .to_string()
        };
        assert_eq!(
            err("gang[rows=0]"),
            "policy gang: parameter rows=\"0\": must be an integer >= 1"
        );
        assert_eq!(
            err("gang[rows=-1]"),
            "policy gang: parameter rows=\"-1\": must be an integer >= 1"
        );
        assert_eq!(
            err("gang[quantum_ms=0]"),
            "policy gang: parameter quantum_ms=\"0\": must be a number > 0"
        );
        assert_eq!(
            err("gang[switch_us=-5]"),
            "policy gang: parameter switch_us=\"-5\": must be a number >= 0"
        );
        assert_eq!(
            err("timeshare[intensity=extreme]"),
            "policy timeshare: parameter intensity=\"extreme\": intensity must be one of \
             very-low, low, medium, high"
        );
    }

    #[test]
    fn unknown_policy_lists_the_job_level_models_too() {
        let e = super::build_cluster("sjf").err().unwrap().to_string();
        assert!(
            e.starts_with("unknown policy \"sjf\"; valid policies: fcfs, easy, conservative"),
            "{e}"
        );
        assert!(
            e.ends_with(", gang[...], timeshare[...], python:module:Class"),
            "{e}"
        );
    }

    /// The documented defaults of `gang` at both fidelities (the job-level model
    /// here, the process-level scheme in cosched-policies) are the contract's.
    #[test]
    fn gang_defaults_are_documented_as_the_contracts_at_both_fidelities() {
        let job_level = super::catalog();
        let process_level = cosched_policies::process_catalog();
        for info in [&job_level, &process_level]
            .into_iter()
            .flatten()
            .filter(|i| i.name == "gang")
        {
            let default = |name: &str| -> f64 {
                let p = info.params.iter().find(|p| p.name == name).expect(name);
                p.default.parse().expect(p.default)
            };
            assert_eq!(
                default("rows"),
                f64::from(GangParams::DEFAULT_ROWS),
                "{}",
                info.level
            );
            assert_eq!(
                default("quantum_ms"),
                GangParams::DEFAULT_QUANTUM_MS,
                "{}",
                info.level
            );
            assert_eq!(
                default("switch_us"),
                GangParams::DEFAULT_SWITCH_US,
                "{}",
                info.level
            );
        }
        assert_eq!(
            [&job_level, &process_level]
                .into_iter()
                .flatten()
                .filter(|i| i.name == "gang")
                .count(),
            2
        );
    }
}
