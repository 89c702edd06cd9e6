//! The interruption request stops every engine (its own test binary: the flag
//! is process-wide and would stop the runs of other tests).

use cosched::model::RunConfig;
use cosched::TraceRun;
use std::io::Write as _;

#[test]
fn an_interruption_request_stops_every_engine() {
    // The flag is process-wide: this test owns it (no other test in this binary sets it).
    // In the target's scratch folder, and removed at the end: nothing is left in the system's /tmp.
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cosched-interrupt-{}.swf", std::process::id()));
    let mut f = std::fs::File::create(&path).unwrap();
    writeln!(f, "; MaxProcs: 4").unwrap();
    writeln!(f, "1 0 -1 5 1 -1 -1 1 5 -1 1 1 1 -1 -1 -1 -1 -1").unwrap();
    writeln!(f, "2 1 -1 5 1 -1 -1 1 5 -1 1 1 1 -1 -1 -1 -1 -1").unwrap();
    drop(f);
    let run = |p: &std::path::PathBuf, policy: &str| cosched::run_trace(&TraceRun::new(p, policy));
    cosched::des::interrupt::request();
    for policy in ["fcfs", "easy", "conservative", "gang[rows=3]", "timeshare"] {
        let e = run(&path, policy).unwrap_err();
        assert!(e.is_interrupted(), "{policy}: {e}");
    }
    let text = "fidelity = \"process\"\n[node_platform]\npreset = \"lee4\"\n[workload]\njobs = [{ app = \"Emp\", procs = 4 }]\n[scheduler]\nnode_policy = \"nls\"\n";
    let cfg = RunConfig::from_str_with(text, "i.toml", None).unwrap();
    assert!(cosched::run_config(&cfg).unwrap_err().is_interrupted());
    cosched::des::interrupt::clear();
    run(&path, "easy").unwrap();
    std::fs::remove_file(&path).unwrap();
}
