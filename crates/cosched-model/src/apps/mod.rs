//! The application library: named presets that build a [`Program`] for the
//! process-level model.
//!
//! - NAS Parallel Benchmarks kernels CG, IS, SP, MG, BT, LU, EP and FT
//!   ([`nas`]): each generator emits the benchmark's real per-iteration
//!   communication structure (NPB 3.3 MPI source, docs/models/seed-parameters.md
//!   §2.8) with message sizes derived from the class problem size (8-byte doubles,
//!   4-byte keys) and the process grid.
//! - sPPM and BlockSolve95 ([`long`]), the two long-running applications of seed
//!   000 Table 1(b) (gap G-APP-2).
//!
//! Compute time is the one fitted quantity. `calibration.json` (next to this
//! file, embedded at compile time) holds, for every (app, class), the CPU time
//! of ONE process for ONE iteration at 16 processes, fitted by
//! `cosched::calibrate` to DEDICATED 16-process runs on the `choi2004` platform
//! (NLS, MPL 1) so that the run time equals seed 000 Table 1
//! (`cosched::validation::SEED000_TABLE1`). At P processes a process computes that × 16 / P per
//! iteration: perfect strong scaling of the computation (gap G-APP-1, an
//! assumption: the seeds give no time at 4, 8 or 9 processes); the communication
//! at P processes follows from the pattern and the grid.
//!
//! Memory per process ([`memory_mb`]) is seed 000 Table 2 where it gives the
//! (app, class C, P) combination, else the G-MEM-2 rule: total(app, class) / P +
//! a per-process constant.
//!
//! Load imbalance across ranks is the second fitted quantity
//! ([`imbalance_factor`], `imbalance_ppm` in the table): rank compute spread
//! linearly from (1 - δ) c to (1 + δ) c, mean c. It is fitted jointly with the
//! compute (`cosched::calibrate`) so that class B at 4 processes on seed 002's
//! cluster model (`ghanesh`) is busy as long as seed 002 Table 1 measured
//! (`cosched::validation::SEED002_TABLE1`, CPU utilization); it is 0 for applications without a seed
//! 002 row (BT, FT, sPPM, BlockSolve95). It stands for every wait the modelled
//! network does not produce (seed 002 §2: the CPU is idle "because of
//! communication, I/O, user interactions, or inherent load imbalance"). No
//! per-iteration noise is added.
//!
//! Besides: seed 003's synthetic applications, real-application profiles and
//! I/O-bound job ([`lee`]: `Emp`, `Barrier`, `Workpile`, `Msg`, `lee-Enum`,
//! `lee-Water`, `lee-LU`, `lee-Barnes`, `io-bound`) and seed 002's competing loads
//! ([`loads`]: `cpu-load`, `mem-load`). These take parameters in the name,
//! `name[key=value,...]` (e.g. `Workpile[unit=2.4]`), have the single class `-`, and
//! are not calibrated (their numbers come from the seeds, see each module).

pub mod lee;
pub mod loads;
pub mod long;
pub mod nas;

use crate::program::{Op, Program};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::OnceLock;
use thiserror::Error;

/// The NAS kernels, in seed 000 Table 1 order, then FT.
pub const NAS_APPS: [&str; 8] = ["CG", "IS", "SP", "MG", "BT", "LU", "EP", "FT"];
/// The long-running applications of seed 000 Table 1(b).
pub const LONG_APPS: [&str; 2] = ["sPPM", "BlockSolve95"];
/// NAS problem classes modelled.
pub const CLASSES: [char; 3] = ['A', 'B', 'C'];
/// The class of an application with a single problem size (sPPM, BlockSolve95).
pub const SINGLE_CLASS: char = '-';

/// Communication intensity labels of seed 000 Table 1 (ordered: `VeryLow < Low < Medium < High`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Intensity {
    VeryLow,
    Low,
    Medium,
    High,
}

impl Intensity {
    pub fn label(self) -> &'static str {
        match self {
            Intensity::VeryLow => "Very low",
            Intensity::Low => "Low",
            Intensity::Medium => "Medium",
            Intensity::High => "High",
        }
    }
}

/// The communication intensity of `app` as seed 000 Table 1 labels it (its
/// "Communication Intensity" column; Choi et al., §5.1): the class the catalog
/// shows and the job-level interference model uses. `None` for an application
/// the table does not label (FT). Table 1's times, the calibration targets, are
/// not model input: they live with the other published numbers the model is
/// compared with, in `cosched::validation`.
pub fn intensity(app: &str) -> Option<Intensity> {
    match app {
        "CG" | "IS" => Some(Intensity::High),
        "SP" | "MG" | "BlockSolve95" => Some(Intensity::Medium),
        "BT" | "LU" | "sPPM" => Some(Intensity::Low),
        "EP" => Some(Intensity::VeryLow),
        _ => None,
    }
}

/// A catalog entry.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AppInfo {
    pub name: String,
    /// Problem classes (`"-"` for a single-size application).
    pub classes: Vec<String>,
    /// Allowed process counts.
    pub procs: Vec<u32>,
    /// The process-count rule, e.g. "a square number of processes".
    pub procs_rule: String,
    /// Seed 000 Table 1 communication intensity, if the table labels the app.
    pub intensity: Option<String>,
    /// Memory per process at 16 processes, MB, per class.
    pub memory_mb_at_16: BTreeMap<String, f64>,
    /// Iterations of the main loop per class (including one untimed warm-up
    /// iteration where the benchmark runs one).
    pub iterations: BTreeMap<String, u32>,
    pub description: String,
    pub source: String,
}

