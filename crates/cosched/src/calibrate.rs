//! Calibration of the application library (`cosched_model::apps`) to seed 000
//! Table 1, and its validation.
//!
//! Every fit uses DEDICATED runs only: one job alone on the `choi2004` platform
//! (16 uniprocessor nodes), 16 processes, MPL 1, node policy `nls`. Nothing is
//! fitted to a shared-execution result.
//!
//! NAS kernels (CG, IS, SP, MG, BT, LU, EP): the one constant per (app, class) is
//! `c`, the CPU time of one process per main-loop iteration at 16 processes. With
//! no contention the dedicated run time is a max-plus expression of the compute
//! and message times, hence piecewise affine and non-decreasing in `c`:
//! T(c) = T(0) + slope x c while the critical path does not change (slope =
//! iterations for a bulk-synchronous kernel, more for LU's pipeline fill). The fit
//! measures T(0) (communication only) and T(c1) at a probe c1 = (target - T(0)) /
//! iterations, solves for c on the line through the two points, then runs T(c)
//! and refines by the secant method until |T(c) - target| <= 1e-6 target (the
//! critical path may change between the probe and the solution). If the
//! communication alone takes longer than the target, c is clamped at 0 and the
//! entry says so (`clamped`); the validation then reports the miss honestly.
//!
//! Target: the Table 1 time as printed (MG B and BT B/C look inconsistent with the
//! other classes, docs/models/seed-parameters.md §2.1; they are calibrated as
//! printed). Launch allowance (gap G-APP-5): 0 s. The seeds do not say whether
//! Table 1 includes job launch; the process-level engine has no launch phase, so
//! the whole Table 1 time is matched by the program (which includes the
//! benchmark's untimed warm-up iteration).
//!
//! FT (not in Table 1): derived, not fitted. FT's compute per iteration is its
//! NPB operation count per iteration (ft.f) divided by 16 and by the sustained
//! rate per process that the MG class C fit implies (NPB MG's operation count
//! 58 n^3 per iteration, mg.f, over MG C's fitted c). MG C is used because MG is
//! the closest kernel (a 3D grid code of the same sizes) and its class C time is
//! not flagged as suspect.
//!
//! sPPM, BlockSolve95 (gap G-APP-2): c = compute share (95% / 80%) x Table 1
//! time / iterations; the halo size is then solved by the same secant method so
//! that the dedicated run takes the Table 1 time.

use crate::engine::process::{simulate_processes, ProcError, ProcJob, ProcOptions};
use crate::model::apps::{
    self, long, nas, AppError, AppParams, CalEntry, Calibration, LONG_APPS, NAS_APPS,
};
use crate::model::node::NodePlatform;
use crate::model::program::{bytes_sent, Program};
use crate::policies::RegistryError;
use cosched_des::SimTime;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use thiserror::Error;

/// Platform preset of the dedicated runs.
pub const PLATFORM: &str = "choi2004";
/// Node policy of the dedicated runs (native local scheduling, spin waits).
pub const POLICY: &str = "nls";
/// Process count of the dedicated runs (seed 000 Table 1 is at 16 processors).
pub const PROCS: u32 = 16;
/// Job launch allowance subtracted from the Table 1 times (gap G-APP-5): none.
pub const LAUNCH_ALLOWANCE_S: f64 = 0.0;
/// Relative tolerance of the fit.
pub const FIT_TOLERANCE: f64 = 1e-6;
/// Largest relative error `validate` accepts (the 5%).
pub const VALIDATION_TOLERANCE: f64 = 0.05;

