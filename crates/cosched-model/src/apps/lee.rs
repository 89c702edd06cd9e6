//! Seed 003's applications (Lee, Frank, Lee, Mackenzie, Rudolph, "Implications of
//! I/O for Gang Scheduled Workloads"): the synthetic applications of its Table 1
//! (Emp, Barrier, Workpile, Msg), the real-application profiles of its Table 2
//! (Enum, Water, LU, Barnes; named `lee-…` so that LU does not clash with NAS LU)
//! and the I/O-bound job of its §3.2. They are meant for the `lee4` platform preset
//! (and `lee32` for the I/O-bound job), where 1 ns stands for one Fugu instruction.
//!
//! Numbers and their sources (docs/models/seed-parameters.md §2.5–2.7, gaps
//! G-S003-1, G-S003-2 and G-S003-4):
//! - the quantum is 500,000 instructions ([`QUANTUM_NS`]; S003 §4 "Quantum size is
//!   fixed at 500,000 instructions across the runs");
//! - every synthetic app does [`DEFAULT_QUANTA`] = 200 quanta of work per
//!   processor (assumption G-S003-1: the seed gives no run length);
//! - **Emp** (S003 Table 1: "Constituent processes work independently without
//!   communication"): each rank computes its 200 quanta, nothing else;
//! - **Barrier** (S003 Table 1: "Consists entirely of synchronizing barriers"): a
//!   dissemination barrier after every `every` quanta of compute (default 0.1: the
//!   seed gives no interval; assumption, the finest grain the G-S003-1 Msg model uses);
//! - **Workpile** (S003 Table 1: "a fixed amount of global work broken into
//!   independent units of work ... distributed dynamically"; parameter "Granularity
//!   of work unit (14%-2400% of a quantum)"): rank 0 is a master that answers work
//!   requests; ranks 1..P-1 are workers that request a unit, compute it, and request
//!   again until the master answers "stop" ([`Op::LoopUntil`]). The total work is 200
//!   quanta per worker, cut into units of `unit` quanta (default 0.14; the four seed
//!   members are 0.14, 0.6, 2.4 and 24 quanta: S003 §4.1 "work unit = 24 time quanta",
//!   "ranges from 14% of a time quantum to 240%"; 0.6 is assumption G-S003-1). A
//!   dedicated master (not a worker itself) is an assumption: the IR has no message
//!   handlers, so the master must be a process of its own;
//! - **Msg** (S003 Table 1: "Phases of request/reply communication are separated by
//!   barriers. Requests are asynchronous, but all replies must be received before a
//!   process proceeds to the next phase"; parameter "Communication pattern"): one
//!   phase per quantum of compute, 10 requests per process per phase (one per 0.1
//!   quantum), then all replies, then a barrier (assumption G-S003-1). Patterns
//!   (G-S003-1): `ring` (to rank + 1), `alltoall` (to rank + 1 + k mod (P - 1) at the
//!   k-th request), `random` (to rank + s_k, the 10 shifts s_k drawn once from the
//!   fixed stream "msg-random" of seed 0 and repeated every phase), `master` (every
//!   worker asks rank 0, which answers each one);
//! - **lee-Enum, lee-Water, lee-LU, lee-Barnes** (S003 Table 2, [`TABLE2`]): per
//!   barrier interval of "Quanta/Barrier" quanta, request/reply steps at the rate of
//!   "Msgs/Proc/Quantum" messages received per process per quantum (barrier messages
//!   included), blocking for Water, LU and Barnes (a process waits for its reply
//!   before going on), non-blocking for Enum (a process receives its partner's
//!   message [`ENUM_LAG`] steps after it was sent, so it tolerates that much skew);
//!   the compute per step is set from the platform's costs so that a dedicated run on
//!   `lee4` has exactly the Table 2 interval; the load imbalance of the seed's progress
//!   plots is extra compute before each barrier on the bottleneck processor
//!   (G-S003-2: Water P3 +20% in every interval; LU P3 +20% and P0 +2% in alternate
//!   intervals; Barnes P0 +30% in the last 2/3 of the intervals; Enum P3 +5% in 3 of
//!   every 5 intervals). Run length: 200 quanta (as the synthetic apps). Message size
//!   [`MSG_BYTES`] (not stated; assumption);
//! - **io-bound** (S003 §3.2: "Its cpu time is modeled by an Erlang-5 distribution
//!   ... with a mean of 5 msec. The latency of I/O requests is fixed at 20 msec."):
//!   every rank repeats a CPU burst drawn from Erlang-5 of mean 5 ms ([`Op::Burst`],
//!   drawn by the engine from the process's seeded stream) and a 20 ms I/O request;
//!   2000 bursts by default (assumption G-S003-4).
//!
//! Parameters are given in the name, `name[key=value,...]`, e.g. `Workpile[unit=2.4]`,
//! `Msg[pattern=master]`, `lee-Water[quanta=100]`, `io-bound[bursts=500]`.