/// Why a preset cannot be built.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum AppError {
    #[error("unknown application {name:?}; valid applications: {valid}")]
    UnknownApp { name: String, valid: String },
    #[error("app {app} has no class {class:?}; valid classes: {valid}")]
    BadClass {
        app: String,
        class: char,
        valid: String,
    },
    #[error("app {app} needs {rule} ({valid}), got {got}")]
    BadProcs {
        app: String,
        rule: String,
        valid: String,
        got: u32,
    },
    #[error("app {app} class {class}: no entry in apps/calibration.json; regenerate it with `cargo run --release -p cosched --example calibrate -- --write`")]
    Uncalibrated { app: String, class: char },
    #[error("apps/calibration.json is unreadable: {0}")]
    Calibration(String),
    #[error("app {app} class {class}: invalid parameters: {msg}")]
    BadParams {
        app: String,
        class: char,
        msg: String,
    },
}

/// The fitted parameters of one (app, class).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppParams {
    /// CPU time of one process for one iteration at 16 processes, ns; fitted so
    /// that the dedicated 16-process run lasts seed 000 Table 1's time
    /// (`cosched::validation::SEED000_TABLE1`).
    pub compute_ns_per_iter: i64,
    /// Long applications only: halo bytes per unit of face area (see [`long`]).
    pub halo_bytes: u64,
    /// Load imbalance across ranks, parts per million (see [`imbalance_factor`]):
    /// 0 is every rank computing the same; fitted to seed 002 Table 1's CPU
    /// utilization (`cosched::validation::SEED002_TABLE1`).
    pub imbalance_ppm: u32,
}

/// Largest accepted [`AppParams::imbalance_ppm`] (rank 0 keeps 5% of the mean).
pub const MAX_IMBALANCE_PPM: u32 = 950_000;

/// The compute factor of rank `r` of `p` at load imbalance `imbalance_ppm` (δ =
/// ppm / 10^6): a linear spread 1 + δ (2r / (p - 1) - 1), from 1 - δ on rank 0 to
/// 1 + δ on the last rank, mean exactly 1 (so the mean compute per iteration stays
/// the calibrated `c`). One process has factor 1. The same relative spread at every
/// process count and class (assumption of the joint calibration, `cosched::calibrate`):
/// a bulk-synchronous iteration then lasts about (1 + δ) c, and a process is busy
/// about 1 / (1 + δ) of the time it does not spend in transfers.
pub fn imbalance_factor(r: u32, p: u32, imbalance_ppm: u32) -> f64 {
    if p <= 1 {
        return 1.0;
    }
    let d = imbalance_ppm as f64 / 1e6;
    1.0 + d * (2.0 * r as f64 / (p - 1) as f64 - 1.0)
}

/// One entry of the calibration table. Fields are in alphabetical order so that
/// the written JSON is sorted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalEntry {
    /// True when the target could not be reached (the communication alone takes
    /// longer than the target) and the compute was clamped at 0.
    pub clamped: bool,
    /// The fitted constant: CPU time per process per iteration at 16 processes, ns.
    pub compute_ns_per_iter: i64,
    /// Dedicated 16-process run time with the fitted constants, s.
    pub fitted_s: f64,
    /// Long applications: the fitted halo bytes per unit face area (0 otherwise).
    #[serde(default)]
    pub halo_bytes: u64,
    /// The fitted load imbalance across ranks, parts per million
    /// ([`imbalance_factor`]); 0 where seed 002 Table 1 has no row for the app.
    #[serde(default)]
    pub imbalance_ppm: u32,
    /// Where the constant comes from.
    pub source: String,
    /// Dedicated 16-process run time with the solved parameter at 0, s: for a
    /// NAS kernel no compute at all (its communication alone); for sPPM and
    /// BlockSolve95 no halo bytes (compute, latencies and allreduces).
    pub t0_s: f64,
    /// The seed 000 Table 1 time, s (none for FT).
    pub target_s: Option<f64>,
}

/// The calibration table (`apps/calibration.json`). Fields in alphabetical order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// app -> class -> entry.
    pub apps: BTreeMap<String, BTreeMap<String, CalEntry>>,
    /// Seconds of job launch subtracted from the Table 1 time (gap G-APP-5).
    pub launch_allowance_s: f64,
    /// How the constants were fitted.
    pub method: String,
    /// Platform preset of the dedicated runs.
    pub platform: String,
    /// Node policy of the dedicated runs.
    pub policy: String,
    /// Process count of the dedicated runs.
    pub procs: u32,
    /// The table the fit targets.
    pub target: String,
}

impl Calibration {
    /// The parameters of (app, class), if present.
    pub fn params(&self, app: &str, class: char) -> Option<AppParams> {
        let e = self.apps.get(app)?.get(&class.to_string())?;
        Some(AppParams {
            compute_ns_per_iter: e.compute_ns_per_iter,
            halo_bytes: e.halo_bytes,
            imbalance_ppm: e.imbalance_ppm,
        })
    }
}

const CALIBRATION_JSON: &str = include_str!("calibration.json");

/// The committed calibration table, parsed once.
pub fn calibration() -> Result<&'static Calibration, AppError> {
    static CAL: OnceLock<Result<Calibration, String>> = OnceLock::new();
    CAL.get_or_init(|| serde_json::from_str(CALIBRATION_JSON).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| AppError::Calibration(e.clone()))
}

// ---------------------------------------------------------------------------
// Names, classes, process counts

/// Canonical name of a NAS or long application (names match case-insensitively).
pub fn canonical(name: &str) -> Result<&'static str, AppError> {
    NAS_APPS
        .iter()
        .chain(LONG_APPS.iter())
        .find(|n| n.eq_ignore_ascii_case(name.trim()))
        .copied()
        .ok_or_else(|| AppError::UnknownApp {
            name: name.to_string(),
            valid: all_names().join(", "),
        })
}

