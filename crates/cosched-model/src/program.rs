//! Application programs for the process-level model: a small intermediate
//! representation of SPMD programs, one operation list per rank.
//!
//! Semantics the process-level engine gives these operations (its contract):
//! - [`Op::Compute`]: the process needs this much CPU time (it progresses only
//!   while it runs on a CPU).
//! - [`Op::Send`] / [`Op::Isend`]: the sender pays the platform's send overhead on
//!   its CPU; the message then travels (latency + bytes / bandwidth) and lands in
//!   the receiver's buffer whether or not the receiver runs (user-level NIC). A
//!   message below the platform's `eager_limit_bytes` is eager: its send completes
//!   at once; a larger one is a rendezvous: the send (blocking, or the `Wait` of an
//!   `Isend`) completes only once the receiver, inside an MPI wait with a matching
//!   receive posted, has answered and the data has been delivered; how the sender
//!   waits (spin, spin-block, block) is the node policy's choice.
//! - [`Op::Recv`] / [`Op::Irecv`]: a receive completes when a matching message is
//!   in the buffer AND the receiver runs to consume it (paying the receive
//!   overhead). `from: None` matches any sender.
//! - [`Op::Reply`]: sends to the sender of the last message this rank received
//!   (request/reply servers).
//! - [`Op::Wait`]: waits for all outstanding non-blocking requests.
//! - [`Op::CollBegin`] / [`Op::CollEnd`]: mark a collective's extent (HYBRID boosts
//!   inside it); the collective itself is the point-to-point rounds between them.
//! - [`Op::Io`]: a disk burst: the process blocks for this long without using a CPU.
//! - [`Op::Loop`]: repeats the next `len` operations `count` times (kept compact so
//!   long runs do not need long lists).
//! - [`Op::LoopUntil`]: repeats the next `len` operations until a message tagged
//!   `stop_tag` is received: inside the body every `Recv { from, tag }` also
//!   accepts a message tagged `stop_tag` from the same sender(s); consuming one
//!   (paying the receive overhead like any message) leaves the loop at once, skipping
//!   the rest of the body. This is the one data-dependent construct of the IR: it lets
//!   a worker take a number of work units that depends on the run (seed 003's Workpile).
//!   A `Reply` after such a receive answers its sender as usual.
//! - [`Op::Burst`]: a compute burst whose length is drawn, when the process reaches
//!   it, from an Erlang-`k` distribution of mean `mean_ns` (the sum of `k` exponential
//!   phases of mean `mean_ns / k`), on the process's own seeded stream: the same run
//!   seed gives the same draws (seed 003's I/O-bound job).
//!
//! Collectives are decomposed into point-to-point rounds with the usual algorithms
//! ([`Builder::barrier`], [`Builder::allreduce`], [`Builder::alltoall`], [`Builder::bcast`],
//! [`Builder::reduce`]).

use serde::Serialize;

/// A rank of a job (0-based).
pub type Rank = u32;

/// Kinds of collectives, for the collective markers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Collective {
    Barrier,
    Allreduce,
    Alltoall,
    Bcast,
    /// `MPI_Reduce` to a root (the application generators' binomial tree).
    Reduce,
}

/// One operation of a rank's program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Op {
    Compute { ns: i64 },
    Send { to: Rank, bytes: u64, tag: u32 },
    Isend { to: Rank, bytes: u64, tag: u32 },
    Recv { from: Option<Rank>, tag: u32 },
    Irecv { from: Option<Rank>, tag: u32 },
    Reply { bytes: u64, tag: u32 },
    Wait,
    CollBegin(Collective),
    CollEnd(Collective),
    Io { ns: i64 },
    Loop { count: u32, len: u32 },
    LoopUntil { stop_tag: u32, len: u32 },
    Burst { mean_ns: i64, k: u32 },
}

