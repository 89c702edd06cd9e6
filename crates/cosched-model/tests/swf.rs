//! SWF reader, writer, workload conversion and statistics: every pitfall of
//! the real traces (see `shared/data/README.md`) and every kind of bad input.

use cosched_des::SimTime;
use cosched_model::swf::*;
use cosched_model::{EstimateSource, OverrunPolicy, WorkloadOptions};
use std::path::{Path, PathBuf};

fn data(name: &str) -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data")).join(name)
}

fn read(name: &str) -> SwfTrace {
    read_swf(&data(name)).unwrap_or_else(|e| panic!("{e}"))
}

fn opts() -> WorkloadOptions {
    WorkloadOptions::default()
}

fn secs(s: i64) -> SimTime {
    SimTime::from_secs(s)
}

/// A valid data line; field `no` (1-based) replaced by `value`.
fn line_with(no: usize, value: &str) -> String {
    let mut f: Vec<&str> = "1 0 0 10 2 -1 -1 2 20 -1 1 1 1 1 1 1 -1 -1"
        .split(' ')
        .collect();
    f[no - 1] = value;
    f.join(" ")
}

fn parse_err(text: &str) -> String {
    match parse_swf(text, "bad.swf") {
        Ok(_) => panic!("parsed without error: {text:?}"),
        Err(e) => e.to_string(),
    }
}

// ---------------------------------------------------------------------------
// Bad input: each error names file, line, field and value.

