//! Text export of one job's per-rank programs, read by the real-execution program
//! `cosched-ir-run` (format: `docs/formats/program.md`).
//!
//! [`to_export`] writes a line-oriented text: a header (`program`, `ranks`,
//! `memory_mb`, `noise_cv`, `scale`, `collectives`), then one `rank R` section per
//! rank with one operation per line and `end`. Loops keep their structure
//! (`loop COUNT LEN`, `loopuntil STOP_TAG LEN`, LEN = number of lines of the body
//! that follows, nested bodies counted as their lines).
//!
//! Collectives: with [`CollectiveForm::Library`] (the default) each
//! `CollBegin`..`CollEnd` region becomes one `coll KIND [ROOT] BYTES` line that the
//! real program runs with the MPI library's own collective; the root of a broadcast
//! and the byte counts are read off the point-to-point rounds of all ranks (the
//! i-th region of every rank is the same collective, as [`crate::program::Builder`]
//! builds them). With [`CollectiveForm::PointToPoint`] the rounds are kept and the
//! region is marked by `collbegin KIND` / `collend KIND`.
//!
//! Scale: `scale` multiplies every amount (compute time, burst mean, I/O time,
//! message bytes, memory footprint), rounded to the nearest integer; loop counts and
//! message counts are unchanged. A preset that takes minutes on its platform thus
//! takes `scale` times as long (plus the per-message latencies, which do not scale)
//! with the same structure; the granularity shrinks by the same factor.

use crate::program::{Collective, Op, Program};

/// How collectives appear in the export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollectiveForm {
    /// One `coll` line per collective: the MPI library's own algorithm runs it.
    Library,
    /// The IR's point-to-point rounds between `collbegin` / `collend` markers.
    PointToPoint,
}

impl CollectiveForm {
    pub fn parse(s: &str) -> Result<Self, ExportError> {
        match s {
            "library" => Ok(Self::Library),
            "p2p" => Ok(Self::PointToPoint),
            _ => Err(ExportError::Form(s.to_string())),
        }
    }
    fn name(self) -> &'static str {
        match self {
            Self::Library => "library",
            Self::PointToPoint => "p2p",
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ExportError {
    #[error("scale must be a finite number > 0, got {0}")]
    Scale(f64),
    #[error("collectives must be library or p2p, got {0:?}")]
    Form(String),
    #[error("rank {rank}: {msg}")]
    Structure { rank: usize, msg: String },
}

/// Version of the export format (first line).
pub const EXPORT_VERSION: u32 = 1;

fn coll_name(c: Collective) -> &'static str {
    match c {
        Collective::Barrier => "barrier",
        Collective::Allreduce => "allreduce",
        Collective::Alltoall => "alltoall",
        Collective::Bcast => "bcast",
        Collective::Reduce => "reduce",
    }
}

/// What the point-to-point rounds of one collective region tell.
#[derive(Clone, Copy, Debug)]
struct Region {
    kind: Collective,
    max_bytes: u64,
    has_recv: bool,
    has_send: bool,
}

/// Index of the `CollEnd` closing the `CollBegin` at `ops[start]`.
fn region_end(ops: &[Op], start: usize, rank: usize) -> Result<usize, ExportError> {
    let Op::CollBegin(kind) = ops[start] else {
        unreachable!("called on a CollBegin")
    };
    ops[start + 1..]
        .iter()
        .position(|op| matches!(op, Op::CollEnd(k) if *k == kind))
        .map(|p| start + 1 + p)
        .ok_or_else(|| ExportError::Structure {
            rank,
            msg: format!(
                "{} collective begins at op {start} and never ends",
                coll_name(kind)
            ),
        })
}

/// The collective regions of a rank, in static order.
fn regions(ops: &[Op], rank: usize) -> Result<Vec<Region>, ExportError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < ops.len() {
        if let Op::CollBegin(kind) = ops[i] {
            let end = region_end(ops, i, rank)?;
            let mut r = Region {
                kind,
                max_bytes: 0,
                has_recv: false,
                has_send: false,
            };
            for op in &ops[i + 1..end] {
                match *op {
                    Op::Send { bytes, .. } | Op::Isend { bytes, .. } => {
                        r.max_bytes = r.max_bytes.max(bytes);
                        r.has_send = true;
                    }
                    Op::Recv { .. } | Op::Irecv { .. } => r.has_recv = true,
                    _ => {}
                }
            }
            out.push(r);
            i = end + 1;
        } else {
            i += 1;
        }
    }
    Ok(out)
}

