//! Random SPMD programs for property tests (the engine's and the node policies'):
//! a program is a sequence of [`Phase`]s, each matched across all ranks, so every
//! message sent is received and no run can deadlock by construction.

use cosched_des::SimTime;
use cosched_model::node::{NodePlatform, OsConfig};
use cosched_model::program::{Builder, Op, Program};

/// One phase of a random SPMD program.
#[derive(Clone, Debug)]
pub enum Phase {
    /// Every rank computes this long (rank `r` 1000 ns more, so ranks drift apart).
    Compute(i64),
    Barrier,
    Allreduce(u64),
    Alltoall(u64),
    Bcast(u64),
    /// A blocking send of this many bytes to the next rank and a blocking receive
    /// from the previous one (even ranks send first).
    Shift(u64),
    /// A non-blocking ring exchange of this many bytes and a `Wait`.
    Ring(u64),
    /// A disk burst of this long on the even ranks.
    Io(i64),
}

/// A program of `p` ranks repeating `phases` `reps` times, with `memory_mb` per process.
pub fn spmd(p: u32, phases: &[Phase], reps: u32, memory_mb: f64) -> Program {
    let mut b = Builder::new(p);
    b.repeat(reps, |b| {
        for ph in phases {
            match *ph {
                Phase::Compute(ns) => {
                    b.each(|r| {
                        vec![Op::Compute {
                            ns: ns + i64::from(r) * 1000,
                        }]
                    });
                }
                Phase::Barrier => {
                    b.barrier();
                }
                Phase::Allreduce(x) => {
                    b.allreduce(x);
                }
                Phase::Alltoall(x) => {
                    b.alltoall(x);
                }
                Phase::Bcast(x) => {
                    b.bcast(0, x);
                }
                Phase::Shift(x) if p > 1 => {
                    b.each(|r| {
                        let send = Op::Send {
                            to: (r + 1) % p,
                            bytes: x,
                            tag: 5,
                        };
                        let recv = Op::Recv {
                            from: Some((r + p - 1) % p),
                            tag: 5,
                        };
                        if r % 2 == 0 {
                            vec![send, recv]
                        } else {
                            vec![recv, send]
                        }
                    });
                }
                Phase::Shift(_) => {}
                Phase::Ring(x) => {
                    b.each(|r| {
                        vec![
                            Op::Isend {
                                to: (r + 1) % p,
                                bytes: x,
                                tag: 7,
                            },
                            Op::Irecv {
                                from: Some((r + p - 1) % p),
                                tag: 7,
                            },
                            Op::Wait,
                        ]
                    });
                }
                Phase::Io(ns) => {
                    b.each(|r| {
                        if r % 2 == 0 {
                            vec![Op::Io { ns }]
                        } else {
                            vec![]
                        }
                    });
                }
            }
        }
    });
    Program {
        memory_mb,
        ..b.build("random", 1.0)
    }
}

/// How rank 1 of [`late_message`] sends its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendBy {
    /// A blocking `Send`.
    Send,
    /// An `Isend` that the rank never waits for.
    Isend,
    /// An `Isend` followed by a `Wait`.
    IsendWait,
}

/// Two ranks, one message: rank 0 receives 8 bytes tagged 1 from rank 1 at once;
/// rank 1 first computes `compute_ns`, then sends them (`send`). The builder is
/// returned so that a test can append operations before it names the program.
pub fn late_message(compute_ns: i64, send: SendBy) -> Builder {
    late_message_of(compute_ns, 8, send)
}

/// [`late_message`] with a message of `bytes` bytes.
pub fn late_message_of(compute_ns: i64, bytes: u64, send: SendBy) -> Builder {
    let mut b = Builder::new(2);
    b.each(|r| {
        if r == 0 {
            return vec![Op::Recv {
                from: Some(1),
                tag: 1,
            }];
        }
        let mut ops = vec![Op::Compute { ns: compute_ns }];
        ops.push(match send {
            SendBy::Send => Op::Send {
                to: 0,
                bytes,
                tag: 1,
            },
            SendBy::Isend | SendBy::IsendWait => Op::Isend {
                to: 0,
                bytes,
                tag: 1,
            },
        });
        if send == SendBy::IsendWait {
            ops.push(Op::Wait);
        }
        ops
    });
    b
}

/// The `k mod 4`-th OS model, with parameters that make small runs switch often:
/// Linux 2.4 (defaults), CFS (Linux defaults), Solaris TS, round robin of 20 ms.
pub fn os_model(k: u8) -> OsConfig {
    match k % 4 {
        0 => OsConfig::default(),
        1 => OsConfig::Cfs {
            latency_ms: 6.0,
            min_granularity_ms: 0.75,
            wakeup_granularity_ms: 1.0,
            slice_cv: 0.0,
        },
        2 => OsConfig::Mlfq { quantum_scale: 1.0 },
        _ => OsConfig::Rr { quantum_ms: 20.0 },
    }
}

/// Gang-mode options: `params` decided by the gang slot policy (the engine's
/// own tests).
#[cfg(test)]
pub fn gang_options(params: super::gang::GangParams) -> super::ProcOptions {
    super::ProcOptions {
        slots: Some(cosched_policies::process::gang::factory(params)),
        ..Default::default()
    }
}

/// What taking simultaneous messages into one receiving NIC in another order can
/// save a job of `procs` processes (process/net.rs: the NIC takes them in one after
/// the other, in the engine's order of requests): in each communicating phase of
/// each repetition, the transfers of the other processes' messages (a nanosecond
/// more each for the rounding of a transfer time).
pub fn incast_slack(plat: &NodePlatform, procs: u32, phases: &[Phase], reps: u32) -> SimTime {
    let ns_per_byte = 1000.0 / plat.bandwidth_mb_s;
    let per_rep: i64 = phases
        .iter()
        .map(|ph| match ph {
            Phase::Allreduce(b)
            | Phase::Alltoall(b)
            | Phase::Bcast(b)
            | Phase::Shift(b)
            | Phase::Ring(b) => {
                i64::from(procs.saturating_sub(1)) * ((*b as f64 * ns_per_byte).round() as i64 + 1)
            }
            Phase::Compute(_) | Phase::Barrier | Phase::Io(_) => 0,
        })
        .sum();
    SimTime(per_rep * i64::from(reps))
}
