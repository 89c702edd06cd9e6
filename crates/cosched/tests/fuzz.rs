//! Fuzzing campaign (proptest, stable Rust) of the three input parsers and of
//! the engines behind them. Every target asserts the same contract: no panic,
//! and either a valid result or an error that names where the input is wrong;
//! a trace that parses also runs under every job-level policy without a panic
//! and with a schedule that passes the facade's invariants.
//!
//! Targets: `swf_reader` (mutated SWF text: extreme and malformed numbers,
//! headers, BOM, CR line endings), `config_loader` (mutated TOML configurations
//! at both fidelities), `policy_spec` (random policy strings through the one
//! `name[key=value,...]` parser, `cosched_model::spec::parse`, and every registry).
//!
//! Cases per target: `PROPTEST_CASES` (default here 200 each, a few seconds in
//! the normal test run); `make fuzz` runs a long campaign. Shrunk failures are
//! persisted in `fuzz.proptest-regressions` beside this file and replayed first.

use cosched::model::swf;
use cosched::model::{RunConfig, WorkloadOptions};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use std::panic::{catch_unwind, AssertUnwindSafe};

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

/// A number as an SWF token: ordinary values, unknowns, extremes and garbage.
fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (0u32..5000).prop_map(|v| v.to_string()),
        2 => Just("-1".to_string()),
        1 => prop::sample::select(vec![
            "0", "1e9", "1e10", "4e9", "9.3e9", "1e12", "1e15", "1e300", "-1e300", "1e-300",
            "4294967296", "18446744073709551616", "nan", "inf", "-0", "0.5", "-2", "1e", "x", "٣",
        ])
        .prop_map(str::to_string),
    ]
}

fn record() -> impl Strategy<Value = String> {
    prop_oneof![
        10 => prop::collection::vec(token(), 18).prop_map(|t| t.join(" ")),
        1 => prop::collection::vec(token(), 0..20).prop_map(|t| t.join("\t")),
    ]
}

fn header() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("; MaxProcs: 64".to_string()),
        Just("; MaxNodes: 16".to_string()),
        token().prop_map(|v| format!("; MaxProcs: {v}")),
        token().prop_map(|v| format!("; MaxNodes: {v} (note)")),
        Just("; Version: 2.2".to_string()),
        Just(";".to_string()),
    ]
}

fn swf_text() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(header(), 0..4),
        prop::collection::vec(record(), 0..12),
        prop::sample::select(vec!["\n", "\r\n", "\r"]),
        any::<bool>(),
    )
        .prop_map(|(h, r, eol, bom)| {
            let body = h.into_iter().chain(r).collect::<Vec<_>>().join(eol);
            if bom {
                format!("\u{feff}{body}")
            } else {
                body
            }
        })
}

const POLICIES: [&str; 5] = ["fcfs", "easy", "conservative", "gang[rows=3]", "timeshare"];

/// Runs `f`, failing the case (not the process) on a panic.
fn no_panic<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, TestCaseError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|e| {
        let msg = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        TestCaseError::fail(format!("{what} panicked: {msg}"))
    })
}