/// Every preset name, in catalog order.
pub fn all_names() -> Vec<&'static str> {
    NAS_APPS
        .iter()
        .chain(LONG_APPS.iter())
        .chain(lee::NAMES.iter())
        .chain(loads::NAMES.iter())
        .copied()
        .collect()
}

/// `key=value` parameters of a preset name, in order.
pub type ParamList = Vec<(String, String)>;

/// Which module builds a parameterized preset.
#[derive(Clone, Copy)]
enum Family {
    Lee,
    Loads,
}

/// A seed 003 or seed 002 preset: its canonical name, family and parameters.
fn parameterized(
    name: &str,
    class: char,
) -> Result<Option<(&'static str, Family, ParamList)>, AppError> {
    let crate::spec::Spec {
        name: base,
        params: kv,
    } = match crate::spec::parse(name) {
        Ok(spec) => spec,
        Err(e) if name.contains('[') => {
            return Err(AppError::BadParams {
                app: name.to_string(),
                class,
                msg: e.to_string(),
            })
        }
        // Not a preset with parameters: looked up as a plain name (unknown names list the valid ones).
        Err(_) => return Ok(None),
    };
    let base = base.as_str();
    let found = lee::NAMES
        .iter()
        .map(|&n| (n, Family::Lee))
        .chain(loads::NAMES.iter().map(|&n| (n, Family::Loads)))
        .find(|(n, _)| n.eq_ignore_ascii_case(base));
    match found {
        Some((app, family)) => Ok(Some((app, family, kv))),
        None if kv.is_empty() => Ok(None),
        None => {
            let app = canonical(base)?;
            Err(AppError::BadParams {
                app: app.to_string(),
                class,
                msg: "this application takes no parameters".to_string(),
            })
        }
    }
}

/// Builds a seed 003 or seed 002 preset, or `None` for a NAS or long application.
fn build_parameterized(name: &str, class: char, p: u32) -> Option<Result<Program, AppError>> {
    let (app, family, kv) = match parameterized(name, class) {
        Ok(Some(x)) => x,
        Ok(None) => return None,
        Err(e) => return Some(Err(e)),
    };
    if class != SINGLE_CLASS {
        return Some(Err(AppError::BadClass {
            app: app.to_string(),
            class,
            valid: SINGLE_CLASS.to_string(),
        }));
    }
    Some(match family {
        Family::Lee => lee::build(app, kv, p),
        Family::Loads => loads::build(app, kv, p),
    })
}

fn is_nas(app: &str) -> bool {
    NAS_APPS.contains(&app)
}

/// Classes of a canonical app name.
pub fn classes(app: &str) -> Vec<char> {
    if is_nas(app) {
        CLASSES.to_vec()
    } else {
        vec![SINGLE_CLASS]
    }
}

/// Allowed process counts of a canonical app name and the rule behind them.
///
/// docs/models/seed-parameters.md §2.3: SP and BT need a square count (NPB
/// `setparams.c`), CG, FT, IS and MG a power of two; LU is a power of two in
/// NPB 2.x and EP takes any count, both modelled at {4, 8, 16} (the counts the
/// seed draws from, S000 §5.1: "4, 8, 9 or 16 as per the NAS application
/// requirements"). sPPM and BlockSolve95: the seeds state only 16; {4, 8, 16} is
/// an assumption (G-APP-2).
pub fn procs(app: &str) -> (&'static [u32], &'static str) {
    match app {
        "SP" | "BT" => (&[4, 9, 16], "a square number of processes"),
        "sPPM" | "BlockSolve95" => (&[4, 8, 16], "4, 8 or 16 processes"),
        _ => (&[4, 8, 16], "a power-of-two number of processes"),
    }
}

fn list<T: ToString>(v: &[T]) -> String {
    v.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
}

/// Checks (name, class, procs) and returns the canonical name and upper-case class.
pub fn check(name: &str, class: char, procs_: u32) -> Result<(&'static str, char), AppError> {
    let app = canonical(name)?;
    let class = class.to_ascii_uppercase();
    let valid = classes(app);
    if !valid.contains(&class) {
        return Err(AppError::BadClass {
            app: app.to_string(),
            class,
            valid: list(&valid),
        });
    }
    let (counts, rule) = procs(app);
    if !counts.contains(&procs_) {
        return Err(AppError::BadProcs {
            app: app.to_string(),
            rule: rule.to_string(),
            valid: list(counts),
            got: procs_,
        });
    }
    Ok((app, class))
}

// ---------------------------------------------------------------------------
// Memory

/// Seed 000 Table 2 (S001 Table 3), "Maximum Memory Requirements of NAS Benchmarks
/// (CLASS=C)": (app, processes, MB per process).
pub const SEED000_TABLE2: [(&str, u32, f64); 10] = [
    ("SP", 4, 354.0),
    ("SP", 9, 176.0),
    ("SP", 16, 111.0),
    ("BT", 9, 473.0),
    ("BT", 16, 272.0),
    ("MG", 8, 456.0),
    ("MG", 16, 228.0),
    ("IS", 4, 428.0),
    ("IS", 8, 214.0),
    ("IS", 16, 107.0),
];

