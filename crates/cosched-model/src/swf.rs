//! Standard Workload Format (SWF v2.2) reader and writer, and the conversion of
//! a trace into a simulator [`Workload`].
//!
//! An SWF file is a list of header comments (lines starting with `;`, e.g.
//! `; MaxProcs: 128`) and data lines of 18 whitespace-separated numbers, one
//! job per line, where -1 means "unknown". The reader keeps every comment line
//! verbatim (the archive asks that acknowledgement headers travel with every
//! derived file) and validates each data line, naming the file, line, field and
//! value of the first error.
//!
//! Pitfalls of real logs that this module handles:
//! - the MaxJobs / MaxRecords headers may count the jobs before cleaning: the
//!   statistics report them next to the real record count;
//! - processors: allocated (field 5) when known, else requested (field 8); when
//!   both are unknown the record is dropped and counted;
//! - run time -1: the job never ran; it is dropped and counted. Such records may
//!   also have an unknown submit time (LLNL-Thunder has 1,190 of them);
//! - the requested time (field 9) may be missing (-1) and may be shorter than
//!   the run time; [`crate::EstimateSource`] and [`crate::OverrunPolicy`] say
//!   what the scheduler sees and what happens;
//! - submit times may be out of order: jobs are stably sorted with one warning;
//! - the first submit time is not always 0: times keep the trace's own origin;
//! - MaxProcs and MaxNodes differ on SMP machines (SDSC-BLUE: 1152 / 144), and
//!   header values may carry a trailing note (`; MaxNodes: 338 (batch partition)`);
//! - status codes other than 0-5 exist (Sandia-Ross: 126, 127, 265, -2, -4).

use crate::{JobSpec, Workload, WorkloadOptions};
use cosched_des::SimTime;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write as _};
use std::path::Path;
use thiserror::Error;

/// Names of the 18 SWF fields; index 0 is field 1.
pub const FIELD_NAMES: [&str; 18] = [
    "job_number",
    "submit_time",
    "wait_time",
    "run_time",
    "allocated_procs",
    "avg_cpu_time",
    "used_memory",
    "requested_procs",
    "requested_time",
    "requested_memory",
    "status",
    "user_id",
    "group_id",
    "executable",
    "queue",
    "partition",
    "preceding_job",
    "think_time",
];

/// Indices into [`SwfRecord::fields`] (0-based: SWF field n is index n - 1).
pub mod field {
    pub const JOB_NUMBER: usize = 0;
    pub const SUBMIT_TIME: usize = 1;
    pub const WAIT_TIME: usize = 2;
    pub const RUN_TIME: usize = 3;
    pub const ALLOCATED_PROCS: usize = 4;
    pub const AVG_CPU_TIME: usize = 5;
    pub const USED_MEMORY: usize = 6;
    pub const REQUESTED_PROCS: usize = 7;
    pub const REQUESTED_TIME: usize = 8;
    pub const REQUESTED_MEMORY: usize = 9;
    pub const STATUS: usize = 10;
    pub const USER_ID: usize = 11;
    pub const GROUP_ID: usize = 12;
    pub const EXECUTABLE: usize = 13;
    pub const QUEUE: usize = 14;
    pub const PARTITION: usize = 15;
    pub const PRECEDING_JOB: usize = 16;
    pub const THINK_TIME: usize = 17;
}

/// One data line of an SWF file.
#[derive(Clone, Debug, PartialEq)]
pub struct SwfRecord {
    /// 1-based line number in the source file.
    pub line: usize,
    /// The 18 fields, as read (-1 = unknown).
    pub fields: [f64; 18],
}

impl SwfRecord {
    /// The value of SWF field `no` (1-based, as in the SWF definition).
    pub fn field(&self, no: usize) -> f64 {
        self.fields[no - 1]
    }
}

/// The header comments of an SWF file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SwfHeader {
    /// Every comment line verbatim (including the leading `;`), in file order.
    pub lines: Vec<String>,
    /// `; MaxProcs: N`
    pub max_procs: Option<u64>,
    /// `; MaxNodes: N`
    pub max_nodes: Option<u64>,
    /// `; MaxJobs: N` (may count jobs removed by cleaning; do not trust it).
    pub max_jobs: Option<u64>,
    /// `; MaxRecords: N` (may count records removed by cleaning; do not trust it).
    pub max_records: Option<u64>,
}

