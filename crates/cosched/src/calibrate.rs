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
//! Joint fit with seed 002 Table 1 (the NAS kernels seed 002 measured: CG, IS,
//! SP, MG, LU, EP). A second free parameter per application, its load imbalance
//! δ across ranks (`apps::imbalance_factor`: rank compute from (1 - δ) c to
//! (1 + δ) c, mean c, the same relative spread at every class and process
//! count), sets how long the processes wait: the Table 1 time alone cannot
//! separate compute from waiting, so without δ every second the modelled network
//! does not account for was fitted as compute and the processes were busier than
//! seed 002 measured. The two targets and the rule that carries seed 002's
//! figures to this model:
//! 1. seed 000 Table 1: the dedicated 16-process run time on `choi2004` (above),
//!    every class, met by `c` per class to 1e-6 (relative);
//! 2. seed 002 Table 1: the average CPU utilization of class B at 4 processes on
//!    4 nodes, met by δ. Rule: seed 002's figures are compared on the model of
//!    seed 002's own cluster, not transformed: the same program (NPB class B, 4
//!    ranks; compute c_B x 16 / 4 by G-APP-1) on the `ghanesh` preset (its CPU
//!    speed relative to seed 000's Athlon fitted on EP class B, a dedicated run;
//!    Fast Ethernet by G-NET-3) under `block` (seed 002 §4: a process blocked for
//!    communication leaves the ready queue, so its CPU is idle), CPU utilization
//!    = CPU time of the job / (4 x run time) as seed 002's CPU probes measure
//!    it. Message rate and data rate are not free: NPB fixes every message's
//!    count and size per class, so the fit reports them (and the per-node counts
//!    over the run, rate x time, which depend on neither processor nor network)
//!    but cannot move them.
//!
//! Objective per application: the sum of (T_k - Table1_k)^2 / Table1_k^2 over
//! its classes k plus (u - u_002)^2 with u the utilization as a fraction, weight 1
//! each. The parameters separate (for any δ, each c_k meets its T_k exactly), so
//! the objective is zero when δ in [0, 0.95] reaches u_002, and otherwise δ sits at
//! its bound and the utilization error is the residual (reported, never hidden).
//! Solved nested: for a trial δ, c_B by the secant fit below; δ by secant steps on
//! 1/u (nearly affine in δ: a bulk-synchronous iteration lasts about (1 + δ) c)
//! to |u - u_002| <= 0.01 points; then c_A, c_C at that δ. Applications without
//! a seed 002 row (BT, FT, sPPM, BlockSolve95) keep δ = 0.
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
    self, long, nas, AppError, AppParams, CalEntry, Calibration, LONG_APPS, MAX_IMBALANCE_PPM,
    NAS_APPS,
};
use crate::model::node::NodePlatform;
use crate::model::program::{bytes_sent, Program};
use crate::policies::RegistryError;
use crate::validation;
use cosched_des::SimTime;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use thiserror::Error;

mod root;

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
/// Tolerance of the imbalance fit on seed 002's CPU utilization, percentage points.
pub const CPU_FIT_POINTS: f64 = 0.01;
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
    validation::table1_target(app, class).map(|t| t - LAUNCH_ALLOWANCE_S)
}

/// Result of a one-parameter solve.
struct Solved {
    x: i64,
    t_ns: i64,
    t0_ns: i64,
    clamped: bool,
}

/// Solves T(x) = target for an integer parameter x >= 0 with T non-decreasing and
/// piecewise affine: T(0), a probe, the line through both, then secant steps and,
/// where they stall, bisection ([`root::find_root`]).
/// `t0_ns`: T(0) when already known (not run again).
fn solve(
    target_ns: i64,
    t0_ns: Option<i64>,
    probe: impl Fn(i64) -> i64,
    run: impl Fn(i64) -> Result<i64, CalibrateError>,
) -> Result<Solved, CalibrateError> {
    let t0 = match t0_ns {
        Some(t) => t,
        None => run(0)?,
    };
    if t0 >= target_ns {
        return Ok(Solved {
            x: 0,
            t_ns: t0,
            t0_ns: t0,
            clamped: t0 > target_ns,
        });
    }
    let tol = (target_ns as f64 * FIT_TOLERANCE).max(1.0);
    let problem = root::Problem {
        residual: |t: &i64| (t - target_ns) as f64,
        error: |t: &i64| ((t - target_ns) as f64).abs(),
        tolerance: tol,
        max: None,
    };
    let first = root::Point { x: 0, v: t0 };
    let best = root::find_root(&problem, first, probe(target_ns - t0).max(1), run)?;
    Ok(Solved {
        x: best.x,
        t_ns: best.v,
        t0_ns: t0,
        clamped: false,
    })
}