proptest! {
    #![proptest_config(Config {
        cases: cases(),
        // Beside this file (the default looks for lib.rs / main.rs and finds none for a test).
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..Config::default()
    })]

    #[test]
    fn swf_reader(text in swf_text(), kill in any::<bool>()) {
        let parsed = no_panic("parse_swf", || swf::parse_swf(&text, "fuzz.swf"))?;
        let trace = match parsed {
            Ok(t) => t,
            Err(e) => {
                prop_assert!(e.to_string().starts_with("fuzz.swf"), "{e}");
                return Ok(());
            }
        };
        let mut opts = WorkloadOptions::default();
        if kill {
            opts.overrun = cosched::model::OverrunPolicy::Kill;
        }
        let built = no_panic("to_workload", || swf::to_workload(&trace, &opts, None))?;
        let Ok((workload, machine)) = built else { return Ok(()) };
        let platform = cosched::platform_of(&machine);
        for policy in POLICIES {
            let r = no_panic(policy, || {
                cosched::run_workload(&workload, &platform, policy, Default::default(), 1, 10.0)
            })?;
            if let Ok(r) = r {
                prop_assert!(r.summary.utilization <= 1.0 + 1e-9);
            }
        }
    }

    #[test]
    fn config_loader(text in config_text()) {
        let r = no_panic("from_str_with", || RunConfig::from_str_with(&text, "fuzz.toml", None))?;
        if let Err(e) = r {
            prop_assert!(e.to_string().starts_with("fuzz.toml: "), "{e}");
            return Ok(());
        }
        let cfg = r.unwrap();
        if cfg.fidelity == "process" {
            // Shorten the run; the point is that nothing panics on the way.
            let mut cfg = cfg;
            cfg.limits.max_events = Some(200_000);
            no_panic("run_config", || cosched::run_config(&cfg))?.ok();
        }
    }

    #[test]
    fn policy_run((level, spec) in catalog_spec()) {
        // A registered policy (every level, from the registries' own catalogs) with
        // random values of its own parameters, run on a small workload: no panic, no
        // violated engine invariant, and a result that passes the checks below.
        let r = match level {
            Level::Job => no_panic(&spec, || {
                let trace = swf::parse_swf(SMALL_TRACE, "small.swf").expect("the small trace parses");
                let (workload, machine) = swf::to_workload(&trace, &WorkloadOptions::default(), None)
                    .expect("the small trace converts");
                cosched::run_workload(&workload, &cosched::platform_of(&machine), &spec, Default::default(), 3, 10.0)
            })?,
            Level::Node | Level::Process => {
                let (policy, node) = if level == Level::Node { ("fcfs", spec.as_str()) } else { (spec.as_str(), "nls") };
                let text = format!("{SMALL_PROCESS}[scheduler]\npolicy = {policy:?}\nnode_policy = {node:?}\nmpl = 2\n");
                let cfg = match RunConfig::from_str_with(&text, "fuzz.toml", None) {
                    Ok(cfg) => cfg,
                    Err(e) => {
                        prop_assert!(e.to_string().starts_with("fuzz.toml: "), "{e}");
                        return Ok(());
                    }
                };
                no_panic(&spec, || cosched::run_config(&cfg))?
            }
        };
        match r {
            Ok(r) => {
                prop_assert!(r.summary.utilization <= 1.0 + 1e-9, "{}: utilization {}", spec, r.summary.utilization);
            }
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(!msg.contains("invariant violated"), "{}: {}", spec, msg);
                prop_assert!(!msg.contains("internal error"), "{}: {}", spec, msg);
            }
        }
    }

    #[test]
    fn policy_spec(spec in prop_oneof![4 => policy_string(), 1 => "\\PC{0,24}"]) {
        // The one `name[key=value,...]` parser: an error names the string and a
        // position inside it (or just past its end); a result renders back to a
        // string that parses to the same result.
        match no_panic("spec::parse", || cosched::model::spec::parse(&spec))? {
            Err(e) => {
                prop_assert_eq!(&e.spec, &spec);
                prop_assert!(e.pos >= 1 && e.pos <= spec.chars().count() + 1, "{}", e);
                let head = format!("cannot parse {spec:?} at character {}: ", e.pos);
                prop_assert!(e.to_string().starts_with(&head), "{}", e);
            }
            Ok(parsed) => {
                let items: Vec<String> = parsed.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let again = format!("{}[{}]", parsed.name, items.join(","));
                let reparsed = cosched::model::spec::parse(&again);
                prop_assert_eq!(reparsed, Ok(parsed), "{}", again);
            }
        }
        no_panic("PolicySpec::parse", || cosched::policies::PolicySpec::parse(&spec))?.ok();
        no_panic("apps::build", || cosched::model::apps::build(&spec, '-', 4).map(|_| ()))?.ok();
        no_panic("build", || cosched::policies::build(&spec).map(|_| ()))?.ok();
        no_panic("build_node", || cosched::policies::build_node(&spec).map(|_| ()))?.ok();
        no_panic("build_process", || cosched::policies::build_process(&spec).map(|_| ()))?.ok();
        no_panic("model_of", || {
            cosched::timeshare::model_of(&spec, Default::default(), 0).map(|_| ())
        })?
        .ok();
    }
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u32..100).prop_map(|v| v.to_string()),
        prop::sample::select(vec![
            "0",
            "-1",
            "1e300",
            "1e-300",
            "-1e300",
            "nan",
            "inf",
            "4294967296",
            "1e12",
            "0.5",
            "\"\"",
            "\"x\"",
            "true",
            "[]",
            "{}",
        ])
        .prop_map(str::to_string),
    ]
}

