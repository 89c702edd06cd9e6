//! Published results the model is compared with: the paper tables the
//! calibration fits to and validates against. The model crate does not depend on
//! this module; it keeps only its inputs (application programs, their fitted
//! parameters in `cosched_model::apps`' `calibration.json`, and the published
//! numbers that are model input, such as seed 000 Table 2's memory per process and
//! S003 Table 2's application profiles), each naming its source.
//!
//! - [`SEED000_TABLE1`]: seed 000 Table 1, the dedicated 16-process run times the
//!   compute per iteration is fitted to (`crate::calibrate`).
//! - [`SEED002_TABLE1`]: seed 002 Table 1, the class B 4-process characteristics
//!   the load imbalance is fitted to (CPU utilization) and checked against
//!   (`crate::calibrate::validate_seed002`).

use cosched_model::apps::SINGLE_CLASS;
use serde::Serialize;

/// One row of seed 000 Table 1: its times. The table's other column, the
/// communication intensity, is an attribute of the application the model uses
/// ([`cosched_model::apps::intensity`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Table1Row {
    pub app: &'static str,
    /// Execution time at 16 processors, seconds, per class; a single-size
    /// application has its time under [`SINGLE_CLASS`].
    pub times: &'static [(char, f64)],
}

/// Seed 000 Table 1 (S001 Table 2), "Execution Time of NAS Benchmarks, sPPM and
/// BlockSolve95 in 16 Processors": the calibration targets of the compute per
/// iteration (`calibration.json`), the ONLY copy of these times in the code
/// (Choi, Kim, Ersoz, Yoo, Das, "Coscheduling in Clusters: Is It a Viable
/// Alternative?", §5.1; docs/models/seed-parameters.md §2.1). FT is not in the
/// table ("we use all programs except FT").
pub const SEED000_TABLE1: [Table1Row; 9] = [
    Table1Row {
        app: "CG",
        times: &[('A', 1.3), ('B', 49.2), ('C', 186.0)],
    },
    Table1Row {
        app: "IS",
        times: &[('A', 1.0), ('B', 2.4), ('C', 10.9)],
    },
    Table1Row {
        app: "SP",
        times: &[('A', 34.5), ('B', 152.5), ('C', 607.1)],
    },
    Table1Row {
        app: "MG",
        times: &[('A', 2.4), ('B', 61.5), ('C', 191.0)],
    },
    Table1Row {
        app: "BT",
        times: &[('A', 53.1), ('B', 435.3), ('C', 995.4)],
    },
    Table1Row {
        app: "LU",
        times: &[('A', 32.2), ('B', 148.7), ('C', 604.9)],
    },
    Table1Row {
        app: "EP",
        times: &[('A', 7.9), ('B', 31.3), ('C', 126.2)],
    },
    Table1Row {
        app: "sPPM",
        times: &[(SINGLE_CLASS, 2726.0)],
    },
    Table1Row {
        app: "BlockSolve95",
        times: &[(SINGLE_CLASS, 941.0)],
    },
];

/// The Table 1 row of `app`, if the table has it.
pub fn table1(app: &str) -> Option<&'static Table1Row> {
    SEED000_TABLE1.iter().find(|r| r.app == app)
}

/// The seed 000 Table 1 time of (app, class) at 16 processes, seconds.
pub fn table1_target(app: &str, class: char) -> Option<f64> {
    table1(app)?
        .times
        .iter()
        .find(|(c, _)| *c == class)
        .map(|&(_, t)| t)
}

/// One row of seed 002 Table 1: a NAS kernel, class B, 4 processes alone on 4
/// nodes of the seed 002 cluster (measured with Vampir and CPU probes, S002 §3.2).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Seed002Row {
    pub app: &'static str,
    /// Execution time, s.
    pub exec_s: f64,
    /// Messages dispatched per node per second.
    pub msgs_per_s: f64,
    /// Data dispatched per node, KB/s.
    pub kb_per_s: f64,
    /// Average CPU utilization, %.
    pub cpu_pct: f64,
    /// Memory utilization, MB.
    pub memory_mb: f64,
}

/// Seed 002 Table 1, "Execution characteristics of the NAS benchmarks: 4 threads
/// run on 4 nodes" (Ghanesh, Kumar, Subhlok, "Empirical Evaluation of Shared
/// Parallel Execution on Independently Scheduled Clusters", §3.2; class B, §3;
/// docs/models/seed-parameters.md §2.4): the second, looser target of the NAS
/// presets (`cosched::calibrate::validate_seed002`), the ONLY copy of these numbers
/// in the Rust code. BT is not in the table.
pub const SEED002_TABLE1: [Seed002Row; 6] = [
    Seed002Row {
        app: "CG",
        exec_s: 417.2,
        msgs_per_s: 19.1,
        kb_per_s: 2700.0,
        cpu_pct: 59.4,
        memory_mb: 110.0,
    },
    Seed002Row {
        app: "EP",
        exec_s: 228.6,
        msgs_per_s: 0.0,
        kb_per_s: 0.0,
        cpu_pct: 99.5,
        memory_mb: 0.0,
    },
    Seed002Row {
        app: "IS",
        exec_s: 81.2,
        msgs_per_s: 1.3,
        kb_per_s: 4333.0,
        cpu_pct: 42.3,
        memory_mb: 121.0,
    },
    Seed002Row {
        app: "LU",
        exec_s: 511.7,
        msgs_per_s: 98.8,
        kb_per_s: 577.0,
        cpu_pct: 91.6,
        memory_mb: 50.0,
    },
    Seed002Row {
        app: "MG",
        exec_s: 37.0,
        msgs_per_s: 89.3,
        kb_per_s: 3020.0,
        cpu_pct: 69.0,
        memory_mb: 114.0,
    },
    Seed002Row {
        app: "SP",
        exec_s: 881.3,
        msgs_per_s: 5.4,
        kb_per_s: 1343.0,
        cpu_pct: 77.2,
        memory_mb: 90.0,
    },
];

/// The seed 002 Table 1 row of `app`, if the table has it.
pub fn seed002_row(app: &str) -> Option<&'static Seed002Row> {
    SEED002_TABLE1.iter().find(|r| r.app == app)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_model::apps;

    #[test]
    fn lookups_return_the_printed_numbers() {
        // Seed 000 Table 1 prints CG class B at 49.2 s and sPPM (one size) at
        // 2726 s; FT is not in the table, and CG has no single-size entry.
        assert_eq!(table1_target("CG", 'B'), Some(49.2));
        assert_eq!(table1_target("sPPM", SINGLE_CLASS), Some(2726.0));
        assert_eq!(table1_target("FT", 'A'), None);
        assert_eq!(table1_target("CG", SINGLE_CLASS), None);
        // Seed 002 Table 1 prints EP at 228.6 s and 99.5% CPU; BT has no row.
        let ep = seed002_row("EP").unwrap();
        assert_eq!((ep.exec_s, ep.cpu_pct), (228.6, 99.5));
        assert!(seed002_row("BT").is_none());
    }

    #[test]
    fn every_table_row_names_a_preset_and_its_classes() {
        let catalog = apps::catalog();
        for row in SEED000_TABLE1 {
            let info = catalog.iter().find(|a| a.name == row.app).unwrap();
            for (class, _) in row.times {
                assert!(
                    info.classes.contains(&class.to_string()),
                    "{} {class}",
                    row.app
                );
            }
            // Table 1 labels every app it times.
            assert!(apps::intensity(row.app).is_some(), "{}", row.app);
        }
        for row in SEED002_TABLE1 {
            assert!(apps::NAS_APPS.contains(&row.app), "{}", row.app);
        }
    }
}