#[derive(Debug, Error)]
pub enum CalibrateError {
    #[error(transparent)]
    App(#[from] AppError),
    #[error(transparent)]
    Engine(#[from] ProcError),
    #[error(transparent)]
    Policy(#[from] RegistryError),
    #[error("platform preset: {0}")]
    Platform(String),
}

/// One dedicated run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DedicatedRun {
    /// Run time (end of the last rank - start), ns.
    pub time_ns: i64,
    pub events: u64,
    pub messages: u64,
    /// Mean compute time of a rank, ns.
    pub compute_ns: f64,
    /// CPU time of all the job's processes (compute, overheads, spinning), ns.
    pub cpu_ns: i64,
    /// Bytes all ranks sent.
    pub bytes_sent: u64,
}

impl DedicatedRun {
    pub fn time_s(&self) -> f64 {
        self.time_ns as f64 / 1e9
    }
    /// Fraction of the run time a process does not spend computing (waiting,
    /// message overheads): the communication intensity measure.
    pub fn comm_fraction(&self) -> f64 {
        if self.time_ns <= 0 {
            0.0
        } else {
            1.0 - self.compute_ns / self.time_ns as f64
        }
    }
}

/// The platform of the dedicated runs.
pub fn platform() -> Result<NodePlatform, CalibrateError> {
    NodePlatform::preset(PLATFORM).map_err(CalibrateError::Platform)
}

/// Runs `program` alone on the calibration platform (MPL 1, `nls`).
pub fn dedicated(program: Program) -> Result<DedicatedRun, CalibrateError> {
    dedicated_on(&platform()?, POLICY, program)
}

/// Runs `program` alone on `plat` (MPL 1, one process per node) under the node
/// policy `policy`.
pub fn dedicated_on(
    plat: &NodePlatform,
    policy: &str,
    program: Program,
) -> Result<DedicatedRun, CalibrateError> {
    crate::policies::build_node(policy)?;
    let compute_ns = program
        .ranks
        .iter()
        .map(|r| apps::compute_ns(r) as f64)
        .sum::<f64>()
        / program.size().max(1) as f64
        / plat.cpu_speed;
    let bytes_sent = program.ranks.iter().map(|r| bytes_sent(r)).sum();
    let jobs = [ProcJob::new(program, SimTime::ZERO)];
    let make = || crate::policies::build_node(policy).expect("checked above");
    let out = simulate_processes(
        plat,
        &jobs,
        &make,
        &ProcOptions {
            mpl: 1,
            ..Default::default()
        },
    )?;
    let rec = &out.jobs[0];
    Ok(DedicatedRun {
        time_ns: (rec.end - rec.start).as_ns(),
        events: out.counters.events,
        messages: out.counters.messages,
        compute_ns,
        cpu_ns: out.proc_cpu_ns.iter().sum(),
        bytes_sent,
    })
}

/// Dedicated run of (app, class) at 16 processes with explicit parameters.
pub fn run_with(
    app: &str,
    class: char,
    params: &AppParams,
) -> Result<DedicatedRun, CalibrateError> {
    dedicated(apps::build_with(app, class, PROCS, params)?)
}

/// The Table 1 time the fit aims at, s (Table 1 minus the launch allowance).
pub fn fit_target_s(app: &str, class: char) -> Option<f64> {
    apps::table1_target(app, class).map(|t| t - LAUNCH_ALLOWANCE_S)
}

/// Result of a one-parameter solve.
struct Solved {
    x: i64,
    t_ns: i64,
    t0_ns: i64,
    clamped: bool,
}

/// Solves T(x) = target for an integer parameter x >= 0 with T non-decreasing and
/// piecewise affine: T(0), a probe, the line through both, then secant steps.
fn solve(
    target_ns: i64,
    probe: impl Fn(i64) -> i64,
    run: impl Fn(i64) -> Result<i64, CalibrateError>,
) -> Result<Solved, CalibrateError> {
    let t0 = run(0)?;
    if t0 >= target_ns {
        return Ok(Solved {
            x: 0,
            t_ns: t0,
            t0_ns: t0,
            clamped: t0 > target_ns,
        });
    }
    let tol = (target_ns as f64 * FIT_TOLERANCE).max(1.0);
    let x1 = probe(target_ns - t0).max(1);
    let t1 = run(x1)?;
    let (mut a, mut b) = ((0i64, t0), (x1, t1));
    let mut best = b;
    for _ in 0..12 {
        if ((b.1 - target_ns) as f64).abs() <= tol {
            break;
        }
        let slope = (b.1 - a.1) as f64 / (b.0 - a.0) as f64;
        if !(slope.is_finite() && slope > 0.0) {
            break;
        }
        let x = (b.0 as f64 + (target_ns - b.1) as f64 / slope)
            .round()
            .max(0.0) as i64;
        if x == b.0 {
            break;
        }
        let t = run(x)?;
        a = b;
        b = (x, t);
        if (t - target_ns).abs() < (best.1 - target_ns).abs() {
            best = b;
        }
    }
    Ok(Solved {
        x: best.0,
        t_ns: best.1,
        t0_ns: t0,
        clamped: false,
    })
}

const NAS_SOURCE: &str =
    "fit: dedicated 16-process run on choi2004 (nls, MPL 1) matched to seed 000 Table 1";

/// Fits one NAS kernel with a Table 1 target.
pub fn fit_nas(app: &str, class: char) -> Result<CalEntry, CalibrateError> {
    let target = fit_target_s(app, class).ok_or_else(|| AppError::Uncalibrated {
        app: app.to_string(),
        class,
    })?;
    let target_ns = (target * 1e9).round() as i64;
    let n = apps::iterations(app, class) as i64;
    let s = solve(
        target_ns,
        |gap| gap / n,
        |c| {
            Ok(run_with(
                app,
                class,
                &AppParams {
                    compute_ns_per_iter: c,
                    halo_bytes: 0,
                },
            )?
            .time_ns)
        },
    )?;
    Ok(CalEntry {
        clamped: s.clamped,
        t0_s: s.t0_ns as f64 / 1e9,
        compute_ns_per_iter: s.x,
        fitted_s: s.t_ns as f64 / 1e9,
        halo_bytes: 0,
        source: if s.clamped {
            format!("{NAS_SOURCE}; CLAMPED at 0: communication alone exceeds the target")
        } else {
            NAS_SOURCE.to_string()
        },
        target_s: apps::table1_target(app, class),
    })
}

/// Fits sPPM or BlockSolve95 (see the module doc).
pub fn fit_long(app: &str) -> Result<CalEntry, CalibrateError> {
    let class = apps::SINGLE_CLASS;
    let target = fit_target_s(app, class).expect("Table 1(b) has both long apps");
    let target_ns = (target * 1e9).round() as i64;
    let c = (long::compute_share(app) * target * 1e9 / long::iterations(app) as f64).round() as i64;
    let run = |h: i64| -> Result<i64, CalibrateError> {
        Ok(run_with(
            app,
            class,
            &AppParams {
                compute_ns_per_iter: c,
                halo_bytes: h as u64,
            },
        )?
        .time_ns)
    };
    // Probe: the bytes the remaining time would carry at the platform bandwidth,
    // spread over one exchange per iteration.
    let bw = platform()?.bandwidth_mb_s * 1e6 / 1e9; // bytes per ns
    let iters = long::iterations(app) as f64;
    let s = solve(target_ns, |gap| (gap as f64 / iters * bw) as i64, run)?;
    Ok(CalEntry {
        clamped: s.clamped,
        t0_s: s.t0_ns as f64 / 1e9,
        compute_ns_per_iter: c,
        fitted_s: s.t_ns as f64 / 1e9,
        halo_bytes: s.x as u64,
        source: format!(
            "fit: compute = {:.0}% of the seed 000 Table 1(b) time (G-APP-2) / {} iterations; halo bytes solved on a dedicated 16-process run on choi2004 (nls, MPL 1)",
            long::compute_share(app) * 100.0,
            long::iterations(app)
        ),
        target_s: apps::table1_target(app, class),
    })
}

/// FT's compute per iteration (ns at 16 processes) derived from the MG C entry.
pub fn ft_compute_ns(class: char, mg_c: &CalEntry) -> i64 {
    // Sustained flop/s per process implied by MG C: ops per iteration / 16 / c.
    let rate = nas::mg_ops_per_iter('C') / PROCS as f64 / (mg_c.compute_ns_per_iter as f64 / 1e9);
    let (_, per_iter) = nas::ft_ops(class);
    (per_iter / PROCS as f64 / rate * 1e9).round() as i64
}

/// The FT entry of `class`, derived from the MG C entry (plus two dedicated runs
/// for the record: T(0) and T(c)).
pub fn derive_ft(class: char, mg_c: &CalEntry) -> Result<CalEntry, CalibrateError> {
    let c = ft_compute_ns(class, mg_c);
    let rate = nas::mg_ops_per_iter('C') / PROCS as f64 / (mg_c.compute_ns_per_iter as f64 / 1e9);
    let t0 = run_with("FT", class, &AppParams::default())?;
    let t = run_with(
        "FT",
        class,
        &AppParams {
            compute_ns_per_iter: c,
            halo_bytes: 0,
        },
    )?;
    Ok(CalEntry {
        clamped: false,
        t0_s: t0.time_s(),
        compute_ns_per_iter: c,
        fitted_s: t.time_s(),
        halo_bytes: 0,
        source: format!(
            "derived (no seed time for FT): NPB FT operation count per iteration (ft.f) / 16 processes at {:.1} Mflop/s per process, the rate the MG class C fit implies (NPB MG count 58 n^3 per iteration, mg.f)",
            rate / 1e6
        ),
        target_s: None,
    })
}

/// Runs `f` over `items` on all cores; results in item order (deterministic).
fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(items.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    let results = std::sync::Mutex::new(&mut out);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= items.len() {
                    break;
                }
                let r = f(&items[i]);
                results.lock().expect("no panics while holding")[i] = Some(r);
            });
        }
    });
    out.into_iter()
        .map(|r| r.expect("every item ran"))
        .collect()
}