use super::{AppError, AppInfo, SINGLE_CLASS};
use crate::node::NodePlatform;
use crate::program::{Builder, Op, Program, Rank};
use std::collections::BTreeMap;

/// The Fugu quantum, ns (1 instruction = 1 ns on `lee4`): S003 §4.
pub const QUANTUM_NS: i64 = 500_000;
/// The largest value of any app parameter (`quanta`, `every`, `unit`, `bursts`):
/// 10^6 quanta are 500 s of compute per process, 5,000 times the seeds' runs.
pub const PARAM_MAX: f64 = 1e6;

/// Work per processor of every app, quanta (assumption G-S003-1).
pub const DEFAULT_QUANTA: f64 = 200.0;
/// Memory per process, MB (memory is not a factor in S003; assumption).
pub const MEMORY_MB: f64 = 1.0;
/// Bytes of every request and reply (not stated in S003; assumption).
pub const MSG_BYTES: u64 = 64;
/// How many steps behind its partner an Enum process may fall before it waits: one
/// quantum of Enum's messages (S003 Table 2: 254 per quantum; assumption G-S003-2).
pub const ENUM_LAG: u32 = 254;
/// Requests per process per Msg phase (one per 0.1 quantum; assumption G-S003-1).
pub const MSG_REQUESTS: u32 = 10;

/// One row of S003 Table 2, "Characteristics of the real applications".
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Table2Row {
    pub app: &'static str,
    pub quanta_per_barrier: f64,
    pub blocking: bool,
    pub msgs_per_proc_per_quantum: f64,
}

/// S003 Table 2 (the only copy of these numbers in the code).
pub const TABLE2: [Table2Row; 4] = [
    Table2Row {
        app: "lee-Enum",
        quanta_per_barrier: 50.0,
        blocking: false,
        msgs_per_proc_per_quantum: 254.0,
    },
    Table2Row {
        app: "lee-Water",
        quanta_per_barrier: 10.0,
        blocking: true,
        msgs_per_proc_per_quantum: 12.0,
    },
    Table2Row {
        app: "lee-LU",
        quanta_per_barrier: 10.0,
        blocking: true,
        msgs_per_proc_per_quantum: 3.0,
    },
    Table2Row {
        app: "lee-Barnes",
        quanta_per_barrier: 50.0,
        blocking: true,
        msgs_per_proc_per_quantum: 28.0,
    },
];

/// The presets of this module.
pub const NAMES: [&str; 9] = [
    "Emp",
    "Barrier",
    "Workpile",
    "Msg",
    "lee-Enum",
    "lee-Water",
    "lee-LU",
    "lee-Barnes",
    "io-bound",
];

const SYNTHETIC_PROCS: [u32; 5] = [2, 4, 8, 16, 32];
const REAL_PROCS: [u32; 1] = [4];
const IO_PROCS: [u32; 6] = [1, 2, 4, 8, 16, 32];