/// Every configuration key the fuzzer mutates (`table.key`, `workload.jobs.key` for a key of a
/// process-level job), with its value in the process-level and in the job-level base
/// configuration (`None`: absent there unless it is the key mutated). `{app}` and `{policy}`
/// stand for the case's drawn application and policy. `every_schema_key_is_fuzzed` checks
/// that this list is the set of keys the loader accepts.
const KEYS: &[(&str, Option<&str>, Option<&str>)] = &[
    ("seed", Some("0"), Some("0")),
    ("fidelity", Some("\"process\""), None),
    (
        "metrics.bounded_slowdown_threshold_s",
        Some("10"),
        Some("10"),
    ),
    ("metrics.wait_time", None, None),
    ("limits.max_sim_time_s", Some("1e7"), Some("1e7")),
    ("limits.max_events", Some("2000000000"), Some("2000000000")),
    ("platform.nodes", None, None),
    ("platform.procs_per_node", None, None),
    ("platform.idle_watts", None, None),
    ("platform.busy_watts", None, None),
    ("node_platform.preset", Some("\"lee4\""), None),
    ("node_platform.nodes", Some("4"), None),
    ("node_platform.cpu_speed", Some("1.0"), None),
    // `[node_platform]` overrides of the preset's costs and OS scheduler.
    ("node_platform.latency_us", None, None),
    ("node_platform.bandwidth_mb_s", None, None),
    ("node_platform.send_overhead_us", None, None),
    ("node_platform.recv_overhead_us", None, None),
    ("node_platform.byte_overhead_ns", None, None),
    ("node_platform.eager_copy_ns", None, None),
    ("node_platform.interrupt_us", None, None),
    ("node_platform.context_switch_us", None, None),
    ("node_platform.os_noise_tick_us", None, None),
    ("node_platform.os", None, None),
    ("node_platform.boost_recheck", None, None),
    ("workload.trace", None, Some("\"t.swf\"")),
    ("workload.max_jobs", None, Some("5")),
    ("workload.estimates", None, None),
    ("workload.overrun", None, None),
    ("workload.machine_size_from_nodes", None, None),
    ("workload.machine_size", None, Some("8")),
    ("workload.load_scale", None, Some("1")),
    ("workload.load_scale_by", None, None),
    ("workload.jobs.app", Some("\"{app}\""), None),
    ("workload.jobs.class", None, None),
    ("workload.jobs.procs", Some("4"), None),
    ("workload.jobs.submit_s", Some("0"), None),
    ("workload.jobs.background", None, None),
    ("workload.jobs.ranks_per_node", Some("1"), None),
    ("workload.jobs.nice", Some("0"), None),
    ("workload.jobs.noise_cv", Some("0"), None),
    ("workload.jobs.start_delay_s", None, None),
    ("workload.jobs.end_delay_s", None, None),
    (
        "scheduler.policy",
        Some("\"{policy}\""),
        Some("\"{policy}\""),
    ),
    ("scheduler.placement", None, None),
    ("scheduler.event_order", None, None),
    ("scheduler.node_policy", Some("\"nls\""), None),
    ("scheduler.mpl", Some("2"), Some("2")),
    ("scheduler.memory_aware", None, None),
];