/// A parallel program: one operation list per rank, plus its memory footprint.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Program {
    pub name: String,
    pub ranks: Vec<Vec<Op>>,
    /// Resident memory per process, MB.
    pub memory_mb: f64,
    /// Coefficient of variation of the run-to-run noise on every compute burst
    /// (0: none). The engine multiplies each burst by a log-normal factor of mean 1
    /// drawn from the process's own seeded stream.
    pub noise_cv: f64,
}

impl Program {
    pub fn size(&self) -> u32 {
        self.ranks.len() as u32
    }

    /// The application of this program: the name of its `name[key=value,...]`
    /// string (`Workpile` for `Workpile[unit=2.4]`, read by the one parser
    /// [`crate::spec`]); a name that parser refuses is its own application.
    pub fn app(&self) -> String {
        crate::spec::parse(&self.name).map_or_else(|_| self.name.clone(), |s| s.name)
    }

    /// The same program with an I/O wait of `start_ns` before every rank's
    /// first operation and one of `end_ns` after its last (each left out when
    /// 0): the job holds its processors without computing while it is launched
    /// and while it is completed (a resource manager's launch and end).
    pub fn with_delays(mut self, start_ns: i64, end_ns: i64) -> Self {
        for ops in &mut self.ranks {
            if start_ns > 0 {
                ops.insert(0, Op::Io { ns: start_ns });
            }
            if end_ns > 0 {
                ops.push(Op::Io { ns: end_ns });
            }
        }
        self
    }

    /// The same program with compute noise of coefficient of variation `cv`.
    pub fn with_noise(mut self, cv: f64) -> Self {
        self.noise_cv = cv;
        self
    }

    /// The same program on a CPU `speed` times as fast as the reference CPU its
    /// compute is expressed for: every [`Op::Compute`] duration and every
    /// [`Op::Burst`] mean is divided by `speed` (rounded to the nearest ns).
    /// Message, I/O and memory operations are unchanged. `speed` must be finite
    /// and > 0 ([`crate::node::NodePlatform::validate`] checks a platform's).
    pub fn at_speed(&self, speed: f64) -> Program {
        let scale = |ns: i64| (ns as f64 / speed).round() as i64;
        let ranks = self
            .ranks
            .iter()
            .map(|ops| {
                ops.iter()
                    .map(|&op| match op {
                        Op::Compute { ns } => Op::Compute { ns: scale(ns) },
                        Op::Burst { mean_ns, k } => Op::Burst {
                            mean_ns: scale(mean_ns),
                            k,
                        },
                        other => other,
                    })
                    .collect()
            })
            .collect();
        Program {
            ranks,
            ..self.clone()
        }
    }
}

/// Builds the same sequence of operations for every rank of a `p`-process job; a
/// closure given the rank decides the rank-specific parts.
pub struct Builder {
    p: u32,
    ranks: Vec<Vec<Op>>,
    /// Tags for collective rounds are drawn from a counter so that consecutive
    /// collectives never match each other's messages.
    next_tag: u32,
}

/// MPICH 1.2.5's `MPIR_ALLTOALL_SHORT_MSG` (`src/coll/intra_fns_new.c`): an
/// alltoall whose total send data (per-pair bytes x processes) is at most this uses
/// recursive doubling.
pub const ALLTOALL_SHORT_MSG: u64 = 128;

/// MPICH 1.2.5's `MPIR_ALLTOALL_MEDIUM_MSG`: below this total, the all-at-once
/// algorithm; at or above it, pairwise exchange.
pub const ALLTOALL_MEDIUM_MSG: u64 = 262_144;

/// Tags at or above this value are reserved for collective rounds.
pub const COLLECTIVE_TAG_BASE: u32 = 1 << 24;

fn ceil_log2(p: u32) -> u32 {
    32 - (p.max(1) - 1).leading_zeros()
}

impl Builder {
    pub fn new(p: u32) -> Self {
        assert!(p >= 1, "a program has at least one rank");
        Self {
            p,
            ranks: vec![Vec::new(); p as usize],
            next_tag: COLLECTIVE_TAG_BASE,
        }
    }