const NAS_SOURCE: &str =
    "fit: dedicated 16-process run on choi2004 (nls, MPL 1) matched to seed 000 Table 1";

/// Fits one NAS kernel with a Table 1 target at load imbalance `imbalance_ppm`.
pub fn fit_nas(app: &str, class: char, imbalance_ppm: u32) -> Result<CalEntry, CalibrateError> {
    fit_nas_from(app, class, imbalance_ppm, None).map(|(e, _)| e)
}

/// [`fit_nas`] from a known T(0) (`t0_ns`; run when None); also returns T(0).
/// T(0) does not depend on the imbalance: at c = 0 every rank computes
/// (1 ± δ) x 0 = 0, so the program is the same at every δ
/// (`t0_program_does_not_depend_on_the_imbalance`), and the imbalance solve
/// runs it once per application instead of once per trial δ.
fn fit_nas_from(
    app: &str,
    class: char,
    imbalance_ppm: u32,
    t0_ns: Option<i64>,
) -> Result<(CalEntry, i64), CalibrateError> {
    let target = fit_target_s(app, class).ok_or_else(|| AppError::Uncalibrated {
        app: app.to_string(),
        class,
    })?;
    let target_ns = (target * 1e9).round() as i64;
    let n = apps::iterations(app, class) as i64;
    let s = solve(
        target_ns,
        t0_ns,
        |gap| gap / n,
        |c| {
            Ok(run_with(
                app,
                class,
                &AppParams {
                    compute_ns_per_iter: c,
                    halo_bytes: 0,
                    imbalance_ppm,
                },
            )?
            .time_ns)
        },
    )?;
    let mut source = NAS_SOURCE.to_string();
    if let Some(row) = validation::seed002_row(app) {
        source.push_str(&format!(
            "; load imbalance fitted so that class B at 4 processes on ghanesh (block) is busy {:.1}% of the time as in seed 002 Table 1",
            row.cpu_pct
        ));
    }
    if s.clamped {
        source.push_str("; CLAMPED at 0: communication alone exceeds the target");
    }
    let entry = CalEntry {
        clamped: s.clamped,
        t0_s: s.t0_ns as f64 / 1e9,
        compute_ns_per_iter: s.x,
        fitted_s: s.t_ns as f64 / 1e9,
        halo_bytes: 0,
        imbalance_ppm,
        source,
        target_s: validation::table1_target(app, class),
    };
    Ok((entry, s.t0_ns))
}

/// Result of the imbalance solve.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ImbalanceFit {
    pub imbalance_ppm: u32,
    /// Model CPU utilization at the fitted imbalance, %.
    pub cpu_pct: f64,
    /// True when the target is out of reach of δ in [0, 0.95] (δ at a bound).
    pub at_bound: bool,
}

/// Solves u(δ) = `target_pct` for the imbalance δ (ppm) with u non-increasing in
/// δ: u(0) at or below the target gives δ = 0 (the model already waits at least as
/// much as measured); else a probe at δ1 = u(0) / target - 1 (exact when u = u(0)
/// / (1 + δ)), then secant steps on 1/u to |u - target| <= [`CPU_FIT_POINTS`],
/// δ clamped to [0, `MAX_IMBALANCE_PPM`]; where the secant stalls, the bound closes
/// the bracket if no point did, and bisection of the bracket of evaluated points
/// (above / below the target) to 1 ppm ([`root::find_root`]). Returns the best point
/// evaluated.
pub fn solve_imbalance(
    target_pct: f64,
    cpu: impl Fn(u32) -> Result<f64, CalibrateError>,
) -> Result<ImbalanceFit, CalibrateError> {
    let u0 = cpu(0)?;
    if u0 <= target_pct + CPU_FIT_POINTS {
        return Ok(ImbalanceFit {
            imbalance_ppm: 0,
            cpu_pct: u0,
            at_bound: u0 < target_pct - CPU_FIT_POINTS,
        });
    }
    let problem = root::Problem {
        residual: |u: &f64| 1.0 / u - 1.0 / target_pct,
        error: |u: &f64| (u - target_pct).abs(),
        tolerance: CPU_FIT_POINTS,
        max: Some(i64::from(MAX_IMBALANCE_PPM)),
    };
    let first = root::Point { x: 0, v: u0 };
    let best = root::find_root(&problem, first, probe_ppm(u0 / target_pct - 1.0), |d| {
        cpu(d as u32)
    })?;
    let ppm = best.x as u32;
    Ok(ImbalanceFit {
        imbalance_ppm: ppm,
        cpu_pct: best.v,
        at_bound: (best.v - target_pct).abs() > CPU_FIT_POINTS
            && (ppm == 0 || ppm == MAX_IMBALANCE_PPM),
    })
}