/// Memory rule of gap G-MEM-2 (docs/models/seed-parameters.md §5): per process =
/// `total / P + per_process`, MB. Returns (total, per_process) and the source.
fn memory_rule(app: &str, class: char) -> (f64, f64) {
    // Per-process constants from the S000 T2 fits (§2.2): SP (1776 - 1416) / 12 = 30 MB,
    // BT (4352 - 4257) / 7 = 13.6 MB; 0 for the others.
    const SP_CONST: f64 = 30.0;
    const BT_CONST: f64 = 13.6;
    // Class B per-node memory on 4 nodes, seed 002 Table 1 ("memory utilization (MB)").
    let s002_b = |mb: f64, k: f64| (mb - k) * 4.0;
    match (app, class) {
        // SP: C from T2 at 4 processes; B from S002 T1 (90 MB); A = B / 4 (NPB size ratio).
        ("SP", 'C') => ((354.0 - SP_CONST) * 4.0, SP_CONST),
        ("SP", 'B') => (s002_b(90.0, SP_CONST), SP_CONST),
        ("SP", _) => (s002_b(90.0, SP_CONST) / 4.0, SP_CONST),
        // BT: C from T2 at 16 processes; B = C / 4, A = B / 4 (NPB size ratios; not in S002 T1).
        ("BT", 'C') => ((272.0 - BT_CONST) * 16.0, BT_CONST),
        ("BT", 'B') => ((272.0 - BT_CONST) * 16.0 / 4.0, BT_CONST),
        ("BT", _) => ((272.0 - BT_CONST) * 16.0 / 16.0, BT_CONST),
        // MG: C from T2 (3648 MB total); B from S002 T1 (114 MB); A = B (same 256^3 grid).
        ("MG", 'C') => (228.0 * 16.0, 0.0),
        ("MG", _) => (s002_b(114.0, 0.0), 0.0),
        // IS: C from T2 (1712 MB total); B from S002 T1 (121 MB); A = B / 4 (keys 4x).
        ("IS", 'C') => (107.0 * 16.0, 0.0),
        ("IS", 'B') => (s002_b(121.0, 0.0), 0.0),
        ("IS", _) => (s002_b(121.0, 0.0) / 4.0, 0.0),
        // CG: B from S002 T1 (110 MB); C = 2.61 x B, A = B / 7.3 (nonzero ratios, §2.1).
        ("CG", 'C') => (s002_b(110.0, 0.0) * 2.61, 0.0),
        ("CG", 'B') => (s002_b(110.0, 0.0), 0.0),
        ("CG", _) => (s002_b(110.0, 0.0) / 7.3, 0.0),
        // LU: B from S002 T1 (50 MB); C = 4 x B, A = B / 4 (NPB size ratios).
        ("LU", 'C') => (s002_b(50.0, 0.0) * 4.0, 0.0),
        ("LU", 'B') => (s002_b(50.0, 0.0), 0.0),
        ("LU", _) => (s002_b(50.0, 0.0) / 4.0, 0.0),
        // EP: 10 MB per process (assumption G-MEM-2: code + MPI buffers; S002 T1 prints 0).
        ("EP", _) => (0.0, 10.0),
        // FT (assumption, not in any seed): NPB 3.3 ft.f keeps three complex arrays
        // (u0, u1, u2, 16 bytes per point) and a real twiddle array (8 bytes): 56 bytes
        // per grid point.
        ("FT", c) => (nas::ft_points(c) as f64 * 56.0 / 1e6, 0.0),
        // sPPM, BlockSolve95: not stated in the seeds; assumption 100 MB per process
        // (1600 MB in all at 16 processes), well inside the 900 MB per node; the
        // per-process block is fixed (weak scaling, `long.rs`), so is its memory.
        _ => (0.0, 100.0),
    }
}

/// Resident memory per process, MB, of (app, class) at `procs` processes: seed 000
/// Table 2 where it has the combination, else the G-MEM-2 rule.
pub fn memory_mb(name: &str, class: char, procs_: u32) -> Result<f64, AppError> {
    if let Some(prog) = build_parameterized(name, class, procs_) {
        return prog.map(|p| p.memory_mb);
    }
    let (app, class) = check(name, class, procs_)?;
    Ok(memory_of(app, class, procs_))
}

fn memory_of(app: &str, class: char, p: u32) -> f64 {
    if class == 'C' {
        if let Some(&(_, _, mb)) = SEED000_TABLE2.iter().find(|(a, n, _)| *a == app && *n == p) {
            return mb;
        }
    }
    let (total, per) = memory_rule(app, class);
    total / p as f64 + per
}

// ---------------------------------------------------------------------------
// Catalog and building

/// Iterations of the main loop of (app, class), including the warm-up iteration
/// the benchmark runs untimed (seed 000 Table 1 is taken as whole-job time, G-APP-5).
pub fn iterations(app: &str, class: char) -> u32 {
    if is_nas(app) {
        nas::iterations(app, class)
    } else {
        long::iterations(app)
    }
}