    pub fn size(&self) -> u32 {
        self.p
    }

    /// Appends `f(rank)`'s operations to every rank.
    pub fn each(&mut self, mut f: impl FnMut(Rank) -> Vec<Op>) -> &mut Self {
        for r in 0..self.p {
            let ops = f(r);
            self.ranks[r as usize].extend(ops);
        }
        self
    }

    /// Appends the same operation to every rank.
    pub fn all(&mut self, op: Op) -> &mut Self {
        self.each(|_| vec![op])
    }

    fn tag(&mut self) -> u32 {
        let t = self.next_tag;
        self.next_tag += 1;
        t
    }

    /// Dissemination barrier: ceil(log2 p) rounds; in round k rank r sends to
    /// r + 2^k and receives from r - 2^k (mod p). p * ceil(log2 p) messages.
    pub fn barrier(&mut self) -> &mut Self {
        let rounds = ceil_log2(self.p);
        let p = self.p;
        let tags: Vec<u32> = (0..rounds).map(|_| self.tag()).collect();
        self.each(|r| {
            let mut ops = vec![Op::CollBegin(Collective::Barrier)];
            for (k, &tag) in tags.iter().enumerate() {
                let d = 1u32 << k;
                ops.push(Op::Isend {
                    to: (r + d) % p,
                    bytes: 0,
                    tag,
                });
                ops.push(Op::Recv {
                    from: Some((r + p - d % p) % p),
                    tag,
                });
                ops.push(Op::Wait);
            }
            ops.push(Op::CollEnd(Collective::Barrier));
            ops
        })
    }

    /// Recursive-doubling allreduce of `bytes` per process. With p not a power of
    /// two, the `p - 2^floor(log2 p)` extra ranks first send their data to a partner
    /// among the first ones and get the result back at the end (the MPICH scheme).
    pub fn allreduce(&mut self, bytes: u64) -> &mut Self {
        let p = self.p;
        let pof2 = if p.is_power_of_two() {
            p
        } else {
            1 << (ceil_log2(p) - 1)
        };
        let extra = p - pof2;
        let rounds = pof2.trailing_zeros();
        let (pre, post) = (self.tag(), self.tag());
        let tags: Vec<u32> = (0..rounds).map(|_| self.tag()).collect();
        self.each(|r| {
            let mut ops = vec![Op::CollBegin(Collective::Allreduce)];
            if r >= pof2 {
                // Extra rank: hand its data to r - pof2, wait for the result.
                ops.push(Op::Send {
                    to: r - pof2,
                    bytes,
                    tag: pre,
                });
                ops.push(Op::Recv {
                    from: Some(r - pof2),
                    tag: post,
                });
            } else {
                if r < extra {
                    ops.push(Op::Recv {
                        from: Some(r + pof2),
                        tag: pre,
                    });
                }
                for (k, &tag) in tags.iter().enumerate() {
                    let partner = r ^ (1 << k);
                    ops.push(Op::Isend {
                        to: partner,
                        bytes,
                        tag,
                    });
                    ops.push(Op::Recv {
                        from: Some(partner),
                        tag,
                    });
                    ops.push(Op::Wait);
                }
                if r < extra {
                    ops.push(Op::Send {
                        to: r + pof2,
                        bytes,
                        tag: post,
                    });
                }
            }
            ops.push(Op::CollEnd(Collective::Allreduce));
            ops
        })
    }

