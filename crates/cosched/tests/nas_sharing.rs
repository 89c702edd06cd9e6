//! Two NAS jobs sharing the 16 nodes of choi2004 (MPL 2) under every node scheme
//! of the registry.
//! The numbers are printed (run with `--nocapture`); the test asserts only what
//! the mechanism makes certain: no shared job finishes sooner than dedicated.

use cosched::des::SimTime;
use cosched::engine::process::{simulate_processes, ProcJob, ProcOptions};
use cosched::model::node::NodePlatform;

#[test]
fn two_nas_jobs_never_beat_dedicated_under_any_scheme() {
    let plat = NodePlatform::preset("choi2004").unwrap();
    for (app, class) in [("CG", 'A'), ("MG", 'A')] {
        let program = cosched::model::apps::build(app, class, 16).unwrap();
        let jobs = [
            ProcJob::new(program.clone(), SimTime::ZERO),
            ProcJob::new(program, SimTime::ZERO),
        ];
        let opts = ProcOptions {
            mpl: 2,
            ..Default::default()
        };
        for info in cosched::policies::node_catalog() {
            let name = info.name;
            let make = || cosched::policies::build_node(name).unwrap();
            // Dedicated: the job alone under the same scheme.
            let alone =
                simulate_processes(&plat, &jobs[..1], &make, &ProcOptions::default()).unwrap();
            let dedicated = alone.jobs[0].end - alone.jobs[0].start;
            let out = simulate_processes(&plat, &jobs, &make, &opts).unwrap();
            let execs: Vec<f64> = out
                .jobs
                .iter()
                .map(|r| (r.end - r.start).as_secs_f64())
                .collect();
            let c = &out.counters;
            println!(
                "{app} {class} x2 on 16 nodes, {name:>6}: executions {:.2} s and {:.2} s, dedicated {:.2} s, spin {:.2} CPU-s, {} context switches, {} wake-up interrupts, {} policy interrupts, {} boosts ({} preempting), {} hints followed",
                execs[0],
                execs[1],
                dedicated.as_secs_f64(),
                c.spin_ns as f64 / 1e9,
                c.context_switches,
                c.interrupts,
                c.policy_interrupts,
                c.boosts,
                c.boost_preemptions,
                c.hints_followed
            );
            for r in &out.jobs {
                assert!(
                    r.end - r.start >= dedicated,
                    "{app} {name}: a shared job beat its dedicated run"
                );
            }
        }
    }
}