/// Every (app, class) with a Table 1 target: the NAS kernels in Table 1 order,
/// then sPPM and BlockSolve95.
pub fn targets() -> Vec<(&'static str, char)> {
    let mut v = Vec::new();
    for app in NAS_APPS.iter().chain(LONG_APPS.iter()) {
        for class in apps::classes(app) {
            if apps::table1_target(app, class).is_some() {
                v.push((*app, class));
            }
        }
    }
    v
}

fn fit_one(app: &str, class: char) -> Result<CalEntry, CalibrateError> {
    if LONG_APPS.contains(&app) {
        fit_long(app)
    } else {
        fit_nas(app, class)
    }
}

/// The header of the calibration table.
fn header(apps_: BTreeMap<String, BTreeMap<String, CalEntry>>) -> Calibration {
    Calibration {
        apps: apps_,
        launch_allowance_s: LAUNCH_ALLOWANCE_S,
        method: format!(
            "dedicated run of one job alone ({PROCS} processes on preset {PLATFORM}, MPL 1, node policy {POLICY}); \
             per (app, class) the compute per iteration c is solved from T(0) and T(c1) at a probe c1 \
             (T(c) = T(0) + slope x c) and refined by secant steps to |T(c) - target| <= {FIT_TOLERANCE} x target; \
             compute at P processes = c x 16 / P; FT derived from the MG C fit; sPPM and BlockSolve95 fit their halo \
             size with the G-APP-2 compute share (cosched::calibrate)"
        ),
        platform: PLATFORM.to_string(),
        policy: POLICY.to_string(),
        procs: PROCS,
        target: "seed 000 (Choi et al., Coscheduling in Clusters: Is It a Viable Alternative?) Table 1: execution time at 16 processors of NAS classes A, B, C, sPPM and BlockSolve95".to_string(),
    }
}

