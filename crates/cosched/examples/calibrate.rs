//! Fits the application library's compute constants to seed 000 Table 1 and
//! their load imbalance to seed 002 Table 1's CPU utilization (the joint fit),
//! with dedicated runs only (see `cosched::calibrate`), and prints the table.
//!
//! Usage:
//!   cargo run --release -p cosched --example calibrate              # fit and print
//!   cargo run --release -p cosched --example calibrate -- --write   # also rewrite
//!       crates/cosched-model/src/apps/calibration.json
//!   cargo run --release -p cosched --example calibrate -- --check   # exit 1 if the
//!       committed file differs from a fresh fit
//!   cargo run --release -p cosched --example calibrate -- --bench   # time `validate`
//!       and the largest dedicated run (events per second); no fit

use cosched::calibrate;
use cosched::model::apps;
use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let write = args.iter().any(|a| a == "--write");
    let check = args.iter().any(|a| a == "--check");
    if let Some(bad) = args
        .iter()
        .find(|a| !["--write", "--check", "--bench"].contains(&a.as_str()))
    {
        eprintln!("unknown argument {bad:?}; usage: calibrate [--write] [--check] [--bench]");
        return ExitCode::from(2);
    }
    if args.iter().any(|a| a == "--bench") {
        return bench();
    }
    let t = Instant::now();
    let cal = match calibrate::fit_all() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let wall = t.elapsed().as_secs_f64();
    println!(
        "{:<13} {:>5} {:>9} {:>11} {:>16} {:>13} {:>11} {:>9} {:>8}",
        "app", "class", "target_s", "t0_s", "compute_s/iter", "imbalance_ppm", "fitted_s", "error_%", "clamped"
    );
    for (app, classes) in &cal.apps {
        for (class, e) in classes {
            let err = e
                .target_s
                .map(|t| format!("{:.4}", (e.fitted_s - t) / t * 100.0))
                .unwrap_or_else(|| "-".into());
            println!(
                "{:<13} {:>5} {:>9} {:>11.3} {:>16.6} {:>13} {:>11.3} {:>9} {:>8}",
                app,
                class,
                e.target_s
                    .map(|t| format!("{t:.1}"))
                    .unwrap_or_else(|| "-".into()),
                e.t0_s,
                e.compute_ns_per_iter as f64 / 1e9,
                e.imbalance_ppm,
                e.fitted_s,
                err,
                e.clamped
            );
        }
    }
    println!("fit wall time: {wall:.1} s");
    let path = calibrate::calibration_path();
    if check {
        let committed = match apps::calibration() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(1);
            }
        };
        let diff = calibrate::differences(&cal, committed);
        if !diff.is_empty() {
            eprintln!("{} is stale:\n{}", path.display(), diff.join("\n"));
            return ExitCode::from(1);
        }
        println!("{} matches a fresh fit", path.display());
    }
    if write {
        if let Err(e) =
            cosched::model::write::write_atomic(&path, calibrate::to_json(&cal).as_bytes())
        {
            eprintln!("error: cannot write {}: {e}", path.display());
            return ExitCode::from(1);
        }
        println!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}

/// Wall time of `validate` and the events per second of the largest dedicated run.
fn bench() -> ExitCode {
    let t = Instant::now();
    let rows = match calibrate::validate() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let wall = t.elapsed().as_secs_f64();
    let worst = rows.iter().map(|r| r.error.abs()).fold(0.0f64, f64::max);
    println!(
        "validate: {} runs in {wall:.2} s, largest |error| {:.6}%",
        rows.len(),
        worst * 100.0
    );
    let big = rows.iter().max_by_key(|r| r.events).expect("rows");
    let class = big.class.chars().next().expect("class");
    let program = match apps::build(&big.app, class, calibrate::PROCS) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let t = Instant::now();
    let run = match calibrate::dedicated(program) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let wall = t.elapsed().as_secs_f64();
    println!(
        "largest run {} {}: {} events, {} messages, {:.1} simulated s in {wall:.2} s wall: {:.0} events/s",
        big.app,
        big.class,
        run.events,
        run.messages,
        run.time_s(),
        run.events as f64 / wall
    );
    ExitCode::SUCCESS
}