impl SwfHeader {
    /// The value (trimmed, trailing notes included) of the first `; Key: value`
    /// comment with this key; keys are case-sensitive.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.lines.iter().find_map(|l| match header_key_value(l) {
            Some((k, v)) if k == key => Some(v),
            _ => None,
        })
    }
}

/// A parsed SWF file.
#[derive(Clone, Debug, PartialEq)]
pub struct SwfTrace {
    /// Where the trace came from (a path, or a name given to [`parse_swf`]); used in messages.
    pub origin: String,
    pub header: SwfHeader,
    /// The data lines, in file order.
    pub records: Vec<SwfRecord>,
}

#[derive(Debug, Error)]
pub enum SwfError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}:{line}: field {field_no} ({field_name}): {msg} (value {value:?})")]
    Malformed {
        path: String,
        line: usize,
        field_no: usize,
        field_name: &'static str,
        value: String,
        msg: String,
    },
    #[error("{path}:{line}: expected 18 fields, found {found}")]
    FieldCount {
        path: String,
        line: usize,
        found: usize,
    },
    #[error(
        "{path}: no machine size: the header has no MaxProcs or MaxNodes (or only 0); give one \
         with --machine-size N (cosched simulate, cosched trace info) or a configuration's workload.machine_size"
    )]
    NoMachineSize { path: String },
    /// A file of another format given as an SWF trace (e.g. the Parquet or JSON of `cosched trace convert`).
    #[error(
        "{path}: not an SWF trace but {what}; convert it to SWF first (cosched trace convert {path} OUT.swf)"
    )]
    NotSwf { path: String, what: &'static str },
    #[error("{path}:{line}: header field {key}: {msg} (value {value:?})")]
    BadHeader {
        path: String,
        line: usize,
        key: String,
        value: String,
        msg: String,
    },
    /// A machine size that cannot be used (an override of 0, a header value beyond `u32`).
    #[error("{path}: bad machine size: {msg}")]
    BadMachineSize { path: String, msg: String },
}

// ---------------------------------------------------------------------------
// Reading

/// Splits a comment line `; Key: value` into `("Key", "value")`. The key is one
/// word (letters, digits, `_`); the value is trimmed. Other comments give `None`.
fn header_key_value(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim_start().strip_prefix(';')?.trim_start();
    let (key, value) = rest.split_once(':')?;
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    Some((key, value.trim()))
}

/// Parses the numeric headers this module uses. The value is the first word of
/// the text after the colon, so trailing notes (`338 (batch partition; 512 total)`) are allowed.
fn parse_header_line(
    header: &mut SwfHeader,
    raw: &str,
    origin: &str,
    line: usize,
) -> Result<(), SwfError> {
    let Some((key, value)) = header_key_value(raw) else {
        return Ok(());
    };
    let (slot, limit) = match key {
        "MaxProcs" => (&mut header.max_procs, u32::MAX as u64),
        "MaxNodes" => (&mut header.max_nodes, u32::MAX as u64),
        "MaxJobs" => (&mut header.max_jobs, u64::MAX),
        "MaxRecords" => (&mut header.max_records, u64::MAX),
        _ => return Ok(()),
    };
    let parsed = value
        .split_ascii_whitespace()
        .next()
        .and_then(|w| w.parse::<u64>().ok());
    let bad = |msg: String| SwfError::BadHeader {
        path: origin.into(),
        line,
        key: key.into(),
        value: value.into(),
        msg,
    };
    match parsed {
        // The first occurrence wins.
        Some(v) if v <= limit => {
            slot.get_or_insert(v);
            Ok(())
        }
        Some(_) => Err(bad(format!(
            "larger than the largest supported value {limit}"
        ))),
        None => Err(bad("not a non-negative integer".into())),
    }
}