fn insert(
    map: &mut BTreeMap<String, BTreeMap<String, CalEntry>>,
    app: &str,
    class: char,
    e: CalEntry,
) {
    map.entry(app.to_string())
        .or_default()
        .insert(class.to_string(), e);
}

/// Fits the given (app, class) pairs (FT pairs are derived from `mg_c`, which
/// must then be given).
pub fn fit_some(
    pairs: &[(&str, char)],
    mg_c: Option<&CalEntry>,
) -> Result<Calibration, CalibrateError> {
    let fitted = parallel_map(pairs, |&(app, class)| {
        if app == "FT" {
            derive_ft(class, mg_c.expect("FT needs the MG C entry"))
        } else {
            fit_one(app, class)
        }
    });
    let mut map = BTreeMap::new();
    for (&(app, class), e) in pairs.iter().zip(fitted) {
        insert(&mut map, app, class, e?);
    }
    Ok(header(map))
}

/// The full fit: every target, then FT from MG C.
pub fn fit_all() -> Result<Calibration, CalibrateError> {
    let mut cal = fit_some(&targets(), None)?;
    let mg_c = cal.apps["MG"]["C"].clone();
    let ft: Vec<(&str, char)> = apps::CLASSES.iter().map(|&c| ("FT", c)).collect();
    let ft = fit_some(&ft, Some(&mg_c))?;
    cal.apps.extend(ft.apps);
    Ok(cal)
}

/// Where the committed calibration table lives.
pub fn calibration_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("cosched-model")
        .join("src")
        .join("apps")
        .join("calibration.json")
}

/// The calibration table as written to `calibration.json` (pretty, keys sorted).
pub fn to_json(cal: &Calibration) -> String {
    let mut s = serde_json::to_string_pretty(cal).expect("plain data");
    s.push('\n');
    s
}

/// Differences between two calibration tables (empty when they agree): exact on
/// the fitted integers and flags, 1e-9 relative on the recorded times.
pub fn differences(fresh: &Calibration, committed: &Calibration) -> Vec<String> {
    let mut d = Vec::new();
    let h = |c: &Calibration| {
        (
            c.launch_allowance_s,
            c.method.clone(),
            c.platform.clone(),
            c.policy.clone(),
            c.procs,
            c.target.clone(),
        )
    };
    if h(fresh) != h(committed) {
        d.push("header fields differ".to_string());
    }
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-12);
    for (app, classes) in &fresh.apps {
        for (class, e) in classes {
            let Some(c) = committed.apps.get(app).and_then(|m| m.get(class)) else {
                d.push(format!("{app} {class}: missing from the committed table"));
                continue;
            };
            if e.compute_ns_per_iter != c.compute_ns_per_iter
                || e.halo_bytes != c.halo_bytes
                || e.clamped != c.clamped
                || e.source != c.source
                || e.target_s != c.target_s
                || !close(e.fitted_s, c.fitted_s)
                || !close(e.t0_s, c.t0_s)
            {
                d.push(format!(
                    "{app} {class}: fresh c = {} ns, halo {} (fitted {} s), committed c = {} ns, halo {} (fitted {} s)",
                    e.compute_ns_per_iter, e.halo_bytes, e.fitted_s,
                    c.compute_ns_per_iter, c.halo_bytes, c.fitted_s
                ));
            }
        }
    }
    d
}

/// One row of the validation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ValidationRow {
    pub app: String,
    pub class: String,
    pub procs: u32,
    /// Dedicated run time with the committed calibration, s.
    pub measured_s: f64,
    /// Seed 000 Table 1 time, s.
    pub target_s: f64,
    /// (measured - target) / target.
    pub error: f64,
    /// Fraction of the run time not spent computing.
    pub comm_fraction: f64,
    /// Seed 000 Table 1 communication intensity label.
    pub intensity: String,
    /// The calibration clamped the compute at 0 (communication alone exceeds the target).
    pub clamped: bool,
    pub events: u64,
    pub messages: u64,
}

