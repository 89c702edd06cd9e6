//! Differential test: job-level (fluid) gang scheduling against the process-level gang
//! scheduler on the same small workloads.
//!
//! Workloads: seed 003's Emp (every rank computes, no communication) on the 16
//! uniprocessor `choi2004` nodes, so a job's progress depends only on the CPU time its
//! row's slots give it. Each job's run time for the job-level model is its dedicated
//! run time measured at process level (alone, FCFS, MPL 1). Both levels get the same
//! policy string `gang[rows=R,quantum_ms=q,switch_us=c]`, PACKING placement and node
//! count.
//!
//! Checked for every job: the same matrix row (at process level read from the
//! timeline: two jobs that were alive together for more than a rotation are in the
//! same row exactly when they ran at the same time), the same nodes, the same start
//! where the start is the submission (otherwise within the end tolerance, since it
//! follows a completion), and the end within
//!
//! `tol = R (q + c) + s x cs`
//!
//! where `R` is the largest number of non-empty rows during the job's life (one
//! rotation: the fluid model spreads a job's slots evenly over the rotation, the
//! process level gives them whole, so a job ends up to one rotation earlier or later;
//! a row that empties mid-slot ends the slot at once, and a new row waits for its
//! turn in index order), `s = ceil(runtime / q)` the number of slots the job needs
//! and `cs` the node's context switch (5 us on `choi2004`, paid at the start of a
//! slot when the CPU last ran another row's process; the fluid model has none).
//! These are the differences the two models' definitions state (module doc of
//! `cosched_engine::gang_fluid`); the measured differences are printed with `--nocapture`.
//! A job whose row was the only non-empty one through its whole life (`R = 1`) runs at
//! full speed at both levels (the process level starts its row's next slot without a
//! switch, the fluid model gives a lone row the whole machine), so its start and end
//! must agree to the nanosecond: its tolerance is 1 ns of rounding.

use cosched::des::SimTime;
use cosched::engine::process::SegmentKind;
use cosched::model::{JobSpec, Placement, Platform, RunConfig, Workload};
use cosched::RunResult;

const NODES: u32 = 16;
const CS_S: f64 = 5e-6; // choi2004 context_switch_us (assumption G-OS-2)

#[derive(Clone, Copy)]
struct Job {
    quanta: u32,
    procs: u32,
    submit_s: f64,
}

fn process_config(jobs: &[Job], policy: &str) -> String {
    let list: Vec<String> = jobs
        .iter()
        .map(|j| {
            format!(
                r#"{{ app = "Emp[quanta={}]", procs = {}, submit_s = {} }}"#,
                j.quanta, j.procs, j.submit_s
            )
        })
        .collect();
    format!(
        r#"
fidelity = "process"
[node_platform]
preset = "choi2004"
[workload]
jobs = [{}]
[scheduler]
policy = "{policy}"
node_policy = "nls"
placement = "packing"
"#,
        list.join(", ")
    )
}

fn run_process(jobs: &[Job], policy: &str, timeline: bool) -> RunResult {
    let cfg = RunConfig::from_str_with(&process_config(jobs, policy), "diff.toml", None)
        .unwrap_or_else(|e| panic!("{e}"));
    cosched::run_config_recording(&cfg, timeline).unwrap_or_else(|e| panic!("{e}"))
}

/// The job's run time alone on the machine at process level (FCFS, MPL 1).
fn dedicated_s(j: &Job) -> f64 {
    let alone = Job {
        submit_s: 0.0,
        ..*j
    };
    run_process(&[alone], "fcfs", false).table.execution_s[0]
}