/// Parses a number that is not a plain integer (decimals, exponents, ...).
/// Non-finite values ("nan", "inf", overflowing exponents) are refused.
fn parse_number(tok: &str) -> Result<f64, &'static str> {
    match tok.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(_) => Err("not a finite number"),
        Err(_) => Err("not a number"),
    }
}

/// Checks one value against the rules of its field (0-based index `k`).
#[inline]
fn check_value(k: usize, v: f64) -> Result<(), &'static str> {
    if k == field::STATUS {
        // Any integer: logs use codes beyond 0-5 (126, 127, 265, -2, ...).
        return if v.fract() == 0.0 {
            Ok(())
        } else {
            Err("not an integer")
        };
    }
    if v < 0.0 && v != -1.0 {
        return Err("negative value");
    }
    if (k == field::ALLOCATED_PROCS || k == field::REQUESTED_PROCS) && v.fract() != 0.0 {
        return Err("not an integer");
    }
    Ok(())
}

fn parse_record(raw: &str, origin: &str, line: usize) -> Result<SwfRecord, SwfError> {
    // One pass over the bytes splits on ASCII whitespace and reads plain
    // integers (almost every SWF value) on the way; other tokens are parsed
    // afterwards by `parse_number`.
    let bytes = raw.as_bytes();
    let mut toks = [""; 18];
    let mut ints: [Option<f64>; 18] = [None; 18];
    let mut found = 0;
    let mut i = 0;
    loop {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == bytes.len() {
            break;
        }
        let start = i;
        let neg = bytes[i] == b'-';
        if neg {
            i += 1;
        }
        let digits = i;
        let mut n = 0i64;
        while i < bytes.len() && bytes[i].is_ascii_digit() && i - digits < 15 {
            n = n * 10 + (bytes[i] - b'0') as i64;
            i += 1;
        }
        let plain = i > digits && (i == bytes.len() || bytes[i].is_ascii_whitespace());
        while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if found < 18 {
            // Both ends are at ASCII bytes (or the end), so on char boundaries.
            toks[found] = &raw[start..i];
            ints[found] = plain.then_some(if neg { -(n as f64) } else { n as f64 });
        }
        found += 1;
    }
    if found != 18 {
        return Err(SwfError::FieldCount {
            path: origin.into(),
            line,
            found,
        });
    }
    let malformed = |k: usize, msg: &str| SwfError::Malformed {
        path: origin.into(),
        line,
        field_no: k + 1,
        field_name: FIELD_NAMES[k],
        value: toks[k].into(),
        msg: msg.into(),
    };
    let mut fields = [0.0; 18];
    for (k, tok) in toks.iter().enumerate() {
        let v = match ints[k] {
            Some(v) => v,
            None => parse_number(tok).map_err(|m| malformed(k, m))?,
        };
        check_value(k, v).map_err(|m| malformed(k, m))?;
        fields[k] = v;
    }
    // A job that ran must have a submit time. Records of jobs that never ran
    // (run time -1) may lack one: LLNL-Thunder has 1,190 such all-unknown records.
    if fields[field::SUBMIT_TIME] == -1.0 && fields[field::RUN_TIME] != -1.0 {
        return Err(malformed(field::SUBMIT_TIME, "submit time unknown"));
    }
    Ok(SwfRecord { line, fields })
}

/// Parses the text of an SWF file. `origin` names the source in error messages.
///
/// Blank lines are ignored; lines whose first non-blank character is `;` are
/// header comments, kept verbatim; every other line must hold 18 numbers.
/// Lines end with LF, CRLF or (when the text has no LF at all) CR; a leading
/// UTF-8 byte order mark is skipped.
pub fn parse_swf(text: &str, origin: &str) -> Result<SwfTrace, SwfError> {
    // A UTF-8 byte order mark (written by some Windows editors) is not part of the text.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // Old Mac line endings (CR only): every CR ends a line.
    let cr_only;
    let text = if text.contains('\r') && !text.contains('\n') {
        cr_only = text.replace('\r', "\n");
        cr_only.as_str()
    } else {
        text
    };
    let mut header = SwfHeader::default();
    // Archive lines are 60-100 bytes long.
    let mut records = Vec::with_capacity(text.len() / 64 + 1);
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim_start();
        if trimmed.is_empty() {
            continue;
        }
        if trimmed.starts_with(';') {
            parse_header_line(&mut header, raw, origin, line)?;
            header.lines.push(raw.to_string());
            continue;
        }
        records.push(parse_record(raw, origin, line)?);
    }
    Ok(SwfTrace {
        origin: origin.to_string(),
        header,
        records,
    })
}

