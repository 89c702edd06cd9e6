//! The policies are hosted by any mechanism through `cosched-contract`: this
//! crate must not depend on the simulator engine (only its tests may).

#[test]
fn policies_do_not_depend_on_the_engine() {
    let manifest = include_str!("../Cargo.toml");
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .expect("a [dependencies] table")
        .split("\n[")
        .next()
        .unwrap();
    assert!(deps.contains("cosched-contract"), "{deps}");
    assert!(!deps.contains("cosched-engine"), "{deps}");
}
