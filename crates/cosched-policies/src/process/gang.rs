//! Gang scheduling, SCore-D like (seed 000 §2.2, §5; seed 001 §5.2).
//!
//! Algorithm (run by `cosched_engine::process::gang`): an Ousterhout matrix
//! whose rows are time slots and whose columns are the nodes. A job of P
//! processes is placed in the first row with P free cells (on P distinct nodes;
//! PACKING by default, the configuration's `placement = "random"` draws the
//! nodes among the row's free cells); when no row has room the job waits, and
//! later jobs wait behind it (FCFS). The number of rows is the MPL. Every
//! `quantum` all CPUs of the machine are taken back, the machine idles for the
//! global synchronization (`switch_us`), then the next non-empty row runs (rows
//! are cycled, empty ones skipped; a row that empties ends its slot at once).
//! Inside a slot a node runs only its process of that row, which spins while it
//! waits (seed 000 §5.2: "nodes spend some spinning time waiting for a message
//! in SCore"); each node pays the platform's context switch when it resumes a
//! different process. With `alternate`, a node with no process in the active
//! row runs a runnable process of another row.
//!
//! Parameters (all defaults are assumption G-SCH-6 of
//! docs/models/seed-parameters.md; the seeds state that the cost exists but
//! give no magnitude):
//! - `quantum_ms` (100): slot length;
//! - `rows` (3): matrix rows = MPL (seed 000 §5.1 runs gang at MPL 3, like the
//!   time-sharing schemes);
//! - `switch_us` (1000): global synchronization per slot switch, every node
//!   idle (seed 001 §5.2: "A gang scheduler like SCore should spend some time to
//!   achieve the global synchronization across all the nodes per every
//!   scheduling quantum");
//! - `alternate` (false): alternate scheduling of other rows' processes.

use super::ProcAdmission;
use crate::registry::{ParamInfo, PolicyInfo, PolicySpec, RegistryError};
use cosched_des::SimTime;
use cosched_engine::process::gang::GangParams;

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "gang",
        level: "process",
        summary: "SCore-D-like gang scheduling: Ousterhout matrix, global slot switches every quantum.",
        params: vec![
            ParamInfo { name: "quantum_ms", kind: "float", default: "100", doc: "slot length, ms (assumption G-SCH-6)" },
            ParamInfo { name: "rows", kind: "int", default: "3", doc: "rows of the matrix = MPL (seed 000 §5.1)" },
            ParamInfo { name: "switch_us", kind: "float", default: "1000", doc: "global synchronization per slot switch, every node idle, µs (assumption G-SCH-6)" },
            ParamInfo { name: "alternate", kind: "bool", default: "false", doc: "a node with no process in the active row may run another row's process" },
        ],
    }
}

pub fn build(spec: &PolicySpec) -> Result<ProcAdmission, RegistryError> {
    spec.expect_only(&["quantum_ms", "rows", "switch_us", "alternate"])?;
    let bad = |param: &str, msg: &str| RegistryError::BadValue {
        policy: spec.name.clone(),
        param: param.into(),
        value: spec.params.get(param).cloned().unwrap_or_default(),
        msg: msg.into(),
    };
    let quantum_ms: f64 = spec.get("quantum_ms", 100.0)?;
    if !(quantum_ms.is_finite() && quantum_ms > 0.0) {
        return Err(bad("quantum_ms", "must be > 0"));
    }
    let rows: u32 = spec.get("rows", 3)?;
    if rows == 0 {
        return Err(bad("rows", "must be at least 1"));
    }
    let switch_us: f64 = spec.get("switch_us", 1000.0)?;
    if !(switch_us.is_finite() && switch_us >= 0.0) {
        return Err(bad("switch_us", "must be >= 0"));
    }
    let quantum = SimTime::from_secs_f64(quantum_ms / 1e3);
    if quantum <= SimTime::ZERO {
        return Err(bad("quantum_ms", "must be > 0"));
    }
    Ok(ProcAdmission::Gang(GangParams {
        quantum,
        rows,
        switch: SimTime::from_secs_f64(switch_us / 1e6),
        alternate: spec.get("alternate", false)?,
    }))
}
