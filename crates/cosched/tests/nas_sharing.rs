//! Two NAS jobs sharing the 16 nodes of choi2004 (MPL 2): spin waits (NLS) versus
//! immediate-block waits with no boosts. The numbers are printed (run with
//! `--nocapture`); the test asserts only what the mechanism makes certain.

use cosched::des::SimTime;
use cosched::engine::process::policy::NodePolicy;
use cosched::engine::process::{simulate_processes, ProcJob, ProcOptions};
use cosched::model::node::NodePlatform;

#[test]
fn two_nas_jobs_never_beat_dedicated_under_spin_or_block() {
    let plat = NodePlatform::preset("choi2004").unwrap();
    for (app, class) in [("CG", 'A'), ("MG", 'A')] {
        let program = cosched::model::apps::build(app, class, 16).unwrap();
        let jobs = [
            ProcJob {
                program: program.clone(),
                submit: SimTime::ZERO,
                background: false,
            },
            ProcJob {
                program,
                submit: SimTime::ZERO,
                background: false,
            },
        ];
        let nls = || cosched::policies::build_node("nls").unwrap();
        let block = || cosched::policies::build_node("block").unwrap();
        let alone = simulate_processes(&plat, &jobs[..1], &nls, &ProcOptions::default()).unwrap();
        let dedicated = alone.jobs[0].end - alone.jobs[0].start;
        let opts = ProcOptions {
            mpl: 2,
            ..Default::default()
        };
        for (name, make) in [
            ("spin (nls)", &nls as &dyn Fn() -> Box<dyn NodePolicy>),
            ("block", &block),
        ] {
            let out = simulate_processes(&plat, &jobs, make, &opts).unwrap();
            let execs: Vec<f64> = out
                .jobs
                .iter()
                .map(|r| (r.end - r.start).as_secs_f64())
                .collect();
            println!(
                "{app} {class} x2 on 16 nodes, {name}: executions {:.2} s and {:.2} s, dedicated {:.2} s, spin {:.2} CPU-s, {} context switches",
                execs[0],
                execs[1],
                dedicated.as_secs_f64(),
                out.counters.spin_ns as f64 / 1e9,
                out.counters.context_switches
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