/// The one rank whose region `i` satisfies `is_root`, else a structure error.
fn only_root(
    per_rank: &[Vec<Region>],
    i: usize,
    is_root: impl Fn(&Region) -> bool,
    what: &str,
    verb: &str,
) -> Result<usize, ExportError> {
    let roots: Vec<usize> = (0..per_rank.len())
        .filter(|&r| is_root(&per_rank[r][i]))
        .collect();
    match roots.as_slice() {
        [root] => Ok(*root),
        _ => Err(ExportError::Structure {
            rank: 0,
            msg: format!(
                "{what} {i} has {} ranks that {verb} nothing (expected 1)",
                roots.len()
            ),
        }),
    }
}

/// One `coll` line per collective index: (text after `coll `), the same for every rank.
fn collective_lines(p: &Program, scale: f64) -> Result<Vec<String>, ExportError> {
    let per_rank: Vec<Vec<Region>> = p
        .ranks
        .iter()
        .enumerate()
        .map(|(r, ops)| regions(ops, r))
        .collect::<Result<_, _>>()?;
    let n = per_rank.first().map_or(0, Vec::len);
    for (r, regs) in per_rank.iter().enumerate() {
        if regs.len() != n {
            return Err(ExportError::Structure {
                rank: r,
                msg: format!("{} collectives, rank 0 has {n}", regs.len()),
            });
        }
    }
    let sb = |b: u64| (b as f64 * scale).round() as u64;
    (0..n)
        .map(|i| {
            let kind = per_rank[0][i].kind;
            if let Some(r) = per_rank.iter().position(|regs| regs[i].kind != kind) {
                return Err(ExportError::Structure {
                    rank: r,
                    msg: format!(
                        "collective {i} is a {}, rank 0's is a {}",
                        coll_name(per_rank[r][i].kind),
                        coll_name(kind)
                    ),
                });
            }
            let bytes = sb(per_rank
                .iter()
                .map(|regs| regs[i].max_bytes)
                .max()
                .unwrap_or(0));
            Ok(match kind {
                Collective::Barrier => "barrier".to_string(),
                Collective::Allreduce => format!("allreduce {bytes}"),
                Collective::Alltoall => format!("alltoall {bytes}"),
                // The root: the one rank that sends nothing (reduce) or receives
                // nothing (broadcast).
                Collective::Reduce => {
                    let root = only_root(&per_rank, i, |r| !r.has_send, "reduce", "send")?;
                    format!("reduce {root} {bytes}")
                }
                Collective::Bcast => {
                    let root = only_root(&per_rank, i, |r| !r.has_recv, "broadcast", "receive")?;
                    format!("bcast {root} {bytes}")
                }
            })
        })
        .collect()
}

struct Emitter<'a> {
    scale: f64,
    form: CollectiveForm,
    colls: &'a [String],
    next_coll: usize,
    rank: usize,
}