/// Allowed process counts and their rule.
pub fn procs(app: &str) -> (&'static [u32], &'static str) {
    match app {
        "Emp" | "Barrier" | "Workpile" | "Msg" => (&SYNTHETIC_PROCS, "2 to 32 processes"),
        "io-bound" => (&IO_PROCS, "1 to 32 processes"),
        _ => (
            &REAL_PROCS,
            "4 processes (S003 Table 2 is measured on 4 processors)",
        ),
    }
}

fn allowed(app: &str, p: u32) -> bool {
    match app {
        "Emp" | "Barrier" | "Workpile" | "Msg" => (2..=32).contains(&p),
        "io-bound" => (1..=32).contains(&p),
        _ => p == 4,
    }
}

fn describe(app: &str) -> &'static str {
    match app {
        "Emp" => "Seed 003 synthetic, embarrassingly parallel: every process computes 200 quanta (500,000 ns each) without communicating. Parameter quanta=200.",
        "Barrier" => "Seed 003 synthetic, synchronization intensive: a dissemination barrier after every `every` quanta of compute (default 0.1), 200 quanta in all. Parameters quanta=200, every=0.1.",
        "Workpile" => "Seed 003 synthetic, self load-balancing: rank 0 hands out work units on request, workers compute units until told to stop; 200 quanta of work per worker in units of `unit` quanta (seed members 0.14, 0.6, 2.4, 24). Parameters unit=0.14, quanta=200.",
        "Msg" => "Seed 003 synthetic, synchronization intensive: per quantum of compute 10 asynchronous requests per process, all replies, then a barrier. Parameters pattern=ring|alltoall|random|master (default ring), quanta=200.",
        "lee-Enum" => "Seed 003 Table 2 profile of Enum (triangle puzzle enumeration): a barrier every 50 quanta, 254 non-blocking messages per process per quantum, processor 3 5% behind in 3 of 5 intervals. Parameter quanta=200.",
        "lee-Water" => "Seed 003 Table 2 profile of Water (SPLASH on CRL): a barrier every 10 quanta, 12 blocking request/reply messages per process per quantum, processor 3 20% behind. Parameter quanta=200.",
        "lee-LU" => "Seed 003 Table 2 profile of LU (SPLASH on CRL; not NAS LU): a barrier every 10 quanta, 3 blocking request/reply messages per process per quantum, processors 3 (+20%) and 0 (+2%) alternate as bottleneck. Parameter quanta=200.",
        "lee-Barnes" => "Seed 003 Table 2 profile of Barnes (SPLASH on CRL): a barrier every 50 quanta, 28 blocking request/reply messages per process per quantum, processor 0 30% behind in the last 2/3. Parameter quanta=200.",
        _ => "Seed 003 I/O-bound job: every process repeats a CPU burst drawn from Erlang-5 with mean 5 ms (per-process seeded stream) and a 20 ms I/O request. Parameter bursts=2000.",
    }
}

/// Catalog entries of this module's presets.
pub fn catalog() -> Vec<AppInfo> {
    NAMES
        .iter()
        .map(|&app| {
            let (counts, rule) = procs(app);
            let one = |v| BTreeMap::from([(SINGLE_CLASS.to_string(), v)]);
            let iterations = match app {
                "io-bound" => 2000,
                "Emp" => 1,
                "Barrier" => 2000,
                "Msg" => 200,
                "Workpile" => (DEFAULT_QUANTA / 0.14).round() as u32,
                _ => {
                    let row = TABLE2.iter().find(|r| r.app == app).expect("a Table 2 app");
                    (DEFAULT_QUANTA / row.quanta_per_barrier).round() as u32
                }
            };
            AppInfo {
                name: app.to_string(),
                classes: vec![SINGLE_CLASS.to_string()],
                procs: counts.to_vec(),
                procs_rule: rule.to_string(),
                intensity: None,
                memory_mb_at_16: one(MEMORY_MB),
                iterations: BTreeMap::from([(SINGLE_CLASS.to_string(), iterations)]),
                description: describe(app).to_string(),
                source: match app {
                    "io-bound" => "seed 003 §3.2; docs/models/seed-parameters.md §2.7, G-S003-4",
                    "Emp" | "Barrier" | "Workpile" | "Msg" => {
                        "seed 003 §4, §4.1, Table 1; docs/models/seed-parameters.md §2.5, G-S003-1"
                    }
                    _ => "seed 003 §4.2, Table 2; docs/models/seed-parameters.md §2.6, G-S003-2",
                }
                .to_string(),
            }
        })
        .collect()
}