fn describe(app: &str) -> (&'static str, &'static str) {
    match app {
        "CG" => (
            "Conjugate gradient: sparse mat-vec on a 2D process grid; per inner iteration log2(npcols) row reductions, a transpose exchange and two dot-product reductions; 25 inner iterations per outer.",
            "NPB 3.3 MPI CG/cg.f (conj_grad, setup_submatrix_info); sizes NPB setparams.c",
        ),
        "IS" => (
            "Integer sort: per iteration an allreduce of bucket counts, an alltoall of send counts and an alltoall(v) of the keys.",
            "NPB 3.3 MPI IS/is.c (rank, full_verify)",
        ),
        "SP" => (
            "Scalar pentadiagonal ADI: multi-partition over sqrt(P) x sqrt(P) cells; copy_faces (6 face exchanges) then pipelined x, y, z solves (forward and back).",
            "NPB 3.3 MPI SP/copy_faces.f, x_solve.f, make_set.f",
        ),
        "MG" => (
            "Multigrid V-cycle on a 3D block decomposition: 3-axis halo exchanges after every operator at every level, allreduce norms.",
            "NPB 3.3 MPI MG/mg.f (mg3P, comm3, setup, norm2u3)",
        ),
        "BT" => (
            "Block tridiagonal ADI: multi-partition like SP with 5x5 block messages in the pipelined solves.",
            "NPB 3.3 MPI BT/copy_faces.f, x_solve.f (x_send_solve_info, x_send_backsub_info)",
        ),
        "LU" => (
            "SSOR: pipelined wavefront over the k-planes on a 2D grid (small messages to and from the grid neighbours) plus a 2-deep halo exchange per iteration.",
            "NPB 3.3 MPI LU/ssor.f, exchange_1.f, exchange_3.f, proc_grid.f",
        ),
        "EP" => (
            "Embarrassingly parallel: all compute, then 4 small allreduces.",
            "NPB 3.3 MPI EP/ep.f",
        ),
        "FT" => (
            "3D FFT: per iteration a local evolve and an inverse FFT with one global transpose (alltoall, 1D layout) and a checksum reduce. Not in the seeds' workloads; compute from the NPB operation count (no seed time).",
            "NPB 3.3 MPI FT/ft.f (fft, transpose_global, checksum, operation count)",
        ),
        "sPPM" => (
            "3D gas dynamics on a uniform mesh (stand-in): per step a 6-face halo exchange, compute and a time-step allreduce; low communication (95% compute).",
            "seed 000 Table 1(b) and §5.1; structure assumed (gap G-APP-2)",
        ),
        _ => (
            "Sparse linear solver (stand-in): CG-like iterations with a neighbour exchange and 2 allreduces; medium communication (80% compute).",
            "seed 000 Table 1(b) and §5.1; structure assumed (gap G-APP-2)",
        ),
    }
}

/// Every application preset.
pub fn catalog() -> Vec<AppInfo> {
    NAS_APPS
        .iter()
        .chain(LONG_APPS.iter())
        .map(|&app| {
            let (counts, rule) = procs(app);
            let (description, source) = describe(app);
            let cls = classes(app);
            AppInfo {
                name: app.to_string(),
                classes: cls.iter().map(char::to_string).collect(),
                procs: counts.to_vec(),
                procs_rule: rule.to_string(),
                intensity: intensity(app).map(|i| i.label().to_string()),
                memory_mb_at_16: cls
                    .iter()
                    .map(|&c| (c.to_string(), memory_of(app, c, 16)))
                    .collect(),
                iterations: cls
                    .iter()
                    .map(|&c| (c.to_string(), iterations(app, c)))
                    .collect(),
                description: description.to_string(),
                source: source.to_string(),
            }
        })
        .chain(lee::catalog())
        .chain(loads::catalog())
        .collect()
}

/// Builds (app, class) at `procs` processes with the committed calibration.
///
/// Errors name the valid applications, classes or process counts, e.g.
/// `app SP needs a square number of processes (4, 9, 16), got 8`.
///
/// Seed 003 and seed 002 presets take their parameters in the name
/// (`Workpile[unit=2.4]`) and the class `-`.
pub fn build(name: &str, class: char, procs_: u32) -> Result<Program, AppError> {
    if let Some(prog) = build_parameterized(name, class, procs_) {
        return prog;
    }
    let (app, class) = check(name, class, procs_)?;
    let params = calibration()?
        .params(app, class)
        .ok_or_else(|| AppError::Uncalibrated {
            app: app.to_string(),
            class,
        })?;
    build_with(app, class, procs_, &params)
}

/// Builds (app, class) at `procs` processes with explicit parameters (used by the
/// calibration fit).
pub fn build_with(
    name: &str,
    class: char,
    procs_: u32,
    params: &AppParams,
) -> Result<Program, AppError> {
    let (app, class) = check(name, class, procs_)?;
    if params.compute_ns_per_iter < 0 {
        return Err(AppError::BadParams {
            app: app.to_string(),
            class,
            msg: format!(
                "compute_ns_per_iter must be >= 0, got {}",
                params.compute_ns_per_iter
            ),
        });
    }
    if params.imbalance_ppm > MAX_IMBALANCE_PPM {
        return Err(AppError::BadParams {
            app: app.to_string(),
            class,
            msg: format!(
                "imbalance_ppm must be <= {MAX_IMBALANCE_PPM}, got {}",
                params.imbalance_ppm
            ),
        });
    }
    // NAS: strong scaling of the computation (G-APP-1): per-process compute at P
    // processes = (compute at 16) x 16 / P. sPPM, BlockSolve95: the problem size
    // grows with P (weak scaling, `long.rs`): per-process compute as at 16.
    let c = if is_nas(app) {
        params.compute_ns_per_iter as f64 * 16.0 / procs_ as f64
    } else {
        params.compute_ns_per_iter as f64
    };
    let b = if is_nas(app) {
        nas::build(app, class, procs_, c)
    } else {
        long::build(app, procs_, c, params.halo_bytes)
    };
    let name = if is_nas(app) {
        format!("{app}.{class}.{procs_}")
    } else {
        format!("{app}.{procs_}")
    };
    let mut prog = b.build(&name, memory_of(app, class, procs_));
    if params.imbalance_ppm > 0 {
        for (r, ops) in prog.ranks.iter_mut().enumerate() {
            let f = imbalance_factor(r as u32, procs_, params.imbalance_ppm);
            for op in ops.iter_mut() {
                if let Op::Compute { ns } = op {
                    *ns = (*ns as f64 * f).round() as i64;
                }
            }
        }
    }
    Ok(prog)
}

// ---------------------------------------------------------------------------
// Helpers shared by the generators

/// A compute operation of `ns` (rounded to the nearest nanosecond); none if 0.
pub(crate) fn compute(ns: f64) -> Vec<Op> {
    let ns = ns.round() as i64;
    if ns > 0 {
        vec![Op::Compute { ns }]
    } else {
        Vec::new()
    }
}