impl Emitter<'_> {
    fn ns(&self, ns: i64) -> i64 {
        (ns as f64 * self.scale).round() as i64
    }
    fn bytes(&self, b: u64) -> u64 {
        (b as f64 * self.scale).round() as u64
    }

    /// Lines for `ops` (a whole rank or a loop body).
    fn lines(&mut self, ops: &[Op]) -> Result<Vec<String>, ExportError> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < ops.len() {
            let op = ops[i];
            i += 1;
            let body_of = |len: u32, i: usize| -> Result<&[Op], ExportError> {
                ops.get(i..i + len as usize)
                    .ok_or_else(|| ExportError::Structure {
                        rank: self.rank,
                        msg: format!("loop at op {} runs past the end of its list", i - 1),
                    })
            };
            match op {
                Op::Loop { count, len }
                | Op::LoopUntil {
                    stop_tag: count,
                    len,
                } => {
                    let body = self.lines(body_of(len, i)?)?;
                    out.push(match op {
                        Op::Loop { .. } => format!("loop {count} {}", body.len()),
                        _ => format!("loopuntil {count} {}", body.len()),
                    });
                    out.extend(body);
                    i += len as usize;
                }
                Op::CollBegin(_) if self.form == CollectiveForm::Library => {
                    let end = region_end(ops, i - 1, self.rank)?;
                    out.push(format!("coll {}", self.colls[self.next_coll]));
                    self.next_coll += 1;
                    i = end + 1;
                }
                Op::CollBegin(kind) => out.push(format!("collbegin {}", coll_name(kind))),
                Op::CollEnd(kind) => out.push(format!("collend {}", coll_name(kind))),
                Op::Compute { ns } => out.push(format!("compute {}", self.ns(ns))),
                Op::Burst { mean_ns, k } => out.push(format!("burst {} {k}", self.ns(mean_ns))),
                Op::Io { ns } => out.push(format!("io {}", self.ns(ns))),
                Op::Send { to, bytes, tag } => {
                    out.push(format!("send {to} {} {tag}", self.bytes(bytes)))
                }
                Op::Isend { to, bytes, tag } => {
                    out.push(format!("isend {to} {} {tag}", self.bytes(bytes)))
                }
                Op::Recv { from, tag } | Op::Irecv { from, tag } => {
                    let verb = if matches!(op, Op::Recv { .. }) {
                        "recv"
                    } else {
                        "irecv"
                    };
                    match from {
                        Some(f) => out.push(format!("{verb} {f} {tag}")),
                        None => out.push(format!("{verb} * {tag}")),
                    }
                }
                Op::Reply { bytes, tag } => out.push(format!("reply {} {tag}", self.bytes(bytes))),
                Op::Wait => out.push("wait".to_string()),
            }
        }
        Ok(out)
    }
}

/// The export text of `program` with every amount multiplied by `scale`.
pub fn to_export(
    program: &Program,
    scale: f64,
    form: CollectiveForm,
) -> Result<String, ExportError> {
    if !(scale.is_finite() && scale > 0.0) {
        return Err(ExportError::Scale(scale));
    }
    let colls = match form {
        CollectiveForm::Library => collective_lines(program, scale)?,
        CollectiveForm::PointToPoint => Vec::new(),
    };
    let mut s = String::new();
    s.push_str(&format!("cosched-program {EXPORT_VERSION}\n"));
    s.push_str(&format!(
        "program {}\n",
        program.name.replace(char::is_whitespace, "_")
    ));
    s.push_str(&format!("ranks {}\n", program.size()));
    s.push_str(&format!("memory_mb {}\n", program.memory_mb * scale));
    s.push_str(&format!("noise_cv {}\n", program.noise_cv));
    s.push_str(&format!("scale {scale}\n"));
    s.push_str(&format!("collectives {}\n", form.name()));
    for (r, ops) in program.ranks.iter().enumerate() {
        let mut e = Emitter {
            scale,
            form,
            colls: &colls,
            next_coll: 0,
            rank: r,
        };
        let lines = e.lines(ops)?;
        s.push_str(&format!("rank {r} {}\n", lines.len()));
        for l in lines {
            s.push_str(&l);
            s.push('\n');
        }
        s.push_str("end\n");
    }
    Ok(s)
}