/// Reads `key=value` parameters; unknown keys are an error.
struct Params<'a> {
    app: &'a str,
    kv: Vec<(String, String)>,
}

impl Params<'_> {
    fn err(&self, msg: String) -> AppError {
        AppError::BadParams {
            app: self.app.to_string(),
            class: SINGLE_CLASS,
            msg,
        }
    }
    fn expect_only(&self, keys: &[&str]) -> Result<(), AppError> {
        match self.kv.iter().find(|(k, _)| !keys.contains(&k.as_str())) {
            Some((k, _)) => Err(self.err(format!(
                "unknown parameter {k:?}; valid parameters: {}",
                keys.join(", ")
            ))),
            None => Ok(()),
        }
    }
    fn raw(&self, key: &str) -> Option<&str> {
        self.kv
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
    /// A number in `(0, PARAM_MAX]`: every parameter counts quanta, units or
    /// bursts, and larger values only make runs that never end in practice.
    fn num(&self, key: &str, default: f64) -> Result<f64, AppError> {
        let Some(v) = self.raw(key) else {
            return Ok(default);
        };
        match v.parse::<f64>() {
            Ok(x) if x.is_finite() && x > 0.0 && x <= PARAM_MAX => Ok(x),
            _ => Err(self.err(format!(
                "{key} must be a number > 0 and at most {PARAM_MAX:e}, got {v:?}"
            ))),
        }
    }
}

/// Builds preset `app` (canonical name) with parameters `kv` at `p` processes.
pub fn build(app: &str, kv: Vec<(String, String)>, p: u32) -> Result<Program, AppError> {
    if !allowed(app, p) {
        let (counts, rule) = procs(app);
        return Err(AppError::BadProcs {
            app: app.to_string(),
            rule: rule.to_string(),
            valid: super::list(counts),
            got: p,
        });
    }
    let params = Params { app, kv };
    let q = QUANTUM_NS as f64;
    let prog = match app {
        "Emp" => {
            params.expect_only(&["quanta"])?;
            let quanta = params.num("quanta", DEFAULT_QUANTA)?;
            let mut b = Builder::new(p);
            b.each(|_| super::compute(quanta * q));
            b.build("Emp", MEMORY_MB)
        }
        "Barrier" => {
            params.expect_only(&["quanta", "every"])?;
            let quanta = params.num("quanta", DEFAULT_QUANTA)?;
            let every = params.num("every", 0.1)?;
            let n = (quanta / every).round().max(1.0) as u32;
            let mut b = Builder::new(p);
            b.repeat(n, |b| {
                b.each(|_| super::compute(every * q));
                b.barrier();
            });
            b.build("Barrier", MEMORY_MB)
        }
        "Workpile" => {
            params.expect_only(&["quanta", "unit"])?;
            let quanta = params.num("quanta", DEFAULT_QUANTA)?;
            let unit = params.num("unit", 0.14)?;
            workpile(p, quanta, unit)
        }
        "Msg" => {
            params.expect_only(&["quanta", "pattern"])?;
            let quanta = params.num("quanta", DEFAULT_QUANTA)?;
            let pattern = params.raw("pattern").unwrap_or("ring");
            if !["ring", "alltoall", "random", "master"].contains(&pattern) {
                return Err(params.err(format!(
                    "pattern must be one of ring, alltoall, random, master; got {pattern:?}"
                )));
            }
            msg(p, quanta.round().max(1.0) as u32, pattern)
        }
        "io-bound" => {
            params.expect_only(&["bursts"])?;
            let bursts = params.num("bursts", 2000.0)?.round().max(1.0) as u32;
            let mut b = Builder::new(p);
            b.repeat(bursts, |b| {
                // S003 §3.2: Erlang-5 CPU time of mean 5 ms, then a 20 ms I/O request.
                b.all(Op::Burst {
                    mean_ns: 5_000_000,
                    k: 5,
                });
                b.all(Op::Io { ns: 20_000_000 });
            });
            b.build("io-bound", MEMORY_MB)
        }
        _ => {
            params.expect_only(&["quanta"])?;
            let quanta = params.num("quanta", DEFAULT_QUANTA)?;
            let row = TABLE2.iter().find(|r| r.app == app).expect("a Table 2 app");
            real(row, quanta)
        }
    };
    Ok(prog)
}