/// Reads and parses an SWF file, plain or gzip-compressed (recognised by its
/// magic bytes, whatever the extension). Text that is not UTF-8 is read as Latin-1.
pub fn read_swf(path: &Path) -> Result<SwfTrace, SwfError> {
    let origin = path.display().to_string();
    let io_err = |source| SwfError::Io {
        path: origin.clone(),
        source,
    };
    let raw = std::fs::read(path).map_err(io_err)?;
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::with_capacity(raw.len() * 8);
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(io_err)?;
        out
    } else {
        raw
    };
    if let Some(what) = other_format(&bytes) {
        return Err(SwfError::NotSwf { path: origin, what });
    }
    let text = match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => e.into_bytes().iter().map(|&b| b as char).collect(),
    };
    parse_swf(&text, &origin)
}

/// The format of a file that is certainly not SWF text: Parquet (its magic `PAR1`) or JSON (an SWF
/// line starts with a digit, `-` or `;`, never with `{` or `[`).
fn other_format(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"PAR1") {
        return Some("a Parquet file");
    }
    let body = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{' | b'[') => Some("a JSON file"),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// Writing

/// Appends one value: integers without a decimal point, other values in the
/// shortest representation that reads back to the same `f64`.
fn push_number(out: &mut String, v: f64) {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        let _ = write!(out, "{}", v as i64);
    } else {
        let _ = write!(out, "{v}");
    }
}

/// The SWF text of a trace: the header lines verbatim, then one record per
/// line (fields separated by one space).
pub fn swf_to_string(trace: &SwfTrace) -> String {
    let header_len: usize = trace.header.lines.iter().map(|l| l.len() + 1).sum();
    let mut out = String::with_capacity(header_len + trace.records.len() * 64);
    for l in &trace.header.lines {
        out.push_str(l);
        out.push('\n');
    }
    for r in &trace.records {
        for (k, &v) in r.fields.iter().enumerate() {
            if k > 0 {
                out.push(' ');
            }
            push_number(&mut out, v);
        }
        out.push('\n');
    }
    out
}

/// Writes a trace (see [`swf_to_string`]), gzip-compressed when the path ends
/// in `.gz`. Atomic: on error nothing is left at `path`.
pub fn write_swf(trace: &SwfTrace, path: &Path) -> Result<(), SwfError> {
    let origin = path.display().to_string();
    let io_err = |source| SwfError::Io {
        path: origin.clone(),
        source,
    };
    let text = swf_to_string(trace);
    let gz = path
        .file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with(".gz"));
    let bytes = if gz {
        let mut enc = flate2::write::GzEncoder::new(
            Vec::with_capacity(text.len() / 6),
            flate2::Compression::default(),
        );
        enc.write_all(text.as_bytes()).map_err(io_err)?;
        enc.finish().map_err(io_err)?
    } else {
        text.into_bytes()
    };
    crate::write::write_atomic(path, &bytes).map_err(io_err)
}

// ---------------------------------------------------------------------------
// Machine size

/// The size of the machine a trace ran on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MachineSize {
    /// Schedulable units (processors, or nodes when sized from MaxNodes).
    pub procs: u32,
    pub procs_per_node: u32,
    pub nodes: u32,
    /// Where the size came from: "MaxProcs header", "MaxNodes header" or "override".
    pub source: String,
    /// Trace processors per schedulable unit: 1, or MaxProcs / MaxNodes when the machine is
    /// sized in nodes of an SMP trace; a job of p processors then needs ceil(p / unit) nodes.
    pub unit_procs: u32,
}