/// `program` with every amount multiplied by `scale`, as [`to_export`] writes it
/// (for simulating exactly what the export runs, collectives aside).
pub fn scaled(program: &Program, scale: f64) -> Program {
    let ns = |v: i64| (v as f64 * scale).round() as i64;
    let b = |v: u64| (v as f64 * scale).round() as u64;
    let ranks = program
        .ranks
        .iter()
        .map(|ops| {
            ops.iter()
                .map(|&op| match op {
                    Op::Compute { ns: v } => Op::Compute { ns: ns(v) },
                    Op::Burst { mean_ns, k } => Op::Burst {
                        mean_ns: ns(mean_ns),
                        k,
                    },
                    Op::Io { ns: v } => Op::Io { ns: ns(v) },
                    Op::Send { to, bytes, tag } => Op::Send {
                        to,
                        bytes: b(bytes),
                        tag,
                    },
                    Op::Isend { to, bytes, tag } => Op::Isend {
                        to,
                        bytes: b(bytes),
                        tag,
                    },
                    Op::Reply { bytes, tag } => Op::Reply {
                        bytes: b(bytes),
                        tag,
                    },
                    other => other,
                })
                .collect()
        })
        .collect();
    Program {
        ranks,
        memory_mb: program.memory_mb * scale,
        ..program.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::Builder;

    fn body(text: &str, rank: usize) -> Vec<String> {
        let mut lines = text
            .lines()
            .skip_while(|l| !l.starts_with(&format!("rank {rank} ")));
        lines.next();
        lines
            .take_while(|l| *l != "end")
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn library_collectives_become_one_line_and_loops_are_recounted() {
        let mut b = Builder::new(3);
        b.repeat(4, |b| {
            b.all(Op::Compute { ns: 1000 });
            b.allreduce(8);
            b.bcast(1, 100);
            b.barrier();
        });
        let p = b.build("t", 2.0);
        let text = to_export(&p, 0.5, CollectiveForm::Library).unwrap();
        assert!(text.starts_with("cosched-program 1\nprogram t\nranks 3\nmemory_mb 1\n"));
        for r in 0..3 {
            assert_eq!(
                body(&text, r),
                vec![
                    "loop 4 4",
                    "compute 500",
                    "coll allreduce 4",
                    "coll bcast 1 50",
                    "coll barrier"
                ],
                "rank {r}"
            );
        }
        assert!(text.contains("rank 2 5\n"));
    }

    #[test]
    fn a_reduce_is_one_library_call_to_its_root() {
        let mut b = Builder::new(3);
        b.reduce(2, 16);
        let p = b.build("t", 0.0);
        let text = to_export(&p, 0.5, CollectiveForm::Library).unwrap();
        for r in 0..3 {
            assert_eq!(body(&text, r), vec!["coll reduce 2 8"], "rank {r}");
        }
        let text = to_export(&p, 1.0, CollectiveForm::PointToPoint).unwrap();
        assert_eq!(body(&text, 2)[0], "collbegin reduce");
    }

    #[test]
    fn p2p_form_keeps_the_rounds_between_markers() {
        let mut b = Builder::new(2);
        b.barrier();
        let p = b.build("t", 0.0);
        let text = to_export(&p, 1.0, CollectiveForm::PointToPoint).unwrap();
        let tag = crate::program::COLLECTIVE_TAG_BASE;
        assert_eq!(
            body(&text, 0),
            vec![
                "collbegin barrier".to_string(),
                format!("isend 1 0 {tag}"),
                format!("recv 1 {tag}"),
                "wait".to_string(),
                "collend barrier".to_string()
            ]
        );
    }

    #[test]
    fn every_op_has_a_line_and_amounts_scale() {
        let p = Program {
            name: "all ops".into(),
            ranks: vec![vec![
                Op::LoopUntil {
                    stop_tag: 9,
                    len: 2,
                },
                Op::Recv { from: None, tag: 1 },
                Op::Reply { bytes: 10, tag: 2 },
                Op::Irecv {
                    from: Some(0),
                    tag: 3,
                },
                Op::Isend {
                    to: 0,
                    bytes: 7,
                    tag: 3,
                },
                Op::Wait,
                Op::Send {
                    to: 0,
                    bytes: 3,
                    tag: 4,
                },
                Op::Io { ns: 20 },
                Op::Burst { mean_ns: 40, k: 5 },
            ]],
            memory_mb: 0.0,
            noise_cv: 0.1,
        };
        let text = to_export(&p, 2.0, CollectiveForm::Library).unwrap();
        assert!(text.contains("program all_ops\n"));
        assert_eq!(
            body(&text, 0),
            vec![
                "loopuntil 9 2",
                "recv * 1",
                "reply 20 2",
                "irecv 0 3",
                "isend 0 14 3",
                "wait",
                "send 0 6 4",
                "io 40",
                "burst 80 5"
            ]
        );
        assert_eq!(scaled(&p, 2.0).ranks[0][8], Op::Burst { mean_ns: 80, k: 5 });
    }

    #[test]
    fn bad_scale_and_unclosed_collectives_are_errors() {
        let p = Builder::new(1).build("t", 0.0);
        assert_eq!(
            to_export(&p, 0.0, CollectiveForm::Library),
            Err(ExportError::Scale(0.0))
        );
        assert!(to_export(&p, f64::NAN, CollectiveForm::Library).is_err());
        let bad = Program {
            name: "x".into(),
            ranks: vec![vec![Op::CollBegin(Collective::Barrier)]],
            memory_mb: 0.0,
            noise_cv: 0.0,
        };
        let e = to_export(&bad, 1.0, CollectiveForm::Library).unwrap_err();
        assert!(e.to_string().contains("never ends"), "{e}");
        assert!(CollectiveForm::parse("mpi").is_err());
    }
}
