//! Seed 002 Table 1 ("Execution characteristics of the NAS benchmarks: 4 threads run
//! on 4 nodes", class B) measured on the model: each NAS preset, class B at 4
//! processes, runs dedicated on the `ghanesh` platform (one process per node,
//! blocking waits as S002 §4 states) and the example prints the table's columns
//! beside the paper's numbers.
//!
//! This is a comparison, not a fit: the NAS compute constants are calibrated to
//! seed 000 Table 1 (16 processes on `choi2004`), and nothing here changes them.
//!
//! Columns: execution time (s); messages dispatched per node per second (every
//! point-to-point send, collectives included, divided by 4 nodes and the run time);
//! data dispatched per node (KB/s, 1 KB = 1000 bytes); average CPU utilization
//! (CPU time of the job's processes over 4 x the run time); memory per process (MB).
//!
//! Run: `cargo run --release -p cosched --example seed002_table1`

use cosched::des::SimTime;
use cosched::engine::process::{simulate_processes, ProcJob, ProcOptions};
use cosched::model::node::NodePlatform;
use cosched::model::program::Op;

/// S002 Table 1: (app, exec s, msgs/s per node, KB/s per node, % CPU, MB).
const SEED002_TABLE1: [(&str, f64, f64, f64, f64, f64); 6] = [
    ("CG", 417.2, 19.1, 2700.0, 59.4, 110.0),
    ("EP", 228.6, 0.0, 0.0, 99.5, 0.0),
    ("IS", 81.2, 1.3, 4333.0, 42.3, 121.0),
    ("LU", 511.7, 98.8, 577.0, 91.6, 50.0),
    ("MG", 37.0, 89.3, 3020.0, 69.0, 114.0),
    ("SP", 881.3, 5.4, 1343.0, 77.2, 90.0),
];

/// Bytes a rank sends, loops counted with their repetitions.
fn bytes_sent(ops: &[Op]) -> u64 {
    let mut total = 0u64;
    let mut i = 0;
    while i < ops.len() {
        match ops[i] {
            Op::Loop { count, len } => {
                total += count as u64 * bytes_sent(&ops[i + 1..i + 1 + len as usize]);
                i += 1 + len as usize;
            }
            Op::Send { bytes, .. } | Op::Isend { bytes, .. } | Op::Reply { bytes, .. } => {
                total += bytes;
                i += 1;
            }
            _ => i += 1,
        }
    }
    total
}

fn main() {
    let plat = NodePlatform::preset("ghanesh").expect("preset");
    let block = || cosched::policies::build_node("block").expect("registered");
    println!(
        "{:<4} {:>17} {:>15} {:>17} {:>13} {:>13}",
        "app", "exec s (S002)", "msgs/s (S002)", "KB/s (S002)", "%CPU (S002)", "MB (S002)"
    );
    for (app, t_p, m_p, kb_p, cpu_p, mb_p) in SEED002_TABLE1 {
        let program = cosched::model::apps::build(app, 'B', 4).expect("preset");
        let bytes: u64 = program.ranks.iter().map(|r| bytes_sent(r)).sum();
        let mb = program.memory_mb;
        let out = simulate_processes(
            &plat,
            &[ProcJob::new(program, SimTime::ZERO)],
            &block,
            &ProcOptions::default(),
        )
        .expect("dedicated run");
        let t = (out.jobs[0].end - out.jobs[0].start).as_secs_f64();
        let msgs = out.counters.messages as f64 / 4.0 / t;
        let kb = bytes as f64 / 1000.0 / 4.0 / t;
        let cpu = out.proc_cpu_ns.iter().sum::<i64>() as f64 / 1e9 / (4.0 * t) * 100.0;
        println!(
            "{app:<4} {t:>8.1} ({t_p:>6.1}) {msgs:>6.1} ({m_p:>6.1}) {kb:>7.0} ({kb_p:>7.0}) {cpu:>5.1} ({cpu_p:>5.1}) {mb:>5.0} ({mb_p:>5.0})"
        );
    }
}
