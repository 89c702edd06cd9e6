//! Replays one trace under one policy and prints phase timings.
//! Usage: cargo run --release -p cosched --example replay -- TRACE POLICY
//!
//! The instruction counts quoted for a policy's speed are those of the simulate
//! phase alone, taken with callgrind on this example's release build:
//! `valgrind --tool=callgrind --toggle-collect='cosched_engine::cluster::simulate'
//! target/release/examples/replay TRACE POLICY` (the "Collected" line).

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: replay TRACE POLICY");
        std::process::exit(2);
    }
    match cosched::run_trace(&cosched::TraceRun::new(&args[1], &args[2])) {
        Ok(r) => {
            let n = r.summary.jobs_total;
            println!(
                "{} jobs={} parse_s={:.3} simulate_s={:.3} metrics_s={:.3} jobs_per_s={:.0} mean_wait_s={:.1} utilization={:.4}",
                r.summary.policy,
                n,
                r.timings.parse_s,
                r.timings.simulate_s,
                r.timings.metrics_s,
                n as f64 / r.timings.simulate_s,
                r.summary.mean_wait_s,
                r.summary.utilization
            );
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
