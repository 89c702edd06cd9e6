//! Extreme and adversarial input: every case ends in a clean error naming the
//! file, line and field (bad input) or the job and instant (engine failure),
//! never in a panic, a hang or an impossible result.

use cosched::model::RunConfig;
use cosched::{Error, TraceRun};
use std::io::Write as _;
use std::path::PathBuf;

/// The folder of this binary's input files: in the target's scratch folder (Cargo's
/// `CARGO_TARGET_TMPDIR`), not the system's /tmp, one per test process.
fn scratch() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cosched-reliability-{}", std::process::id()))
}

/// An SWF file with a `; MaxProcs: procs` header and one line per (submit, run, procs, requested).
fn swf(name: &str, procs: u64, jobs: &[(f64, f64, u32, f64)]) -> PathBuf {
    let dir = scratch();
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let mut f = std::fs::File::create(&path).unwrap();
    writeln!(f, "; MaxProcs: {procs}").unwrap();
    for (i, (s, r, p, q)) in jobs.iter().enumerate() {
        writeln!(
            f,
            "{} {s} -1 {r} {p} -1 -1 {p} {q} -1 1 1 1 -1 -1 -1 -1 -1",
            i + 1
        )
        .unwrap();
    }
    path
}

fn run(path: &PathBuf, policy: &str) -> Result<cosched::RunResult, Error> {
    let mut r = TraceRun::new(path, policy);
    r.options.estimates = cosched::model::EstimateSource::Requested;
    cosched::run_trace(&r)
}

const POLICIES: [&str; 5] = ["fcfs", "easy", "conservative", "gang[rows=3]", "timeshare"];

#[test]
fn times_beyond_the_input_range_name_line_and_field() {
    // Run times of 4e9 s (the gang saturation case), a submit time of 1e12 s, a requested
    // time of 1e15 s (the conservative backfilling index panic).
    let cases = [
        ("run.swf", (0.0, 4e9, 1, 4e9), 4, "field 4 (run_time)"),
        (
            "submit.swf",
            (1e12, 10.0, 1, 10.0),
            2,
            "field 2 (submit_time)",
        ),
        (
            "requested.swf",
            (0.0, 10.0, 1, 1e15),
            9,
            "field 9 (requested_time)",
        ),
    ];
    for (name, job, _, want) in cases {
        let path = swf(name, 4, &[(0.0, 5.0, 1, 5.0), job]);
        for policy in POLICIES {
            let e = run(&path, policy).unwrap_err();
            assert!(e.is_input(), "{policy}: {e}");
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("{name}:3: {want}")),
                "{policy}: {msg}"
            );
            assert!(msg.contains("outside the supported range"), "{msg}");
        }
    }
}

#[test]
fn schedules_beyond_the_time_range_are_engine_errors_not_saturated_values() {
    // Ten jobs of 1e9 s (under the input limit) in a row on one processor end at 1e10 s,
    // beyond what SimTime holds (9.2e9 s).
    let jobs: Vec<_> = (0..10).map(|_| (0.0, 1e9, 1, 1e9)).collect();
    let path = swf("long.swf", 1, &jobs);
    for policy in POLICIES {
        let e = run(&path, policy).unwrap_err();
        assert!(!e.is_input(), "{policy}: {e}");
        let msg = e.to_string();
        assert!(
            msg.contains("beyond the representable simulated time"),
            "{policy}: {msg}"
        );
    }
    // Three such jobs fit: every policy gives a schedule that passes the invariants.
    let path = swf("three.swf", 1, &jobs[..3]);
    for policy in POLICIES {
        let r = run(&path, policy).unwrap();
        assert!(
            r.summary.utilization <= 1.0,
            "{policy}: {}",
            r.summary.utilization
        );
        for i in 0..3 {
            let t = &r.table;
            assert!(
                t.end_s[i] >= t.start_s[i] && t.start_s[i] >= t.submit_s[i],
                "{policy}"
            );
        }
    }
}

#[test]
fn load_scale_to_absurd_factors_is_a_clean_error() {
    let path = swf("scale.swf", 4, &[(0.0, 5.0, 1, 5.0), (100.0, 5.0, 1, 5.0)]);
    for factor in [1e-300, 1e300] {
        let mut r = TraceRun::new(&path, "easy");
        r.load_scale = Some((factor, cosched::model::LoadScaleBy::Runtime));
        let e = cosched::run_trace(&r);
        if factor > 1.0 {
            let msg = e.unwrap_err().to_string();
            assert!(msg.contains("field 4 (run_time)"), "{msg}");
        } else {
            // Run times scaled to 0 are valid (zero-length jobs).
            e.unwrap();
        }
        let mut r = TraceRun::new(&path, "easy");
        r.load_scale = Some((factor, cosched::model::LoadScaleBy::Interarrival));
        match cosched::run_trace(&r) {
            Ok(_) => assert!(factor > 1.0),
            Err(e) => assert!(e.to_string().contains("field 2 (submit_time)"), "{e}"),
        }
    }
}

