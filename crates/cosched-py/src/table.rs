//! The job table leaving Rust: as Arrow buffers (for pyarrow) and as CSV text.
//!
//! Arrow: every column becomes its Arrow buffers (values, validity bitmap,
//! string offsets) copied once into Python `bytes`; the Python side wraps them
//! with `pyarrow.Array.from_buffers`, without converting values one by one.
//! Float NaN is null (a cleared validity bit), as `pyarrow.Table.from_pandas` does.
//!
//! CSV: the jobs.csv encoding of docs/formats/jobs.md, byte for byte what
//! `pandas.DataFrame.to_csv(index=False, lineterminator="\n", na_rep="")` writes
//! for the same table: floats in Python's `repr` form (shortest round-trip digits,
//! exponent form below 1e-4 and from 1e16), NaN as an empty field, strings quoted
//! only when they hold a comma, a quote or a line break.

use cosched::engine::metrics::JobTable;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

/// Arrow type of a column, as named by pyarrow (`pyarrow.int64()`, ...).
#[derive(Clone, Copy)]
pub enum Kind {
    Int64,
    Float64,
    Utf8,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Int64 => "int64",
            Kind::Float64 => "float64",
            Kind::Utf8 => "string",
        }
    }
}

/// One column of the job table, borrowed.
pub enum Column<'a> {
    Int(Vec<i64>),
    Float(&'a [f64]),
    Str(Vec<&'a str>),
}

impl Column<'_> {
    fn kind(&self) -> Kind {
        match self {
            Column::Int(_) => Kind::Int64,
            Column::Float(_) => Kind::Float64,
            Column::Str(_) => Kind::Utf8,
        }
    }
}

/// The columns of the job table in table order (docs/formats/jobs.md).
pub fn job_columns(t: &JobTable) -> Vec<(&'static str, Column<'_>)> {
    let wide = |v: &[u32]| v.iter().map(|&x| i64::from(x)).collect::<Vec<_>>();
    let gang_row = if t.gang_row.is_empty() {
        vec![-1i64; t.job_id.len()]
    } else {
        t.gang_row.clone()
    };
    vec![
        ("job_id", Column::Int(t.job_id.clone())),
        ("submit_s", Column::Float(&t.submit_s)),
        ("start_s", Column::Float(&t.start_s)),
        ("end_s", Column::Float(&t.end_s)),
        ("wait_s", Column::Float(&t.wait_s)),
        ("execution_s", Column::Float(&t.execution_s)),
        ("response_s", Column::Float(&t.response_s)),
        ("slowdown", Column::Float(&t.slowdown)),
        ("bounded_slowdown", Column::Float(&t.bounded_slowdown)),
        ("procs", Column::Int(wide(&t.procs))),
        ("nodes", Column::Int(wide(&t.nodes))),
        ("runtime_s", Column::Float(&t.runtime_s)),
        ("estimate_s", Column::Float(&t.estimate_s)),
        ("requested_s", Column::Float(&t.requested_s)),
        ("status", Column::Str(t.status.clone())),
        ("energy_j", Column::Float(&t.energy_j)),
        (
            "node_list",
            Column::Str(t.node_list.iter().map(String::as_str).collect()),
        ),
        ("gang_row", Column::Int(gang_row)),
    ]
}

/// `bytes` of `n` items of `size` bytes each, filled by `fill`.
fn bytes_with<'py>(
    py: Python<'py>,
    len: usize,
    fill: impl FnOnce(&mut [u8]),
) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, len, |buf| {
        fill(buf);
        Ok(())
    })
}

/// The validity bitmap of a float column (bit clear = NaN = null), or None when no value is NaN.
fn nan_validity(v: &[f64]) -> Option<Vec<u8>> {
    if !v.iter().any(|x| x.is_nan()) {
        return None;
    }
    let mut bits = vec![0u8; v.len().div_ceil(8)];
    for (i, x) in v.iter().enumerate() {
        if !x.is_nan() {
            bits[i / 8] |= 1 << (i % 8);
        }
    }
    Some(bits)
}

/// One column as `(name, arrow type, values, validity or None, offsets or None)`.
pub type ArrowColumn<'py> = (
    &'static str,
    &'static str,
    Bound<'py, PyBytes>,
    Option<Bound<'py, PyBytes>>,
    Option<Bound<'py, PyBytes>>,
);

