//! The crate graph of docs/architecture.md ("Crate graph and dependency rule"):
//! the policies are hosted by any mechanism through `cosched-contract`, so this
//! crate must not depend on the simulator engine (only its tests may), and the
//! two mechanisms, the simulator engine and real execution, depend on the
//! contract and not on each other. The rule code they and the policies share
//! (`cosched-rules`) depends on the contract only. Only the binding crate
//! knows PyO3.

/// The `[dependencies]` table of a manifest (not the dev-dependencies).
fn dependencies(manifest: &str) -> &str {
    manifest
        .split("\n[dependencies]")
        .nth(1)
        .expect("a [dependencies] table")
        .split("\n[")
        .next()
        .unwrap()
}

/// The workspace crates a manifest's `[dependencies]` name, sorted.
fn workspace_deps(manifest: &str) -> Vec<&str> {
    let mut deps: Vec<&str> = dependencies(manifest)
        .lines()
        .filter_map(|l| l.split(['.', ' ', '=']).next())
        .filter(|name| name.starts_with("cosched"))
        .collect();
    deps.sort_unstable();
    deps
}

#[test]
fn policies_do_not_depend_on_the_engine() {
    let deps = workspace_deps(include_str!("../Cargo.toml"));
    assert!(deps.contains(&"cosched-contract"), "{deps:?}");
    assert!(deps.contains(&"cosched-rules"), "{deps:?}");
    assert!(!deps.contains(&"cosched-engine"), "{deps:?}");
}

#[test]
fn every_crate_depends_only_on_the_crates_the_graph_allows() {
    let crates: [(&str, &str, &[&str]); 9] = [
        (
            "cosched-des",
            include_str!("../../cosched-des/Cargo.toml"),
            &[],
        ),
        (
            "cosched-model",
            include_str!("../../cosched-model/Cargo.toml"),
            &["cosched-des"],
        ),
        (
            "cosched-contract",
            include_str!("../../cosched-contract/Cargo.toml"),
            &["cosched-des", "cosched-model"],
        ),
        (
            "cosched-rules",
            include_str!("../../cosched-rules/Cargo.toml"),
            &["cosched-contract"],
        ),
        (
            "cosched-policies",
            include_str!("../Cargo.toml"),
            &[
                "cosched-contract",
                "cosched-des",
                "cosched-model",
                "cosched-rules",
            ],
        ),
        (
            "cosched-engine",
            include_str!("../../cosched-engine/Cargo.toml"),
            &[
                "cosched-contract",
                "cosched-des",
                "cosched-model",
                "cosched-rules",
            ],
        ),
        (
            "cosched-real",
            include_str!("../../cosched-real/Cargo.toml"),
            &[
                "cosched-contract",
                "cosched-des",
                "cosched-model",
                "cosched-policies",
                "cosched-rules",
            ],
        ),
        (
            "cosched",
            include_str!("../../cosched/Cargo.toml"),
            &[
                "cosched-contract",
                "cosched-des",
                "cosched-engine",
                "cosched-model",
                "cosched-policies",
            ],
        ),
        (
            "cosched-py",
            include_str!("../../cosched-py/Cargo.toml"),
            &["cosched", "cosched-real"],
        ),
    ];
    for (name, manifest, allowed) in crates {
        assert_eq!(workspace_deps(manifest), allowed, "{name}");
        assert_eq!(
            dependencies(manifest).contains("pyo3"),
            name == "cosched-py",
            "{name}: only the binding crate depends on PyO3"
        );
    }
}
