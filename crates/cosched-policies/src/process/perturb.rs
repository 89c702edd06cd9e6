//! Perturbed gang scheduling of one job (seed 003 §4, Fig. 4), the environment of
//! the takeaway/giveaway experiments and of the gangedness estimator (S003 §5.2).
//!
//! Algorithm (run by `cosched_engine::process::perturb` on top of
//! `cosched_engine::process::gang`): job 0 of the workload is gang scheduled in
//! its own matrix row against the jobs of the other rows (a competing load); each
//! perturbation either takes one of job 0's slots away from one processor (that
//! node runs another row's process instead) or gives job 0 the slot that follows
//! one of its own on one processor. Perturbations come in batches of four, three of
//! job 0's slots apart, the batch starts drawn uniformly over the first `span`
//! slots (S003 §4). The run reports job 0's time inside its own slots and the
//! per-quantum message and progress statistics (gang, non-gang-running,
//! non-gang-non-running).
//!
//! Parameters:
//! - `quantum_ms` (0.5): slot length; S003 §4 "Quantum size is fixed at 500,000
//!   instructions" (1 instruction = 1 ns on `lee4`);
//! - `rows` (2): matrix rows; job 0 and one competing row;
//! - `switch_us` (0): global switch cost; S003 §2 says the global work is small for
//!   the four-processor configuration (assumption G-S003-3; the rest of the
//!   environment is assumption G-S003-6);
//! - `kind` (`takeaway`): `takeaway` (Sub) or `giveaway` (Add), S003 §4;
//! - `choice` (`fixed`): `fixed` (FX: always rank `proc`) or `rr` (RR: round robin);
//! - `proc` (1): the fixed rank (S003 §4.2 uses processors 0, 1 and 3);
//! - `count` (0): number of perturbations (S003 Fig. 5-9 plot up to 20);
//! - `span` (200): batch starts are drawn over job 0's first `span` slots (the
//!   seed apps' run length, assumption G-S003-1);
//! - `seed` (0): seed of the batch draw.

use super::ProcAdmission;
use crate::registry::{ParamInfo, PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::process::GangParams;
use cosched_contract::process::{Choice, Kind, PerturbParams};
use cosched_des::SimTime;

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "gang-perturb",
        level: "process",
        summary: "Gang scheduling of job 0 with quanta taken away or given away (seed 003 §4) and the gangedness estimator (§5).",
        params: vec![
            ParamInfo { name: "quantum_ms", kind: "float", default: "0.5", doc: "slot length, ms (S003 §4: 500,000 instructions)" },
            ParamInfo { name: "rows", kind: "int", default: "2", doc: "matrix rows: job 0 and the competing rows" },
            ParamInfo { name: "switch_us", kind: "float", default: "0", doc: "global switch cost, µs (assumption G-S003-3)" },
            ParamInfo { name: "kind", kind: "str", default: "takeaway", doc: "takeaway | giveaway (S003 §4)" },
            ParamInfo { name: "choice", kind: "str", default: "fixed", doc: "fixed | rr: fixed processor or round robin (S003 §4, Fig. 4)" },
            ParamInfo { name: "proc", kind: "int", default: "1", doc: "rank of job 0 perturbed when choice=fixed" },
            ParamInfo { name: "count", kind: "int", default: "0", doc: "number of perturbations, in batches of four three quanta apart" },
            ParamInfo { name: "span", kind: "int", default: "200", doc: "batch starts drawn over job 0's first `span` slots" },
            ParamInfo { name: "seed", kind: "int", default: "0", doc: "seed of the batch draw" },
        ],
    }
}

pub fn build(spec: &PolicySpec) -> Result<ProcAdmission, RegistryError> {
    spec.expect_only(&[
        "quantum_ms",
        "rows",
        "switch_us",
        "kind",
        "choice",
        "proc",
        "count",
        "span",
        "seed",
    ])?;
    let bad = |param: &str, msg: &str| RegistryError::BadValue {
        policy: spec.name.clone(),
        param: param.into(),
        value: spec.params.get(param).cloned().unwrap_or_default(),
        msg: msg.into(),
    };
    let quantum_ms: f64 = spec.get("quantum_ms", 0.5)?;
    let quantum = SimTime::from_secs_f64(quantum_ms / 1e3);
    if !(quantum_ms.is_finite() && quantum > SimTime::ZERO) {
        return Err(bad("quantum_ms", "must be > 0"));
    }
    let rows: u32 = spec.get("rows", 2)?;
    if rows < 2 {
        return Err(bad(
            "rows",
            "must be at least 2 (job 0 and a competing row)",
        ));
    }
    let switch_us: f64 = spec.get("switch_us", 0.0)?;
    if !(switch_us.is_finite() && switch_us >= 0.0) {
        return Err(bad("switch_us", "must be >= 0"));
    }
    let kind = match spec.get("kind", "takeaway".to_string())?.as_str() {
        "takeaway" => Kind::Takeaway,
        "giveaway" => Kind::Giveaway,
        _ => return Err(bad("kind", "must be \"takeaway\" or \"giveaway\"")),
    };
    let proc: u32 = spec.get("proc", 1)?;
    let choice = match spec.get("choice", "fixed".to_string())?.as_str() {
        "fixed" => Choice::Fixed(proc),
        "rr" => Choice::RoundRobin,
        _ => return Err(bad("choice", "must be \"fixed\" or \"rr\"")),
    };
    let span: u32 = spec.get("span", 200)?;
    if span == 0 {
        return Err(bad("span", "must be at least 1"));
    }
    // As for gang: durations beyond 1e6 s overflowed the run's nanosecond arithmetic.
    for (key, ms) in [("quantum_ms", quantum_ms), ("switch_us", switch_us / 1e3)] {
        if ms > super::gang::MAX_DURATION_MS {
            return Err(bad(key, "must be at most 1e6 s (1e9 ms, 1e12 us)"));
        }
    }
    Ok(ProcAdmission::GangPerturb {
        gang: GangParams {
            quantum,
            rows,
            switch: SimTime::from_secs_f64(switch_us / 1e6),
            alternate: false,
            flex: Default::default(),
        },
        perturb: PerturbParams {
            kind,
            choice,
            count: spec.get("count", 0)?,
            span,
            seed: spec.get("seed", 0)?,
        },
    })
}