fn header_u32(trace: &SwfTrace, key: &str, v: Option<u64>) -> Result<Option<u32>, SwfError> {
    match v {
        None | Some(0) => Ok(None),
        Some(v) => u32::try_from(v)
            .map(Some)
            .map_err(|_| SwfError::BadMachineSize {
                path: trace.origin.clone(),
                msg: format!("{key} {v} exceeds {}", u32::MAX),
            }),
    }
}

/// The machine size of a trace.
///
/// The override (`opts.machine_size`, in processors) wins; else MaxNodes when
/// `opts.machine_size_from_nodes`; else MaxProcs. When the chosen header is
/// absent (or 0) the other one is used and a warning is pushed to `warnings`;
/// when both are absent the result is [`SwfError::NoMachineSize`].
///
/// When sized from MaxProcs and MaxProcs is a positive multiple of MaxNodes,
/// `procs_per_node` = MaxProcs / MaxNodes (SDSC-BLUE: 1152 / 144 = 8), else 1.
/// When sized from MaxNodes, `procs` = MaxNodes and `procs_per_node` = 1 (the unit is the node).
pub fn machine_size(
    trace: &SwfTrace,
    opts: &WorkloadOptions,
    warnings: &mut Vec<String>,
) -> Result<MachineSize, SwfError> {
    let path = &trace.origin;
    if let Some(p) = opts.machine_size {
        if p == 0 {
            return Err(SwfError::BadMachineSize {
                path: path.clone(),
                msg: "the machine size override must be at least 1".into(),
            });
        }
        return Ok(MachineSize {
            procs: p,
            procs_per_node: 1,
            nodes: p,
            source: "override".into(),
            unit_procs: 1,
        });
    }
    let max_procs = header_u32(trace, "MaxProcs", trace.header.max_procs)?;
    let max_nodes = header_u32(trace, "MaxNodes", trace.header.max_nodes)?;
    let from_procs = |p: u32| {
        let ppn = match max_nodes {
            Some(n) if p.checked_rem(n) == Some(0) => p / n,
            _ => 1,
        };
        MachineSize {
            procs: p,
            procs_per_node: ppn,
            nodes: p / ppn,
            source: "MaxProcs header".into(),
            unit_procs: 1,
        }
    };
    let from_nodes = |n: u32| MachineSize {
        procs: n,
        procs_per_node: 1,
        nodes: n,
        source: "MaxNodes header".into(),
        unit_procs: match max_procs {
            Some(p) if p.checked_rem(n) == Some(0) => p / n,
            _ => 1,
        },
    };
    match (opts.machine_size_from_nodes, max_procs, max_nodes) {
        (true, _, Some(n)) => Ok(from_nodes(n)),
        (true, Some(p), None) => {
            warnings.push(format!("{path}: the header has no MaxNodes; machine size taken from MaxProcs: {p} processors"));
            Ok(from_procs(p))
        }
        (false, Some(p), _) => Ok(from_procs(p)),
        (false, None, Some(n)) => {
            warnings.push(format!("{path}: the header has no MaxProcs; machine size taken from MaxNodes: {n} processors"));
            Ok(from_nodes(n))
        }
        (_, None, None) => Err(SwfError::NoMachineSize { path: path.clone() }),
    }
}

// ---------------------------------------------------------------------------
// Workload

/// Processors of a record: allocated if > 0, else requested if > 0.
fn record_procs(r: &SwfRecord) -> Option<f64> {
    let alloc = r.fields[field::ALLOCATED_PROCS];
    let req = r.fields[field::REQUESTED_PROCS];
    if alloc > 0.0 {
        Some(alloc)
    } else if req > 0.0 {
        Some(req)
    } else {
        None
    }
}

fn malformed(trace: &SwfTrace, r: &SwfRecord, k: usize, msg: &str) -> SwfError {
    SwfError::Malformed {
        path: trace.origin.clone(),
        line: r.line,
        field_no: k + 1,
        field_name: FIELD_NAMES[k],
        value: format_number(r.fields[k]),
        msg: msg.into(),
    }
}

fn format_number(v: f64) -> String {
    let mut s = String::new();
    push_number(&mut s, v);
    s
}