impl ValidationRow {
    pub fn ok(&self) -> bool {
        self.error.abs() <= VALIDATION_TOLERANCE
    }
}

/// Runs every application with a seed 000 Table 1 time (the NAS kernels at every
/// class, sPPM and BlockSolve95) dedicated at 16 processes on `choi2004` with the
/// committed calibration, and compares the run time with Table 1.
pub fn validate() -> Result<Vec<ValidationRow>, CalibrateError> {
    validate_some(&targets())
}

/// [`validate`] for some (app, class) pairs.
pub fn validate_some(pairs: &[(&str, char)]) -> Result<Vec<ValidationRow>, CalibrateError> {
    let cal = apps::calibration()?;
    parallel_map(pairs, |&(app, class)| {
        let run = dedicated(apps::build(app, class, PROCS)?)?;
        let target = apps::table1_target(app, class).expect("targets() has a time");
        let measured = run.time_s();
        Ok(ValidationRow {
            app: app.to_string(),
            class: class.to_string(),
            procs: PROCS,
            measured_s: measured,
            target_s: target,
            error: (measured - target) / target,
            comm_fraction: run.comm_fraction(),
            intensity: apps::table1(app)
                .map(|r| r.intensity.label().to_string())
                .unwrap_or_default(),
            clamped: cal
                .apps
                .get(app)
                .and_then(|m| m.get(&class.to_string()))
                .is_some_and(|e| e.clamped),
            events: run.events,
            messages: run.messages,
        })
    })
    .into_iter()
    .collect()
}

/// Pairs (lower-labelled app, higher-labelled app) of seed 000 Table 1 whose
/// order the model does NOT reproduce, and why. Measured as the fraction of the
/// dedicated 16-process run not spent computing on `choi2004`:
/// - LU ("Low") above SP and MG ("Medium"): LU's SSOR wavefront leaves every
///   process idle for the pipeline fill and drain, px + py - 2 = 6 k-plane stages
///   of nz - 2 per sweep on the 4x4 grid (ssor.f); with Myrinet-class latency and
///   bandwidth this idle time (3-11%) exceeds MG's and SP's transfer times. On the
///   slower network of seed 002 (4 nodes) the order of the labels does appear.
/// - BT ("Low") above SP ("Medium"): SP overlaps each solve-stage receive with
///   half of the stage's work (x_solve.f computes `lhsx` / `ninvr` before
///   waiting), which hides nearly all of its pipelined-solve messages; BT does not
///   overlap.
/// - BT ("Low") at or above MG ("Medium") in classes B and C, since messages of
///   at least `eager_limit_bytes` go by rendezvous: 0.73% against 0.68% (B) and
///   0.77% against 0.77% (C), both under 1% of the run (class A keeps the order,
///   2.19% against 3.71%). Not yet explained from the programs' message sizes.
pub const KNOWN_INTENSITY_DEVIATIONS: [(&str, &str); 4] =
    [("LU", "SP"), ("LU", "MG"), ("BT", "SP"), ("BT", "MG")];

/// A pair of NAS kernels of one class whose communication fractions contradict
/// their seed 000 Table 1 labels.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IntensityViolation {
    pub class: String,
    /// The app with the lower label, and its fraction.
    pub lower: String,
    pub lower_fraction: f64,
    /// The app with the higher label, and its fraction.
    pub higher: String,
    pub higher_fraction: f64,
}

impl IntensityViolation {
    /// Whether this is one of [`KNOWN_INTENSITY_DEVIATIONS`].
    pub fn known(&self) -> bool {
        KNOWN_INTENSITY_DEVIATIONS
            .iter()
            .any(|&(l, h)| l == self.lower && h == self.higher)
    }
}

/// Every pair of NAS kernels of the same class whose labels differ and whose
/// measured communication fractions are in the opposite order.
pub fn intensity_violations(rows: &[ValidationRow]) -> Vec<IntensityViolation> {
    let label = |app: &str| apps::table1(app).map(|r| r.intensity);
    let mut v = Vec::new();
    for a in rows.iter().filter(|r| NAS_APPS.contains(&r.app.as_str())) {
        for b in rows.iter().filter(|r| r.class == a.class) {
            let (Some(la), Some(lb)) = (label(&a.app), label(&b.app)) else {
                continue;
            };
            if la < lb && a.comm_fraction >= b.comm_fraction {
                v.push(IntensityViolation {
                    class: a.class.clone(),
                    lower: a.app.clone(),
                    lower_fraction: a.comm_fraction,
                    higher: b.app.clone(),
                    higher_fraction: b.comm_fraction,
                });
            }
        }
    }
    v
}

