//! Why PB collapses on two CG class A jobs sharing the 16 nodes of `choi2004`
//! (docs/models/pb-lockstep.md): each scheme's execution time, the share of the run
//! during which all 16 ranks of a job are on a CPU at once, the share of CPU time
//! spent spinning, context switches and followed recommendations; then the same
//! with one node's scheduler state perturbed by a one-process job computing 100 ms
//! on node 0 (NLS's lockstep depends on every node's scheduler being in the same
//! state). Seed 0, MPL 3, PACKING.
//! Usage: cargo run --release -p cosched --example pb_lockstep

use cosched::des::SimTime;
use cosched::engine::process::{simulate_processes, ProcJob, ProcOptions, ProcOutput, SegmentKind};
use cosched::model::node::NodePlatform;
use cosched::model::program::{Builder, Op};

const RANKS: i32 = 16;

/// Share of the run during which all ranks of job `job` are on a CPU at once.
fn coscheduled(out: &ProcOutput, job: usize, end: i64) -> f64 {
    let mut ev: Vec<(i64, i32)> = Vec::new();
    for s in out.timeline.iter().filter(|s| {
        s.job == job && s.cpu.is_some() && s.kind != SegmentKind::Switch
    }) {
        ev.push((s.start.as_ns(), 1));
        ev.push((s.end.as_ns(), -1));
    }
    ev.sort_unstable();
    let (mut on, mut full, mut last) = (0, 0i64, 0i64);
    for (t, d) in ev {
        if on == RANKS {
            full += t - last;
        }
        last = t;
        on += d;
    }
    full as f64 / end as f64
}

fn main() {
    let plat = NodePlatform::preset("choi2004").expect("preset");
    let cg = cosched::model::apps::build("CG", 'A', 16).expect("CG A");
    let mut blip = Builder::new(1);
    blip.all(Op::Compute { ns: 100_000_000 });
    let blip = blip.build("blip", 1.0);
    println!("| node policy | perturbed | execution (s) | all 16 ranks on a CPU | spinning | context switches | recommendations followed |");
    println!("|---|---|---|---|---|---|---|");
    for perturbed in [false, true] {
        for policy in [
            "nls",
            "pb[period_us=2000]",
            "pb[period_us=10000]",
            "pb[period_us=50000]",
            "hybrid",
        ] {
            let mut jobs = vec![
                ProcJob::new(cg.clone(), SimTime::ZERO),
                ProcJob::new(cg.clone(), SimTime::ZERO),
            ];
            if perturbed {
                jobs.push(ProcJob::new(blip.clone(), SimTime::ZERO));
            }
            let make = || cosched::policies::build_node(policy).expect("policy");
            let opts = ProcOptions {
                mpl: 3,
                seed: 0,
                record_timeline: true,
                ..Default::default()
            };
            let out = simulate_processes(&plat, &jobs, &make, &opts).expect("run");
            let end = out.jobs[..2].iter().map(|r| r.end).max().expect("jobs").as_ns();
            let exec: Vec<String> = out.jobs[..2]
                .iter()
                .map(|r| format!("{:.3}", (r.end - r.start).as_secs_f64()))
                .collect();
            let c = &out.counters;
            println!(
                "| {policy} | {} | {} | {:.1}%, {:.1}% | {:.1}% | {} | {} |",
                if perturbed { "yes" } else { "no" },
                exec.join(", "),
                100.0 * coscheduled(&out, 0, end),
                100.0 * coscheduled(&out, 1, end),
                100.0 * c.spin_ns as f64 / (c.spin_ns + c.useful_ns) as f64,
                c.context_switches,
                c.hints_followed,
            );
        }
    }
}