/// Builds the simulator workload of a trace.
///
/// - processors: allocated (field 5) if > 0, else requested (field 8) if > 0;
///   otherwise the record is dropped and counted in `dropped_no_procs`;
/// - run time (field 4) < 0: the job never ran; dropped and counted in `dropped_never_ran`;
/// - requested time (field 9) <= 0: unknown;
/// - estimate: `Exact` -> the run time; `Requested` + `Extend` -> max(requested, run time);
///   `Requested` + `Kill` -> the requested time, and the job is killed there (`kill_after`).
///   A job without a requested time is estimated at its run time and never killed;
/// - jobs are stably sorted by submit time; when the file was not sorted, one
///   warning gives the number of inversions (jobs submitted before the job
///   preceding them in the file) and the line of the first;
/// - times are the trace's own seconds (not shifted to start at 0);
/// - `max_jobs` keeps the first N jobs after dropping and sorting.
pub fn to_workload(
    trace: &SwfTrace,
    opts: &WorkloadOptions,
    max_jobs: Option<usize>,
) -> Result<(Workload, MachineSize), SwfError> {
    let mut w = Workload::default();
    let machine = machine_size(trace, opts, &mut w.warnings)?;
    let mut jobs = Vec::with_capacity(trace.records.len());
    let mut inversions = 0u64;
    let mut first_inversion = None;
    let mut prev_submit = f64::NEG_INFINITY;
    for r in &trace.records {
        let f = &r.fields;
        if f[field::RUN_TIME] < 0.0 {
            w.dropped_never_ran += 1;
            continue;
        }
        let Some(procs) = record_procs(r) else {
            w.dropped_no_procs += 1;
            continue;
        };
        if procs > u32::MAX as f64 || procs.fract() != 0.0 {
            let k = if f[field::ALLOCATED_PROCS] > 0.0 {
                field::ALLOCATED_PROCS
            } else {
                field::REQUESTED_PROCS
            };
            return Err(malformed(trace, r, k, "not a processor count"));
        }
        let submit_s = f[field::SUBMIT_TIME];
        if submit_s < 0.0 {
            return Err(malformed(
                trace,
                r,
                field::SUBMIT_TIME,
                "submit time unknown",
            ));
        }
        if submit_s < prev_submit {
            inversions += 1;
            first_inversion.get_or_insert(r.line);
        }
        prev_submit = submit_s;
        let time = |k: usize| {
            SimTime::try_from_secs_f64(f[k]).map_err(|e| malformed(trace, r, k, &e.to_string()))
        };
        let submit = time(field::SUBMIT_TIME)?;
        let runtime = time(field::RUN_TIME)?;
        let requested = if f[field::REQUESTED_TIME] > 0.0 {
            Some(time(field::REQUESTED_TIME)?)
        } else {
            None
        };
        let (estimate, kill_after) = opts.estimate(runtime, requested);
        jobs.push(JobSpec {
            source_id: f[field::JOB_NUMBER] as i64,
            submit,
            runtime,
            procs: (procs as u32).div_ceil(machine.unit_procs),
            requested,
            estimate,
            kill_after,
        });
    }
    let origin = &trace.origin;
    if inversions > 0 {
        // `sort_by_key` is stable: equal submit times keep file order.
        jobs.sort_by_key(|j| j.submit);
        w.warnings.push(format!(
            "{origin}: submit times are not sorted: {inversions} inversions (first at line {}); jobs sorted by submit time",
            first_inversion.unwrap_or(0)
        ));
    }
    if w.dropped_no_procs > 0 {
        let n = w.dropped_no_procs;
        let jobs_word = if n == 1 { "job" } else { "jobs" };
        w.warnings.push(format!(
            "{origin}: {n} {jobs_word} dropped: no processor count (allocated, field 5, and requested, field 8, are both -1 or 0)"
        ));
    }
    if let Some(n) = max_jobs {
        jobs.truncate(n);
    }
    // Archive traces may reuse a job number; results stay in workload order, so
    // this is only reported.
    let mut ids: Vec<i64> = jobs.iter().map(|j| j.source_id).collect();
    ids.sort_unstable();
    let repeated = ids.windows(2).filter(|w| w[0] == w[1]).count();
    if repeated > 0 {
        w.warnings.push(format!(
            "{origin}: {repeated} jobs reuse the job number (field 1) of an earlier job; the job table has one row per job, in submit order"
        ));
    }
    let wider = jobs.iter().filter(|j| j.procs > machine.procs).count();
    if wider > 0 {
        w.warnings.push(format!(
            "{origin}: {wider} jobs need more processors than the machine's {} ({})",
            machine.procs, machine.source
        ));
    }
    w.jobs = jobs;
    Ok((w, machine))
}