// ---------------------------------------------------------------------------
// Seed 002 Table 1: the second, looser target.

/// Platform preset of seed 002 Table 1's runs.
pub const S002_PLATFORM: &str = "ghanesh";
/// Node policy of those runs: seed 002 §4 "when a process is blocked for
/// communication it is removed from the ready queue".
pub const S002_POLICY: &str = "block";
/// Processes (one per node) and class of seed 002 Table 1.
pub const S002_PROCS: u32 = 4;
pub const S002_CLASS: char = 'B';
/// Looser tolerance of the second target: execution time, message rate and data
/// rate within this factor of the table (either way). The platform's network
/// numbers are assumptions (G-NET-3) and the compute constants are fitted on
/// another machine (seed 000's), so only the magnitude is expected to agree.
pub const S002_FACTOR: f64 = 1.5;
/// Rates this small agree whatever the factor (EP sends a few messages at the end).
pub const S002_RATE_FLOOR: (f64, f64) = (1.0, 100.0);
/// CPU utilization within this many percentage points.
pub const S002_CPU_POINTS: f64 = 15.0;

/// The columns of seed 002 Table 1 that [`validate_seed002`] compares.
pub const S002_COLUMNS: [&str; 4] = ["exec_s", "msgs_per_s", "kb_per_s", "cpu_pct"];

/// (app, column) of seed 002 Table 1 that the model does NOT match within the
/// looser tolerance, and why (docs/models/seed-parameters.md §2.4). A new miss, or
/// a listed one that starts to match, fails the test that pins this list. With the
/// preset's EP-fitted CPU speed, 13 of the 24 compared cells match.
/// - MG, every column: seed 000 Table 1's MG class B time (61.5 s at 16 processes,
///   the calibration target) is inconsistent with its classes A and C (§2.1: B/A =
///   25.6 against a work ratio of 5), while seed 002 measures MG B at 37.0 s on 4
///   processes. The preset's class B compute makes the run about 12x seed 002's; the
///   same messages over a 12x longer run give about 1/12 of the rates, and the CPU
///   is almost never waiting.
/// - LU exec_s, msgs_per_s, kb_per_s: strong scaling of seed 000's 16-process time
///   (G-APP-1) at the EP-fitted speed predicts 2.1x seed 002's 511.7 s; the two
///   papers' LU times do not fit one compute constant and one CPU speed. The rates
///   follow (the model sends the NPB message counts, §2.4's cross-check, over a
///   longer run).
/// - IS exec_s, kb_per_s: at 4 processes on Fast Ethernet the alltoallv of 3/4 of
///   the 33.5 MB of keys per iteration dominates IS; the model moves it faster than
///   seed 002 measured (its data rate is 1.6x the table's, its run 0.49x).
/// - CG, SP cpu_pct: the model's processes wait less for messages than measured
///   (75% and 96% busy against 59.4% and 77.2%): the model's Fast Ethernet has no
///   TCP or MPICH protocol cost beyond the 25 us per-message overheads of G-NET-3
///   and no congestion; the measured breakdown of the waits is not published.
pub const KNOWN_SEED002_DEVIATIONS: [(&str, &str); 11] = [
    ("MG", "exec_s"),
    ("MG", "msgs_per_s"),
    ("MG", "kb_per_s"),
    ("MG", "cpu_pct"),
    ("LU", "exec_s"),
    ("LU", "msgs_per_s"),
    ("LU", "kb_per_s"),
    ("IS", "exec_s"),
    ("IS", "kb_per_s"),
    ("CG", "cpu_pct"),
    ("SP", "cpu_pct"),
];

/// The `ghanesh` platform at its preset CPU speed.
pub fn seed002_platform() -> Result<NodePlatform, CalibrateError> {
    NodePlatform::preset(S002_PLATFORM).map_err(CalibrateError::Platform)
}

/// Dedicated EP class B run at 4 processes on `ghanesh` at `speed`.
fn ep_on_ghanesh(speed: f64) -> Result<DedicatedRun, CalibrateError> {
    let mut plat = seed002_platform()?;
    plat.cpu_speed = speed;
    dedicated_on(&plat, S002_POLICY, apps::build("EP", S002_CLASS, S002_PROCS)?)
}

/// Fits the `ghanesh` preset's `cpu_speed` on a dedicated run: EP class B at 4
/// processes alone on 4 nodes takes seed 002 Table 1's time. EP is pure compute
/// (four allreduces at the end), so its time is nearly compute / speed: the fixed
/// point speed <- speed x T(speed) / target converges in a few runs. Returned
/// rounded to 4 significant digits (the preset's constant).
pub fn fit_cpu_speed() -> Result<f64, CalibrateError> {
    let target = apps::seed002_row("EP").expect("EP is in the table").exec_s;
    let mut speed = 1.0f64;
    for _ in 0..20 {
        let t = ep_on_ghanesh(speed)?.time_s();
        if ((t - target) / target).abs() <= FIT_TOLERANCE {
            break;
        }
        speed *= t / target;
    }
    let digits = 10f64.powi(3 - speed.log10().floor() as i32);
    Ok((speed * digits).round() / digits)
}

