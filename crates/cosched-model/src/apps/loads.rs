//! Seed 002's competing loads (Ghanesh et al., §3.1 and §3.4), one process each,
//! meant to run as background jobs (`ProcJob::background` in the engine,
//! `background = true` in a configuration): they compute until every foreground job
//! has finished, and the engine stops them then.
//!
//! - **cpu-load**: "a synthetic CPU intensive program that uses little memory and has
//!   no communication or I/O" (S002 §3.1); "The load threads need the CPU 100% of the
//!   time" (S002 §3.1). One process that computes forever (1 s bursts, repeated
//!   2^32 - 1 times, i.e. far longer than any run); 1 MB of memory ("little memory";
//!   the size is an assumption).
//! - **mem-load[mb=N]**: "loads that allocated a significant amount of memory and
//!   periodically scanned the entire data space" (S002 §3.4). The same computing
//!   process with a footprint of `mb` MB (default 500, half of the nominal 1 GB of a
//!   `ghanesh` node, S002 §3.4 "nominally 1 Gigabyte"; the sizes of Fig. 3 are not
//!   stated). The scan is the engine's touch rate (gap G-MEM-1): a process sweeps
//!   its footprint once per iteration of its loop, here once per 1 s burst, which
//!   is assumption G-S002-2 (continuous scan). When the load and the applications
//!   do not fit in a node's memory together, they take pages from each other and
//!   fault them back in.

use super::{AppError, AppInfo, SINGLE_CLASS};
use crate::program::{Op, Program};
use std::collections::BTreeMap;

/// The presets of this module.
pub const NAMES: [&str; 2] = ["cpu-load", "mem-load"];
/// Memory of the CPU-hungry load, MB ("little memory"; assumption).
pub const CPU_LOAD_MB: f64 = 1.0;
/// Default footprint of the memory load, MB (assumption, see the module doc).
pub const MEM_LOAD_DEFAULT_MB: f64 = 500.0;
/// Length of one compute burst of a load, ns.
const BURST_NS: i64 = 1_000_000_000;

/// Catalog entries.
pub fn catalog() -> Vec<AppInfo> {
    NAMES
        .iter()
        .map(|&app| {
            let one = |v| BTreeMap::from([(SINGLE_CLASS.to_string(), v)]);
            let (mb, description) = if app == "cpu-load" {
                (CPU_LOAD_MB, "Seed 002 CPU-hungry competing load: one process computing forever with little memory (1 MB); run it as a background job, it stops when the foreground jobs have finished. No parameters.")
            } else {
                (MEM_LOAD_DEFAULT_MB, "Seed 002 memory-scanning competing load: one process computing forever sweeping a footprint of `mb` MB once per second of CPU; run it as a background job. Parameter mb=500.")
            };
            AppInfo {
                name: app.to_string(),
                classes: vec![SINGLE_CLASS.to_string()],
                procs: vec![1],
                procs_rule: "1 process (add one job per load)".to_string(),
                intensity: None,
                memory_mb_at_16: one(mb),
                iterations: BTreeMap::from([(SINGLE_CLASS.to_string(), u32::MAX)]),
                description: description.to_string(),
                source: "seed 002 §3.1, §3.4; docs/models/seed-parameters.md §1.4, G-S002-2".to_string(),
            }
        })
        .collect()
}

/// Builds load `app` (canonical name) with parameters `kv`.
pub fn build(app: &str, kv: Vec<(String, String)>, p: u32) -> Result<Program, AppError> {
    let bad = |msg: String| AppError::BadParams {
        app: app.to_string(),
        class: SINGLE_CLASS,
        msg,
    };
    if p != 1 {
        return Err(AppError::BadProcs {
            app: app.to_string(),
            rule: "1 process (add one job per load)".to_string(),
            valid: "1".to_string(),
            got: p,
        });
    }
    let valid: &[&str] = if app == "cpu-load" { &[] } else { &["mb"] };
    if let Some((k, _)) = kv.iter().find(|(k, _)| !valid.contains(&k.as_str())) {
        return Err(bad(format!(
            "unknown parameter {k:?}; valid parameters: {}",
            if valid.is_empty() {
                "none".to_string()
            } else {
                valid.join(", ")
            }
        )));
    }
    let mb = match kv.iter().find(|(k, _)| k == "mb") {
        None if app == "cpu-load" => CPU_LOAD_MB,
        None => MEM_LOAD_DEFAULT_MB,
        Some((_, v)) => match v.parse::<f64>() {
            Ok(x) if x.is_finite() && x >= 0.0 => x,
            _ => return Err(bad(format!("mb must be a number >= 0, got {v:?}"))),
        },
    };
    let name = if app == "cpu-load" {
        "cpu-load".to_string()
    } else {
        format!("mem-load[mb={mb}]")
    };
    Ok(Program {
        name,
        ranks: vec![vec![
            Op::Loop {
                count: u32::MAX,
                len: 1,
            },
            Op::Compute { ns: BURST_NS },
        ]],
        memory_mb: mb,
        noise_cv: 0.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_build_and_check_their_parameters() {
        let c = build("cpu-load", Vec::new(), 1).unwrap();
        assert_eq!(c.memory_mb, CPU_LOAD_MB);
        // Effectively endless: 2^32 - 1 seconds of compute.
        assert_eq!(
            crate::program::compute_ns(&c.ranks[0]),
            u32::MAX as i64 * BURST_NS
        );
        let m = build("mem-load", vec![("mb".into(), "800".into())], 1).unwrap();
        assert_eq!(m.memory_mb, 800.0);
        assert_eq!(m.name, "mem-load[mb=800]");
        assert_eq!(
            build("mem-load", Vec::new(), 1).unwrap().memory_mb,
            MEM_LOAD_DEFAULT_MB
        );
        assert!(build("cpu-load", vec![("mb".into(), "1".into())], 1)
            .unwrap_err()
            .to_string()
            .contains("unknown parameter \"mb\""));
        assert!(build("mem-load", vec![("mb".into(), "x".into())], 1)
            .unwrap_err()
            .to_string()
            .contains("mb must be a number"));
        assert!(build("cpu-load", Vec::new(), 2)
            .unwrap_err()
            .to_string()
            .contains("got 2"));
    }
}
