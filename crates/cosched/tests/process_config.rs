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
    let delayed = exec(r#"{ app = "EP", class = "A", procs = 4, start_delay_s = 0.5, end_delay_s = 0.25 }"#);
    // Plus the platform's cost of waking a process at the end of each wait (its interrupt and context switch,
    // microseconds), nothing else.
    let extra = delayed - plain - 0.75;
    assert!((0.0..1e-4).contains(&extra), "{plain} -> {delayed}");
    let e = error(r#"{ app = "EP", class = "A", procs = 4, end_delay_s = -1 }"#);
    assert!(e.contains("field `workload.jobs[0].end_delay_s`"), "{e}");
}