    /// `MPI_Alltoall` of `bytes` per pair as MPICH 1.2.5 does it (`intra_Alltoall` in
    /// `src/coll/intra_fns_new.c`, the default collectives of MPICH 1.2.5, which
    /// MPICH-GM 1.2.5 builds on). The algorithm depends on `n = bytes * p`, the data a
    /// process sends in all (its own block included):
    /// - `n <= 128` ([`ALLTOALL_SHORT_MSG`]): recursive doubling
    ///   ([`Builder::alltoall_short`]);
    /// - `128 < n < 262144` ([`ALLTOALL_MEDIUM_MSG`]): every receive and send posted
    ///   at once, then one wait ([`Builder::alltoall_post_all`]);
    /// - otherwise pairwise exchange: p - 1 `MPI_Sendrecv` steps, in step k rank r
    ///   sends to r + k and receives from r - k (mod p) (the source computes an
    ///   exclusive-or pairing for a power-of-two p, then overwrites it with these
    ///   shifts, so the shifts are what runs). p * (p - 1) messages.
    ///
    /// The copy of a process's own block is local and left out.
    pub fn alltoall(&mut self, bytes: u64) -> &mut Self {
        let n = bytes * u64::from(self.p);
        if n <= ALLTOALL_SHORT_MSG {
            return self.alltoall_short(bytes);
        }
        if n < ALLTOALL_MEDIUM_MSG {
            return self.alltoall_post_all(bytes);
        }
        let p = self.p;
        let tags: Vec<u32> = (1..p).map(|_| self.tag()).collect();
        self.each(|r| {
            let mut ops = vec![Op::CollBegin(Collective::Alltoall)];
            for (k, &tag) in (1..p).zip(&tags) {
                ops.push(Op::Isend {
                    to: (r + k) % p,
                    bytes,
                    tag,
                });
                ops.push(Op::Recv {
                    from: Some((r + p - k) % p),
                    tag,
                });
                ops.push(Op::Wait);
            }
            ops.push(Op::CollEnd(Collective::Alltoall));
            ops
        })
    }

    /// `MPI_Alltoallv` with `bytes` per pair as MPICH 1.2.5 does it at every size
    /// (`intra_Alltoallv`, `src/coll/intra_fns_new.c`): [`Builder::alltoall_post_all`].
    pub fn alltoallv(&mut self, bytes: u64) -> &mut Self {
        self.alltoall_post_all(bytes)
    }

    /// The all-at-once alltoall of MPICH 1.2.5: rank r posts its receives from
    /// r + 1, r + 2, ... (mod p), then its sends to r + 1, r + 2, ... in the same
    /// order, then waits for all of them (`MPI_Waitall`). Nothing orders the
    /// messages that reach one process, so they meet at its NIC (incast).
    /// p * (p - 1) messages.
    pub fn alltoall_post_all(&mut self, bytes: u64) -> &mut Self {
        let p = self.p;
        let tag = self.tag();
        self.each(|r| {
            let mut ops = vec![Op::CollBegin(Collective::Alltoall)];
            ops.extend((1..p).map(|k| Op::Irecv {
                from: Some((r + k) % p),
                tag,
            }));
            ops.extend((1..p).map(|k| Op::Isend {
                to: (r + k) % p,
                bytes,
                tag,
            }));
            ops.push(Op::Wait);
            ops.push(Op::CollEnd(Collective::Alltoall));
            ops
        })
    }

