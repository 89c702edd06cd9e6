//! Batch scheduling, PBS like (seed 000 §5.1: "PACKING is the default
//! configuration in PBS"; MPL "in batch scheduling is always one", seed 000 §5.2;
//! the seeds ran OpenPBS, §2).
//!
//! Algorithm: one process per node (MPL 1), jobs in submission order, PACKING
//! placement (the configuration's `placement` applies), each job running
//! dedicated on its nodes under the node policy. Three queue disciplines:
//!
//! - `strict=true` (default): strict FCFS, the queue head blocks every later job.
//! - `strict=false`: OpenPBS's default scheduler (`strict_ordering: false ALL`
//!   in `src/scheduler/pbs_sched_config` of openpbs/openpbs, called `strict_fifo`
//!   in OpenPBS 2.x): each pass goes through the queue in order and starts every
//!   job that fits now; a job that does not fit keeps its place but holds no
//!   reservation, except a job that has waited longer than `max_starve_s`
//!   (default 24 h): it is starving and no later job starts until it has
//!   (OpenPBS's `help_starving_jobs`, on by default; [`super::starving`]).
//! - `backfill=easy` (or the name `easy`): strict order with EASY backfilling,
//!   the job-level policy [`crate::easy`] hosted as the admission
//!   ([`super::hosted::Hosted`], nodes as its processors; one implementation
//!   at both fidelities): when the queue head does not fit it gets a
//!   reservation at the earliest time enough nodes are free by the running
//!   jobs' estimated ends; a later job starts now if it fits and ends by its
//!   estimate before that time or uses only nodes the head does not need. As
//!   at job level, the policy decides once per instant, on all of the
//!   instant's arrivals and ends together. PBS backfills only around a top job
//!   held in strict order, so `strict=false` with `backfill=easy` is refused.
//!
//! EASY's estimates (`estimates`):
//! - `perfect`: each job's dedicated runtime, obtained by simulating it alone
//!   (cached per application, class and process count) on the same platform
//!   (assumption G-SCH-8 of docs/models/seed-parameters.md).
//! - `request` (default): the walltime a user of the job's class would request:
//!   the longest dedicated runtime among the workload's jobs of the same class
//!   (A, B, C; a single-class application is its own class), rounded up to a
//!   whole multiple of `round_s` seconds (default 600: PBS walltimes are given
//!   in hh:mm:ss and requested in round numbers). Never below the job's own
//!   dedicated runtime, so a job is not killed at its estimate.
//!
//! Parameters: `backfill` (`none` | `easy`, default `none`), `strict` (default
//! `true`), `estimates` (`request` | `perfect`, default `request`), `round_s`
//! (default 600, > 0 and at most 1e7), `help_starving` (default `true`) and
//! `max_starve_s` (default 86400, > 0 and at most 1e9): the starving-job
//! rule, which only the non-strict order uses (a strict head, or EASY's
//! reserved head, already waits for nobody).

use super::starving::StarvingFifo;
use super::ProcAdmission;
use crate::registry::{ParamInfo, PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::admission::AdmissionPolicy;
use cosched_des::SimTime;
use cosched_rules::admission::Fcfs;

/// EASY's runtime estimates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Estimates {
    /// Each job's dedicated runtime.
    Perfect,
    /// The class's longest dedicated runtime rounded up to a multiple of `round`.
    Request { round: SimTime },
}

impl Estimates {
    /// The default, `estimates=request` with `round_s=600`.
    pub const DEFAULT: Estimates = Estimates::Request {
        round: SimTime::from_secs(600),
    };
}

/// Parameters of the batch scheme without backfilling (with `backfill=easy`
/// the scheme is the hosted EASY, [`ProcAdmission::Hosted`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchParams {
    pub strict: bool,
    /// OpenPBS's `help_starving_jobs` with this `max_starve` (`None`: off).
    pub max_starve: Option<SimTime>,
}

/// OpenPBS's default `max_starve` (24:00:00).
pub const MAX_STARVE_DEFAULT: SimTime = SimTime::from_secs(86_400);