/// The configuration's tables in the order they are written (top-level keys first).
const TABLES: &[&str] = &[
    "",
    "metrics",
    "limits",
    "platform",
    "node_platform",
    "workload",
    "scheduler",
];

/// Values of the string-valued keys: the accepted ones and a wrong one.
fn words() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "\"job\"",
        "\"process\"",
        "\"requested\"",
        "\"exact\"",
        "\"extend\"",
        "\"kill\"",
        "\"interarrival\"",
        "\"runtime\"",
        "\"packing\"",
        "\"random\"",
        "\"per-instant\"",
        "\"per-event\"",
        "\"lee4\"",
        "\"choi2004\"",
        "\"none\"",
        "\"agent\"",
        "\"A\"",
        "\"AB\"",
        "\"nope\"",
    ])
    .prop_map(str::to_string)
}

/// A configuration as TOML: `values` (key -> value text) written table by table, the keys
/// of a process-level job (`workload.jobs.*`) as the one job's inline table.
fn render(values: &[(&str, String)]) -> String {
    let mut out = String::new();
    for table in TABLES {
        let in_table = |k: &str| match k.rsplit_once('.') {
            Some((t, _)) => t == *table,
            None => table.is_empty(),
        };
        let lines: Vec<String> = values
            .iter()
            .filter(|(k, _)| in_table(k))
            .map(|(k, v)| format!("{} = {v}\n", k.rsplit('.').next().unwrap_or(k)))
            .collect();
        let job: Vec<String> = values
            .iter()
            .filter_map(|(k, v)| {
                k.strip_prefix("workload.jobs.")
                    .filter(|_| *table == "workload")
                    .map(|f| format!("{f} = {v}"))
            })
            .collect();
        if lines.is_empty() && job.is_empty() {
            continue;
        }
        if !table.is_empty() {
            out.push_str(&format!("[{table}]\n"));
        }
        out.extend(lines);
        if !job.is_empty() {
            out.push_str(&format!("jobs = [{{ {} }}]\n", job.join(", ")));
        }
    }
    out
}

/// A process-level or job-level configuration with one key replaced by a random value.
fn config_text() -> impl Strategy<Value = String> {
    // One OS scheduler table per model, its parameter set to the value.
    let os_models = vec![
        "{ model = \"linux24\", tick_ms = V }",
        "{ model = \"linux24\", base_ticks = V }",
        "{ model = \"cfs\", latency_ms = V }",
        "{ model = \"cfs\", min_granularity_ms = V, wakeup_granularity_ms = V }",
        "{ model = \"mlfq\", quantum_scale = V }",
        "{ model = \"rr\", quantum_ms = V }",
        "{ model = \"nope\" }",
        "V",
    ];
    let apps = vec![
        "Emp",
        "Barrier",
        "Workpile[unit=2.4]",
        "Msg",
        "Emp[quanta=1e12]",
        "EP",
        "nope",
    ];
    let policies = vec![
        "fcfs",
        "gang[rows=2]",
        "batch",
        "easy",
        "gang[rows=3,,]",
        "x",
    ];
    (
        0..KEYS.len(),
        prop_oneof![3 => value(), 1 => words()],
        prop::sample::select(apps),
        prop::sample::select(policies),
        any::<bool>(),
        prop::sample::select(os_models),
    )
        .prop_map(|(key, v, app, policy, process, os)| {
            let key = KEYS[key].0;
            let v = if key == "node_platform.os" {
                os.replace('V', &v)
            } else {
                v
            };
            let values: Vec<(&str, String)> = KEYS
                .iter()
                .filter_map(|&(k, p, j)| {
                    let base = if process { p } else { j };
                    let text = if k == key { Some(v.as_str()) } else { base };
                    text.map(|t| (k, t.replace("{app}", app).replace("{policy}", policy)))
                })
                .collect();
            render(&values)
        })
}