/// Per job, its CPU intervals of useful work at process level, merged, sorted.
fn useful_intervals(r: &RunResult, n: usize) -> Vec<Vec<(i64, i64)>> {
    let mut out: Vec<Vec<(i64, i64)>> = vec![Vec::new(); n];
    for s in &r.timeline {
        if s.kind == SegmentKind::Useful && s.cpu.is_some() {
            out[s.job].push((s.start.as_ns(), s.end.as_ns()));
        }
    }
    for v in &mut out {
        v.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::new();
        for &(a, b) in v.iter() {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        *v = merged;
    }
    out
}

fn overlap(a: &[(i64, i64)], b: &[(i64, i64)]) -> bool {
    let (mut i, mut k) = (0, 0);
    while i < a.len() && k < b.len() {
        if a[i].0.max(b[k].0) < a[i].1.min(b[k].1) {
            return true;
        }
        if a[i].1 < b[k].1 {
            i += 1;
        } else {
            k += 1;
        }
    }
    false
}

struct Case {
    name: &'static str,
    rows: u32,
    quantum_ms: f64,
    switch_us: f64,
    jobs: Vec<Job>,
    /// Expected job-level rows (a check of the case's intent, not of the comparison).
    expect_rows: Vec<i64>,
}

#[expect(
    clippy::too_many_lines,
    reason = "one comparison of both fidelities on a case, checked step by step"
)]
fn check(case: &Case) {
    let policy = format!(
        "gang[rows={},quantum_ms={},switch_us={}]",
        case.rows, case.quantum_ms, case.switch_us
    );
    let n = case.jobs.len();
    let proc = run_process(&case.jobs, &policy, true);
    let specs: Vec<JobSpec> = case
        .jobs
        .iter()
        .enumerate()
        .map(|(k, j)| {
            let rt = SimTime::from_secs_f64(dedicated_s(j));
            JobSpec {
                source_id: k as i64,
                submit: SimTime::from_secs_f64(j.submit_s),
                runtime: rt,
                procs: j.procs,
                requested: None,
                estimate: rt,
                kill_after: None,
            }
        })
        .collect();
    let runtimes: Vec<f64> = specs.iter().map(|s| s.runtime.as_secs_f64()).collect();
    let w = Workload::from_jobs(specs, "diff");
    let fluid = cosched::run_workload(
        &w,
        &Platform::new(NODES, 1),
        &policy,
        Placement::Packing,
        0,
        10.0,
    )
    .unwrap();
    let (p, f) = (&proc.table, &fluid.table);
    assert_eq!(f.gang_row.len(), n, "{}: gang_row column", case.name);
    assert_eq!(
        f.gang_row, case.expect_rows,
        "{}: job-level rows are not the case's intent",
        case.name
    );
    let q = case.quantum_ms / 1e3;
    let c = case.switch_us / 1e6;
    let useful = useful_intervals(&proc, n);
    let alive = |t: &cosched::engine::metrics::JobTable, j: usize| (t.start_s[j], t.end_s[j]);
    for j in 0..n {
        // Largest number of non-empty rows during j's life (from the process-level
        // schedule; its rows are the job-level ones, checked below).
        let (s, e) = alive(p, j);
        let mut rows_alive: Vec<i64> = (0..n)
            .filter(|&k| p.start_s[k] < e && p.end_s[k] > s)
            .map(|k| f.gang_row[k])
            .collect();
        rows_alive.sort_unstable();
        rows_alive.dedup();
        let r_max = rows_alive.len() as f64;
        let slots = (runtimes[j] / q).ceil();
        let tol = if r_max <= 1.0 {
            1e-9
        } else {
            r_max * (q + c) + slots * CS_S + 1e-9
        };
        let d_end = f.end_s[j] - p.end_s[j];
        let d_start = f.start_s[j] - p.start_s[j];
        println!(
            "{} job {j}: row {}, start process {:.6} fluid {:.6}, end process {:.6} fluid {:.6} (diff {:+.6} s, tol {:.6} s)",
            case.name, f.gang_row[j], p.start_s[j], f.start_s[j], p.end_s[j], f.end_s[j], d_end, tol
        );
        if p.start_s[j] == case.jobs[j].submit_s {
            assert_eq!(
                f.start_s[j], p.start_s[j],
                "{} job {j}: start at submission",
                case.name
            );
        } else {
            assert!(
                d_start.abs() <= tol,
                "{} job {j}: start differs by {d_start} s (tol {tol})",
                case.name
            );
        }
        assert!(
            d_end.abs() <= tol,
            "{} job {j}: end differs by {d_end} s (tol {tol})",
            case.name
        );
        assert_eq!(
            f.node_list[j], p.node_list[j],
            "{} job {j}: nodes",
            case.name
        );
        // Rows: jobs alive together for more than a rotation ran at the same time
        // exactly when they share a row.
        for k in (j + 1)..n {
            let together = p.end_s[j].min(p.end_s[k]) - p.start_s[j].max(p.start_s[k]);
            if together <= r_max * (q + c) {
                continue;
            }
            let same = f.gang_row[j] == f.gang_row[k];
            assert_eq!(
                overlap(&useful[j], &useful[k]),
                same,
                "{}: jobs {j} and {k} (rows {} and {}) at process level",
                case.name,
                f.gang_row[j],
                f.gang_row[k]
            );
        }
    }
}