/// One application of seed 002 Table 1 measured on the model beside the table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Seed002Check {
    pub app: String,
    pub exec_s: f64,
    pub paper_exec_s: f64,
    /// Messages sent per node per second (every point-to-point send, collectives
    /// included, over 4 nodes and the run time).
    pub msgs_per_s: f64,
    pub paper_msgs_per_s: f64,
    /// KB (1000 bytes) sent per node per second.
    pub kb_per_s: f64,
    pub paper_kb_per_s: f64,
    /// CPU time of the job's processes over 4 x the run time, %.
    pub cpu_pct: f64,
    pub paper_cpu_pct: f64,
    /// Memory per process of the preset (not compared: the presets take it from
    /// seed 000 Table 2 and the G-MEM-2 rule).
    pub memory_mb: f64,
    pub paper_memory_mb: f64,
    /// Columns of [`S002_COLUMNS`] outside the looser tolerance.
    pub off: Vec<String>,
    /// Columns of `off` listed in [`KNOWN_SEED002_DEVIATIONS`].
    pub known: Vec<String>,
}

impl Seed002Check {
    /// Columns off the table that are not known deviations.
    pub fn unknown(&self) -> Vec<&str> {
        self.off
            .iter()
            .filter(|c| !self.known.contains(c))
            .map(String::as_str)
            .collect()
    }
}

/// Whether `model` agrees with `paper` within the looser tolerance of `column`.
pub fn seed002_within(column: &str, model: f64, paper: f64) -> bool {
    let factor = |floor: f64| {
        (model - paper).abs() <= floor
            || (model > 0.0 && paper > 0.0 && (model / paper).max(paper / model) <= S002_FACTOR)
    };
    match column {
        "exec_s" => factor(0.0),
        "msgs_per_s" => factor(S002_RATE_FLOOR.0),
        "kb_per_s" => factor(S002_RATE_FLOOR.1),
        "cpu_pct" => (model - paper).abs() <= S002_CPU_POINTS,
        _ => panic!("not a seed 002 Table 1 column: {column}"),
    }
}