/// δ as a fraction to ppm, rounded and clamped to [0, `MAX_IMBALANCE_PPM`].
fn probe_ppm(d: f64) -> i64 {
    (d * 1e6).round().clamp(0.0, f64::from(MAX_IMBALANCE_PPM)) as i64
}

/// Seed 002's configuration with explicit parameters: (app, class B, 4 processes)
/// alone on `ghanesh` under `block`.
pub fn seed002_run(app: &str, params: &AppParams) -> Result<DedicatedRun, CalibrateError> {
    dedicated_on(
        &seed002_platform()?,
        S002_POLICY,
        apps::build_with(app, S002_CLASS, S002_PROCS, params)?,
    )
}

/// CPU utilization of a dedicated run, %: CPU time of the job over (ranks x run time).
pub fn cpu_pct(run: &DedicatedRun, ranks: u32) -> f64 {
    run.cpu_ns as f64 / (ranks as f64 * run.time_ns as f64) * 100.0
}

/// The joint fit's imbalance of `app` (0 without a seed 002 Table 1 row): for a
/// trial δ, c_B is fitted to seed 000 Table 1 on choi2004, then seed 002's
/// configuration is run with (c_B, δ) and its CPU utilization compared.
pub fn fit_imbalance(app: &str) -> Result<ImbalanceFit, CalibrateError> {
    fit_imbalance_and_entry(app).map(|(fit, _)| fit)
}

/// [`fit_imbalance`] and the class B entry fitted at the imbalance found (the
/// solve fits c_B at every trial δ; None without a seed 002 row), so that the
/// full fit does not fit that entry a second time.
fn fit_imbalance_and_entry(
    app: &str,
) -> Result<(ImbalanceFit, Option<CalEntry>), CalibrateError> {
    let Some(row) = validation::seed002_row(app) else {
        let fit = ImbalanceFit {
            imbalance_ppm: 0,
            cpu_pct: f64::NAN,
            at_bound: false,
        };
        return Ok((fit, None));
    };
    let entries = std::cell::RefCell::new(BTreeMap::new());
    let t0 = std::cell::Cell::new(None);
    let fit = solve_imbalance(row.cpu_pct, |ppm| {
        let (e, t0_ns) = fit_nas_from(app, S002_CLASS, ppm, t0.get())?;
        t0.set(Some(t0_ns));
        let run = seed002_run(
            app,
            &AppParams {
                compute_ns_per_iter: e.compute_ns_per_iter,
                halo_bytes: 0,
                imbalance_ppm: ppm,
            },
        )?;
        entries.borrow_mut().insert(ppm, e);
        Ok(cpu_pct(&run, S002_PROCS))
    })?;
    let entry = entries.into_inner().remove(&fit.imbalance_ppm);
    Ok((fit, entry))
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
                imbalance_ppm: 0,
            },
        )?
        .time_ns)
    };
    // Probe: the bytes the remaining time would carry at the platform bandwidth,
    // spread over one exchange per iteration.
    let bw = platform()?.bandwidth_mb_s * 1e6 / 1e9; // bytes per ns
    let iters = long::iterations(app) as f64;
    let s = solve(target_ns, None, |gap| (gap as f64 / iters * bw) as i64, run)?;
    Ok(CalEntry {
        clamped: s.clamped,
        t0_s: s.t0_ns as f64 / 1e9,
        compute_ns_per_iter: c,
        fitted_s: s.t_ns as f64 / 1e9,
        halo_bytes: s.x as u64,
        imbalance_ppm: 0,
        source: format!(
            "fit: compute = {:.0}% of the seed 000 Table 1(b) time (G-APP-2) / {} iterations; halo bytes solved on a dedicated 16-process run on choi2004 (nls, MPL 1)",
            long::compute_share(app) * 100.0,
            long::iterations(app)
        ),
        target_s: validation::table1_target(app, class),
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
            imbalance_ppm: 0,
        },
    )?;
    Ok(CalEntry {
        clamped: false,
        t0_s: t0.time_s(),
        compute_ns_per_iter: c,
        fitted_s: t.time_s(),
        halo_bytes: 0,
        imbalance_ppm: 0,
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
            if validation::table1_target(app, class).is_some() {
                v.push((*app, class));
            }
        }
    }
    v
}