/// The keys the loader accepts in the table `[table]` (a process-level job's keys for
/// `workload.jobs`), read from its own error for an unknown key there: "unknown field `zz`,
/// expected `a`", "... expected `a` or `b`", "... expected one of `a`, `b`, `c`".
fn accepted(table: &str) -> Vec<String> {
    let zz = |t: &str| if t == table { "zz = 1\n" } else { "" };
    let job = if table == "workload.jobs" {
        ", zz = 1"
    } else {
        ""
    };
    let mut text = format!("fidelity = \"process\"\n{}", zz(""));
    for t in &TABLES[1..] {
        let body = match *t {
            "node_platform" => "preset = \"lee4\"\n".to_string(),
            "scheduler" => "policy = \"fcfs\"\n".to_string(),
            "platform" => "nodes = 1\n".to_string(),
            "workload" => format!("jobs = [{{ app = \"Emp\", procs = 1{job} }}]\n"),
            _ => String::new(),
        };
        text.push_str(&format!("[{t}]\n{body}{}", zz(t)));
    }
    let e = RunConfig::from_str_with(&text, "schema.toml", None)
        .expect_err("an unknown key is refused")
        .to_string();
    let (_, list) = e
        .split_once("expected ")
        .unwrap_or_else(|| panic!("[{table}]: no list of keys in {e:?}"));
    // The names are the back-quoted words: the odd pieces between back quotes.
    list.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn every_schema_key_is_fuzzed() {
    // Every leaf key the loader accepts, as `table.key`: the top level's keys that are not
    // tables, each table's keys, and a process-level job's keys under `workload.jobs.`.
    let mut schema = std::collections::BTreeSet::new();
    for key in accepted("") {
        if !TABLES.contains(&key.as_str()) {
            schema.insert(key);
        }
    }
    for table in &TABLES[1..] {
        for key in accepted(table) {
            if !(*table == "workload" && key == "jobs") {
                schema.insert(format!("{table}.{key}"));
            }
        }
    }
    for key in accepted("workload.jobs") {
        schema.insert(format!("workload.jobs.{key}"));
    }
    let fuzzed: std::collections::BTreeSet<String> =
        KEYS.iter().map(|(k, _, _)| (*k).to_string()).collect();
    assert_eq!(fuzzed.len(), KEYS.len(), "a key is listed twice");
    let missing: Vec<_> = schema.difference(&fuzzed).collect();
    let unknown: Vec<_> = fuzzed.difference(&schema).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "KEYS and the configuration schema differ: not fuzzed {missing:?}, not in the schema {unknown:?}"
    );
}

#[test]
fn the_base_configurations_load() {
    // The unmutated bases (no key replaced) are valid, so a mutation is what a failure is about.
    for process in [true, false] {
        let values: Vec<(&str, String)> = KEYS
            .iter()
            .filter_map(|&(k, p, j)| {
                let base = if process { p } else { j };
                base.map(|t| (k, t.replace("{app}", "Emp").replace("{policy}", "fcfs")))
            })
            .collect();
        let text = render(&values);
        let r = RunConfig::from_str_with(
            &text,
            "base.toml",
            Some(std::path::Path::new("/nonexistent")),
        );
        assert!(r.is_ok(), "{text}\n{:?}", r.err());
    }
}

fn policy_string() -> impl Strategy<Value = String> {
    let names = vec![
        "fcfs",
        "easy",
        "conservative",
        "gang",
        "timeshare",
        "batch",
        "nls",
        "block",
        "dcs",
        "sb",
        "pb",
        "cc",
        "hybrid",
        "gang-perturb",
        "python:m:C",
        "",
        " easy",
        "x",
    ];
    let keys = vec![
        "rows",
        "quantum_ms",
        "switch_us",
        "mpl",
        "scheme",
        "intensity",
        "reserve",
        "spin_us",
        "x",
        "",
    ];
    (
        prop::sample::select(names),
        prop::collection::vec((prop::sample::select(keys), value()), 0..4),
        prop::sample::select(vec!["", ",", ",,", "]", "[", "=", " "]),
    )
        .prop_map(|(name, params, junk)| {
            if params.is_empty() {
                format!("{name}{junk}")
            } else {
                let p: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("{name}[{}{junk}]", p.join(","))
            }
        })
}

