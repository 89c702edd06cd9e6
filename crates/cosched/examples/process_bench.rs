//! The scenario of `cosched bench process-level` as a plain binary, for instruction counts
//! (valgrind --tool=callgrind) free of the Python interpreter: 20 NAS jobs of the seed 000
//! mix on choi2004, MPL 3, NLS, memory-aware admission.
//! Usage: cargo run --release -p cosched --example process_bench [SEED]

fn main() {
    let seed = std::env::args()
        .nth(1)
        .map_or(1, |s| s.parse().expect("SEED: a whole number"));
    let b = cosched::process_run::bench_process_level(seed).expect("the benchmark's scenario runs");
    println!(
        "jobs={} events={} simulated_s={:.3} wall_s={:.3} events_per_second={:.0}",
        b.jobs,
        b.events,
        b.simulated_s,
        b.wall_s,
        b.events as f64 / b.wall_s
    );
}
