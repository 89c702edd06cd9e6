//! Process-level gang and batch scheduling through configurations, and the seed
//! 000 style comparison of three identical class A NAS jobs on the 16 choi2004
//! nodes (run with `--nocapture` to see the numbers).

use cosched::model::RunConfig;

fn config(apps: &str, policy: &str, mpl: u32) -> String {
    format!(
        r#"
fidelity = "process"
[node_platform]
preset = "choi2004"
[workload]
jobs = [{apps}]
[scheduler]
policy = "{policy}"
node_policy = "nls"
mpl = {mpl}
"#
    )
}

fn run(text: &str) -> Result<cosched::RunResult, String> {
    let cfg = RunConfig::from_str_with(text, "g.toml", None).map_err(|e| e.to_string())?;
    cosched::run_config(&cfg).map_err(|e| e.to_string())
}

#[test]
fn gang_and_batch_configurations_run_and_bad_parameters_are_clear_errors() {
    let jobs = r#"{ app = "EP", class = "A", procs = 4 }, { app = "EP", class = "A", procs = 4 }"#;
    let gang = run(&config(jobs, "gang[quantum_ms=50,rows=2,switch_us=500]", 1)).unwrap();
    assert_eq!(gang.summary.jobs_simulated, 2);
    assert!(
        gang.summary.policy.starts_with("gang["),
        "{}",
        gang.summary.policy
    );
    // Both EP jobs fit in row 0 (4 + 4 of 16 nodes): both start at once.
    let easy = run(&config(jobs, "easy", 1)).unwrap();
    assert_eq!(easy.summary.jobs_simulated, 2);
    // The job-level conservative backfilling, hosted at process level.
    let cons = run(&config(jobs, "conservative", 1)).unwrap();
    assert_eq!(cons.summary.jobs_simulated, 2);
    assert_eq!(cons.summary.policy, "conservative+nls");
    for (policy, want) in [
        (
            "gang[rows=0]",
            "policy gang: parameter rows=\"0\": must be at least 1",
        ),
        (
            "gang[quantum_ms=fast]",
            "policy gang: parameter quantum_ms=\"fast\"",
        ),
        (
            "gang[slots=3]",
            "unknown parameter \"slots\"; valid parameters: quantum_ms, rows, switch_us, alternate",
        ),
        ("batch[backfill=maybe]", "must be \"none\" or \"easy\""),
        (
            "sjf",
            "unknown policy \"sjf\"; valid policies: fcfs, batch, easy, gang",
        ),
        (
            "conservative[estimates=exact]",
            "must be \"request\" or \"perfect\"",
        ),
    ] {
        let e = run(&config(jobs, policy, 1)).unwrap_err();
        assert!(e.contains(want), "{policy}: {e}");
    }
}

/// Three identical class A jobs of 16 processes started together: under batch
/// they run one after the other, under gang they share the 3 rows, under
/// fcfs+nls (MPL 3) they share the nodes under Linux.
#[test]
fn three_identical_class_a_jobs_under_gang_fcfs_nls_and_batch() {
    for app in ["CG", "MG"] {
        let one = format!(r#"{{ app = "{app}", class = "A", procs = 16 }}"#);
        let three = [one.as_str(); 3].join(", ");
        let dedicated = run(&config(&one, "fcfs", 1))
            .unwrap()
            .summary
            .mean_execution_s;
        let mut line = format!("{app} A x3 on 16 nodes: dedicated {dedicated:.3} s");
        for (name, policy, mpl) in [
            ("gang", "gang", 3),
            ("fcfs+nls", "fcfs", 3),
            ("batch", "batch", 3),
        ] {
            let r = run(&config(&three, policy, mpl)).unwrap();
            let s = &r.summary;
            line += &format!(
                "; {name}: mean execution {:.3} s, mean response {:.3} s, makespan {:.3} s",
                s.mean_execution_s, s.mean_response_s, s.makespan_s
            );
            match name {
                // One after the other, each dedicated (MPL 1); each job draws its own OS
                // noise (0.1% of the CPU on choi2004), so within that.
                "batch" => {
                    assert!(
                        (s.mean_execution_s - dedicated).abs() < 1e-3 * dedicated,
                        "{line}"
                    );
                    assert!((s.makespan_s - 3.0 * dedicated).abs() < 1e-3 * dedicated);
                }
                // Three rows share the machine: each job gets a third of the slots.
                "gang" => {
                    assert!(s.mean_execution_s > 2.5 * dedicated, "{line}");
                    assert!(s.makespan_s < 3.3 * dedicated, "{line}");
                }
                _ => assert!(s.mean_execution_s >= dedicated, "{line}"),
            }
        }
        println!("{line}");
    }
}

/// The shipped gang example loads from its file (the policy checked at load),
/// runs deterministically, and a bad parameter in a file names file and field.
#[test]
fn gang_example_file_loads_and_runs_deterministically() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let cfg = cosched::load_config(&dir.join("choi-nas-gang.toml")).unwrap();
    let a = cosched::run_config(&cfg).unwrap();
    let b = cosched::run_config(&cfg).unwrap();
    assert_eq!(a.summary.jobs_simulated, 5);
    assert_eq!(a.table.end_s, b.table.end_s);
    assert_eq!(a.summary.policy, format!("{}+nls", cfg.scheduler.policy));
    let bad = std::env::temp_dir().join(format!("cosched-gang-bad-{}.toml", std::process::id()));
    let text = std::fs::read_to_string(dir.join("choi-nas-gang.toml"))
        .unwrap()
        .replace("switch_us=1000", "switch_us=-1");
    std::fs::write(&bad, text).unwrap();
    let e = cosched::load_config(&bad).unwrap_err().to_string();
    std::fs::remove_file(&bad).ok();
    assert!(
        e.ends_with(
            "field `scheduler.policy`: policy gang: parameter switch_us=\"-1\": must be >= 0"
        ),
        "{e}"
    );
}

/// The five-job mix of the examples under every process-level scheme (numbers
/// printed with `--nocapture`). Under batch and EASY a job never shares a node.
#[test]
fn example_mix_under_every_scheme() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let base = cosched::load_config(&dir.join("choi-nas-gang.toml")).unwrap();
    for policy in ["gang", "gang[alternate=true]", "fcfs", "batch", "easy"] {
        let mut cfg = base.clone();
        cfg.scheduler.policy = policy.into();
        cfg.scheduler.mpl = 3;
        let r = cosched::run_config(&cfg).unwrap();
        let s = &r.summary;
        println!(
            "5-job mix, {policy}: mean response {:.3} s, mean execution {:.3} s, mean wait {:.3} s, makespan {:.3} s",
            s.mean_response_s, s.mean_execution_s, s.mean_wait_s, s.makespan_s
        );
        assert_eq!(s.jobs_simulated, 5);
        if policy == "batch" || policy == "easy" {
            let t = &r.table;
            for a in 0..5 {
                for b in a + 1..5 {
                    let overlap = t.start_s[a] < t.end_s[b] && t.start_s[b] < t.end_s[a];
                    assert!(
                        !overlap || t.procs[a] + t.procs[b] <= 16,
                        "{policy}: jobs {a} {b}"
                    );
                }
            }
        }
    }
}