/// The level a registered policy runs at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    /// A job-level cluster policy or time-sharing model, on a trace.
    Job,
    /// A node-level policy (`scheduler.node_policy` at process fidelity).
    Node,
    /// A process-level cluster scheme (`scheduler.policy` at process fidelity).
    Process,
}

/// Every registered policy: its level, name and parameter names.
fn registered() -> Vec<(Level, &'static str, Vec<&'static str>)> {
    let level = |l: &str| match l {
        "node" => Level::Node,
        "process" => Level::Process,
        _ => Level::Job,
    };
    cosched::policies::catalog()
        .into_iter()
        .chain(cosched::timeshare::catalog())
        .map(|i| {
            (
                level(i.level),
                i.name,
                i.params.iter().map(|p| p.name).collect(),
            )
        })
        .collect()
}

/// A value of a policy parameter: small numbers, extremes, and the words the
/// parameters take (booleans, modes, app lists).
fn param_value() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (0u32..20).prop_map(|v| v.to_string()),
        1 => (0u32..2000).prop_map(|v| format!("{}.{}", v / 100, v % 100)),
        2 => prop::sample::select(vec![
            "0", "-1", "1e-300", "1e300", "1e12", "1e-9", "nan", "inf", "4294967296",
            "18446744073709551616", "", "true", "false", "auto", "easy", "takeaway", "giveaway",
            "rr", "fixed", "Emp/Msg", "Msg:5/Emp:1e300", "Emp:0", "Msg:-1", "very-low", "high",
            "hybrid", "nls", "x",
        ])
        .prop_map(str::to_string),
    ]
}

/// A registered policy with 0 to 4 of its own parameters (now and then an unknown one).
fn catalog_spec() -> impl Strategy<Value = (Level, String)> {
    prop::sample::select(registered()).prop_flat_map(|(level, name, params)| {
        let mut keys = params;
        keys.push("x");
        prop::collection::vec((prop::sample::select(keys), param_value()), 0..5).prop_map(
            move |ps| {
                if ps.is_empty() {
                    return (level, name.to_string());
                }
                let items: Vec<String> = ps.iter().map(|(k, v)| format!("{k}={v}")).collect();
                (level, format!("{name}[{}]", items.join(",")))
            },
        )
    })
}

/// A small trace for job-level policies: 8 processors, jobs of every width, an
/// over-estimate, an under-estimate and unknown estimates.
const SMALL_TRACE: &str = "; MaxProcs: 8
1 0 -1 100 4 -1 -1 4 200 -1 1 1 1 -1 -1 -1 -1 -1
2 5 -1 50 8 -1 -1 8 60 -1 1 1 1 -1 -1 -1 -1 -1
3 10 -1 30 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1
4 10 -1 400 1 -1 -1 1 -1 -1 1 1 1 -1 -1 -1 -1 -1
5 20 -1 10 3 -1 -1 3 10 -1 1 1 1 -1 -1 -1 -1 -1
6 300 -1 1 6 -1 -1 6 1000 -1 1 1 1 -1 -1 -1 -1 -1
";

/// A small process-level configuration (its `[scheduler]` table is added per case):
/// messaging, barrier and compute-only jobs on 4 nodes, short runs bounded by the limits.
const SMALL_PROCESS: &str = r#"fidelity = "process"
seed = 3
[limits]
max_events = 20000
max_sim_time_s = 1000
[node_platform]
preset = "lee4"
[workload]
jobs = [
  { app = "Msg[quanta=20]", procs = 4 },
  { app = "Barrier[quanta=20]", procs = 2, submit_s = 0.01 },
  { app = "Emp[quanta=20]", procs = 4, submit_s = 0.02 },
]
"#;
