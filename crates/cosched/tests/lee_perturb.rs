//! The seed 003 perturbation harness (`gang-perturb`) through configurations: the
//! summary carries job 0's own-slot run time and the gangedness statistics, and bad
//! parameters are clear errors.

use cosched::model::RunConfig;

fn config(app: &str, policy: &str) -> String {
    format!(
        r#"
fidelity = "process"
[node_platform]
preset = "lee4"
[workload]
jobs = [{{ app = "{app}", procs = 4 }}, {{ app = "Emp[quanta=100000]", procs = 4, background = true }}]
[scheduler]
policy = "{policy}"
node_policy = "nls"
mpl = 2
"#
    )
}

fn run(text: &str) -> Result<cosched::RunResult, String> {
    let cfg = RunConfig::from_str_with(text, "p.toml", None).map_err(|e| e.to_string())?;
    cosched::run_config(&cfg).map_err(|e| e.to_string())
}

#[test]
fn takeaways_lengthen_own_time_and_fill_the_gangedness_classes() {
    let base = run(&config(
        "Barrier[quanta=40]",
        "gang-perturb[count=0,span=40]",
    ))
    .unwrap();
    let pert = run(&config(
        "Barrier[quanta=40]",
        "gang-perturb[kind=takeaway,choice=rr,count=8,span=40,seed=4]",
    ))
    .unwrap();
    // The harness's figures are the `perturb` entry of the summary's measures.
    let perturb =
        |r: &cosched::RunResult| r.summary.process.as_ref().unwrap().measures["perturb"].clone();
    let (b, p) = (perturb(&base), perturb(&pert));
    assert_eq!(
        (b["perturbations"].as_u64(), p["perturbations"].as_u64()),
        (Some(0), Some(8))
    );
    // Barrier loses a whole quantum (0.5 ms) per takeaway.
    let own = |v: &serde_json::Value| v["own_s"].as_f64().unwrap();
    let per = (own(&p) - own(&b)) / 8.0 / 0.0005;
    assert!((per - 1.0).abs() < 0.05, "{per}");
    assert_eq!(
        (b["ngr_n"].as_u64(), b["ngn_n"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(
        (p["ngr_n"].as_u64(), p["ngn_n"].as_u64()),
        (Some(24), Some(8))
    );
    assert!(p["gang_n"].as_u64().unwrap() > 0 && p["gang_msg_mean"].as_f64().unwrap() > 0.0);
    let json = serde_json::to_value(&pert.summary).unwrap();
    assert!(json["process"]["measures"]["perturb"]["msg_ratio"].is_number());
    assert!(json["process"].get("own_s").is_none());
    // A plain gang run has none of them.
    let gang = run(&config(
        "Barrier[quanta=40]",
        "gang[quantum_ms=0.5,rows=2,switch_us=0]",
    ))
    .unwrap();
    let json = serde_json::to_value(&gang.summary).unwrap();
    assert!(json["process"]["measures"].get("perturb").is_none());
}

#[test]
fn bad_perturbation_parameters_are_errors() {
    let e = run(&config("Emp[quanta=10]", "gang-perturb[proc=7,count=4]")).unwrap_err();
    assert!(e.contains("perturbed rank 7 does not exist"), "{e}");
    let e = run(&config("Emp[quanta=10]", "gang-perturb[kind=steal]")).unwrap_err();
    assert!(e.contains("\"takeaway\" or \"giveaway\""), "{e}");
}