    /// The short-message alltoall of MPICH 1.2.5 (recursive doubling): in step i
    /// (mask m = 2^i) rank r exchanges everything it holds with r XOR m
    /// (`MPI_Sendrecv`; it holds `bytes * p` of its own at the start and adds what it
    /// receives). For p not a power of two, a rank whose partner does not exist gets
    /// the data of the step from the ranks of its subtree that have it, by recursive
    /// halving (blocking sends and receives). The data each message carries is
    /// worked out here by running the algorithm over all ranks.
    pub fn alltoall_short(&mut self, bytes: u64) -> &mut Self {
        let p = self.p;
        let mut held = vec![bytes * u64::from(p); p as usize];
        let mut last = vec![0u64; p as usize];
        let mut ops: Vec<Vec<Op>> = vec![vec![Op::CollBegin(Collective::Alltoall)]; p as usize];
        let (mut mask, mut i) = (1u32, 0u32);
        while mask < p {
            let tag = self.tag();
            let before = held.clone();
            for r in 0..p {
                let dst = r ^ mask;
                if dst < p {
                    let ru = r as usize;
                    ops[ru].push(Op::Isend {
                        to: dst,
                        bytes: before[ru],
                        tag,
                    });
                    ops[ru].push(Op::Recv {
                        from: Some(dst),
                        tag,
                    });
                    ops[ru].push(Op::Wait);
                    last[ru] = before[dst as usize];
                    held[ru] += last[ru];
                }
            }
            // Ranks whose subtree lacked partners get the step's data in a tree.
            let mut sub = mask >> 1;
            let mut k = i;
            while sub > 0 && k > 0 {
                k -= 1;
                let tag = self.tag();
                let sent = last.clone();
                for r in 0..p {
                    let dst_root = ((r ^ mask) >> i) << i;
                    let my_root = (r >> i) << i;
                    if dst_root + mask <= p {
                        continue;
                    }
                    let done = i64::from(p) - i64::from(my_root) - i64::from(mask);
                    let tree = i64::from((r >> (k + 1)) << (k + 1));
                    let peer = r ^ sub;
                    let (ri, pi) = (i64::from(r), i64::from(peer));
                    let ru = r as usize;
                    if pi > ri && ri < tree + done && pi >= tree + done {
                        ops[ru].push(Op::Send {
                            to: peer,
                            bytes: sent[ru],
                            tag,
                        });
                    } else if pi < ri && pi < tree + done && ri >= tree + done {
                        ops[ru].push(Op::Recv {
                            from: Some(peer),
                            tag,
                        });
                        last[ru] = sent[peer as usize];
                        held[ru] += last[ru];
                    }
                }
                sub >>= 1;
            }
            mask <<= 1;
            i += 1;
        }
        for (r, mut o) in ops.into_iter().enumerate() {
            o.push(Op::CollEnd(Collective::Alltoall));
            self.ranks[r].extend(o);
        }
        self
    }

    /// Binomial-tree broadcast of `bytes` from `root`: ceil(log2 p) rounds, p - 1 messages.
    pub fn bcast(&mut self, root: Rank, bytes: u64) -> &mut Self {
        let p = self.p;
        let tag = self.tag();
        self.each(|r| {
            let rel = (r + p - root) % p;
            let mut ops = vec![Op::CollBegin(Collective::Bcast)];
            // Receive from the parent: clear the lowest set bit of the relative rank.
            let mut mask = 1u32;
            while mask < p {
                if rel & mask != 0 {
                    ops.push(Op::Recv {
                        from: Some((rel - mask + root) % p),
                        tag,
                    });
                    break;
                }
                mask <<= 1;
            }
            // Send to children: relative ranks rel + m for m below the receive bit.
            mask >>= 1;
            while mask > 0 {
                if rel + mask < p {
                    ops.push(Op::Send {
                        to: (rel + mask + root) % p,
                        bytes,
                        tag,
                    });
                }
                mask >>= 1;
            }
            ops.push(Op::CollEnd(Collective::Bcast));
            ops
        })
    }

    /// Binomial-tree reduce of `bytes` to `root` (MPICH's `MPI_Reduce`: in round k a
    /// rank whose relative rank has bit k set sends its partial result to the rank
    /// 2^k below and stops; the others receive from 2^k above). p - 1 messages.
    pub fn reduce(&mut self, root: Rank, bytes: u64) -> &mut Self {
        let p = self.p;
        let tag = self.tag();
        self.each(|r| {
            let rel = (r + p - root) % p;
            let mut ops = vec![Op::CollBegin(Collective::Reduce)];
            let mut mask = 1u32;
            while mask < p {
                if rel & mask != 0 {
                    ops.push(Op::Send {
                        to: (rel - mask + root) % p,
                        bytes,
                        tag,
                    });
                    break;
                }
                if rel + mask < p {
                    ops.push(Op::Recv {
                        from: Some((rel + mask + root) % p),
                        tag,
                    });
                }
                mask <<= 1;
            }
            ops.push(Op::CollEnd(Collective::Reduce));
            ops
        })
    }