/// Multiplies a trace's offered load by `factor` (> 0), in place; the rule of
/// `cosched trace scale-load` (`python/coscheduling/traces.py`) and of a
/// configuration's `workload.load_scale`:
/// - [`LoadScaleBy::Interarrival`]: every known submit time `s` becomes
///   `first + (s - first) / factor` (`first`: the smallest known submit time);
/// - [`LoadScaleBy::Runtime`]: every known run, requested and average CPU time is
///   multiplied by `factor`.
///
/// Results are rounded to whole seconds (half to even), as SWF stores them;
/// unknown values (< 0) stay unknown.
pub fn scale_load(trace: &mut SwfTrace, factor: f64, by: crate::config::LoadScaleBy) {
    use crate::config::LoadScaleBy;
    match by {
        LoadScaleBy::Interarrival => {
            let first = trace
                .records
                .iter()
                .map(|r| r.fields[field::SUBMIT_TIME])
                .filter(|&s| s >= 0.0)
                .fold(f64::INFINITY, f64::min);
            for r in &mut trace.records {
                let s = &mut r.fields[field::SUBMIT_TIME];
                if *s >= 0.0 {
                    *s = (first + (*s - first) / factor).round_ties_even();
                }
            }
        }
        LoadScaleBy::Runtime => {
            for r in &mut trace.records {
                for k in [field::RUN_TIME, field::REQUESTED_TIME, field::AVG_CPU_TIME] {
                    let v = &mut r.fields[k];
                    if *v >= 0.0 {
                        *v = (*v * factor).round_ties_even();
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Statistics

/// Summary of a trace, for `cosched trace info`. Job statistics are over the
/// usable jobs (what [`to_workload`] keeps); record statistics over every data line.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceStats {
    pub origin: String,
    /// Data lines in the file.
    pub records: u64,
    /// Header comment lines in the file.
    pub header_lines: u64,
    /// The MaxJobs header (may disagree with `records`: it can count jobs removed by cleaning).
    pub header_max_jobs: Option<u64>,
    /// The MaxRecords header (may disagree with `records`).
    pub header_max_records: Option<u64>,
    /// Usable jobs.
    pub jobs: u64,
    pub dropped_never_ran: u64,
    pub dropped_no_procs: u64,
    pub machine_procs: u32,
    pub machine_nodes: u32,
    pub procs_per_node: u32,
    pub machine_size_source: String,
    pub first_submit_s: Option<f64>,
    pub last_submit_s: Option<f64>,
    /// last_submit_s - first_submit_s.
    pub span_s: Option<f64>,
    pub procs_min: Option<u32>,
    pub procs_mean: Option<f64>,
    pub procs_max: Option<u32>,
    pub runtime_mean_s: Option<f64>,
    pub runtime_median_s: Option<f64>,
    /// Jobs whose run time exceeds their (known) requested time.
    pub jobs_over_requested: u64,
    /// Jobs without a requested time.
    pub requested_time_missing: u64,
    /// Jobs needing more processors than the machine has.
    pub jobs_wider_than_machine: u64,
    /// Usable jobs submitted before the usable job preceding them in the file
    /// (what [`to_workload`] sorts and warns about).
    pub submit_inversions: u64,
    /// Records whose submit field is smaller than the previous record's, over
    /// every record in file order, counting an unknown submit time (-1) as a
    /// value (this is how a plain check of the file's column sees it).
    pub submit_inversions_all_records: u64,
    /// Records with an unknown submit time (-1); all are jobs that never ran.
    pub submit_time_unknown: u64,
    /// sum(procs x run time) / (machine procs x span).
    pub offered_load: Option<f64>,
    /// Records per status code (field 11), over every record.
    pub status_counts: BTreeMap<i64, u64>,
    /// Warnings from sizing the machine and building the workload.
    pub warnings: Vec<String>,
}

/// Computes the statistics of a trace.
pub fn trace_stats(trace: &SwfTrace, opts: &WorkloadOptions) -> Result<TraceStats, SwfError> {
    let (w, machine) = to_workload(trace, opts, None)?;
    let jobs = &w.jobs;
    let n = jobs.len();

    let mut status_counts = BTreeMap::new();
    let mut all_inversions = 0u64;
    let mut unknown_submit = 0u64;
    let mut usable_inversions = 0u64;
    let mut prev_all = f64::NEG_INFINITY;
    let mut prev_usable = f64::NEG_INFINITY;
    for r in &trace.records {
        let f = &r.fields;
        *status_counts.entry(f[field::STATUS] as i64).or_insert(0u64) += 1;
        let s = f[field::SUBMIT_TIME];
        if s < prev_all {
            all_inversions += 1;
        }
        prev_all = s;
        if s == -1.0 {
            unknown_submit += 1;
        }
        if f[field::RUN_TIME] >= 0.0 && record_procs(r).is_some() {
            if s < prev_usable {
                usable_inversions += 1;
            }
            prev_usable = s;
        }
    }

    let first = jobs.first().map(|j| j.submit.as_secs_f64());
    let last = jobs.last().map(|j| j.submit.as_secs_f64());
    let span = first.zip(last).map(|(a, b)| b - a);
    let mean = |sum: f64| (n > 0).then(|| sum / n as f64);
    let mut runtimes: Vec<i64> = jobs.iter().map(|j| j.runtime.as_ns()).collect();
    runtimes.sort_unstable();
    let median = match n {
        0 => None,
        _ if n % 2 == 1 => Some(SimTime(runtimes[n / 2]).as_secs_f64()),
        _ => Some(
            (SimTime(runtimes[n / 2 - 1]).as_secs_f64() + SimTime(runtimes[n / 2]).as_secs_f64())
                / 2.0,
        ),
    };
    let work: f64 = jobs
        .iter()
        .map(|j| j.procs as f64 * j.runtime.as_secs_f64())
        .sum();
    let offered_load = span
        .filter(|&s| s > 0.0)
        .map(|s| work / (machine.procs as f64 * s));

    Ok(TraceStats {
        origin: trace.origin.clone(),
        records: trace.records.len() as u64,
        header_lines: trace.header.lines.len() as u64,
        header_max_jobs: trace.header.max_jobs,
        header_max_records: trace.header.max_records,
        jobs: n as u64,
        dropped_never_ran: w.dropped_never_ran,
        dropped_no_procs: w.dropped_no_procs,
        machine_procs: machine.procs,
        machine_nodes: machine.nodes,
        procs_per_node: machine.procs_per_node,
        machine_size_source: machine.source.clone(),
        first_submit_s: first,
        last_submit_s: last,
        span_s: span,
        procs_min: jobs.iter().map(|j| j.procs).min(),
        procs_mean: mean(jobs.iter().map(|j| j.procs as f64).sum()),
        procs_max: jobs.iter().map(|j| j.procs).max(),
        runtime_mean_s: mean(jobs.iter().map(|j| j.runtime.as_secs_f64()).sum()),
        runtime_median_s: median,
        jobs_over_requested: jobs
            .iter()
            .filter(|j| j.requested.is_some_and(|r| j.runtime > r))
            .count() as u64,
        requested_time_missing: jobs.iter().filter(|j| j.requested.is_none()).count() as u64,
        jobs_wider_than_machine: jobs.iter().filter(|j| j.procs > machine.procs).count() as u64,
        submit_inversions: usable_inversions,
        submit_inversions_all_records: all_inversions,
        submit_time_unknown: unknown_submit,
        offered_load,
        status_counts,
        warnings: w.warnings,
    })
}
