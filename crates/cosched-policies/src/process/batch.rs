//! Batch scheduling, PBS like (seed 000 §5.1: "PACKING is the default
//! configuration in PBS"; MPL "in batch scheduling is always one", seed 000 §5.2).
//!
//! Algorithm: one process per node (MPL 1), jobs in FCFS order, PACKING
//! placement (the configuration's `placement` applies), each job running
//! dedicated on its nodes under the node policy. With `backfill=easy` (or the
//! name `easy`), EASY backfilling (run by `cosched_engine::process::batch`):
//! when the queue head does not fit it gets a reservation at the earliest time
//! enough nodes are free by the running jobs' estimated ends; a later job starts
//! now if it fits and ends by its estimate before that time or uses only nodes
//! the head does not need. Estimates are "perfect": each job's dedicated
//! runtime, obtained by simulating it alone (cached per application, class and
//! process count) on the same platform (seed 000 §5.1 reports PBS with and
//! without backfilling "very close (within 2%)" and gives no estimate rule;
//! assumption G-SCH-8 of docs/models/seed-parameters.md).
//!
//! Parameters: `backfill` (`none` | `easy`, default `none`).

use super::ProcAdmission;
use crate::registry::{ParamInfo, PolicyInfo, PolicySpec, RegistryError};

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "batch",
        level: "process",
        summary: "PBS-like batch: MPL 1, FCFS, PACKING; optional EASY backfilling with perfect estimates.",
        params: vec![ParamInfo {
            name: "backfill",
            kind: "string",
            default: "none",
            doc: "\"none\" or \"easy\" (EASY backfilling, estimates = dedicated runtimes)",
        }],
    }
}

pub fn easy_info() -> PolicyInfo {
    PolicyInfo {
        name: "easy",
        level: "process",
        summary: "Same as batch[backfill=easy].",
        params: Vec::new(),
    }
}

pub fn build(spec: &PolicySpec) -> Result<ProcAdmission, RegistryError> {
    spec.expect_only(&["backfill"])?;
    let backfill: String = spec.get("backfill", "none".to_string())?;
    match backfill.as_str() {
        "none" => Ok(ProcAdmission::Batch { backfill: false }),
        "easy" => Ok(ProcAdmission::Batch { backfill: true }),
        _ => Err(RegistryError::BadValue {
            policy: spec.name.clone(),
            param: "backfill".into(),
            value: backfill,
            msg: "must be \"none\" or \"easy\"".into(),
        }),
    }
}

pub fn build_easy(spec: &PolicySpec) -> Result<ProcAdmission, RegistryError> {
    spec.expect_only(&[])?;
    Ok(ProcAdmission::Batch { backfill: true })
}