const REQ: u32 = 1;
const WORK: u32 = 2;
const STOP: u32 = 3;

/// Workpile: a master (rank 0) and P - 1 workers; `quanta` of work per worker in
/// units of `unit` quanta.
fn workpile(p: u32, quanta: f64, unit: f64) -> Program {
    let workers = p - 1;
    let units = (quanta * workers as f64 / unit).round().max(1.0) as u32;
    let unit_ns = (unit * QUANTUM_NS as f64).round().max(1.0) as i64;
    let mut ranks = Vec::with_capacity(p as usize);
    ranks.push(vec![
        // Answer `units` requests with work, then one stop per worker.
        Op::Loop {
            count: units,
            len: 2,
        },
        Op::Recv {
            from: None,
            tag: REQ,
        },
        Op::Reply {
            bytes: MSG_BYTES,
            tag: WORK,
        },
        Op::Loop {
            count: workers,
            len: 2,
        },
        Op::Recv {
            from: None,
            tag: REQ,
        },
        Op::Reply {
            bytes: MSG_BYTES,
            tag: STOP,
        },
    ]);
    for _ in 1..p {
        ranks.push(vec![
            Op::LoopUntil {
                stop_tag: STOP,
                len: 3,
            },
            Op::Send {
                to: 0,
                bytes: MSG_BYTES,
                tag: REQ,
            },
            Op::Recv {
                from: Some(0),
                tag: WORK,
            },
            Op::Compute { ns: unit_ns },
        ]);
    }
    Program {
        name: format!("Workpile[unit={unit}]"),
        ranks,
        memory_mb: MEMORY_MB,
        noise_cv: 0.0,
    }
}

/// The request targets of rank `r` in a Msg phase, one per request (not for `master`).
fn shifts(p: u32, pattern: &str) -> Vec<u32> {
    use rand::Rng;
    let mut rng = cosched_des::RngStreams::new(0).stream("msg-random");
    (0..MSG_REQUESTS)
        .map(|k| match pattern {
            "ring" => 1,
            "alltoall" => 1 + k % (p - 1),
            _ => rng.gen_range(1..p),
        })
        .collect()
}

/// Msg: `phases` phases of one quantum of compute with 10 requests per process,
/// the replies, and a barrier.
fn msg(p: u32, phases: u32, pattern: &str) -> Program {
    let c = QUANTUM_NS as f64 / MSG_REQUESTS as f64;
    // Request and reply tags of the k-th request of a phase.
    let tags = |k: u32| (100 + k, 200 + k);
    let mut b = Builder::new(p);
    let master = pattern == "master";
    let s = if master {
        Vec::new()
    } else {
        shifts(p, pattern)
    };
    b.repeat(phases, |b| {
        b.each(|r| {
            let mut ops = Vec::new();
            for k in 0..MSG_REQUESTS {
                let (tq, tp) = tags(k);
                ops.extend(super::compute(c));
                if master {
                    if r == 0 {
                        for w in 1..p {
                            ops.push(Op::Recv {
                                from: Some(w),
                                tag: tq,
                            });
                            ops.push(Op::Isend {
                                to: w,
                                bytes: MSG_BYTES,
                                tag: tp,
                            });
                        }
                    } else {
                        ops.push(Op::Isend {
                            to: 0,
                            bytes: MSG_BYTES,
                            tag: tq,
                        });
                    }
                } else {
                    let sk = s[k as usize];
                    let (to, from) = ((r + sk) % p, (r + p - sk) % p);
                    ops.push(Op::Isend {
                        to,
                        bytes: MSG_BYTES,
                        tag: tq,
                    });
                    ops.push(Op::Recv {
                        from: Some(from),
                        tag: tq,
                    });
                    ops.push(Op::Isend {
                        to: from,
                        bytes: MSG_BYTES,
                        tag: tp,
                    });
                }
            }
            // All replies before the next phase.
            for k in 0..MSG_REQUESTS {
                let (_, tp) = tags(k);
                if master {
                    if r != 0 {
                        ops.push(Op::Recv {
                            from: Some(0),
                            tag: tp,
                        });
                    }
                } else {
                    ops.push(Op::Recv {
                        from: Some((r + s[k as usize]) % p),
                        tag: tp,
                    });
                }
            }
            ops.push(Op::Wait);
            ops
        });
        b.barrier();
    });
    b.build(&format!("Msg[pattern={pattern}]"), MEMORY_MB)
}