#[test]
fn wrong_field_count() {
    let path = data("bad_field_count.swf");
    let e = read_swf(&path).unwrap_err();
    assert!(
        matches!(
            e,
            SwfError::FieldCount {
                line: 3,
                found: 17,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        format!("{}:3: expected 18 fields, found 17", path.display())
    );
    let long = format!("{} 5", line_with(1, "1"));
    assert_eq!(parse_err(&long), "bad.swf:1: expected 18 fields, found 19");
}

#[test]
fn non_numeric_value() {
    let text = format!("; MaxProcs: 4\n{}\n", line_with(4, "abc"));
    assert_eq!(
        parse_err(&text),
        "bad.swf:2: field 4 (run_time): not a number (value \"abc\")"
    );
    assert_eq!(
        parse_err(&line_with(12, "u42")),
        "bad.swf:1: field 12 (user_id): not a number (value \"u42\")"
    );
}

#[test]
fn nan_and_inf_are_refused() {
    assert_eq!(
        parse_err(&line_with(6, "nan")),
        "bad.swf:1: field 6 (avg_cpu_time): not a finite number (value \"nan\")"
    );
    assert_eq!(
        parse_err(&line_with(9, "inf")),
        "bad.swf:1: field 9 (requested_time): not a finite number (value \"inf\")"
    );
    assert_eq!(
        parse_err(&line_with(2, "1e400")),
        "bad.swf:1: field 2 (submit_time): not a finite number (value \"1e400\")"
    );
}

#[test]
fn negative_values_other_than_minus_one() {
    assert_eq!(
        parse_err(&line_with(4, "-5")),
        "bad.swf:1: field 4 (run_time): negative value (value \"-5\")"
    );
    assert_eq!(
        parse_err(&line_with(9, "-0.5")),
        "bad.swf:1: field 9 (requested_time): negative value (value \"-0.5\")"
    );
    assert_eq!(
        parse_err(&line_with(17, "-2")),
        "bad.swf:1: field 17 (preceding_job): negative value (value \"-2\")"
    );
    assert_eq!(
        parse_err(&line_with(18, "-3")),
        "bad.swf:1: field 18 (think_time): negative value (value \"-3\")"
    );
    // -1 (also written -1.0) is "unknown" everywhere.
    let t = parse_swf(&line_with(7, "-1.0"), "ok.swf").unwrap();
    assert_eq!(t.records[0].field(7), -1.0);
}

#[test]
fn submit_time_unknown_is_refused_for_a_job_that_ran() {
    let text = format!("; MaxProcs: 4\n\n{}\n", line_with(2, "-1"));
    assert_eq!(
        parse_err(&text),
        "bad.swf:3: field 2 (submit_time): submit time unknown (value \"-1\")"
    );
}

#[test]
fn processor_counts_and_status_must_be_integers() {
    assert_eq!(
        parse_err(&line_with(5, "2.5")),
        "bad.swf:1: field 5 (allocated_procs): not an integer (value \"2.5\")"
    );
    assert_eq!(
        parse_err(&line_with(8, "0.5")),
        "bad.swf:1: field 8 (requested_procs): not an integer (value \"0.5\")"
    );
    assert_eq!(
        parse_err(&line_with(11, "1.5")),
        "bad.swf:1: field 11 (status): not an integer (value \"1.5\")"
    );
}

#[test]
fn bad_header_value() {
    let text = format!("; Version: 2.2\n; MaxProcs: abc\n{}\n", line_with(1, "1"));
    let e = parse_swf(&text, "bad.swf").unwrap_err();
    assert!(
        matches!(&e, SwfError::BadHeader { line: 2, key, .. } if key == "MaxProcs"),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "bad.swf:2: header field MaxProcs: not a non-negative integer (value \"abc\")"
    );
    assert_eq!(
        parse_err("; MaxNodes:\n"),
        "bad.swf:1: header field MaxNodes: not a non-negative integer (value \"\")"
    );
    assert_eq!(
        parse_err("; MaxJobs: -3\n"),
        "bad.swf:1: header field MaxJobs: not a non-negative integer (value \"-3\")"
    );
    // Keys are case-sensitive; headers this reader does not use are kept but not parsed.
    let t = parse_swf("; maxprocs: abc\n;MaxRuntime: N/A\n", "ok.swf").unwrap();
    assert_eq!(t.header.max_procs, None);
    assert_eq!(t.header.get("MaxRuntime"), Some("N/A"));
}

#[test]
fn number_spellings() {
    let ok = |v: &str| parse_swf(&line_with(6, v), "ok.swf").unwrap().records[0].field(6);
    assert_eq!(ok("0012"), 12.0);
    assert_eq!(ok("12.50"), 12.5);
    assert_eq!(ok(".5"), 0.5);
    assert_eq!(ok("1e3"), 1000.0);
    assert_eq!(ok("+7"), 7.0);
    assert_eq!(ok("1234567890123456789"), 1234567890123456789.0);
    assert_eq!(ok("-1"), -1.0);
    assert_eq!(ok("-1.0"), -1.0);
    for bad in ["-", "1-", "12abc", "--1", "1,5", "0x10"] {
        assert_eq!(
            parse_err(&line_with(6, bad)),
            format!("bad.swf:1: field 6 (avg_cpu_time): not a number (value {bad:?})")
        );
    }
}

#[test]
fn latin1_header_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("latin1.swf");
    let mut bytes = b"; Acknowledge: Jos\xe9\n; MaxProcs: 4\n".to_vec();
    bytes.extend_from_slice(line_with(1, "1").as_bytes());
    std::fs::write(&path, bytes).unwrap();
    let t = read_swf(&path).unwrap();
    assert_eq!(t.header.lines[0], "; Acknowledge: Jos\u{e9}");
    assert_eq!((t.header.max_procs, t.records.len()), (Some(4), 1));
}

#[test]
fn missing_file_is_an_io_error_naming_the_path() {
    let path = data("does-not-exist.swf");
    let e = read_swf(&path).unwrap_err();
    assert!(matches!(e, SwfError::Io { .. }), "{e:?}");
    assert!(
        e.to_string().starts_with(&format!("{}: ", path.display())),
        "{e}"
    );
}

// ---------------------------------------------------------------------------
// Parsing

#[test]
fn header_lines_kept_verbatim_and_keys_parsed() {
    let t = read("basic.swf");
    assert_eq!(t.header.lines.len(), 10);
    assert_eq!(
        t.header.lines[2],
        "; Acknowledge: keep this line in derived files"
    );
    assert_eq!(t.header.lines[8], ";");
    assert_eq!(t.header.max_procs, Some(128));
    assert_eq!(t.header.max_nodes, Some(128));
    assert_eq!(t.header.max_jobs, Some(10));
    assert_eq!(t.header.max_records, Some(6));
    assert_eq!(t.header.get("UnixStartTime"), Some("893466664"));
    assert_eq!(
        t.header.get("Note"),
        Some("hand-written fixture; notes may contain colons: a: b")
    );
    assert_eq!(t.records.len(), 4);
    assert_eq!(t.records[0].line, 11);
    assert_eq!(t.records[0].fields[0], 1.0);
    assert_eq!(t.records[1].field(6), 24666.5);
    assert_eq!(t.records[3].field(2), 571164.25);
    assert_eq!(t.records[3].field(18), 30.0);
}

#[test]
fn header_values_with_trailing_notes_and_no_space_after_semicolon() {
    let t = read("procs.swf");
    assert_eq!(t.header.max_nodes, Some(338));
    let t = read("status_codes.swf");
    assert_eq!(t.header.max_nodes, Some(1524));
    assert_eq!(t.header.lines[0], ";Version: SWF v2");
}

#[test]
fn crlf_blank_lines_and_indented_comments() {
    let t = read("crlf_blank.swf");
    assert_eq!(
        t.header.lines,
        vec![
            "; MaxProcs: 4".to_string(),
            "\t; indented comment".to_string()
        ]
    );
    assert_eq!(
        t.records.iter().map(|r| r.line).collect::<Vec<_>>(),
        vec![3, 6]
    );
    assert_eq!(t.records[1].field(2), 5.0);
}

#[test]
fn gzip_recognised_by_magic_bytes_not_extension() {
    use std::io::Write;
    let text = std::fs::read(data("basic.swf")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("compressed-but-named.swf");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(&text).unwrap();
    std::fs::write(&path, enc.finish().unwrap()).unwrap();
    let t = read_swf(&path).unwrap();
    assert_eq!(t.records, read("basic.swf").records);
    // And a plain file named .gz reads as plain text.
    let plain_gz = dir.path().join("plain.swf.gz");
    std::fs::write(&plain_gz, &text).unwrap();
    assert_eq!(read_swf(&plain_gz).unwrap().records.len(), 4);
}

#[test]
fn nonstandard_status_codes_are_accepted_and_counted() {
    let t = read("status_codes.swf");
    let s = trace_stats(&t, &opts()).unwrap();
    let counts: Vec<(i64, u64)> = s.status_counts.into_iter().collect();
    assert_eq!(counts, vec![(-2, 1), (126, 1), (127, 1), (265, 2)]);
}

// ---------------------------------------------------------------------------
// Workload: processors, never-ran jobs, order, times

#[test]
fn processors_allocated_then_requested_then_dropped() {
    let t = read("procs.swf");
    let (w, _) = to_workload(&t, &opts(), None).unwrap();
    // Job 1: allocated 306 (requested -1, CTC-SP2 style); job 2: requested 17;
    // job 4: allocated 0 so requested 4; jobs 3 and 5: both unknown, dropped.
    let got: Vec<(i64, u32)> = w.jobs.iter().map(|j| (j.source_id, j.procs)).collect();
    assert_eq!(got, vec![(1, 306), (2, 17), (4, 4)]);
    assert_eq!(w.dropped_no_procs, 2);
    assert_eq!(w.dropped_never_ran, 0);
    let summary: Vec<&String> = w
        .warnings
        .iter()
        .filter(|m| m.contains("dropped"))
        .collect();
    assert_eq!(summary.len(), 1, "{:?}", w.warnings);
    assert_eq!(
        summary[0],
        &format!(
            "{}: 2 jobs dropped: no processor count (allocated, field 5, and requested, field 8, are both -1 or 0)",
            t.origin
        )
    );
    // One such record: "1 job", singular.
    let one = parse_swf(
        "; MaxProcs: 8\n1 0 0 10 0 -1 -1 -1 20 -1 1 1 1 -1 -1 -1 -1 -1\n",
        "one.swf",
    )
    .unwrap();
    let (w, _) = to_workload(&one, &opts(), None).unwrap();
    assert!(
        w.warnings.contains(
            &"one.swf: 1 job dropped: no processor count (allocated, field 5, and \
             requested, field 8, are both -1 or 0)"
                .to_string()
        ),
        "{:?}",
        w.warnings
    );
}

#[test]
fn never_ran_jobs_are_dropped_and_counted() {
    let t = read("never_ran.swf");
    let (w, _) = to_workload(&t, &opts(), None).unwrap();
    assert_eq!(
        w.jobs.iter().map(|j| j.source_id).collect::<Vec<_>>(),
        vec![11, 20]
    );
    assert_eq!(w.dropped_never_ran, 2);
    assert_eq!(w.dropped_no_procs, 0);
    assert_eq!(w.dropped(), 2);
    let s = trace_stats(&t, &opts()).unwrap();
    assert_eq!((s.records, s.jobs, s.dropped_never_ran), (4, 2, 2));
}

#[test]
fn times_keep_the_trace_origin_and_fractions() {
    let t = read("basic.swf");
    let (w, _) = to_workload(&t, &opts(), None).unwrap();
    // The first submit is 566,129 s (SDSC-SP2 style), not shifted to 0.
    assert_eq!(w.jobs[0].submit, secs(566_129));
    assert_eq!(w.jobs[3].submit, SimTime::from_ns(571_164_250_000_000));
    assert_eq!(w.jobs[3].runtime, SimTime::from_ns(64_832_750_000_000));
}

#[test]
fn unsorted_submit_times_are_sorted_with_one_warning() {
    let t = read("unsorted.swf");
    let (w, _) = to_workload(&t, &opts(), None).unwrap();
    let order: Vec<i64> = w.jobs.iter().map(|j| j.source_id).collect();
    // Stable: jobs 2 and 4 share submit time 200 and keep file order.
    assert_eq!(order, vec![5, 1, 3, 2, 4, 6]);
    assert!(w.jobs.windows(2).all(|p| p[0].submit <= p[1].submit));
    assert_eq!(w.warnings.len(), 1, "{:?}", w.warnings);
    assert_eq!(
        w.warnings[0],
        format!(
            "{}: submit times are not sorted: 2 inversions (first at line 4); jobs sorted by submit time",
            t.origin
        )
    );
    let s = trace_stats(&t, &opts()).unwrap();
    assert_eq!(
        (s.submit_inversions, s.submit_inversions_all_records),
        (2, 2)
    );
    assert_eq!(
        (s.first_submit_s, s.last_submit_s, s.span_s),
        (Some(50.0), Some(300.0), Some(250.0))
    );
}

#[test]
fn sorted_trace_gives_no_warning() {
    let (w, _) = to_workload(&read("basic.swf"), &opts(), None).unwrap();
    assert!(w.warnings.is_empty(), "{:?}", w.warnings);
}

#[test]
fn unknown_submit_times_of_never_ran_records() {
    // LLNL-Thunder style: the -1 submit times of never-ran records make the raw
    // column look unsorted, but the jobs themselves are in order.
    let t = read("unknown_submit.swf");
    let (w, _) = to_workload(&t, &opts(), None).unwrap();
    assert_eq!(
        w.jobs.iter().map(|j| j.source_id).collect::<Vec<_>>(),
        vec![1, 3, 5]
    );
    assert_eq!(w.dropped_never_ran, 2);
    assert!(w.warnings.is_empty(), "{:?}", w.warnings);
    let s = trace_stats(&t, &opts()).unwrap();
    assert_eq!(s.submit_time_unknown, 2);
    assert_eq!(s.submit_inversions_all_records, 2);
    assert_eq!(s.submit_inversions, 0);
}

#[test]
fn max_jobs_keeps_the_first_jobs_after_dropping_and_sorting() {
    let (w, _) = to_workload(&read("unsorted.swf"), &opts(), Some(3)).unwrap();
    assert_eq!(
        w.jobs.iter().map(|j| j.source_id).collect::<Vec<_>>(),
        vec![5, 1, 3]
    );
    let (w, _) = to_workload(&read("never_ran.swf"), &opts(), Some(1)).unwrap();
    assert_eq!(
        w.jobs.iter().map(|j| j.source_id).collect::<Vec<_>>(),
        vec![11]
    );
    assert_eq!(w.dropped_never_ran, 2);
    let (w, _) = to_workload(&read("never_ran.swf"), &opts(), Some(0)).unwrap();
    assert!(w.jobs.is_empty());
}

#[test]
fn jobs_wider_than_the_machine_are_reported() {
    let o = WorkloadOptions {
        machine_size: Some(16),
        ..opts()
    };
    let t = read("basic.swf");
    let (w, m) = to_workload(&t, &o, None).unwrap();
    assert_eq!(m.procs, 16);
    assert_eq!(w.jobs.len(), 4);
    assert_eq!(
        w.warnings,
        vec![format!(
            "{}: 1 jobs need more processors than the machine's 16 (override)",
            t.origin
        )]
    );
    assert_eq!(trace_stats(&t, &o).unwrap().jobs_wider_than_machine, 1);
}

// ---------------------------------------------------------------------------
// Machine size

#[test]
fn machine_size_from_max_procs() {
    let mut warnings = Vec::new();
    let m = machine_size(&read("basic.swf"), &opts(), &mut warnings).unwrap();
    assert_eq!(
        m,
        MachineSize {
            procs: 128,
            procs_per_node: 1,
            nodes: 128,
            source: "MaxProcs header".into(),
            unit_procs: 1
        }
    );
    assert!(warnings.is_empty());
}

#[test]
fn machine_size_smp_nodes_sdsc_blue_style() {
    let mut warnings = Vec::new();
    let m = machine_size(&read("blue_style.swf"), &opts(), &mut warnings).unwrap();
    assert_eq!(
        m,
        MachineSize {
            procs: 1152,
            procs_per_node: 8,
            nodes: 144,
            source: "MaxProcs header".into(),
            unit_procs: 1,
        }
    );
    assert!(warnings.is_empty());
}

#[test]
fn machine_size_not_a_multiple_gives_one_proc_per_node() {
    let t = parse_swf("; MaxNodes: 57\n; MaxProcs: 178\n", "osc.swf").unwrap();
    let m = machine_size(&t, &opts(), &mut Vec::new()).unwrap();
    assert_eq!((m.procs, m.procs_per_node, m.nodes), (178, 1, 178));
}

#[test]
fn machine_size_from_max_nodes_with_the_flag() {
    let o = WorkloadOptions {
        machine_size_from_nodes: true,
        ..opts()
    };
    let mut warnings = Vec::new();
    let m = machine_size(&read("blue_style.swf"), &o, &mut warnings).unwrap();
    assert_eq!(
        m,
        MachineSize {
            procs: 144,
            procs_per_node: 1,
            nodes: 144,
            source: "MaxNodes header".into(),
            unit_procs: 8,
        }
    );
    assert!(warnings.is_empty());
    // Jobs are then counted in whole nodes: 8 processors -> 1 node, 16 -> 2 nodes.
    let (w, _) = to_workload(&read("blue_style.swf"), &o, None).unwrap();
    assert_eq!(
        w.jobs.iter().map(|j| j.procs).take(2).collect::<Vec<_>>(),
        vec![1, 2]
    );
    // The flag without a MaxNodes header falls back to MaxProcs, with a warning.
    let t = parse_swf("; MaxProcs: 64\n", "p.swf").unwrap();
    let m = machine_size(&t, &o, &mut warnings).unwrap();
    assert_eq!((m.procs, m.source.as_str()), (64, "MaxProcs header"));
    assert_eq!(
        warnings,
        vec!["p.swf: the header has no MaxNodes; machine size taken from MaxProcs: 64 processors"]
    );
}

#[test]
fn machine_size_falls_back_to_max_nodes_with_a_warning() {
    let t = read("lublin_style.swf");
    let mut warnings = Vec::new();
    let m = machine_size(&t, &opts(), &mut warnings).unwrap();
    assert_eq!(
        m,
        MachineSize {
            procs: 256,
            procs_per_node: 1,
            nodes: 256,
            source: "MaxNodes header".into(),
            unit_procs: 1,
        }
    );
    assert_eq!(
        warnings,
        vec![format!(
            "{}: the header has no MaxProcs; machine size taken from MaxNodes: 256 processors",
            t.origin
        )]
    );
    // to_workload passes the warning on.
    let (w, _) = to_workload(&t, &opts(), None).unwrap();
    assert_eq!(w.warnings, warnings);
}

#[test]
fn machine_size_override() {
    let o = WorkloadOptions {
        machine_size: Some(500),
        machine_size_from_nodes: true,
        ..opts()
    };
    let m = machine_size(&read("blue_style.swf"), &o, &mut Vec::new()).unwrap();
    assert_eq!(
        m,
        MachineSize {
            procs: 500,
            procs_per_node: 1,
            nodes: 500,
            source: "override".into(),
            unit_procs: 1,
        }
    );
    // The override also sizes a trace without header sizes.
    let m = machine_size(&read("no_size.swf"), &o, &mut Vec::new()).unwrap();
    assert_eq!(m.procs, 500);
    let zero = WorkloadOptions {
        machine_size: Some(0),
        ..opts()
    };
    let e = machine_size(&read("no_size.swf"), &zero, &mut Vec::new()).unwrap_err();
    assert!(
        e.to_string().ends_with(
            "no_size.swf: bad machine size: the machine size override must be at least 1"
        ),
        "{e}"
    );
}

#[test]
fn no_machine_size_is_an_error() {
    let t = read("no_size.swf");
    let e = machine_size(&t, &opts(), &mut Vec::new()).unwrap_err();
    assert!(matches!(e, SwfError::NoMachineSize { .. }), "{e:?}");
    let msg = format!(
        "{}: no machine size: the header has no MaxProcs or MaxNodes (or only 0); give one \
         with --machine-size N (cosched simulate, cosched trace info) or a configuration's workload.machine_size",
        t.origin
    );
    assert_eq!(e.to_string(), msg);
    assert_eq!(to_workload(&t, &opts(), None).unwrap_err().to_string(), msg);
    assert_eq!(trace_stats(&t, &opts()).unwrap_err().to_string(), msg);
    // A zero header counts as absent.
    let t = parse_swf("; MaxProcs: 0\n", "zero.swf").unwrap();
    assert!(matches!(
        machine_size(&t, &opts(), &mut Vec::new()),
        Err(SwfError::NoMachineSize { .. })
    ));
}

#[test]
fn a_parquet_or_json_file_read_as_swf_is_named_as_such() {
    // `read_swf` of the Parquet magic "PAR1", or of text whose first non-blank character is `{` or `[`
    // (after a byte order mark), names the format and the conversion instead of "expected 18 fields".
    let dir = std::env::temp_dir().join(format!("cosched-notswf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes, what) in [
        ("t.parquet", &b"PAR1\x15\x04"[..], "a Parquet file"),
        (
            "t.json",
            &b"\n  {\"header\": [], \"jobs\": []}"[..],
            "a JSON file",
        ),
        ("u.json", &b"\xef\xbb\xbf[1, 2]"[..], "a JSON file"),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let e = read_swf(&path).unwrap_err();
        let p = path.display();
        assert_eq!(
            e.to_string(),
            format!("{p}: not an SWF trace but {what}; convert it to SWF first (cosched trace convert {p} OUT.swf)")
        );
    }
    // An SWF file is still read: a header line, then a record.
    let path = dir.join("ok.swf");
    std::fs::write(
        &path,
        "; MaxProcs: 4\n1 0 0 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1\n",
    )
    .unwrap();
    assert_eq!(read_swf(&path).unwrap().records.len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---------------------------------------------------------------------------
// Estimates

fn estimates(o: &WorkloadOptions) -> Vec<(Option<SimTime>, SimTime, Option<SimTime>)> {
    let (w, _) = to_workload(&read("estimates.swf"), o, None).unwrap();
    w.jobs
        .iter()
        .map(|j| (j.requested, j.estimate, j.kill_after))
        .collect()
}

#[test]
fn estimates_requested_extend() {
    let o = WorkloadOptions {
        estimates: EstimateSource::Requested,
        overrun: OverrunPolicy::Extend,
        ..opts()
    };
    assert_eq!(
        estimates(&o),
        vec![
            (Some(secs(200)), secs(200), None),
            (Some(secs(200)), secs(300), None), // max(requested, runtime)
            (None, secs(400), None),            // requested -1: the runtime
            (None, secs(500), None),            // requested 0: unknown too
        ]
    );
}

#[test]
fn estimates_requested_kill() {
    let o = WorkloadOptions {
        estimates: EstimateSource::Requested,
        overrun: OverrunPolicy::Kill,
        ..opts()
    };
    assert_eq!(
        estimates(&o),
        vec![
            (Some(secs(200)), secs(200), Some(secs(200))),
            (Some(secs(200)), secs(200), Some(secs(200))),
            (None, secs(400), None),
            (None, secs(500), None),
        ]
    );
    let (w, _) = to_workload(&read("estimates.swf"), &o, None).unwrap();
    assert_eq!(w.jobs[1].effective_runtime(), secs(200));
    assert_eq!(w.jobs[1].runtime, secs(300));
}

#[test]
fn estimates_exact() {
    for overrun in [OverrunPolicy::Extend, OverrunPolicy::Kill] {
        let o = WorkloadOptions {
            estimates: EstimateSource::Exact,
            overrun,
            ..opts()
        };
        assert_eq!(
            estimates(&o),
            vec![
                (Some(secs(200)), secs(100), None),
                (Some(secs(200)), secs(300), None),
                (None, secs(400), None),
                (None, secs(500), None),
            ]
        );
    }
}

#[test]
fn requested_time_unknown_lublin_style() {
    let t = read("lublin_style.swf");
    let (w, _) = to_workload(&t, &opts(), None).unwrap();
    assert!(w
        .jobs
        .iter()
        .all(|j| j.requested.is_none() && j.estimate == j.runtime && j.kill_after.is_none()));
    let s = trace_stats(&t, &opts()).unwrap();
    assert_eq!((s.requested_time_missing, s.jobs_over_requested), (3, 0));
}

// ---------------------------------------------------------------------------
// Statistics

#[test]
fn stats_of_a_small_trace() {
    let t = read("estimates.swf");
    let s = trace_stats(&t, &opts()).unwrap();
    assert_eq!((s.records, s.jobs, s.header_lines), (4, 4, 5));
    assert_eq!(
        (s.machine_procs, s.machine_nodes, s.procs_per_node),
        (16, 16, 1)
    );
    assert_eq!(s.machine_size_source, "MaxProcs header");
    assert_eq!(
        (s.procs_min, s.procs_mean, s.procs_max),
        (Some(1), Some(1.0), Some(1))
    );
    assert_eq!(s.runtime_mean_s, Some(325.0));
    assert_eq!(s.runtime_median_s, Some(350.0));
    assert_eq!((s.jobs_over_requested, s.requested_time_missing), (1, 2));
    // 1 proc x (100 + 300 + 400 + 500) s over 16 procs x 30 s.
    assert_eq!(s.offered_load, Some(1300.0 / (16.0 * 30.0)));
    assert_eq!(s.status_counts.get(&1), Some(&4));
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["jobs"], 4);
    assert_eq!(json["status_counts"]["1"], 4);
}

#[test]
fn stats_report_header_counts_next_to_real_counts() {
    let s = trace_stats(&read("basic.swf"), &opts()).unwrap();
    assert_eq!(s.records, 4);
    assert_eq!(
        (s.header_max_jobs, s.header_max_records),
        (Some(10), Some(6))
    );
}

#[test]
fn stats_of_a_trace_without_jobs() {
    let t = parse_swf("; MaxProcs: 8\n", "empty.swf").unwrap();
    let s = trace_stats(&t, &opts()).unwrap();
    assert_eq!((s.records, s.jobs), (0, 0));
    assert_eq!(
        (
            s.first_submit_s,
            s.span_s,
            s.offered_load,
            s.runtime_median_s
        ),
        (None, None, None, None)
    );
}

// ---------------------------------------------------------------------------
// Writing

#[test]
fn round_trip_through_text() {
    for name in [
        "basic.swf",
        "procs.swf",
        "status_codes.swf",
        "unsorted.swf",
        "lublin_style.swf",
    ] {
        let t = read(name);
        let text = swf_to_string(&t);
        let back = parse_swf(&text, &t.origin).unwrap();
        // Headers come first and there are no blank lines, so even line numbers agree.
        assert_eq!(back, t, "{name}");
    }
    // Integers without a decimal point; fractions in their shortest exact form.
    let text = swf_to_string(&read("basic.swf"));
    assert!(
        text.contains("\n2 566290 532 26171 1 24666.5 -1 1 28800 -1 1 153 75 18184 3 -1 -1 -1\n"),
        "{text}"
    );
    assert!(
        text.contains("\n4 571164.25 21568 64832.75 32 44134 2048 "),
        "{text}"
    );
}

#[test]
fn round_trip_keeps_comments_and_records_of_irregular_files() {
    let t = read("crlf_blank.swf");
    let back = parse_swf(&swf_to_string(&t), "x").unwrap();
    assert_eq!(back.header.lines, t.header.lines);
    let fields = |t: &SwfTrace| t.records.iter().map(|r| r.fields).collect::<Vec<_>>();
    assert_eq!(fields(&back), fields(&t));
}

#[test]
fn write_gz_and_plain_and_read_back() {
    let t = read("basic.swf");
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("out.swf.gz");
    write_swf(&t, &gz).unwrap();
    assert_eq!(&std::fs::read(&gz).unwrap()[..2], &[0x1f, 0x8b]);
    let back = read_swf(&gz).unwrap();
    assert_eq!(
        (back.header, back.records),
        (t.header.clone(), t.records.clone())
    );
    let plain = dir.path().join("out.swf");
    write_swf(&t, &plain).unwrap();
    assert_eq!(std::fs::read_to_string(&plain).unwrap(), swf_to_string(&t));
    // Only the two outputs: no temporary file left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

#[test]
fn write_into_missing_directory_fails_and_leaves_nothing() {
    let t = read("basic.swf");
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir");
    let path = missing.join("out.swf.gz");
    let e = write_swf(&t, &path).unwrap_err();
    assert!(matches!(e, SwfError::Io { .. }), "{e:?}");
    assert!(
        e.to_string().starts_with(&format!("{}: ", path.display())),
        "{e}"
    );
    assert!(!path.exists());
    assert!(!missing.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

// ---------------------------------------------------------------------------
// Property: valid records survive text round trips exactly.

mod prop {
    use super::*;
    use proptest::prelude::*;

    /// A value valid for field index `k` (0-based).
    fn value(k: usize) -> BoxedStrategy<f64> {
        let unknown = Just(-1.0);
        match k {
            10 => (-300i64..300).prop_map(|v| v as f64).boxed(),
            4 | 7 => prop_oneof![unknown, (0u32..100_000).prop_map(f64::from)].boxed(),
            _ => prop_oneof![
                unknown,
                (0i64..10_000_000_000).prop_map(|v| v as f64),
                (0.0f64..1e9),
                (0.0f64..1.0),
                (1e15f64..1e20),
            ]
            .boxed(),
        }
    }

    fn record() -> impl Strategy<Value = [f64; 18]> {
        let parts: Vec<BoxedStrategy<f64>> = (0..18).map(value).collect();
        parts.prop_map(|v| {
            let mut f: [f64; 18] = v.try_into().unwrap();
            // A job that ran has a submit time.
            if f[1] == -1.0 && f[3] != -1.0 {
                f[1] = 0.0;
            }
            f
        })
    }

    proptest! {
        #[test]
        fn records_round_trip(
            comments in proptest::collection::vec("; #[ -~]{0,30}", 0..4),
            fields in proptest::collection::vec(record(), 0..20),
        ) {
            let n = comments.len();
            let trace = SwfTrace {
                origin: "p.swf".into(),
                header: SwfHeader { lines: comments, ..Default::default() },
                records: fields.into_iter().enumerate().map(|(i, fields)| SwfRecord { line: n + i + 1, fields }).collect(),
            };
            let back = parse_swf(&swf_to_string(&trace), "p.swf").unwrap();
            prop_assert_eq!(back, trace);
        }
    }
}

// ---------------------------------------------------------------------------
// The real traces of shared/data/traces (README table).

const TRACES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data/traces");

struct Fact {
    name: &'static str,
    records: u64,
    max_nodes: Option<u64>,
    max_procs: Option<u64>,
    /// Span in days, for the rows that give it in days.
    span_days: Option<f64>,
    offered_load: f64,
}

const fn fact(
    name: &'static str,
    records: u64,
    nodes: u64,
    procs: u64,
    span_days: Option<f64>,
    load: f64,
) -> Fact {
    let max_procs = if procs == 0 { None } else { Some(procs) };
    Fact {
        name,
        records,
        max_nodes: Some(nodes),
        max_procs,
        span_days,
        offered_load: load,
    }
}

const FACTS: &[Fact] = &[
    fact("KTH-SP2-1996-2.1-cln", 28_476, 100, 100, Some(333.0), 0.70),
    fact("SDSC-SP2-1998-4.2-cln", 59_715, 128, 128, Some(729.0), 0.83),
    fact("CTC-SP2-1996-3.1-cln", 77_222, 338, 338, Some(339.0), 0.84),
    fact("HPC2N-2002-2.2-cln", 202_871, 240, 240, Some(1264.0), 0.60),
    fact(
        "SDSC-BLUE-2000-4.2-cln",
        243_306,
        144,
        1152,
        Some(974.0),
        0.77,
    ),
    fact(
        "CEA-Curie-2011-2.1-cln",
        312_826,
        5544,
        93312,
        Some(254.0),
        0.63,
    ),
    fact("LANL-CM5-1994-4.1-cln", 122_060, 1024, 1024, None, 0.74),
    fact("LLNL-Thunder-2007-1.1-cln", 121_039, 1002, 4008, None, 0.87),
    fact("LLNL-Atlas-2006-2.1-cln", 43_778, 1152, 9216, None, 0.70),
    fact("SDSC-Par-1996-3.1-cln", 32_135, 400, 400, None, 0.75),
    fact("SDSC-DS-2004-2.1-cln", 96_069, 184, 1664, None, 0.67),
    fact("NASA-iPSC-1993-3.1-cln", 18_239, 128, 128, None, 0.47),
    fact("OSC-Clust-2000-3.1-cln", 36_097, 57, 178, None, 0.13),
    fact("Sandia-Ross-2001-1.1-cln", 57_882, 1524, 1524, None, 0.53),
    fact("lublin_256", 10_000, 256, 0, Some(89.0), 1.06),
];

fn check_trace(f: &Fact) {
    let path = Path::new(TRACES).join(format!("{}.swf.gz", f.name));
    let t = read_swf(&path).unwrap_or_else(|e| panic!("{e}"));
    let s = trace_stats(&t, &opts()).unwrap_or_else(|e| panic!("{e}"));
    let n = f.name;
    assert_eq!(s.records, f.records, "{n}: records");
    // Every line is a header comment or a record: the last record is the last line.
    let last_line = t.records.last().unwrap().line;
    assert_eq!(
        last_line,
        t.header.lines.len() + t.records.len(),
        "{n}: line count"
    );
    assert_eq!(
        (t.header.max_nodes, t.header.max_procs),
        (f.max_nodes, f.max_procs),
        "{n}: header sizes"
    );
    assert_eq!(
        s.jobs + s.dropped_never_ran + s.dropped_no_procs,
        s.records,
        "{n}: accounting"
    );
    assert!(
        (s.offered_load.unwrap() - f.offered_load).abs() < 0.01,
        "{n}: offered load {:?}",
        s.offered_load
    );
    if let Some(d) = f.span_days {
        assert!(
            (s.span_s.unwrap() / 86_400.0 - d).abs() <= 0.5,
            "{n}: span {:?}",
            s.span_s
        );
    }
    // Header (acknowledgement) lines survive a write.
    assert!(
        swf_to_string(&t).starts_with(&t.header.lines.join("\n")),
        "{n}: header kept"
    );
    match n {
        "SDSC-SP2-1998-4.2-cln" => {
            assert_eq!(s.dropped_never_ran, 5_671);
            assert_eq!(s.first_submit_s, Some(566_129.0));
            assert_eq!(s.jobs_over_requested, 4_134);
        }
        "CTC-SP2-1996-3.1-cln" => {
            assert!(
                t.records.iter().all(|r| r.field(8) == -1.0),
                "requested procs are all -1"
            );
            assert_eq!((s.jobs, s.dropped_no_procs), (77_222, 0));
        }
        "LLNL-Thunder-2007-1.1-cln" => {
            // The 808 inversions of the raw column all come from never-ran records
            // whose submit time is unknown (-1); the usable jobs are in order.
            assert_eq!(s.submit_inversions_all_records, 808);
            assert_eq!(s.submit_time_unknown, 1_190);
            assert_eq!(s.dropped_never_ran, 1_190);
            assert_eq!(s.submit_inversions, 0);
        }
        "SDSC-BLUE-2000-4.2-cln" => {
            assert_eq!(
                (s.machine_procs, s.procs_per_node, s.machine_nodes),
                (1152, 8, 144)
            );
            assert_eq!(s.jobs_over_requested, 23_434);
        }
        "lublin_256" => {
            assert!(
                t.records.iter().all(|r| r.field(9) == -1.0),
                "requested time is all -1"
            );
            assert_eq!(s.requested_time_missing, 10_000);
            assert_eq!(s.machine_size_source, "MaxNodes header");
            assert_eq!(s.warnings.len(), 1);
        }
        "Sandia-Ross-2001-1.1-cln" => {
            for code in [126, 127, 265] {
                assert!(
                    s.status_counts.get(&code).is_some_and(|&c| c > 0),
                    "status {code}"
                );
            }
        }
        _ => {}
    }
}

#[test]
fn real_traces_all() {
    // About 15 s in a debug build (1.5 million gzipped lines), under a second in release.
    let mut names: Vec<String> = std::fs::read_dir(TRACES)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|n| n.strip_suffix(".swf.gz").map(str::to_string))
        .collect();
    names.sort();
    let mut known: Vec<String> = FACTS.iter().map(|f| f.name.to_string()).collect();
    known.sort();
    assert_eq!(
        names, known,
        "every trace of the folder has a row in the README table"
    );
    for f in FACTS {
        check_trace(f);
    }
}

#[test]
#[ignore = "timing: run in release with --ignored --nocapture"]
fn parse_time_cea_curie() {
    use std::io::Read;
    use std::time::{Duration, Instant};
    let path = Path::new(TRACES).join("CEA-Curie-2011-2.1-cln.swf.gz");
    let best = |f: &mut dyn FnMut()| {
        (0..5)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .min()
            .unwrap_or(Duration::ZERO)
    };
    let raw = std::fs::read(&path).unwrap();
    let mut text = String::new();
    let gunzip = best(&mut || {
        text.clear();
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_string(&mut text)
            .unwrap();
    });
    let mut records = 0;
    let parse = best(&mut || records = parse_swf(&text, "curie").unwrap().records.len());
    let read = best(&mut || {
        read_swf(&path).unwrap();
    });
    println!("CEA-Curie: {records} records; best of 5: gunzip {gunzip:?}, parse_swf {parse:?}, read_swf (read + gunzip + parse) {read:?}");
}

#[test]
fn scale_load_by_interarrival_and_runtime_rounds_half_to_even() {
    use cosched_model::LoadScaleBy;
    let text = "; MaxProcs: 4\n\
        1 10 -1 10 1 3 -1 1 20 -1 1 -1 -1 -1 -1 -1 -1 -1\n\
        2 13 -1 5 1 -1 -1 1 -1 -1 1 -1 -1 -1 -1 -1 -1 -1\n\
        3 -1 -1 -1 1 -1 -1 1 20 -1 0 -1 -1 -1 -1 -1 -1 -1\n\
        4 15 -1 7 1 -1 -1 1 9 -1 1 -1 -1 -1 -1 -1 -1 -1\n";
    let base = parse_swf(text, "t.swf").unwrap();
    let mut t = base.clone();
    scale_load(&mut t, 2.0, LoadScaleBy::Interarrival);
    let submits: Vec<f64> = t.records.iter().map(|r| r.field(2)).collect();
    // first = 10: 10, 10 + 3/2 = 11.5 -> 12 (half to even), unknown stays, 10 + 5/2 = 12.5 -> 12.
    assert_eq!(submits, vec![10.0, 12.0, -1.0, 12.0]);
    let mut t = base.clone();
    scale_load(&mut t, 0.5, LoadScaleBy::Runtime);
    let run: Vec<f64> = t.records.iter().map(|r| r.field(4)).collect();
    let req: Vec<f64> = t.records.iter().map(|r| r.field(9)).collect();
    let cpu: Vec<f64> = t.records.iter().map(|r| r.field(6)).collect();
    assert_eq!(run, vec![5.0, 2.0, -1.0, 4.0]); // 2.5 -> 2, 3.5 -> 4
    assert_eq!(req, vec![10.0, -1.0, 10.0, 4.0]); // 4.5 -> 4
    assert_eq!(cpu, vec![2.0, -1.0, -1.0, -1.0]); // 1.5 -> 2
    assert_eq!(
        t.records.iter().map(|r| r.field(2)).collect::<Vec<_>>(),
        base.records.iter().map(|r| r.field(2)).collect::<Vec<_>>()
    );
}