fn process(jobs: &str, extra: &str) -> String {
    format!(
        "fidelity = \"process\"\n[node_platform]\npreset = \"lee4\"\n{extra}\n[workload]\njobs = [{jobs}]\n[scheduler]\nnode_policy = \"nls\"\nmpl = 2\n"
    )
}

fn config_error(text: &str) -> String {
    let dir = scratch();
    std::fs::create_dir_all(&dir).unwrap();
    // One file per call: the tests of this binary run in parallel.
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("c{n}.toml"));
    std::fs::write(&path, text).unwrap();
    let e = cosched::load_config(&path)
        .and_then(|c| cosched::run_config(&c))
        .unwrap_err();
    assert!(e.is_input(), "{e}");
    e.to_string()
}

#[test]
fn implausible_physical_parameters_are_refused_with_the_field() {
    let emp = r#"{ app = "Emp", procs = 4 }"#;
    for (extra, jobs, field) in [
        (
            "cpu_speed = 1e-300",
            emp,
            "cpu_speed: must be a finite number between 0.001 and 1000",
        ),
        ("cpu_speed = 1e-9", emp, "cpu_speed"),
        (
            "os = { model = \"rr\", quantum_ms = 1e12 }",
            emp,
            "os.quantum_ms",
        ),
        (
            "",
            r#"{ app = "Emp[quanta=1e12]", procs = 4 }"#,
            "field `workload.jobs[0]`",
        ),
        (
            "",
            r#"{ app = "Emp", procs = 4, noise_cv = 1e300 }"#,
            "field `workload.jobs[0].noise_cv`: must be a finite number between 0 and 10",
        ),
        (
            "",
            r#"{ app = "Emp", procs = 4, submit_s = 1e12 }"#,
            "field `workload.jobs[0].submit_s`",
        ),
        (
            "",
            r#"{ app = "Emp", procs = 4, ranks_per_node = 0 }"#,
            "field `workload.jobs[0].ranks_per_node`",
        ),
    ] {
        let e = config_error(&process(jobs, extra));
        assert!(
            e.contains(".toml: ") && e.contains(field),
            "{extra} {jobs}: {e}"
        );
    }
}

#[test]
fn durations_beyond_the_time_range_in_platform_costs_and_policy_parameters_are_input_errors() {
    // Found by the fuzz targets `config_loader` and `policy_run`: each was a panic
    // (nanosecond arithmetic overflowed) before its parameter got an upper bound.
    let jobs = r#"{ app = "Msg[quanta=20]", procs = 4 }, { app = "Emp[quanta=20]", procs = 4 }"#;
    let with_policy = |policy: &str, node: &str| {
        process(jobs, "").replace(
            "node_policy = \"nls\"",
            &format!("policy = {policy:?}\nnode_policy = {node:?}"),
        )
    };
    for (text, needle) in [
        (
            process(jobs, "latency_us = 1e300"),
            "field `node_platform`: latency_us: must be a finite number between 0 and 1000000",
        ),
        (
            process(jobs, "bandwidth_mb_s = 1e-300"),
            "field `node_platform`: bandwidth_mb_s",
        ),
        (
            with_policy("fcfs", "block[spin_us=18446744073709551616]"),
            "parameter spin_us=\"18446744073709551616\": must be a finite number between 0 and 1e9",
        ),
        (
            with_policy("easy[round_s=1e300]", "nls"),
            "must be a positive number of seconds, at most 1e7",
        ),
        (
            with_policy("gang[quantum_ms=18446744073709551616]", "nls"),
            "parameter quantum_ms=\"18446744073709551616\": must be at most 1e6 s",
        ),
        (
            with_policy("gang[quanta=Msg:1e300]", "nls"),
            "parameter quanta=\"Msg:1e300\": must be at most 1e6 s",
        ),
        (
            with_policy("gang-perturb[switch_us=1e300]", "nls"),
            "parameter switch_us=\"1e300\": must be at most 1e6 s",
        ),
    ] {
        let e = config_error(&text);
        assert!(e.contains(".toml: ") && e.contains(needle), "{needle}: {e}");
    }
}

#[test]
fn engine_job_errors_name_the_configuration_entry_not_the_sorted_index() {
    // The wide job is the first of the file but the second by submit time.
    let jobs = r#"{ app = "Emp", procs = 32, submit_s = 5 }, { app = "Emp", procs = 4 }"#;
    let e = config_error(&process(jobs, ""));
    assert!(
        e.contains(".toml: field `workload.jobs[0]`: app Emp at 32 processes: needs 32 nodes but the machine has 4"),
        "{e}"
    );
    let jobs = r#"{ app = "Emp", procs = 4 }, { app = "Emp", procs = 4, ranks_per_node = 9 }"#;
    let e = config_error(&process(jobs, ""));
    assert!(e.contains(".toml: ") && e.contains("ranks_per_node"), "{e}");
}