/// The Arrow buffers of `columns` (native byte order, which Arrow requires to be little-endian here).
pub fn arrow_buffers<'py>(
    py: Python<'py>,
    columns: &[(&'static str, Column<'_>)],
) -> PyResult<Vec<ArrowColumn<'py>>> {
    let mut out = Vec::with_capacity(columns.len());
    for (name, col) in columns {
        let kind = col.kind().name();
        let item = match col {
            Column::Int(v) => {
                let data = bytes_with(py, v.len() * 8, |b| {
                    for (c, x) in b.chunks_exact_mut(8).zip(v) {
                        c.copy_from_slice(&x.to_ne_bytes());
                    }
                })?;
                (*name, kind, data, None, None)
            }
            Column::Float(v) => {
                let data = bytes_with(py, v.len() * 8, |b| {
                    for (c, x) in b.chunks_exact_mut(8).zip(v.iter()) {
                        c.copy_from_slice(&x.to_ne_bytes());
                    }
                })?;
                let validity = nan_validity(v).map(|bits| PyBytes::new(py, &bits));
                (*name, kind, data, validity, None)
            }
            Column::Str(v) => {
                let total: usize = v.iter().map(|s| s.len()).sum();
                if i32::try_from(total).is_err() {
                    return Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
                        "column {name}: {total} bytes of text, more than one Arrow string array holds"
                    )));
                }
                let data = bytes_with(py, total, |b| {
                    let mut at = 0;
                    for s in v {
                        b[at..at + s.len()].copy_from_slice(s.as_bytes());
                        at += s.len();
                    }
                })?;
                let offsets = bytes_with(py, (v.len() + 1) * 4, |b| {
                    let mut at = 0i32;
                    b[..4].copy_from_slice(&at.to_ne_bytes());
                    for (c, s) in b[4..].chunks_exact_mut(4).zip(v) {
                        at += s.len() as i32;
                        c.copy_from_slice(&at.to_ne_bytes());
                    }
                })?;
                (*name, kind, data, None, Some(offsets))
            }
        };
        out.push(item);
    }
    Ok(out)
}

/// Appends `x` as Python's `repr(float)` writes it: shortest round-trip digits;
/// exponent form (`1e-05`, `1.5e+16`) when the decimal exponent is below -4 or at
/// least 16, else positional with at least one digit after the point (`1.0`).
/// `scratch` is a reusable buffer.
pub fn push_py_float(out: &mut String, x: f64, scratch: &mut String) {
    if x.is_nan() {
        out.push_str("nan");
        return;
    }
    if x.is_infinite() {
        out.push_str(if x < 0.0 { "-inf" } else { "inf" });
        return;
    }
    // Whole numbers below 1e16 (most times in seconds) are "<integer>.0".
    if x == x.trunc() && x.abs() < 1e16 {
        if x == 0.0 && x.is_sign_negative() {
            out.push('-');
        }
        let _ = write!(out, "{}", x as i64);
        out.push_str(".0");
        return;
    }
    // Rust's `{:e}` gives the shortest round-trip digit count; of the strings of that length
    // Python takes the one nearest to `x`, ties to even: what `{:.Ne}` (correctly rounded,
    // ties to even) gives for that many digits. "-d.ddde-N".
    scratch.clear();
    let _ = write!(scratch, "{x:e}");
    let digits = scratch
        .bytes()
        .take_while(|&b| b != b'e')
        .filter(u8::is_ascii_digit)
        .count();
    scratch.clear();
    let _ = write!(scratch, "{:.*e}", digits.saturating_sub(1), x);
    let (mantissa, exp) = scratch.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent is an integer");
    let mantissa = match mantissa.strip_prefix('-') {
        Some(m) => {
            out.push('-');
            m
        }
        None => mantissa,
    };
    // The significant digits without the point: `first` then `rest`.
    let (first, rest) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let n = first.len() + rest.len();
    let digit = |i: usize| {
        if i < first.len() {
            &first[i..i + 1]
        } else {
            &rest[i - first.len()..i - first.len() + 1]
        }
    };
    let decpt = exp + 1; // value = 0.DIGITS * 10^decpt
    if !(-4 < decpt && decpt <= 16) {
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    } else if decpt <= 0 {
        out.push_str("0.");
        for _ in 0..-decpt {
            out.push('0');
        }
        out.push_str(first);
        out.push_str(rest);
    } else {
        let d = decpt as usize;
        for i in 0..d.min(n) {
            out.push_str(digit(i));
        }
        if d >= n {
            for _ in n..d {
                out.push('0');
            }
            out.push_str(".0");
        } else {
            out.push('.');
            for i in d..n {
                out.push_str(digit(i));
            }
        }
    }
}

