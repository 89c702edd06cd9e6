//! The node policies' and gang's counters reach the run summary (`process` object):
//! DCS raises interrupts and boosts for descheduled receivers, NLS and immediate
//! blocking raise none, gang counts its slot switches.

use cosched::model::RunConfig;

fn run(policy: &str, node_policy: &str) -> cosched::RunResult {
    let text = format!(
        r#"
fidelity = "process"
[node_platform]
preset = "choi2004"
[workload]
jobs = [{{ app = "CG", class = "A", procs = 16 }}, {{ app = "CG", class = "A", procs = 16 }}]
[scheduler]
policy = "{policy}"
node_policy = "{node_policy}"
mpl = 2
"#
    );
    let cfg = RunConfig::from_str_with(&text, "c.toml", None).unwrap();
    cosched::run_config(&cfg).unwrap()
}

#[test]
fn scheme_counters_are_exported_in_the_summary() {
    let dcs = run("fcfs", "dcs");
    let p = dcs.summary.process.as_ref().unwrap();
    assert!(p.policy_interrupts > 0, "DCS raised no interrupt: {p:?}");
    assert!(p.boosts > 0, "DCS boosted nothing: {p:?}");
    assert_eq!(p.ack_boosts, 0, "DCS has no sender boost");
    assert_eq!(p.gang_switches, 0);
    let json = serde_json::to_value(&dcs.summary).unwrap();
    for key in [
        "policy_interrupts",
        "boosts",
        "boost_preemptions",
        "ack_boosts",
        "gang_switches",
        "gang_io_preemptions",
    ] {
        assert!(json["process"].get(key).is_some(), "missing process.{key}");
    }
    assert_eq!(json["process"]["policy_interrupts"], p.policy_interrupts);
    // The observers' entries: every run measures priority inversion; the
    // gang-only measures are absent.
    let measures = |j: &serde_json::Value| -> Vec<String> {
        j["process"]["measures"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    assert_eq!(measures(&json), ["priority_inversion"]);
    assert!(json["process"]["measures"]["priority_inversion"]["total_s"].is_number());

    for node in ["nls", "block"] {
        let r = run("fcfs", node);
        let p = r.summary.process.as_ref().unwrap();
        assert_eq!(
            (
                p.policy_interrupts,
                p.boosts,
                p.boost_preemptions,
                p.ack_boosts
            ),
            (0, 0, 0, 0),
            "{node}"
        );
    }
    // CC boosts blocked senders when their acknowledgement arrives.
    let cc = run("fcfs", "cc");
    let p = cc.summary.process.as_ref().unwrap();
    assert!(p.ack_boosts > 0 && p.ack_boosts <= p.boosts, "{p:?}");

    let gang = run("gang", "nls");
    let p = gang.summary.process.as_ref().unwrap();
    assert!(p.gang_switches > 0, "gang switched no slot: {p:?}");
    // Fragmentation is the CPU capacity over the makespan not spent on useful work.
    let capacity = 16.0 * gang.summary.makespan_s;
    assert!((p.cpu_fragmentation - (1.0 - p.useful_s / capacity)).abs() < 1e-12);
    assert!(
        p.cpu_fragmentation > 0.0 && p.cpu_fragmentation < 1.0,
        "{p:?}"
    );
    assert_eq!(p.gang_io_preemptions, 0);
    let json = serde_json::to_value(&gang.summary).unwrap();
    assert_eq!(
        measures(&json),
        [
            "gang_fragment",
            "gangedness",
            "io_interrupts",
            "priority_inversion"
        ]
    );
    assert!(json["process"]["measures"]["gang_fragment"]["total_s"].is_number());
}