fn fit_one(app: &str, class: char, imbalance_ppm: u32) -> Result<CalEntry, CalibrateError> {
    if LONG_APPS.contains(&app) {
        fit_long(app)
    } else {
        fit_nas(app, class, imbalance_ppm)
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
             compute at P processes = c x 16 / P; jointly, per app in seed 002 Table 1, the load imbalance across ranks \
             (rank compute (1 - d) c .. (1 + d) c) solved so that class B at {S002_PROCS} processes alone on {S002_PLATFORM} \
             ({S002_POLICY}) has seed 002 Table 1's CPU utilization to {CPU_FIT_POINTS} points, with c_B refitted at each \
             trial d; objective per app: sum of squared relative time errors + squared utilization error (fraction), \
             weight 1 each; d = 0 without a seed 002 row; FT derived from the MG C fit; sPPM and BlockSolve95 fit their \
             halo size with the G-APP-2 compute share (cosched::calibrate)"
        ),
        platform: PLATFORM.to_string(),
        policy: POLICY.to_string(),
        procs: PROCS,
        target: "seed 000 (Choi et al., Coscheduling in Clusters: Is It a Viable Alternative?) Table 1: execution time at 16 processors of NAS classes A, B, C, sPPM and BlockSolve95; and seed 002 (Ghanesh et al., Empirical Evaluation of Shared Parallel Execution on Independently Scheduled Clusters) Table 1: average CPU utilization of NAS class B on 4 nodes".to_string(),
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

/// Fits the given (app, class) pairs at the given load imbalances (ppm per app,
/// 0 when absent; FT pairs are derived from `mg_c`, which must then be given).
pub fn fit_some(
    pairs: &[(&str, char)],
    imbalance: &BTreeMap<String, u32>,
    mg_c: Option<&CalEntry>,
) -> Result<Calibration, CalibrateError> {
    let fitted = parallel_map(pairs, |&(app, class)| {
        if app == "FT" {
            derive_ft(class, mg_c.expect("FT needs the MG C entry"))
        } else {
            fit_one(app, class, imbalance.get(app).copied().unwrap_or(0))
        }
    });
    let mut map = BTreeMap::new();
    for (&(app, class), e) in pairs.iter().zip(fitted) {
        insert(&mut map, app, class, e?);
    }
    Ok(header(map))
}

/// The imbalances of the joint fit, per application of seed 002 Table 1, each
/// with the class B entry fitted at it.
pub fn fit_imbalances(
) -> Result<BTreeMap<String, (ImbalanceFit, Option<CalEntry>)>, CalibrateError> {
    let names: Vec<&str> = validation::SEED002_TABLE1.iter().map(|r| r.app).collect();
    let fits = parallel_map(&names, |app| fit_imbalance_and_entry(app));
    names
        .iter()
        .zip(fits)
        .map(|(a, f)| Ok((a.to_string(), f?)))
        .collect()
}

/// The imbalance per application recorded in a calibration table.
pub fn imbalances_of(cal: &Calibration) -> BTreeMap<String, u32> {
    cal.apps
        .iter()
        .filter_map(|(a, m)| m.values().next().map(|e| (a.clone(), e.imbalance_ppm)))
        .collect()
}

/// The full fit: the imbalances (joint with seed 002 Table 1), every target at
/// them (the class B entries the imbalance solves fitted at them are kept, not
/// fitted again), then FT from MG C.
pub fn fit_all() -> Result<Calibration, CalibrateError> {
    let joint = fit_imbalances()?;
    let imbalance: BTreeMap<String, u32> = joint
        .iter()
        .map(|(a, (f, _))| (a.clone(), f.imbalance_ppm))
        .collect();
    let already = |app: &str, class: char| {
        class == S002_CLASS && joint.get(app).is_some_and(|(_, e)| e.is_some())
    };
    let all = targets();
    let pairs: Vec<(&str, char)> = all.iter().copied().filter(|&(a, c)| !already(a, c)).collect();
    let mut cal = fit_some(&pairs, &imbalance, None)?;
    for (app, class) in all.into_iter().filter(|&(a, c)| already(a, c)) {
        let e = joint[app].1.clone().expect("already fitted");
        insert(&mut cal.apps, app, class, e);
    }
    let mg_c = cal.apps["MG"]["C"].clone();
    let ft: Vec<(&str, char)> = apps::CLASSES.iter().map(|&c| ("FT", c)).collect();
    let ft = fit_some(&ft, &imbalance, Some(&mg_c))?;
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
                || e.imbalance_ppm != c.imbalance_ppm
                || e.clamped != c.clamped
                || e.source != c.source
                || e.target_s != c.target_s
                || !close(e.fitted_s, c.fitted_s)
                || !close(e.t0_s, c.t0_s)
            {
                d.push(format!(
                    "{app} {class}: fresh c = {} ns, halo {}, imbalance {} ppm (fitted {} s), committed c = {} ns, halo {}, imbalance {} ppm (fitted {} s)",
                    e.compute_ns_per_iter, e.halo_bytes, e.imbalance_ppm, e.fitted_s,
                    c.compute_ns_per_iter, c.halo_bytes, c.imbalance_ppm, c.fitted_s
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
        let target = validation::table1_target(app, class).expect("targets() has a time");
        let measured = run.time_s();
        Ok(ValidationRow {
            app: app.to_string(),
            class: class.to_string(),
            procs: PROCS,
            measured_s: measured,
            target_s: target,
            error: (measured - target) / target,
            comm_fraction: run.comm_fraction(),
            intensity: apps::intensity(app)
                .map(|i| i.label().to_string())
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
/// dedicated 16-process run not spent computing on `choi2004` (waits for
/// transfers and, since the joint fit, for the slowest rank):
/// - MG ("Medium") above IS ("High") in every class (33.4/31.4/31.5% against IS
///   15.7/26.0/23.2%, A/B/C) and SP ("Medium") above IS in classes A and C (27.2%
///   and 24.2% against 15.7% and 23.2%; B: 25.1% against 26.0% holds): the joint
///   fit gives MG and SP a load imbalance (0.45, 0.29) that makes their processes
///   as idle as seed 002 measured on its cluster (69.0%, 77.2% busy), while IS
///   keeps none (on `ghanesh` IS is less busy than measured, 31.0% against 42.3%),
///   so its waits at 16 processes are only its Myrinet transfers. Those are near
///   their link time since GM's packets interleave (a message waiting for a busy
///   receiver no longer holds its sender's link): IS's communication-only time at
///   16 processes fell from 0.26/1.04/4.16 s to 0.11/0.44/1.73 s. (With whole
///   messages holding their senders, IS waited 28.1/46.2/42.4% and only MG A was
///   above it.) Seed 002's own order of utilization (IS < CG < MG < SP) holds on
///   `ghanesh`.
/// - SP and MG ("Medium") above CG ("High"), every class (A: 27.2%, 33.4% against
///   CG 26.6%; B: 25.1%, 31.4% against 19.6%; C: 24.2%, 31.5% against 15.5%):
///   on `ghanesh` CG's Fast Ethernet transfers, queued at the receiving NICs
///   (incast), explain much of its idle time, so the joint fit gives CG a smaller
///   imbalance (0.12, against 0.29 for SP and 0.45 for MG); on Myrinet CG's
///   transfers shrink while the imbalance's waits do not.
pub const KNOWN_INTENSITY_DEVIATIONS: [(&str, &str); 4] =
    [("MG", "IS"), ("SP", "IS"), ("SP", "CG"), ("MG", "CG")];

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
    let label = apps::intensity;
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
/// preset's EP-fitted CPU speed, the joint fit and TCP's per-byte host CPU, 15 of the
/// 24 compared cells match.
/// - MG, time and rates: seed 000 Table 1's MG class B time (61.5 s at 16 processes,
///   the calibration target) is inconsistent with its classes A and C (§2.1: B/A =
///   25.6 against a work ratio of 5), while seed 002 measures MG B at 37.0 s on 4
///   processes. The preset's class B compute makes the run about 12x seed 002's; the
///   same messages over a 12x longer run give about 1/12 of the rates.
/// - LU exec_s, msgs_per_s, kb_per_s: strong scaling of seed 000's 16-process time
///   (G-APP-1) at the EP-fitted speed predicts 2.1x seed 002's 511.7 s; the two
///   papers' LU times do not fit one compute constant and one CPU speed. The rates
///   follow (the model sends the NPB message counts, §2.4's cross-check, over a
///   longer run).
/// - IS exec_s, kb_per_s: at 4 processes on Fast Ethernet the alltoallv of 3/4 of
///   the keys (25.2 MB sent and 25.2 MB received per node and iteration, 2.29 s at
///   11 MB/s each way) dominates IS. Its compute (seed 000's fitted constant at the
///   EP-fitted speed, 1.18 s per iteration) plus TCP's per-byte host CPU (4.444 ns
///   per byte at each end, G-NET-3: 50.4 MB x 4.444 ns = 0.22 s per iteration) gives
///   15.5 CPU-s per process against the 34.3 seed 002 measured (42.3% of 81.2 s).
///   The run takes 39.8 s against 81.2 s (0.49x), so the 277 MB per node (within 21%
///   of the table's 352 MB) give 6,950 against 4,333 kB/s (1.60x, past the factor
///   1.5); IS is 38.9% busy against 42.3% (within 15 points; 31.0% before the
///   per-byte CPU) with no load imbalance (the fit's bound).
///   Of the missing 41.4 s, 18.9 s are CPU (IS's compute on the Xeon or TCP's
///   per-byte cost: the table's one CPU column cannot split them) and 22.5 s are
///   off the CPU: the all-to-all moves its 25.2 MB per node at 54% of the assumed
///   11 MB/s. The traffic itself matches (S002's 352 MB per node is within 5% of
///   the model's 369 MB counted with the alltoallv's self part, which a profiler of
///   MPI calls sees and no link carries). TCP segment loss under all-to-all with
///   Linux's 200 ms minimum retransmission timeout would explain the time off the
///   CPU, but no source gives the loss rate: not modelled
///   (docs/models/seed-parameters.md §2.4).
/// - CG kb_per_s: 1,794 against 2,700 kB/s (-34%, just past the factor 1.5). With
///   the per-byte CPU the fitted imbalance that holds CG at seed 002's 59.4% busy
///   rose from 12.3% to 13.6%, so the run waits longer (495.6 s against 417.2 s;
///   487.8 s before) and the same 889 MB per node spread over it (the per-node
///   volume is -21% in either case).
/// - CG, SP and MG cpu_pct are no longer deviations: the joint calibration fits
///   each application's load imbalance to this column (`fit_imbalance`).
pub const KNOWN_SEED002_DEVIATIONS: [(&str, &str); 9] = [
    ("CG", "kb_per_s"),
    ("MG", "exec_s"),
    ("MG", "msgs_per_s"),
    ("MG", "kb_per_s"),
    ("LU", "exec_s"),
    ("LU", "msgs_per_s"),
    ("LU", "kb_per_s"),
    ("IS", "exec_s"),
    ("IS", "kb_per_s"),
];

/// The `ghanesh` platform at its preset CPU speed.
pub fn seed002_platform() -> Result<NodePlatform, CalibrateError> {
    NodePlatform::preset(S002_PLATFORM).map_err(CalibrateError::Platform)
}

/// Dedicated EP class B run at 4 processes on `ghanesh` at `speed`.
fn ep_on_ghanesh(speed: f64) -> Result<DedicatedRun, CalibrateError> {
    let mut plat = seed002_platform()?;
    plat.cpu_speed = speed;
    dedicated_on(
        &plat,
        S002_POLICY,
        apps::build("EP", S002_CLASS, S002_PROCS)?,
    )
}

/// Fits the `ghanesh` preset's `cpu_speed` on a dedicated run: EP class B at 4
/// processes alone on 4 nodes takes seed 002 Table 1's time. EP is pure compute
/// (four allreduces at the end), so its time is nearly compute / speed: the fixed
/// point speed <- speed x T(speed) / target converges in a few runs. Returned
/// rounded to 4 significant digits (the preset's constant).
pub fn fit_cpu_speed() -> Result<f64, CalibrateError> {
    let target = validation::seed002_row("EP")
        .expect("EP is in the table")
        .exec_s;
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
    /// Messages sent per node over the whole run (rate x time): the platform-free
    /// form of the message rate (depends on neither processor nor network).
    pub msgs_per_node: f64,
    pub paper_msgs_per_node: f64,
    /// KB sent per node over the whole run (rate x time).
    pub kb_per_node: f64,
    pub paper_kb_per_node: f64,
    /// Error per column: relative ((model - paper) / paper) for exec_s,
    /// msgs_per_s, kb_per_s, msgs_per_node and kb_per_node (none where the paper
    /// prints 0), percentage points (model - paper) for cpu_pct.
    pub errors: BTreeMap<String, Option<f64>>,
    /// The joint fit's load imbalance of the preset, ppm (`apps::imbalance_factor`).
    pub imbalance_ppm: u32,
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
    parallel_map(&validation::SEED002_TABLE1, |row| {
        let program = apps::build(row.app, S002_CLASS, S002_PROCS)?;
        let memory_mb = program.memory_mb;
        let run = dedicated_on(&plat, S002_POLICY, program)?;
        let t = run.time_s();
        let measured = [
            t,
            run.messages as f64 / n / t,
            run.bytes_sent as f64 / 1000.0 / n / t,
            cpu_pct(&run, S002_PROCS),
        ];
        let counts = [run.messages as f64 / n, run.bytes_sent as f64 / 1000.0 / n];
        let paper_counts = [row.msgs_per_s * row.exec_s, row.kb_per_s * row.exec_s];
        let rel = |m: f64, p: f64| (p > 0.0).then(|| (m - p) / p);
        let errors: BTreeMap<String, Option<f64>> = [
            ("exec_s", rel(measured[0], row.exec_s)),
            ("msgs_per_s", rel(measured[1], row.msgs_per_s)),
            ("kb_per_s", rel(measured[2], row.kb_per_s)),
            ("cpu_pct", Some(measured[3] - row.cpu_pct)),
            ("msgs_per_node", rel(counts[0], paper_counts[0])),
            ("kb_per_node", rel(counts[1], paper_counts[1])),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let imbalance_ppm = apps::calibration()?
            .params(row.app, S002_CLASS)
            .map_or(0, |p| p.imbalance_ppm);
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
            msgs_per_node: counts[0],
            paper_msgs_per_node: paper_counts[0],
            kb_per_node: counts[1],
            paper_kb_per_node: paper_counts[1],
            errors,
            imbalance_ppm,
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
        // suite (tests/python/test_apps.py) through the installed extension
        // (`_core.apps_fit_differences`).
        // At the committed imbalances (their fit needs class B runs; the Python suite
        // checks it with the full fit).
        let committed = apps::calibration().unwrap();
        let pairs: Vec<(&str, char)> = targets().into_iter().filter(|&(_, c)| c == 'A').collect();
        let fresh = fit_some(&pairs, &imbalances_of(committed), None).unwrap();
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
        assert!(
            unknown.is_empty(),
            "new deviations from seed 002 Table 1: {unknown:?}"
        );
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
        let s = solve(8000, None, |gap| gap / 10, |x| Ok(1000 + 7 * x)).unwrap();
        assert_eq!((s.x, s.t_ns, s.clamped), (1000, 8000, false));
        // Piecewise: T = max(5000, 1000 + 7x) + x.
        let s = solve(
            20_000,
            None,
            |gap| gap / 100,
            |x| Ok((5000i64).max(1000 + 7 * x) + x),
        )
        .unwrap();
        assert_eq!(s.t_ns, 20_000);
        // Unreachable: T(0) above the target.
        let s = solve(500, None, |g| g, |x| Ok(1000 + x)).unwrap();
        assert_eq!((s.x, s.t_ns, s.clamped), (0, 1000, true));
        // A known T(0) is not run again: the same answer from the runs at x > 0 only.
        let s = solve(
            8000,
            Some(1000),
            |gap| gap / 10,
            |x| {
                assert!(x > 0, "T(0) run although given");
                Ok(1000 + 7 * x)
            },
        )
        .unwrap();
        assert_eq!((s.x, s.t_ns, s.t0_ns), (1000, 8000, 1000));
    }

    #[test]
    fn differences_name_a_changed_or_missing_entry() {
        let committed = apps::calibration().unwrap();
        assert!(differences(committed, committed).is_empty());
        let mut changed = committed.clone();
        let cg_b = changed.apps.get_mut("CG").unwrap().get_mut("B").unwrap();
        cg_b.compute_ns_per_iter += 1;
        let d = differences(&changed, committed);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].starts_with("CG B: fresh c = "), "{d:?}");
        let mut missing = committed.clone();
        missing.apps.get_mut("EP").unwrap().remove("A");
        assert_eq!(
            differences(committed, &missing),
            ["EP A: missing from the committed table"]
        );
    }

    #[test]
    fn t0_program_does_not_depend_on_the_imbalance() {
        // The imbalance solve reuses T(0) across its trials δ: at c = 0 the program
        // (hence its dedicated run) is the same at every δ.
        for app in NAS_APPS {
            let at = |compute_ns_per_iter, imbalance_ppm| {
                apps::build_with(
                    app,
                    S002_CLASS,
                    PROCS,
                    &AppParams {
                        compute_ns_per_iter,
                        halo_bytes: 0,
                        imbalance_ppm,
                    },
                )
                .unwrap()
                .ranks
            };
            assert_eq!(at(0, 0), at(0, MAX_IMBALANCE_PPM), "{app}");
            // A positive c does depend on it (the comparison can fail).
            assert_ne!(at(1_000_000, 0), at(1_000_000, MAX_IMBALANCE_PPM), "{app}");
        }
    }

    #[test]
    fn the_imbalance_solve_meets_a_utilization_worked_by_hand() {
        // Busy 80% with no imbalance and u = 80 / (1 + δ): 64% needs 1 + δ = 1.25,
        // δ = 250,000 ppm, found at the probe.
        let s = solve_imbalance(64.0, |ppm| Ok(80.0 / (1.0 + ppm as f64 / 1e6))).unwrap();
        assert_eq!((s.imbalance_ppm, s.at_bound), (250_000, false));
        assert!((s.cpu_pct - 64.0).abs() < 1e-9);
        // A fixed wait as well: u = 100 / (1.2 + δ) (83.3% at 0); 50% needs
        // δ = 2 - 1.2 = 0.8. The probe (83.3 / 50 - 1 = 0.667) misses; 1/u is affine
        // in δ, so one secant step lands on 800,000 ppm.
        let s = solve_imbalance(50.0, |ppm| Ok(100.0 / (1.2 + ppm as f64 / 1e6))).unwrap();
        assert_eq!((s.imbalance_ppm, s.at_bound), (800_000, false));
        // Already less busy than the target: δ = 0, at the bound.
        let s = solve_imbalance(90.0, |_| Ok(85.0)).unwrap();
        assert_eq!((s.imbalance_ppm, s.cpu_pct, s.at_bound), (0, 85.0, true));
        // Out of reach from above: δ stops at its bound, 950,000 ppm.
        let s = solve_imbalance(10.0, |ppm| Ok(90.0 / (1.0 + ppm as f64 / 1e6))).unwrap();
        assert_eq!((s.imbalance_ppm, s.at_bound), (MAX_IMBALANCE_PPM, true));
    }

    #[test]
    fn the_imbalance_solve_bisects_where_the_secant_stalls() {
        // Flat at 80% to δ = 0.3, then falling 2,000 points per unit δ to 60% at 0.31:
        // the secant's first step (δ = 80/64 - 1 = 0.25) lands on the plateau, its slope
        // is 0 and it stops; the bound (0.95, 60%) closes the bracket and bisection finds
        // 64% at δ = 0.308 (0.002 points per ppm, so within the fit's 0.01 points).
        let u = |ppm: u32| {
            let d = ppm as f64 / 1e6;
            Ok(if d < 0.3 {
                80.0
            } else {
                (80.0 - 2000.0 * (d - 0.3)).max(60.0)
            })
        };
        let s = solve_imbalance(64.0, u).unwrap();
        assert!((s.cpu_pct - 64.0).abs() <= CPU_FIT_POINTS, "{s:?}");
        assert!((307_990..=308_010).contains(&s.imbalance_ppm), "{s:?}");
        assert!(!s.at_bound);
    }

    #[test]
    fn the_joint_fit_meets_both_targets_on_a_tiny_run() {
        // EP class A, the cheapest preset: at a trial imbalance, c is refitted to
        // seed 000 Table 1 (7.9 s) and the dedicated run still takes it; with δ the
        // last rank computes (1 + δ) c x iterations, so the mean compute (what the
        // CPU is busy with) is 1 / (1 + δ) of the run, within the time of EP's four
        // small allreduces.
        let e0 = fit_nas("EP", 'A', 0).unwrap();
        let e = fit_nas("EP", 'A', 250_000).unwrap();
        assert!((e.fitted_s - 7.9).abs() <= 7.9 * FIT_TOLERANCE, "{e:?}");
        let ratio = e0.compute_ns_per_iter as f64 / e.compute_ns_per_iter as f64;
        assert!((ratio - 1.25).abs() < 1e-3, "c shrinks by 1 + δ: {ratio}");
        let run = run_with(
            "EP",
            'A',
            &AppParams {
                compute_ns_per_iter: e.compute_ns_per_iter,
                halo_bytes: 0,
                imbalance_ppm: 250_000,
            },
        )
        .unwrap();
        assert!(
            (1.0 - run.comm_fraction() - 0.8).abs() < 1e-3,
            "{}",
            run.comm_fraction()
        );
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
        // The labels that do separate: High above every other label but the known
        // deviations, every label above Very low.
        let frac = |app: &str| rows.iter().find(|r| r.app == app).unwrap().comm_fraction;
        for high in ["CG", "IS"] {
            for other in ["SP", "MG", "BT", "LU", "EP"] {
                if !KNOWN_INTENSITY_DEVIATIONS.contains(&(other, high)) {
                    assert!(frac(high) > frac(other), "{high} vs {other}");
                }
            }
        }
        for other in ["CG", "IS", "SP", "MG", "BT", "LU"] {
            assert!(frac(other) > frac("EP"), "{other} vs EP");
        }
    }
}