fn job(quanta: u32, procs: u32, submit_s: f64) -> Job {
    Job {
        quanta,
        procs,
        submit_s,
    }
}

#[test]
fn one_job_alone() {
    check(&Case {
        name: "alone",
        rows: 3,
        quantum_ms: 100.0,
        switch_us: 1000.0,
        jobs: vec![job(2000, 16, 0.0)],
        expect_rows: vec![0],
    });
}

#[test]
fn two_full_width_jobs_share_two_rows() {
    check(&Case {
        name: "two-full",
        rows: 3,
        quantum_ms: 100.0,
        switch_us: 0.0,
        jobs: vec![job(2000, 16, 0.0), job(4000, 16, 0.0)],
        expect_rows: vec![0, 1],
    });
}

#[test]
fn the_row_limit_blocks_fcfs() {
    // Two rows: the third full-width job waits for a row, and the narrow fourth
    // (which would fit in a row next to nothing) waits behind it.
    check(&Case {
        name: "row-limit",
        rows: 2,
        quantum_ms: 100.0,
        switch_us: 0.0,
        jobs: vec![
            job(2000, 16, 0.0),
            job(3000, 16, 0.0),
            job(2000, 16, 0.3),
            job(400, 4, 0.5),
        ],
        expect_rows: vec![0, 1, 0, 1],
    });
}

#[test]
fn narrow_jobs_share_a_row() {
    check(&Case {
        name: "narrow",
        rows: 3,
        quantum_ms: 100.0,
        switch_us: 1000.0,
        jobs: vec![
            job(2000, 4, 0.0),
            job(3000, 4, 0.0),
            job(1000, 8, 0.2),
            job(1000, 8, 0.4),
        ],
        expect_rows: vec![0, 0, 0, 1],
    });
}

#[test]
fn switch_cost_slows_every_row() {
    check(&Case {
        name: "switch",
        rows: 3,
        quantum_ms: 50.0,
        switch_us: 10000.0,
        jobs: vec![job(2000, 16, 0.0), job(2000, 12, 0.0), job(1000, 8, 0.7)],
        expect_rows: vec![0, 1, 2],
    });
}

#[test]
fn several_rows_with_arrivals_and_completions() {
    check(&Case {
        name: "several",
        rows: 4,
        quantum_ms: 100.0,
        switch_us: 2000.0,
        jobs: vec![
            job(3000, 16, 0.0),
            job(1000, 8, 0.25),
            job(2000, 10, 0.5),
            job(1500, 6, 0.75),
            job(2000, 12, 1.0),
            // Jobs 1 and 3 have left row 1 by then: the first row with room.
            job(800, 16, 2.5),
        ],
        expect_rows: vec![0, 1, 2, 1, 3, 1],
    });
}