    /// Wraps everything appended by `body` in a loop repeated `count` times.
    pub fn repeat(&mut self, count: u32, body: impl FnOnce(&mut Builder)) -> &mut Self {
        let starts: Vec<usize> = self.ranks.iter().map(Vec::len).collect();
        body(self);
        for (ops, start) in self.ranks.iter_mut().zip(starts) {
            let len = (ops.len() - start) as u32;
            if len > 0 {
                ops.insert(start, Op::Loop { count, len });
            }
        }
        self
    }

    pub fn build(self, name: &str, memory_mb: f64) -> Program {
        Program {
            name: name.to_string(),
            ranks: self.ranks,
            memory_mb,
            noise_cv: 0.0,
        }
    }
}

/// Sum of `f` over a rank's operations, loops counted with their repetitions and
/// the body of a [`Op::LoopUntil`] once.
fn sum_ops(ops: &[Op], f: &impl Fn(&Op) -> i64) -> i64 {
    let mut total = 0i64;
    let mut i = 0;
    while i < ops.len() {
        match ops[i] {
            Op::Loop { count, len } => {
                total += count as i64 * sum_ops(&ops[i + 1..i + 1 + len as usize], f);
                i += 1 + len as usize;
            }
            ref op => {
                total += f(op);
                i += 1;
            }
        }
    }
    total
}

/// Total compute time of a rank's operations, loops counted with their repetitions;
/// the body of a [`Op::LoopUntil`] counted once and a [`Op::Burst`] at its mean (the
/// run decides both: see [`static_compute_ns`]).
pub fn compute_ns(ops: &[Op]) -> i64 {
    sum_ops(ops, &|op| match *op {
        Op::Compute { ns } | Op::Burst { mean_ns: ns, .. } => ns.max(0),
        _ => 0,
    })
}

/// Bytes a rank sends (`Send`, `Isend`, `Reply`), loops counted with their
/// repetitions; the body of a [`Op::LoopUntil`] counted once.
pub fn bytes_sent(ops: &[Op]) -> u64 {
    sum_ops(ops, &|op| match *op {
        Op::Send { bytes, .. } | Op::Isend { bytes, .. } | Op::Reply { bytes, .. } => bytes as i64,
        _ => 0,
    }) as u64
}

/// The compute time a rank will ask for whatever happens during the run, or `None`
/// when the run decides it (a [`Op::LoopUntil`] or a drawn [`Op::Burst`]).
pub fn static_compute_ns(ops: &[Op]) -> Option<i64> {
    ops.iter()
        .all(|op| !matches!(op, Op::LoopUntil { .. } | Op::Burst { .. }))
        .then(|| compute_ns(ops))
}

