//! The shipped example configurations load, validate and run; runs are deterministic.

use cosched::model::RunConfig;
use std::path::Path;

fn example(name: &str) -> RunConfig {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    RunConfig::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn example_configs_run() {
    for name in ["kth-easy.toml", "kth-conservative-kill.json"] {
        let cfg = example(name);
        let r = cosched::run_config(&cfg).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            r.summary.jobs_total,
            r.summary.jobs_simulated + r.summary.jobs_rejected,
            "{name}"
        );
        assert!(
            r.summary.jobs_simulated > 2900,
            "{name}: {}",
            r.summary.jobs_simulated
        );
        assert!(r.summary.utilization > 0.0 && r.summary.utilization <= 1.0);
    }
    let kill = cosched::run_config(&example("kth-conservative-kill.json")).unwrap();
    assert!(
        kill.summary.jobs_killed > 0,
        "the KTH excerpt has jobs that outlive their request"
    );
    assert_eq!(kill.summary.policy, "conservative");
}

#[test]
fn same_config_and_seed_give_identical_results() {
    let cfg = example("kth-conservative-kill.json");
    let a = cosched::run_config(&cfg).unwrap();
    let b = cosched::run_config(&cfg).unwrap();
    assert_eq!(format!("{:?}", a.table), format!("{:?}", b.table));
    assert_eq!(a.summary, b.summary);
    let mut other = cfg.clone();
    other.seed = 2;
    let c = cosched::run_config(&other).unwrap();
    assert_ne!(
        a.table.node_list, c.table.node_list,
        "random placement depends on the seed"
    );
}

#[test]
fn config_with_an_unknown_policy_names_file_and_field() {
    // A folder of its own in the target's scratch folder (not the system's
    // /tmp), removed when dropped, also when an assert fails.
    let dir = tempfile::Builder::new()
        .prefix("cosched-cfg-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        "[workload]\ntrace = \"t.swf\"\n[scheduler]\npolicy = \"sjf\"\n",
    )
    .unwrap();
    let e = cosched::load_config(&path).unwrap_err().to_string();
    // Every cluster-level policy of the registry, in its order (fcfs, easy,
    // conservative, then any added later), then the job-level forms resolved
    // before the registry (time-sharing models, Python policies).
    let valid: Vec<&str> = cosched::policies::catalog()
        .into_iter()
        .filter(|p| p.level == "cluster")
        .map(|p| p.name)
        .collect();
    assert!(valid.join(", ").starts_with("fcfs, easy, conservative"));
    assert_eq!(
        e,
        format!(
            "{}: field `scheduler.policy`: unknown policy \"sjf\"; valid policies: {}, {}",
            path.display(),
            valid.join(", "),
            cosched::timeshare::JOB_LEVEL_FORMS
        )
    );
}

#[test]
fn conservative_shortcuts_match_the_reference_on_a_real_trace() {
    use cosched::engine::{simulate, SimOptions};
    use cosched::policies::conservative::Conservative;
    let cfg = example("kth-easy.toml");
    let trace = cosched::model::swf::read_swf(cfg.workload.trace.as_deref().unwrap()).unwrap();
    let (w, m) =
        cosched::model::swf::to_workload(&trace, &cfg.workload.options(), Some(1500)).unwrap();
    let p = cosched::platform_of(&m);
    let mut fast = Conservative::with_reservation_log();
    let mut slow = Conservative::reference();
    let a = simulate(&w, &p, &mut fast, &SimOptions::default()).unwrap();
    let b = simulate(&w, &p, &mut slow, &SimOptions::default()).unwrap();
    assert_eq!(a.records, b.records);
    assert_eq!(fast.reservation_log(), slow.reservation_log());
}

#[test]
fn a_process_level_config_runs_deterministically() {
    let cfg = example("choi-nas-small.toml");
    let a = cosched::run_config(&cfg).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.summary.jobs_simulated, 5);
    assert_eq!(a.summary.policy, "fcfs+nls");
    assert!(
        a.summary.utilization > 0.0 && a.summary.utilization <= 1.0,
        "{}",
        a.summary.utilization
    );
    assert!(a.summary.energy_j > 0.0);
    assert_eq!(a.summary.machine_nodes, 16);
    // Every job waits for nothing at submission order here only if it fits; responses are positive.
    assert!(a.table.response_s.iter().all(|&r| r > 0.0));
    let b = cosched::run_config(&cfg).unwrap();
    assert_eq!(format!("{:?}", a.table), format!("{:?}", b.table));
    assert_eq!(a.summary, b.summary);
}