impl BatchParams {
    /// Strict FCFS, no backfilling.
    pub const STRICT: BatchParams = BatchParams {
        strict: true,
        max_starve: Some(MAX_STARVE_DEFAULT),
    };
}

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "batch",
        level: "process",
        summary: "PBS-like batch: MPL 1, FCFS (strict, or OpenPBS's default non-strict order), PACKING; optional EASY backfilling from requested walltimes or perfect estimates.",
        params: vec![
            ParamInfo {
                name: "backfill",
                kind: "string",
                default: "none",
                doc: "\"none\" or \"easy\" (EASY backfilling around the queue head)",
            },
            ParamInfo {
                name: "strict",
                kind: "bool",
                default: "true",
                doc: "strict FCFS (the head blocks the queue); false: every job that fits starts (OpenPBS strict_ordering: false)",
            },
            ParamInfo {
                name: "estimates",
                kind: "string",
                default: "request",
                doc: "EASY's estimates: \"request\" (the class's longest dedicated runtime rounded up to round_s) or \"perfect\" (each job's dedicated runtime)",
            },
            ParamInfo {
                name: "round_s",
                kind: "float",
                default: "600",
                doc: "walltime request granularity of estimates=request, seconds",
            },
            ParamInfo {
                name: "help_starving",
                kind: "bool",
                default: "true",
                doc: "OpenPBS help_starving_jobs: with strict=false, a job waiting longer than max_starve_s holds the queue until it starts",
            },
            ParamInfo {
                name: "max_starve_s",
                kind: "float",
                default: "86400",
                doc: "OpenPBS max_starve: the wait after which a queued job is starving, seconds",
            },
        ],
    }
}

/// The process-level `easy`: the job-level EASY hosted, with the estimates'
/// parameters.
pub fn easy_info() -> PolicyInfo {
    PolicyInfo {
        summary: "Same as batch[backfill=easy]: the job-level EASY hosted at MPL 1, nodes as its processors.",
        ..super::hosted_info(crate::easy::info())
    }
}

fn bad(spec: &PolicySpec, param: &str, value: String, msg: &str) -> RegistryError {
    RegistryError::BadValue {
        policy: spec.name.clone(),
        param: param.into(),
        value,
        msg: msg.into(),
    }
}

pub(super) fn estimates(spec: &PolicySpec) -> Result<Estimates, RegistryError> {
    let kind: String = spec.get("estimates", "request".to_string())?;
    let round_s: f64 = spec.get("round_s", 600.0)?;
    // At most 1e7 s (the process-level run's default time limit): a larger
    // granularity overflowed the estimates' nanosecond arithmetic.
    if !(round_s.is_finite() && round_s > 0.0 && round_s <= 1e7) {
        return Err(bad(
            spec,
            "round_s",
            format!("{round_s:?}"),
            "must be a positive number of seconds, at most 1e7",
        ));
    }
    match kind.as_str() {
        "perfect" => Ok(Estimates::Perfect),
        "request" => Ok(Estimates::Request {
            round: SimTime::from_secs_f64(round_s),
        }),
        _ => Err(bad(
            spec,
            "estimates",
            kind,
            "must be \"request\" or \"perfect\"",
        )),
    }
}

fn max_starve(spec: &PolicySpec) -> Result<Option<SimTime>, RegistryError> {
    let on: bool = spec.get("help_starving", true)?;
    let s: f64 = spec.get("max_starve_s", MAX_STARVE_DEFAULT.as_secs_f64())?;
    // At most 1e9 s (about 32 years): beyond the nanosecond time range.
    if !(s.is_finite() && s > 0.0 && s <= 1e9) {
        return Err(bad(
            spec,
            "max_starve_s",
            s.to_string(),
            "must be a positive number of seconds, at most 1e9",
        ));
    }
    Ok(on.then(|| SimTime::from_secs_f64(s)))
}

pub fn build(spec: &PolicySpec) -> Result<ProcAdmission, RegistryError> {
    spec.expect_only(&[
        "backfill",
        "strict",
        "estimates",
        "round_s",
        "help_starving",
        "max_starve_s",
    ])?;
    let backfill: String = spec.get("backfill", "none".to_string())?;
    let strict: bool = spec.get("strict", true)?;
    let backfill = match backfill.as_str() {
        "none" => false,
        "easy" => true,
        _ => {
            return Err(bad(
                spec,
                "backfill",
                backfill,
                "must be \"none\" or \"easy\"",
            ))
        }
    };
    if backfill && !strict {
        return Err(bad(
            spec,
            "strict",
            "false".into(),
            "EASY backfills around a queue head held in strict order; use strict=true with backfill=easy",
        ));
    }
    // Checked with or without backfilling (the estimates apply to EASY only).
    let estimates = estimates(spec)?;
    let max_starve = max_starve(spec)?;
    if backfill {
        return Ok(easy(estimates));
    }
    Ok(ProcAdmission::Batch(BatchParams { strict, max_starve }))
}