/// Expands loops: the flat operation sequence a rank executes (for tests and small
/// programs). The body of a [`Op::LoopUntil`] appears once, after its marker.
pub fn flatten(ops: &[Op]) -> Vec<Op> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < ops.len() {
        match ops[i] {
            Op::Loop { count, len } => {
                let body = flatten(&ops[i + 1..i + 1 + len as usize]);
                for _ in 0..count {
                    out.extend_from_slice(&body);
                }
                i += 1 + len as usize;
            }
            op => {
                out.push(op);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn the_application_is_the_name_of_the_spec_string() {
        let named = |name: &str| Program {
            name: name.into(),
            ranks: Vec::new(),
            memory_mb: 0.0,
            noise_cv: 0.0,
        };
        assert_eq!(named("Workpile[unit=2.4]").app(), "Workpile");
        assert_eq!(named(" io-bound ").app(), "io-bound");
        assert_eq!(named("lee-Enum").app(), "lee-Enum");
        // Not a spec string: the whole name.
        assert_eq!(named("a b[").app(), "a b[");
    }

    #[test]
    fn at_speed_scales_compute_and_bursts_only() {
        let p = Program {
            name: "t".into(),
            ranks: vec![vec![
                Op::Loop { count: 3, len: 2 },
                Op::Compute { ns: 1000 },
                Op::Send {
                    to: 1,
                    bytes: 64,
                    tag: 0,
                },
                Op::Burst { mean_ns: 5, k: 5 },
                Op::Io { ns: 700 },
            ]],
            memory_mb: 1.0,
            noise_cv: 0.0,
        };
        let q = p.at_speed(0.5);
        assert_eq!(compute_ns(&q.ranks[0]), 2 * 3 * 1000 + 10);
        assert_eq!(bytes_sent(&q.ranks[0]), 3 * 64);
        assert_eq!(q.ranks[0][4], Op::Io { ns: 700 });
        assert_eq!(q.ranks[0][3], Op::Burst { mean_ns: 10, k: 5 });
        // Rounded to the nearest ns.
        assert_eq!(p.at_speed(3.0).ranks[0][1], Op::Compute { ns: 333 });
        assert_eq!(p.at_speed(1.0), p);
    }

    /// Every send has exactly one matching receive (same tag, same pair).
    fn matched(p: &Program) -> usize {
        let mut sends: HashMap<(Rank, Rank, u32), i64> = HashMap::new();
        for (r, ops) in p.ranks.iter().enumerate() {
            for op in flatten(ops) {
                match op {
                    Op::Send { to, tag, .. } | Op::Isend { to, tag, .. } => {
                        *sends.entry((r as u32, to, tag)).or_default() += 1
                    }
                    Op::Recv { from: Some(f), tag } | Op::Irecv { from: Some(f), tag } => {
                        *sends.entry((f, r as u32, tag)).or_default() -= 1
                    }
                    _ => {}
                }
            }
        }
        assert!(
            sends.values().all(|&v| v == 0),
            "unmatched messages in {}: {sends:?}",
            p.name
        );
        p.ranks
            .iter()
            .map(|ops| {
                flatten(ops)
                    .iter()
                    .filter(|o| matches!(o, Op::Send { .. } | Op::Isend { .. }))
                    .count()
            })
            .sum()
    }

    #[test]
    fn collective_message_counts_follow_their_algorithms() {
        for p in [1u32, 2, 3, 4, 8, 9, 16] {
            let lg = ceil_log2(p) as usize;
            let n = p as usize;
            let mut b = Builder::new(p);
            b.barrier();
            assert_eq!(matched(&b.build("barrier", 0.0)), n * lg, "barrier p={p}");
            // Medium (post all) and long (pairwise): one message per ordered pair.
            for bytes in [1_000, 300_000] {
                let mut b = Builder::new(p);
                b.alltoall(bytes);
                assert_eq!(
                    matched(&b.build("alltoall", 0.0)),
                    n * (n - 1),
                    "alltoall {bytes} p={p}"
                );
            }
            // Short (recursive doubling): log2 p exchanges per rank at a power of two.
            if p.is_power_of_two() {
                let mut b = Builder::new(p);
                b.alltoall(8);
                assert_eq!(matched(&b.build("alltoall", 0.0)), n * lg, "short p={p}");
            }
            let mut b = Builder::new(p);
            b.bcast(p / 2, 8);
            assert_eq!(matched(&b.build("bcast", 0.0)), n - 1, "bcast p={p}");
            let mut b = Builder::new(p);
            b.allreduce(8);
            let pof2 = if p.is_power_of_two() {
                p
            } else {
                1 << (lg - 1)
            } as usize;
            let extra = n - pof2;
            assert_eq!(
                matched(&b.build("allreduce", 0.0)),
                pof2 * pof2.trailing_zeros() as usize + 2 * extra,
                "allreduce p={p}"
            );
        }
    }

    /// Bytes each rank is sent, over the whole program.
    fn received(prog: &Program) -> Vec<u64> {
        let mut got = vec![0u64; prog.ranks.len()];
        for ops in &prog.ranks {
            for op in flatten(ops) {
                if let Op::Send { to, bytes, .. } | Op::Isend { to, bytes, .. } = op {
                    got[to as usize] += bytes;
                }
            }
        }
        got
    }

    #[test]
    fn alltoall_picks_mpich_125s_algorithm_by_total_size() {
        // 4 ranks: n = 4 x bytes. 32 bytes (n = 128): recursive doubling, rank 0
        // exchanges 128 bytes with rank 1, then 256 with rank 2.
        let mut b = Builder::new(4);
        b.alltoall(32);
        let short = b.build("short", 0.0);
        let sends: Vec<(Rank, u64)> = flatten(&short.ranks[0])
            .iter()
            .filter_map(|o| match *o {
                Op::Isend { to, bytes, .. } => Some((to, bytes)),
                _ => None,
            })
            .collect();
        assert_eq!(sends, vec![(1, 128), (2, 256)]);
        // 33 bytes (n = 132): all receives posted, then all sends, then one wait.
        let mut b = Builder::new(4);
        b.alltoall(33);
        let medium = b.build("medium", 0.0);
        let ops = &medium.ranks[1];
        let kinds: Vec<String> = ops
            .iter()
            .map(|o| match o {
                Op::Irecv { from: Some(f), .. } => format!("r{f}"),
                Op::Isend { to, .. } => format!("s{to}"),
                Op::Wait => "w".into(),
                _ => "c".into(),
            })
            .collect();
        assert_eq!(kinds, ["c", "r2", "r3", "r0", "s2", "s3", "s0", "w", "c"]);
        // 65,536 bytes (n = 262,144): pairwise exchange, a wait per step.
        let mut b = Builder::new(4);
        b.alltoall(65_536);
        let long = b.build("long", 0.0);
        assert_eq!(
            flatten(&long.ranks[0])
                .iter()
                .filter(|o| matches!(o, Op::Wait))
                .count(),
            3
        );
        // The alltoallv posts all at once at every size.
        let mut b = Builder::new(4);
        b.alltoallv(65_536);
        assert_eq!(b.build("v", 0.0).ranks[0].len(), 3 + 3 + 1 + 2);
    }

    #[test]
    fn the_short_alltoall_delivers_every_block_at_any_size() {
        // Whatever p (powers of two or not, with MPICH's recursive-halving fix-up),
        // each rank ends up with the p - 1 blocks of the others: it receives
        // bytes x p x (p - 1) in all (blocks travel in bundles of bytes x p).
        for p in 1u32..=20 {
            let bytes = 128 / u64::from(p);
            let mut b = Builder::new(p);
            b.alltoall_short(bytes);
            let prog = b.build("short", 0.0);
            let n = u64::from(p);
            for (r, got) in received(&prog).into_iter().enumerate() {
                assert_eq!(got, bytes * n * (n - 1), "p={p} rank {r}");
            }
        }
    }

    #[test]
    fn loops_repeat_their_body() {
        let mut b = Builder::new(2);
        b.repeat(3, |b| {
            b.all(Op::Compute { ns: 5 });
            b.barrier();
        });
        let p = b.build("loop", 1.0);
        assert_eq!(matched(&p), 2 * 3);
        let flat = flatten(&p.ranks[0]);
        assert_eq!(compute_ns(&p.ranks[0]), 15);
        assert_eq!(
            flat.iter()
                .filter(|o| matches!(o, Op::Compute { .. }))
                .count(),
            3
        );
        assert!(matches!(p.ranks[0][0], Op::Loop { count: 3, .. }));
    }
}