/// Appends a CSV field: quoted (inner quotes doubled) only when it holds a comma, quote or line break.
fn push_field(out: &mut String, s: &str) {
    if s.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}

/// The CSV text of `columns`: a header line, then one line per row, `\n` line ends.
pub fn csv_text(columns: &[(&'static str, Column<'_>)]) -> String {
    let rows = columns.first().map_or(0, |(_, c)| match c {
        Column::Int(v) => v.len(),
        Column::Float(v) => v.len(),
        Column::Str(v) => v.len(),
    });
    let mut out = String::with_capacity(64 + rows * 160);
    let mut scratch = String::with_capacity(32);
    let names: Vec<&str> = columns.iter().map(|(n, _)| *n).collect();
    for (i, n) in names.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_field(&mut out, n);
    }
    out.push('\n');
    for r in 0..rows {
        for (i, (_, col)) in columns.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            match col {
                Column::Int(v) => {
                    let _ = write!(out, "{}", v[r]);
                }
                Column::Float(v) => {
                    if !v[r].is_nan() {
                        push_py_float(&mut out, v[r], &mut scratch);
                    }
                }
                Column::Str(v) => push_field(&mut out, v[r]),
            }
        }
        out.push('\n');
    }
    out
}

/// Writes `text` to `path` (created or truncated), as an OSError naming the path on failure.
pub fn write_file(path: &Path, text: &str) -> PyResult<()> {
    let io = |e: std::io::Error| {
        pyo3::exceptions::PyOSError::new_err((
            e.raw_os_error().unwrap_or(0),
            e.to_string(),
            path.display().to_string(),
        ))
    };
    let mut f = std::fs::File::create(path).map_err(io)?;
    f.write_all(text.as_bytes()).map_err(io)?;
    f.flush().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn py(x: f64) -> String {
        let mut s = String::new();
        push_py_float(&mut s, x, &mut String::new());
        s
    }

    #[test]
    fn floats_read_like_python_repr() {
        // Each expected text is Python's repr of the value.
        let cases = [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (43306.0, "43306.0"),
            (5266064.159999999, "5266064.159999999"),
            (0.1, "0.1"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (0.000123, "0.000123"),
            (1.5e-7, "1.5e-07"),
            (1234567890123456.0, "1234567890123456.0"),
            (1e16, "1e+16"),
            (1.25e16, "1.25e+16"),
            (-2.5e22, "-2.5e+22"),
            (1e300, "1e+300"),
            (5e-324, "5e-324"),
            (123.456, "123.456"),
            (-123.456, "-123.456"),
            (-5.0, "-5.0"),
            (9999999999999998.0, "9999999999999998.0"),
            (1.5e15, "1500000000000000.0"),
            (123456.75, "123456.75"),
            (-0.000_12, "-0.00012"),
            // A tie between two shortest strings: Python rounds half to even.
            (85_214_599_048_830.0 + 0.125, "85214599048830.12"),
            (0.3, "0.3"),
            (2.0f64.powi(-30), "9.313225746154785e-10"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for (x, want) in cases {
            assert_eq!(py(x), want, "{x:e}");
        }
    }

    #[test]
    fn csv_fields_quoted_only_when_needed() {
        let ids = vec![1i64, -2];
        let f = [1.0, f64::NAN];
        let cols = vec![
            ("job_id", Column::Int(ids)),
            ("x", Column::Float(&f)),
            ("node_list", Column::Str(vec!["0-3,8", ""])),
            ("s", Column::Str(vec!["a\"b", "c"])),
        ];
        assert_eq!(
            csv_text(&cols),
            "job_id,x,node_list,s\n1,1.0,\"0-3,8\",\"a\"\"b\"\n-2,,,c\n"
        );
    }

    #[test]
    fn validity_marks_nan_as_null() {
        assert_eq!(nan_validity(&[1.0, 2.0]), None);
        let v = [1.0, f64::NAN, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, f64::NAN];
        assert_eq!(nan_validity(&v), Some(vec![0b1111_1101, 0b0000_0000]));
    }
}