/// `batch[backfill=easy]`: the job-level EASY hosted, from `estimates`.
fn easy(estimates: Estimates) -> ProcAdmission {
    ProcAdmission::Hosted {
        policy: "easy".into(),
        estimates,
    }
}

/// The process-level `easy[estimates=...,round_s=...]`, the same as
/// `batch[backfill=easy,...]`.
pub fn build_easy(spec: &PolicySpec) -> Result<ProcAdmission, RegistryError> {
    spec.expect_only(&["estimates", "round_s"])?;
    Ok(easy(estimates(spec)?))
}

/// The admission policy of the batch scheme `b` without backfilling: FCFS,
/// strict or not (not strict: with the starving-job rule when `b.max_starve`).
/// The mechanism runs it at MPL 1.
pub fn admission(b: &BatchParams) -> Box<dyn AdmissionPolicy> {
    match (b.strict, b.max_starve) {
        (false, Some(t)) => Box::new(StarvingFifo::new(t)),
        _ => Box::new(Fcfs::new(b.strict)),
    }
}

/// EASY's estimate of each job from the dedicated runtimes (`dedicated[k]`) and
/// classes (`class[k]`) of the workload's jobs, by `est`: `Request` takes, for a
/// job of class c, the longest dedicated runtime of class c rounded up to a
/// multiple of `round`; `SimTime::MAX` (no finite estimate) stays as it is.
pub fn estimates_of(est: Estimates, dedicated: &[SimTime], class: &[&str]) -> Vec<SimTime> {
    match est {
        Estimates::Perfect => dedicated.to_vec(),
        Estimates::Request { round } => {
            let mut longest: std::collections::BTreeMap<&str, SimTime> = Default::default();
            for (&d, &c) in dedicated.iter().zip(class) {
                if d != SimTime::MAX {
                    let e = longest.entry(c).or_insert(d);
                    *e = (*e).max(d);
                }
            }
            dedicated
                .iter()
                .zip(class)
                .map(|(&d, c)| {
                    if d == SimTime::MAX {
                        return d;
                    }
                    let l = longest[c].as_ns();
                    let r = round.as_ns().max(1);
                    SimTime::from_ns(((l + r - 1) / r).max(1) * r)
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    fn s(x: i64) -> SimTime {
        SimTime::from_secs(x)
    }

    #[test]
    fn request_estimates_are_the_class_walltime_rounded_up() {
        // Class A: 40 s and 130 s -> longest 130 s -> 3 x 60 s = 180 s for both;
        // class C: 600 s exactly -> 600 s; a background job keeps no estimate.
        let ded = [s(40), s(130), s(600), SimTime::MAX];
        let cls = ["A", "A", "C", "A"];
        let round = s(60);
        assert_eq!(
            estimates_of(Estimates::Request { round }, &ded, &cls),
            vec![s(180), s(180), s(600), SimTime::MAX]
        );
        assert_eq!(estimates_of(Estimates::Perfect, &ded, &cls), ded.to_vec());
    }

    #[test]
    fn parameters_and_refusals() {
        let b = |x: &str| build(&PolicySpec::parse(x).unwrap());
        assert_eq!(
            b("batch").unwrap(),
            ProcAdmission::Batch(BatchParams::STRICT)
        );
        assert_eq!(
            b("batch[strict=false]").unwrap(),
            ProcAdmission::Batch(BatchParams {
                strict: false,
                ..BatchParams::STRICT
            })
        );
        assert_eq!(
            b("batch[backfill=easy,estimates=perfect]").unwrap(),
            ProcAdmission::Hosted {
                policy: "easy".into(),
                estimates: Estimates::Perfect
            }
        );
        assert_eq!(
            b("batch[strict=false,max_starve_s=3600]").unwrap(),
            ProcAdmission::Batch(BatchParams {
                strict: false,
                max_starve: Some(SimTime::from_secs(3600)),
            })
        );
        assert_eq!(
            b("batch[strict=false,help_starving=false]").unwrap(),
            ProcAdmission::Batch(BatchParams {
                strict: false,
                max_starve: None,
            })
        );
        assert!(b("batch[max_starve_s=0]").is_err());
        assert!(b("batch[max_starve_s=1e12]").is_err());
        assert!(b("batch[backfill=easy,strict=false]")
            .unwrap_err()
            .to_string()
            .contains("strict order"));
        assert!(b("batch[estimates=exact]").is_err());
        assert!(b("batch[round_s=0]").is_err());
        // The refused value is written as typed, not as 301 digits.
        let e = b("batch[round_s=1e300]").unwrap_err().to_string();
        assert!(e.contains("1e300") && e.len() < 200, "{e}");
    }
}