/// Total compute time of a rank's operation list, ns (loops counted, not expanded).
pub use crate::program::compute_ns;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{flatten, Rank};
    use std::collections::HashMap;

    /// Every send has exactly one matching receive (same pair, same tag), after
    /// expanding loops; returns the number of messages.
    fn matched(p: &Program) -> usize {
        let mut balance: HashMap<(Rank, Rank, u32), i64> = HashMap::new();
        let mut sends = 0;
        for (r, ops) in p.ranks.iter().enumerate() {
            for op in flatten(ops) {
                match op {
                    Op::Send { to, tag, .. } | Op::Isend { to, tag, .. } => {
                        assert_ne!(to, r as Rank, "{}: rank {r} sends to itself", p.name);
                        assert!(to < p.size(), "{}: rank {r} sends to {to}", p.name);
                        *balance.entry((r as Rank, to, tag)).or_default() += 1;
                        sends += 1;
                    }
                    Op::Recv { from: Some(f), tag } | Op::Irecv { from: Some(f), tag } => {
                        *balance.entry((f, r as Rank, tag)).or_default() -= 1
                    }
                    Op::Recv { from: None, .. } | Op::Irecv { from: None, .. } => {
                        panic!("{}: wildcard receive", p.name)
                    }
                    _ => {}
                }
            }
        }
        let bad: Vec<_> = balance.iter().filter(|(_, &v)| v != 0).collect();
        assert!(bad.is_empty(), "unmatched messages in {}: {bad:?}", p.name);
        sends
    }

    /// The NAS and long applications (the calibrated presets).
    fn calibrated_catalog() -> Vec<AppInfo> {
        catalog()
            .into_iter()
            .filter(|i| canonical(&i.name).is_ok())
            .collect()
    }

    fn params(c: i64) -> AppParams {
        AppParams {
            compute_ns_per_iter: c,
            halo_bytes: 4096,
            imbalance_ppm: 0,
        }
    }

    #[test]
    fn every_send_has_a_receive_for_every_app_and_count() {
        // Class A everywhere (small enough to expand); B and C only change sizes
        // and counts of the same loops, checked for LU, MG and CG below.
        for info in calibrated_catalog() {
            let class = info.classes[0].chars().next().unwrap();
            for &p in &info.procs {
                let prog = build_with(&info.name, class, p, &params(1_000_000)).unwrap();
                assert_eq!(prog.size(), p);
                let n = matched(&prog);
                assert!(n > 0, "{}: no messages", prog.name);
            }
        }
        for (app, class, p) in [
            ("MG", 'C', 16),
            ("CG", 'B', 8),
            ("SP", 'B', 9),
            ("BT", 'C', 4),
        ] {
            matched(&build_with(app, class, p, &params(1_000_000)).unwrap());
        }
    }

    #[test]
    fn imbalance_spreads_rank_compute_linearly_around_the_mean() {
        // δ = 0.3 at 4 ranks: factors 0.7, 0.9, 1.1, 1.3 (mean 1); one rank: 1.
        let f: Vec<f64> = (0..4).map(|r| imbalance_factor(r, 4, 300_000)).collect();
        for (got, want) in f.iter().zip([0.7, 0.9, 1.1, 1.3]) {
            assert!((got - want).abs() < 1e-12, "{f:?}");
        }
        assert_eq!(imbalance_factor(0, 1, 300_000), 1.0);
        // EP at 4 ranks: compute c x 16 / 4 per iteration scaled per rank; the
        // messages are unchanged.
        let flat = build_with("EP", 'A', 4, &params(1_000_000)).unwrap();
        let imb = build_with(
            "EP",
            'A',
            4,
            &AppParams {
                imbalance_ppm: 300_000,
                ..params(1_000_000)
            },
        )
        .unwrap();
        for (r, fr) in f.iter().enumerate() {
            let (a, b) = (compute_ns(&flat.ranks[r]), compute_ns(&imb.ranks[r]));
            assert!(
                (b as f64 - a as f64 * fr).abs() <= 2.0,
                "rank {r}: {a} -> {b}"
            );
            assert_eq!(
                crate::program::bytes_sent(&flat.ranks[r]),
                crate::program::bytes_sent(&imb.ranks[r])
            );
        }
        let too_much = AppParams {
            imbalance_ppm: MAX_IMBALANCE_PPM + 1,
            ..params(1)
        };
        assert!(build_with("CG", 'A', 4, &too_much)
            .unwrap_err()
            .to_string()
            .contains("imbalance_ppm must be <= 950000"));
    }

    #[test]
    fn programs_stay_compact() {
        // A class C LU run has millions of operations per rank once expanded;
        // the loops keep the stored program small.
        let lu = build_with("LU", 'C', 16, &params(2_000_000_000)).unwrap();
        let stored: usize = lu.ranks.iter().map(Vec::len).max().unwrap();
        assert!(stored < 200, "LU C stores {stored} ops per rank");
        for info in calibrated_catalog() {
            for c in &info.classes {
                let class = c.chars().next().unwrap();
                let prog = build_with(&info.name, class, 16, &params(1_000_000)).unwrap();
                let stored: usize = prog.ranks.iter().map(Vec::len).sum();
                assert!(stored < 50_000, "{} stores {stored} ops", prog.name);
            }
        }
    }

    #[test]
    fn long_apps_keep_their_16_process_block_at_every_count() {
        // Weak scaling (long.rs): at 16 processes the grid is 4 x 2 x 2, so a face on
        // axis 0 is 1/(2 x 2) and on axes 1 and 2 is 1/(4 x 2) of the halo bytes. At 4
        // processes (grid 2 x 2 x 1) the faces on axes 0 and 1 keep those sizes; memory
        // per process stays 100 MB.
        let halo = 8000u64;
        let p = AppParams {
            halo_bytes: halo,
            ..params(1_000_000)
        };
        let sizes = |procs: u32| {
            let prog = build_with("sPPM", '-', procs, &p).unwrap();
            let mut s: Vec<u64> = flatten(&prog.ranks[0])
                .iter()
                .filter_map(|o| match o {
                    // (the 8-byte sends are the time-step allreduce's)
                    Op::Isend { bytes, .. } if *bytes > 8 => Some(*bytes),
                    _ => None,
                })
                .collect();
            s.sort_unstable();
            s.dedup();
            (s, prog.memory_mb)
        };
        assert_eq!(sizes(16), (vec![halo / 8, halo / 4], 100.0));
        assert_eq!(sizes(4), (vec![halo / 8, halo / 4], 100.0));
        assert_eq!(sizes(8).1, 100.0);
    }

    #[test]
    fn compute_scales_as_16_over_p_and_totals_the_iterations() {
        // NAS kernels: strong scaling (16 / P); sPPM and BlockSolve95: weak scaling
        // (the problem grows with P, each process computes as at 16: ratio 1).
        for info in calibrated_catalog() {
            let class = info.classes[0].chars().next().unwrap();
            let c16 = 3_000_000_000i64;
            let at = |p: u32| {
                let prog = build_with(&info.name, class, p, &params(c16)).unwrap();
                let per_rank: Vec<i64> = prog.ranks.iter().map(|r| compute_ns(r)).collect();
                // No imbalance: every rank computes the same (up to ns rounding).
                let (lo, hi) = (
                    per_rank.iter().min().unwrap(),
                    per_rank.iter().max().unwrap(),
                );
                assert!(hi - lo <= 1000, "{}: ranks differ: {lo} vs {hi}", prog.name);
                *hi as f64
            };
            let n = iterations(&info.name, class) as f64;
            let t16 = at(16);
            // Per iteration c16, plus at most one extra iteration of prologue work
            // (LU's first rhs, FT's setup, MG's first resid).
            assert!(
                t16 >= n * c16 as f64 * 0.999 && t16 <= (n + 3.0) * c16 as f64,
                "{}: compute {t16} for {n} iterations",
                info.name
            );
            for &p in &info.procs {
                let ratio = at(p) / t16;
                let want = if is_nas(&info.name) {
                    16.0 / p as f64
                } else {
                    1.0
                };
                assert!((ratio - want).abs() < 1e-6, "{} at {p}: {ratio}", info.name);
            }
        }
        // The loop-aware total agrees with the expanded program.
        let prog = build_with("CG", 'A', 4, &params(26_000)).unwrap();
        let flat: i64 = flatten(&prog.ranks[0])
            .iter()
            .map(|o| if let Op::Compute { ns } = o { *ns } else { 0 })
            .sum();
        assert_eq!(compute_ns(&prog.ranks[0]), flat);
    }

    #[test]
    fn process_counts_follow_the_npb_rules_and_errors_name_the_valid_values() {
        let msg = |r: Result<Program, AppError>| r.unwrap_err().to_string();
        assert_eq!(
            msg(build_with("SP", 'A', 8, &params(1))),
            "app SP needs a square number of processes (4, 9, 16), got 8"
        );
        assert_eq!(
            msg(build_with("bt", 'A', 2, &params(1))),
            "app BT needs a square number of processes (4, 9, 16), got 2"
        );
        assert_eq!(
            msg(build_with("CG", 'A', 9, &params(1))),
            "app CG needs a power-of-two number of processes (4, 8, 16), got 9"
        );
        assert_eq!(
            msg(build_with("CG", 'D', 16, &params(1))),
            "app CG has no class 'D'; valid classes: A, B, C"
        );
        assert_eq!(
            msg(build_with("sPPM", 'A', 16, &params(1))),
            "app sPPM has no class 'A'; valid classes: -"
        );
        assert_eq!(
            msg(build_with("XX", 'A', 16, &params(1))),
            "unknown application \"XX\"; valid applications: CG, IS, SP, MG, BT, LU, EP, FT, sPPM, BlockSolve95, Emp, Barrier, Workpile, Msg, lee-Enum, lee-Water, lee-LU, lee-Barnes, io-bound, cpu-load, mem-load"
        );
        assert!(msg(build_with("EP", 'A', 16, &params(-1))).contains("must be >= 0"));
        for app in ["SP", "BT"] {
            assert_eq!(procs(app).0, &[4, 9, 16]);
        }
        for app in ["CG", "IS", "MG", "LU", "EP", "FT"] {
            assert_eq!(procs(app).0, &[4, 8, 16]);
        }
        // Names and classes match case-insensitively; the program is named NPB-style.
        let p = build_with("cg", 'b', 8, &params(1)).unwrap();
        assert_eq!(p.name, "CG.B.8");
    }

    #[test]
    fn intensity_is_seed_000_table_1s_label() {
        // Seed 000 Table 1 labels CG and IS "High", EP "Very low", sPPM "Low";
        // FT is not in the table; the labels order Very low < Low < Medium < High.
        assert_eq!(intensity("CG"), Some(Intensity::High));
        assert_eq!(intensity("IS"), Some(Intensity::High));
        assert_eq!(intensity("EP"), Some(Intensity::VeryLow));
        assert_eq!(intensity("sPPM").map(Intensity::label), Some("Low"));
        assert_eq!(intensity("FT"), None);
        assert!(intensity("EP") < intensity("BT") && intensity("BT") < intensity("SP"));
    }

    #[test]
    fn memory_is_table_2_where_given_else_the_g_mem_2_rule() {
        for (app, p, mb) in SEED000_TABLE2 {
            assert_eq!(memory_mb(app, 'C', p).unwrap(), mb, "{app} C {p}");
        }
        let close = |a: f64, b: f64| (a - b).abs() < 0.05;
        // Rule: totals / P + constant (docs/models/seed-parameters.md G-MEM-2).
        assert!(close(memory_mb("SP", 'B', 4).unwrap(), 90.0)); // S002 T1
        assert!(close(memory_mb("CG", 'B', 4).unwrap(), 110.0)); // S002 T1
        assert!(close(memory_mb("LU", 'B', 4).unwrap(), 50.0)); // S002 T1
        assert!(close(memory_mb("MG", 'B', 4).unwrap(), 114.0)); // S002 T1
        assert!(close(memory_mb("IS", 'B', 4).unwrap(), 121.0)); // S002 T1
        assert!(close(
            memory_mb("CG", 'C', 1 << 4).unwrap(),
            440.0 * 2.61 / 16.0
        ));
        assert!(close(memory_mb("LU", 'C', 16).unwrap(), 50.0));
        assert!(close(memory_mb("BT", 'C', 4).unwrap(), 1047.2)); // > 900 MB: cannot run (§2.2)
        assert!(close(memory_mb("MG", 'C', 4).unwrap(), 912.0)); // > 900 MB: cannot run (§2.2)
        assert_eq!(memory_mb("EP", 'A', 8).unwrap(), 10.0);
        // The program carries it.
        let sp = build_with("SP", 'C', 9, &params(1)).unwrap();
        assert_eq!(sp.memory_mb, 176.0);
        // Memory per process never grows with P (EP's is constant).
        for info in calibrated_catalog() {
            for c in &info.classes {
                let class = c.chars().next().unwrap();
                let m: Vec<f64> = info
                    .procs
                    .iter()
                    .map(|&p| memory_mb(&info.name, class, p).unwrap())
                    .collect();
                assert!(
                    m.windows(2).all(|w| w[1] <= w[0]),
                    "{} {class}: {m:?}",
                    info.name
                );
            }
        }
    }

    #[test]
    fn message_counts_match_the_npb_structure() {
        // Sends per process per main-loop iteration, against the counts of
        // docs/models/seed-parameters.md §2.4 and §2.8.
        let per_iter = |app: &str, class: char, p: u32| -> f64 {
            let prog = build_with(app, class, p, &params(1)).unwrap();
            matched(&prog) as f64 / p as f64 / iterations(app, class) as f64
        };
        // LU, 2x2 grid: 2 line sends per k-plane per rank on average over the sweeps
        // (corner ranks send 1 or 2) + halo: (100 x 2 x 1 + 2) = 202 per rank (§2.4).
        let lu = per_iter("LU", 'B', 4);
        assert!((lu - 202.0).abs() < 2.0, "LU B 4: {lu}");
        // SP, 2x2 (2 cells): 6 copy_faces + 3 x 2 = 12 per iteration (§2.4).
        let sp = per_iter("SP", 'B', 4);
        assert!((sp - 12.0).abs() < 0.1, "SP B 4: {sp}");
        // SP 4x4 (4 cells): 6 + 3 x 2 x 3 = 24 (§2.8).
        let sp = per_iter("SP", 'A', 16);
        assert!((sp - 24.0).abs() < 0.1, "SP A 16: {sp}");
        // CG 2x2: 25 x (1 + 1 + 2) + 4 + 1 per outer iteration = 105 (§2.4), except
        // that the two diagonal ranks have no transpose partner (self copy).
        let cg = per_iter("CG", 'B', 4);
        assert!((cg - (105.0 - 26.0 / 2.0)).abs() < 0.5, "CG B 4: {cg}");
        // IS 16: allreduce 4 + alltoall of one int per pair 4 (n = 64 bytes: MPICH
        // 1.2.5's recursive doubling) + alltoallv 15 (all at once) = 23 per iteration.
        let is = per_iter("IS", 'A', 16);
        assert!((is - 23.0).abs() < 0.2, "IS A 16: {is}");
    }

    #[test]
    fn seed_003_and_002_presets_build_by_name_with_parameters() {
        let names: Vec<String> = catalog().into_iter().map(|i| i.name).collect();
        assert_eq!(names, all_names());
        // Every catalog entry builds at each of its sizes with its defaults.
        for info in catalog() {
            if canonical(&info.name).is_ok() {
                continue;
            }
            for &p in &info.procs {
                assert_eq!(
                    build(&info.name, '-', p).unwrap().size(),
                    p,
                    "{}",
                    info.name
                );
            }
            assert_eq!(info.classes, vec!["-".to_string()]);
        }
        // Names match case-insensitively; parameters go in brackets.
        let w = build("workpile[unit=2.4, quanta=10]", '-', 4).unwrap();
        assert_eq!(w.name, "Workpile[unit=2.4]");
        assert_eq!(memory_mb("mem-load[mb=700]", '-', 1).unwrap(), 700.0);
        let msg = |r: Result<Program, AppError>| r.unwrap_err().to_string();
        assert_eq!(
            msg(build("Emp", 'A', 4)),
            "app Emp has no class 'A'; valid classes: -"
        );
        assert!(msg(build("Emp[quanta=1", '-', 4)).contains("at character 13: missing closing ']'"));
        assert!(msg(build("Emp[quanta]", '-', 4)).contains("parameter \"quanta\" has no '='"));
        assert!(msg(build("CG[x=1]", 'A', 4)).contains("takes no parameters"));
        assert!(msg(build("lee-LU", '-', 8)).contains("got 8"));
        assert!(msg(build("nope[x=1]", '-', 4)).contains("unknown application"));
    }
}
