//! Per-job `nice`, `noise_cv` and start and end delays in process-level configurations: parsed, checked
//! with the field named, passed to the engine, seeded.

use cosched::model::RunConfig;

fn text(jobs: &str, seed: u64) -> String {
    text_on(jobs, seed, "")
}

/// The configuration with `platform` added to its `[node_platform]` table.
fn text_on(jobs: &str, seed: u64, platform: &str) -> String {
    format!(
        r#"
fidelity = "process"
seed = {seed}
[node_platform]
preset = "choi2004"
nodes = 4
{platform}
[workload]
jobs = [
{jobs}
]
[scheduler]
node_policy = "block"
mpl = 2
"#
    )
}

fn config(jobs: &str, seed: u64) -> RunConfig {
    RunConfig::from_str_with(&text(jobs, seed), "c.toml", None).unwrap()
}

fn error(jobs: &str) -> String {
    RunConfig::from_str_with(&text(jobs, 1), "c.toml", None)
        .unwrap_err()
        .to_string()
}

fn exec_s(cfg: &RunConfig) -> Vec<f64> {
    cosched::run_config(cfg).unwrap().table.execution_s.clone()
}

#[test]
fn noise_cv_is_seeded_and_deterministic() {
    let noisy = r#"{ app = "CG", class = "A", procs = 4, noise_cv = 0.3 }"#;
    let quiet = r#"{ app = "CG", class = "A", procs = 4 }"#;
    let a = exec_s(&config(noisy, 1));
    assert_eq!(a, exec_s(&config(noisy, 1)), "same seed, same run");
    assert_ne!(a, exec_s(&config(noisy, 2)), "another seed, other draws");
    // Without the OS noise of choi2004 either, the seed does not matter.
    let silent = |seed| {
        let t = text_on(quiet, seed, "os_noise_tick_us = 0.0");
        exec_s(&RunConfig::from_str_with(&t, "c.toml", None).unwrap())
    };
    let q = silent(1);
    assert_eq!(q, silent(2), "no noise: the seed does not matter");
    // Each iteration waits for the slowest rank: noise lengthens the run.
    assert!(a[0] > q[0], "{a:?} vs {q:?}");
    let e = error(&noisy.replace("0.3", "-0.1"));
    assert!(e.contains("field `workload.jobs[0].noise_cv`"), "{e}");
}

#[test]
fn nice_gives_a_job_its_share_of_shared_nodes() {
    // Two EP jobs on the same 4 nodes (a 4-node platform, MPL 2), one of nice 10. choi2004's Linux 2.4
    // gives nice 0 its 6-tick base and nice 10 the kernel's 3 ticks less: 3 ticks,
    // so while both compute the nice-0 job gets 6/9 of each CPU.
    let alone = exec_s(&config(r#"{ app = "EP", class = "A", procs = 4 }"#, 1))[0];
    let both = exec_s(&config(
        r#"{ app = "EP", class = "A", procs = 4 },
           { app = "EP", class = "A", procs = 4, nice = 10 }"#,
        1,
    ));
    let slowdown = both[0] / alone;
    assert!((slowdown - 9.0 / 6.0).abs() < 0.03, "nice 0: {slowdown}");
    assert!(both[1] > both[0]);
    let e = error(r#"{ app = "EP", class = "A", procs = 4, nice = 20 }"#);
    assert!(
        e.contains("field `workload.jobs[0].nice`") && e.contains("between -20 and 19"),
        "{e}"
    );
}

#[test]
fn start_and_end_delays_hold_the_processors_for_their_length() {
    // One EP job alone, no OS noise: the delays add their sum to its execution (the job holds its nodes,
    // computing nothing, 0.5 s before its work and 0.25 s after it).
    let exec = |job: &str| {
        let t = text_on(job, 1, "os_noise_tick_us = 0.0");
        exec_s(&RunConfig::from_str_with(&t, "c.toml", None).unwrap())[0]
    };
    let plain = exec(r#"{ app = "EP", class = "A", procs = 4 }"#);
    let delayed =
        exec(r#"{ app = "EP", class = "A", procs = 4, start_delay_s = 0.5, end_delay_s = 0.25 }"#);
    // Plus the platform's cost of waking a process at the end of each wait (its interrupt and context switch,
    // microseconds), nothing else.
    let extra = delayed - plain - 0.75;
    assert!((0.0..1e-4).contains(&extra), "{plain} -> {delayed}");
    let e = error(r#"{ app = "EP", class = "A", procs = 4, end_delay_s = -1 }"#);
    assert!(e.contains("field `workload.jobs[0].end_delay_s`"), "{e}");
}

#[test]
fn a_job_started_ahead_of_an_earlier_one_is_charged_its_own_cpu_time() {
    // 8 nodes at MPL 1 under EASY with exact estimates, every process spinning while it waits (NLS), so
    // each job's CPU time is its processes x its execution. EP.4 (31.6 s dedicated) starts at 0 on 4
    // nodes; EP.8 (0.01) waits for all 8 until EP.4 ends; IS.4 (0.02, 3.8 s) ends before that and
    // backfills on the 4 free nodes. Processes are numbered as they start (EP.4, IS.4, then EP.8), so a
    // job's CPU time must follow each process's job, not its number: each job's energy is then
    // busy_watts x processes x execution / CPUs per node.
    let text = r#"
fidelity = "process"
seed = 1
[node_platform]
preset = "choi2004"
nodes = 8
os_noise_tick_us = 0.0
[workload]
jobs = [
  { app = "EP", class = "A", procs = 4, submit_s = 0 },
  { app = "EP", class = "A", procs = 8, submit_s = 0.01 },
  { app = "IS", class = "A", procs = 4, submit_s = 0.02 },
]
[scheduler]
node_policy = "nls"
policy = "easy[estimates=perfect]"
"#;
    let cfg = RunConfig::from_str_with(text, "c.toml", None).unwrap();
    let out = cosched::run_config(&cfg).unwrap();
    let t = &out.table;
    assert!(
        t.start_s[2] < t.start_s[1],
        "IS.4 backfills: {:?}",
        t.start_s
    );
    let plat = cfg.node_platform.as_ref().unwrap().platform().unwrap();
    for (k, procs) in [4.0, 8.0, 4.0].into_iter().enumerate() {
        let want = plat.busy_watts * procs * t.execution_s[k] / f64::from(plat.cpus_per_node);
        let got = t.energy_j[k];
        assert!(
            (got - want).abs() < 0.02 * want,
            "job {k}: {got} J, want {want} J"
        );
    }
}