#[test]
fn run_limits_are_configuration_keys_and_engine_errors() {
    let dir = scratch();
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("limits.toml");
    let emp = r#"{ app = "Emp", procs = 4 }"#;
    for (limits, want) in [
        (
            "[limits]\nmax_sim_time_s = 0.01",
            "raise `limits.max_sim_time_s`",
        ),
        ("[limits]\nmax_events = 10", "raise `limits.max_events`"),
    ] {
        std::fs::write(&path, format!("{}{limits}\n", process(emp, ""))).unwrap();
        let cfg = cosched::load_config(&path).unwrap();
        let e = cosched::run_config(&cfg).unwrap_err();
        assert!(!e.is_input(), "{e}");
        assert!(e.to_string().contains(want), "{e}");
        assert!(e.to_string().contains("limits.toml"), "{e}");
    }
    for (limits, field) in [
        ("[limits]\nmax_sim_time_s = 0", "limits.max_sim_time_s"),
        ("[limits]\nmax_sim_time_s = 1e300", "limits.max_sim_time_s"),
        ("[limits]\nmax_events = 0", "limits.max_events"),
    ] {
        let e =
            RunConfig::from_str_with(&format!("{}{limits}\n", process(emp, "")), "l.toml", None)
                .unwrap_err()
                .to_string();
        assert!(e.contains(&format!("field `{field}`")), "{e}");
    }
    // Default limits stay out of the canonical form (configuration hashes do not change).
    let c = RunConfig::from_str_with(&process(emp, ""), "l.toml", None).unwrap();
    assert!(!serde_json::to_string(&c).unwrap().contains("limits"));
}

/// Starts each job, then asks to be woken 1 s later, for ever.
struct Insomniac;

impl cosched::engine::ClusterPolicy for Insomniac {
    fn name(&self) -> String {
        "insomniac".into()
    }
    fn on_events(
        &mut self,
        events: &[cosched::engine::Event],
        view: &dyn cosched::engine::ClusterView,
        out: &mut Vec<cosched::engine::Decision>,
    ) {
        use cosched::engine::{Decision, Event};
        for e in events {
            if let Event::Submitted(j) = e {
                out.push(Decision::Start(*j));
            }
        }
        out.push(Decision::WakeAt(
            view.now() + cosched::des::SimTime::from_secs(1),
        ));
    }
}

#[test]
fn job_level_run_limits_name_the_key_and_are_engine_errors() {
    let path = swf("insomniac.swf", 4, &[(0.0, 100.0, 1, -1.0)]);
    let limited = |limits: cosched::model::LimitsConfig| {
        let mut r = TraceRun::new(&path, "python:x:Insomniac");
        r.limits = limits;
        r.origin = Some("run.toml".into());
        cosched::run_trace_with(&r, Some(&mut Insomniac)).unwrap_err()
    };
    // Instants 0, 1, 2, ...: at t=11 the policy has been given 1 submission + 10 timers.
    let e = limited(cosched::model::LimitsConfig {
        max_events: Some(10),
        ..Default::default()
    });
    assert!(!e.is_input(), "{e}");
    let text = e.to_string();
    assert!(text.starts_with("run.toml: event limit 10 reached at t=11.000000000s under policy insomniac with 1 job(s) unfinished"), "{text}");
    assert!(text.contains("raise `limits.max_events`"), "{text}");
    let e = limited(cosched::model::LimitsConfig {
        max_sim_time_s: Some(50.5),
        ..Default::default()
    });
    assert!(!e.is_input(), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("time limit 50.500000000s reached at t=51.000000000s"),
        "{text}"
    );
    assert!(text.contains("raise `limits.max_sim_time_s`"), "{text}");
}

#[test]
fn job_level_limit_defaults_never_stop_a_real_trace() {
    // The defaults at job fidelity: the whole range of simulated time and 2e8 events;
    // the process-level ones are unchanged.
    let d = cosched::model::LimitsConfig::default();
    assert_eq!(d.sim_time_s("job"), 9e9);
    assert_eq!(d.sim_time_s("process"), 1e7);
    assert_eq!(d.events("job"), 200_000_000);
    assert_eq!(d.events("process"), 2_000_000_000);
    assert_eq!(
        cosched::engine::SimOptions::default().event_limit,
        d.events("job"),
        "the engine's default is the configuration's"
    );
    // A job submitted at the largest input time and running for the largest input time
    // still ends below the job-level default time limit.
    let big = f64::from(i32::MAX);
    let path = swf("late.swf", 4, &[(0.0, 10.0, 1, -1.0), (big, big, 1, -1.0)]);
    run(&path, "fcfs").expect("the largest input times fit in the default limits");
}
