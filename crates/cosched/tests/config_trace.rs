//! A configuration whose trace file is missing: the error names the configuration
//! file, the field and the trace.

#[test]
fn a_missing_trace_names_the_configuration_and_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let cfg_path = dir.path().join("run.toml");
    std::fs::write(
        &cfg_path,
        "[workload]\ntrace = \"sub/nope.swf\"\n[scheduler]\npolicy = \"fcfs\"\n",
    )
    .unwrap();
    let cfg = cosched::load_config(&cfg_path).unwrap();
    let e = cosched::run_config(&cfg).err().unwrap();
    assert!(e.is_input());
    let msg = e.to_string();
    let trace = dir.path().join("sub/nope.swf");
    let expected = format!(
        "{}: field `workload.trace`: {}: ",
        cfg_path.display(),
        trace.display()
    );
    assert!(msg.starts_with(&expected), "{msg}");
}