/// Extra compute of rank `r` in barrier interval `i` of `n`, as a fraction of the
/// balanced work (G-S003-2).
fn imbalance(app: &str, r: Rank, i: u32, n: u32) -> f64 {
    match (app, r) {
        ("lee-Water", 3) => 0.20,
        ("lee-LU", 3) if i.is_multiple_of(2) => 0.20,
        ("lee-LU", 0) if i % 2 == 1 => 0.02,
        ("lee-Barnes", 0) if 3 * i >= n => 0.30,
        ("lee-Enum", 3) if i % 5 < 3 => 0.05,
        _ => 0.0,
    }
}

/// A Table 2 profile at 4 processes.
fn real(row: &Table2Row, quanta: f64) -> Program {
    const P: u32 = 4;
    let plat = NodePlatform::preset("lee4").expect("built-in preset");
    let us = |x: f64| x * 1000.0;
    let (send, recv, lat) = (
        us(plat.send_overhead_us),
        us(plat.recv_overhead_us),
        us(plat.latency_us),
    );
    let wire = MSG_BYTES as f64 * 1000.0 / plat.bandwidth_mb_s;
    let q = QUANTUM_NS as f64;
    let interval = row.quanta_per_barrier * q;
    let n = (quanta / row.quanta_per_barrier).round().max(1.0) as u32;
    // Messages received per process per interval: Table 2's rate; the barrier's
    // dissemination rounds (log2 4 = 2 messages) count among them.
    let barrier_msgs = 2.0;
    let per_interval = row.msgs_per_proc_per_quantum * row.quanta_per_barrier - barrier_msgs;
    // A barrier round: send overhead, wire, latency, receive overhead.
    let barrier_ns = barrier_msgs * (send + wire + lat + recv);
    let (steps, step_comm) = if row.blocking {
        // Request and reply per step: two messages received; the critical path of a
        // step is two one-way trips (the reply leaves once the request is consumed).
        let steps = (per_interval / 2.0).round().max(1.0) as u32;
        (steps, 2.0 * (send + wire + lat + recv))
    } else {
        // One message received per step, no waiting: the overheads only.
        let steps = per_interval.round().max(1.0) as u32;
        (steps, send + recv)
    };
    let mut b = Builder::new(P);
    for i in 0..n {
        let x_max = (0..P)
            .map(|r| imbalance(row.app, r, i, n))
            .fold(0.0, f64::max);
        let c = ((interval - barrier_ns - steps as f64 * step_comm)
            / (steps as f64 * (1.0 + x_max)))
            .max(0.0);
        if row.blocking {
            b.repeat(steps, |b| {
                b.each(|r| {
                    let (to, from) = ((r + 1) % P, (r + P - 1) % P);
                    let mut ops = super::compute(c);
                    ops.extend([
                        Op::Isend {
                            to,
                            bytes: MSG_BYTES,
                            tag: REQ,
                        },
                        Op::Recv {
                            from: Some(from),
                            tag: REQ,
                        },
                        Op::Isend {
                            to: from,
                            bytes: MSG_BYTES,
                            tag: WORK,
                        },
                        Op::Recv {
                            from: Some(to),
                            tag: WORK,
                        },
                        Op::Wait,
                    ]);
                    ops
                });
            });
        } else {
            // Non-blocking: receive the partner's message ENUM_LAG steps after it was sent.
            let lag = ENUM_LAG.min(steps);
            let send = |r: Rank| Op::Isend {
                to: (r + 1) % P,
                bytes: MSG_BYTES,
                tag: REQ,
            };
            let recv = |r: Rank| Op::Recv {
                from: Some((r + P - 1) % P),
                tag: REQ,
            };
            b.repeat(lag, |b| {
                b.each(|r| {
                    let mut ops = super::compute(c);
                    ops.push(send(r));
                    ops
                });
            });
            b.repeat(steps - lag, |b| {
                b.each(|r| {
                    let mut ops = super::compute(c);
                    ops.extend([send(r), recv(r)]);
                    ops
                });
            });
            b.repeat(lag, |b| {
                b.each(|r| vec![recv(r)]);
            });
            b.all(Op::Wait);
        }
        // The bottleneck's extra work, then the barrier.
        let work = steps as f64 * c;
        b.each(|r| super::compute(work * imbalance(row.app, r, i, n)));
        b.barrier();
    }
    b.build(row.app, MEMORY_MB)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{flatten, static_compute_ns};

    #[test]
    fn every_preset_builds_at_its_sizes_and_rejects_others() {
        for app in NAMES {
            for &p in procs(app).0 {
                let prog = build(app, Vec::new(), p).unwrap();
                assert_eq!(prog.size(), p, "{app}");
            }
            let e = build(app, Vec::new(), 33).unwrap_err().to_string();
            assert!(e.contains("got 33"), "{e}");
        }
        let e = build("Msg", vec![("pattern".into(), "star".into())], 4)
            .unwrap_err()
            .to_string();
        assert!(e.contains("pattern must be one of"), "{e}");
        let e = build("Emp", vec![("size".into(), "1".into())], 4)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown parameter \"size\""), "{e}");
        let e = build("Workpile", vec![("unit".into(), "-1".into())], 4)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unit must be a number > 0"), "{e}");
    }

    #[test]
    fn workpile_hands_out_all_units_and_workers_loop_until_stopped() {
        let prog = build("Workpile", vec![("unit".into(), "2.4".into())], 4).unwrap();
        // 200 quanta x 3 workers / 2.4 = 250 units, then 3 stops.
        assert_eq!(prog.ranks[0][0], Op::Loop { count: 250, len: 2 });
        assert!(matches!(
            prog.ranks[1][0],
            Op::LoopUntil {
                stop_tag: STOP,
                len: 3
            }
        ));
        assert_eq!(static_compute_ns(&prog.ranks[1]), None);
        assert_eq!(static_compute_ns(&prog.ranks[0]), Some(0));
    }

    #[test]
    fn real_profiles_have_the_table_2_message_counts() {
        for row in TABLE2 {
            let prog = build(row.app, Vec::new(), 4).unwrap();
            let n = DEFAULT_QUANTA / row.quanta_per_barrier;
            let recvs = flatten(&prog.ranks[1])
                .iter()
                .filter(|o| matches!(o, Op::Recv { .. }))
                .count() as f64;
            let per_interval = row.msgs_per_proc_per_quantum * row.quanta_per_barrier;
            assert!(
                (recvs / n - per_interval).abs() <= 1.0,
                "{}: {recvs} receives in {n} intervals",
                row.app
            );
            // The bottleneck computes more than rank 1.
            let c: Vec<i64> = prog
                .ranks
                .iter()
                .map(|r| crate::program::compute_ns(r))
                .collect();
            let bottleneck = if row.app == "lee-Barnes" { 0 } else { 3 };
            assert!(c[bottleneck] > c[1], "{}: {c:?}", row.app);
        }
    }
}