/// Runs every application of seed 002 Table 1 (class B, 4 processes, one per node)
/// dedicated on `ghanesh` under `block` and compares each column with the table.
pub fn validate_seed002() -> Result<Vec<Seed002Check>, CalibrateError> {
    let plat = seed002_platform()?;
    let n = S002_PROCS as f64;
    parallel_map(&apps::SEED002_TABLE1, |row| {
        let program = apps::build(row.app, S002_CLASS, S002_PROCS)?;
        let memory_mb = program.memory_mb;
        let run = dedicated_on(&plat, S002_POLICY, program)?;
        let t = run.time_s();
        let measured = [
            t,
            run.messages as f64 / n / t,
            run.bytes_sent as f64 / 1000.0 / n / t,
            run.cpu_ns as f64 / 1e9 / (n * t) * 100.0,
        ];
        let paper = [row.exec_s, row.msgs_per_s, row.kb_per_s, row.cpu_pct];
        let off: Vec<String> = S002_COLUMNS
            .iter()
            .zip(measured.iter().zip(paper))
            .filter(|(c, (&m, p))| !seed002_within(c, m, *p))
            .map(|(c, _)| c.to_string())
            .collect();
        let known = off
            .iter()
            .filter(|c| KNOWN_SEED002_DEVIATIONS.contains(&(row.app, c.as_str())))
            .cloned()
            .collect();
        Ok(Seed002Check {
            app: row.app.to_string(),
            exec_s: measured[0],
            paper_exec_s: row.exec_s,
            msgs_per_s: measured[1],
            paper_msgs_per_s: row.msgs_per_s,
            kb_per_s: measured[2],
            paper_kb_per_s: row.kb_per_s,
            cpu_pct: measured[3],
            paper_cpu_pct: row.cpu_pct,
            memory_mb,
            paper_memory_mb: row.memory_mb,
            off,
            known,
        })
    })
    .into_iter()
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_calibration_matches_a_fresh_fit_of_class_a() {
        // The full fit (every class, in release mode) is checked by the Python
        // suite (tests/python/test_apps.py) through the `calibrate` example.
        let pairs: Vec<(&str, char)> = targets().into_iter().filter(|&(_, c)| c == 'A').collect();
        let fresh = fit_some(&pairs, None).unwrap();
        let committed = apps::calibration().unwrap();
        let diff = differences(&fresh, committed);
        assert!(
            diff.is_empty(),
            "apps/calibration.json is stale (regenerate: cargo run --release -p cosched --example calibrate -- --write):\n{}",
            diff.join("\n")
        );
        // FT is derived from the committed MG C entry.
        let mg_c = &committed.apps["MG"]["C"];
        for class in apps::CLASSES {
            assert_eq!(
                committed.apps["FT"][&class.to_string()].compute_ns_per_iter,
                ft_compute_ns(class, mg_c)
            );
        }
    }

    #[test]
    fn ghanesh_cpu_speed_matches_a_fresh_fit_and_ep_takes_the_table_time() {
        let fresh = fit_cpu_speed().unwrap();
        assert_eq!(
            fresh,
            crate::model::node::GHANESH_CPU_SPEED,
            "the ghanesh preset's cpu_speed is stale: set GHANESH_CPU_SPEED to {fresh}"
        );
        let t = ep_on_ghanesh(fresh).unwrap().time_s();
        assert!((t - 228.6).abs() / 228.6 < 1e-3, "EP B on ghanesh: {t} s");
    }

    #[test]
    fn seed002_table1_is_matched_within_the_looser_tolerance_but_the_known_deviations() {
        let rows = validate_seed002().unwrap();
        for r in &rows {
            eprintln!("{r:?}");
        }
        let unknown: Vec<(&str, Vec<&str>)> = rows
            .iter()
            .map(|r| (r.app.as_str(), r.unknown()))
            .filter(|(_, u)| !u.is_empty())
            .collect();
        assert!(unknown.is_empty(), "new deviations from seed 002 Table 1: {unknown:?}");
        // Every listed deviation is still one (the list does not rot).
        for (app, col) in KNOWN_SEED002_DEVIATIONS {
            let r = rows.iter().find(|r| r.app == app).unwrap();
            assert!(
                r.off.iter().any(|c| c == col),
                "{app} {col} now matches seed 002 Table 1: remove it from KNOWN_SEED002_DEVIATIONS"
            );
        }
    }

    #[test]
    fn the_looser_tolerance_is_a_factor_a_floor_and_points() {
        assert!(seed002_within("exec_s", 150.0, 100.0));
        assert!(!seed002_within("exec_s", 151.0, 100.0));
        assert!(seed002_within("exec_s", 67.0, 100.0));
        assert!(!seed002_within("exec_s", 66.0, 100.0));
        assert!(seed002_within("msgs_per_s", 0.9, 0.0));
        assert!(!seed002_within("msgs_per_s", 1.1, 0.0));
        assert!(seed002_within("kb_per_s", 99.0, 0.0));
        assert!(seed002_within("cpu_pct", 84.0, 99.0));
        assert!(!seed002_within("cpu_pct", 83.9, 99.0));
    }

    #[test]
    fn the_solver_finds_an_affine_target_and_clamps_an_unreachable_one() {
        // T(x) = 1000 + 7x, target 8000 -> x = 1000.
        let s = solve(8000, |gap| gap / 10, |x| Ok(1000 + 7 * x)).unwrap();
        assert_eq!((s.x, s.t_ns, s.clamped), (1000, 8000, false));
        // Piecewise: T = max(5000, 1000 + 7x) + x.
        let s = solve(
            20_000,
            |gap| gap / 100,
            |x| Ok((5000i64).max(1000 + 7 * x) + x),
        )
        .unwrap();
        assert_eq!(s.t_ns, 20_000);
        // Unreachable: T(0) above the target.
        let s = solve(500, |g| g, |x| Ok(1000 + x)).unwrap();
        assert_eq!((s.x, s.t_ns, s.clamped), (0, 1000, true));
    }

    #[test]
    fn intensity_order_of_table_1_holds_for_class_a_except_the_known_deviations() {
        // Class A here (debug builds are slow); every class in the Python suite.
        let pairs: Vec<(&str, char)> = targets()
            .into_iter()
            .filter(|&(a, c)| c == 'A' && NAS_APPS.contains(&a))
            .collect();
        let rows = validate_some(&pairs).unwrap();
        let v = intensity_violations(&rows);
        let unknown: Vec<&IntensityViolation> = v.iter().filter(|x| !x.known()).collect();
        assert!(unknown.is_empty(), "intensity order broken: {unknown:#?}");
        // The labels that do separate: High above every other label, every label
        // above Very low.
        let frac = |app: &str| rows.iter().find(|r| r.app == app).unwrap().comm_fraction;
        for high in ["CG", "IS"] {
            for other in ["SP", "MG", "BT", "LU", "EP"] {
                assert!(frac(high) > frac(other), "{high} vs {other}");
            }
        }
        for other in ["CG", "IS", "SP", "MG", "BT", "LU"] {
            assert!(frac(other) > frac("EP"), "{other} vs EP");
        }
    }
}
