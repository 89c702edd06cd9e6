//! The interpreter of the program IR ([`cosched_model::program::Op`]): a
//! running process with no CPU work left executes its operations until one
//! needs CPU time (compute, a drawn burst, a send's or receive's overhead),
//! waits, blocks or ends. Loops are expanded here; compute bursts get their
//! noise (log-normal per program, Erlang bursts, OS timer ticks) from the
//! process's seeded streams.

use super::{After, Apply, Cond, DequeueReason, Ev, Pid, SegmentKind, Sim, Stop, Waiting};
use cosched_contract::node::{WaitKind, WaitMode};
use cosched_des::{RngStream, SimTime};
use cosched_model::program::{Op, Rank};

/// An Erlang-`k` draw of mean `mean_ns` (the sum of `k` exponential phases of mean
/// `mean_ns / k`), rounded to the nanosecond.
pub(super) fn erlang(mean_ns: i64, k: u32, rng: &mut RngStream) -> i64 {
    use rand::Rng;
    let k = k.max(1);
    let phase = mean_ns.max(0) as f64 / k as f64;
    let sum: f64 = (0..k).map(|_| -(1.0 - rng.gen::<f64>()).ln() * phase).sum();
    sum.round() as i64
}

/// A compute burst of `ns` scaled by a log-normal factor of mean 1 and log-sigma
/// `sigma` (Box-Muller on the process's stream).
fn noisy(ns: i64, sigma: f64, rng: &mut RngStream) -> i64 {
    use rand::Rng;
    let (u1, u2): (f64, f64) = (rng.gen::<f64>().max(f64::MIN_POSITIVE), rng.gen());
    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
    let factor = (sigma * z - sigma * sigma / 2.0).exp();
    (ns.max(0) as f64 * factor).round() as i64
}

impl Sim<'_> {
    /// Executes operations of a running process that has no CPU work left, until
    /// it needs CPU time, waits, blocks or ends.
    pub(super) fn step(&mut self, pid: Pid, now: SimTime) {
        loop {
            let p = &mut self.procs[pid as usize];
            debug_assert!(p.cpu_left == 0 && p.wait.is_none());
            if let After::Depart {
                to,
                bytes,
                tag,
                blocking,
            } = std::mem::replace(&mut p.after, After::Next)
            {
                self.depart(pid, to, bytes, tag, blocking, now);
                // MPICH-GM's sends poll GM's receive queue once the data is out.
                self.poll(pid, None, false);
                if blocking && self.procs[pid as usize].acks_pending > 0 {
                    self.begin_wait(pid, Cond::Ack, WaitKind::SendAck, now);
                    return;
                }
                continue;
            }
            let Some(op) = self.next_op(pid) else {
                let (node, cpu) = self.where_running(pid);
                self.release_cpu(node, cpu, pid, Stop::Blocked, now);
                self.hook_dequeue(pid, DequeueReason::Finished, now);
                self.finish_rank(pid, now);
                self.schedule(node, now);
                return;
            };
            if !self.exec(pid, op, now) {
                return;
            }
        }
    }

    /// Executes `op` of the running process `pid`. Returns whether it goes on to
    /// its next operation at once (`false`: it needs CPU time, waits or blocked).
    fn exec(&mut self, pid: Pid, op: Op, now: SimTime) -> bool {
        match op {
            Op::Compute { ns } => self.exec_compute(pid, ns, now),
            Op::Burst { mean_ns, k } => self.exec_burst(pid, mean_ns, k),
            Op::Send { to, bytes, tag } | Op::Isend { to, bytes, tag } => {
                self.exec_send(pid, to, bytes, tag, matches!(op, Op::Send { .. }))
            }
            Op::Reply { bytes, tag } => {
                let to = self.procs[pid as usize]
                    .last_from
                    .expect("a reply follows a receive");
                self.exec_send(pid, to, bytes, tag, true)
            }
            Op::Recv { from, tag } => {
                let cond = match self.procs[pid as usize].untils.last() {
                    Some(&(_, stop)) => Cond::MsgOr { from, tag, stop },
                    None => Cond::Msg { from, tag },
                };
                // Posted, then polled until it completes (MPICH's `MPID_RecvContig`).
                self.poll(pid, Some(cond), true);
                self.try_resume(pid, cond).unwrap_or_else(|| {
                    self.begin_wait(pid, cond, WaitKind::Recv, now);
                    false
                })
            }
            Op::Irecv { from, tag } => {
                self.procs[pid as usize].posted.push((from, tag));
                true
            }
            Op::Wait => {
                self.poll(pid, Some(Cond::Completion), true);
                self.try_resume(pid, Cond::Completion).unwrap_or_else(|| {
                    let kind = if self.posted_matched(pid) {
                        WaitKind::SendCompletion
                    } else {
                        WaitKind::RecvCompletion
                    };
                    self.begin_wait(pid, Cond::Completion, kind, now);
                    false
                })
            }
            Op::CollBegin(_) | Op::CollEnd(_) => {
                let node = self.procs[pid as usize].node;
                let enter = matches!(op, Op::CollBegin(_));
                self.with_policy(node, now, Apply::NextPoint, |pol, v, out| {
                    pol.on_collective(v, pid, enter, out)
                });
                true
            }
            Op::Io { ns } => {
                self.exec_io(pid, ns, now);
                false
            }
            Op::Loop { .. } | Op::LoopUntil { .. } => {
                unreachable!("next_op expands loops")
            }
        }
    }

    /// A compute burst of `ns`, with the program's noise and the OS noise it
    /// meets; whether it took no time.
    fn exec_compute(&mut self, pid: Pid, ns: i64, now: SimTime) -> bool {
        let p = &mut self.procs[pid as usize];
        let ns = match &mut p.noise {
            Some((rng, sigma)) => noisy(ns, *sigma, rng),
            None => ns.max(0),
        };
        let touching = ns;
        let ns = ns + self.os_noise_extra(pid, ns, now);
        self.counters.compute_ns += ns;
        self.procs[pid as usize].compute_ns += ns;
        if ns > 0 {
            // The OS noise is kernel work: it touches none of the program's pages.
            self.procs[pid as usize].cpu_left = ns;
            self.procs[pid as usize].pages.compute_ns = touching;
            return false;
        }
        true
    }

    /// An Erlang-`k` burst of mean `mean_ns` drawn from the process's stream
    /// `"burst/{job}/{rank}"`; whether it took no time.
    fn exec_burst(&mut self, pid: Pid, mean_ns: i64, k: u32) -> bool {
        let p = &mut self.procs[pid as usize];
        let (job, rank) = (p.job, p.rank);
        let streams = &self.streams;
        let rng = p
            .bursts
            .get_or_insert_with(|| streams.stream(&format!("burst/{job}/{rank}")));
        let ns = erlang(mean_ns, k, rng);
        self.counters.compute_ns += ns;
        p.compute_ns += ns;
        if ns > 0 {
            p.cpu_left = ns;
            p.pages.compute_ns = ns;
            return false;
        }
        true
    }

    /// A send: the message departs once the send overhead and the per-byte CPU of
    /// its bytes are paid; whether that costs nothing.
    fn exec_send(&mut self, pid: Pid, to: Rank, bytes: u64, tag: u32, blocking: bool) -> bool {
        let per_byte = self.bytes_cpu_ns(bytes, 1);
        self.byte_cpu_ns += per_byte;
        let send_ns = self.send_ns + per_byte;
        let p = &mut self.procs[pid as usize];
        p.after = After::Depart {
            to,
            bytes,
            tag,
            blocking,
        };
        if send_ns > 0 {
            p.cpu_left = send_ns;
            return false;
        }
        true
    }

    /// If `cond` holds, consumes what it waited for and returns whether the
    /// process goes on at once (no receive overhead to pay); `None` if it must wait.
    fn try_resume(&mut self, pid: Pid, cond: Cond) -> Option<bool> {
        if !self.satisfied(pid, cond) {
            return None;
        }
        self.resume_after_wait(pid, cond);
        Some(self.procs[pid as usize].cpu_left <= 0)
    }

    /// A disk burst of `ns`: queued on the node's disk; the process blocks until
    /// it completes.
    fn exec_io(&mut self, pid: Pid, ns: i64, now: SimTime) {
        let node = self.procs[pid as usize].node as usize;
        let start = self.nodes[node].disk_free_at.max(now);
        let done = start + SimTime(ns.max(0));
        self.nodes[node].disk_free_at = done;
        self.record_disk(node as u32, pid, start, done, SegmentKind::Io);
        self.procs[pid as usize].wait = Some(Waiting {
            cond: Cond::Io,
            kind: None,
            mode: WaitMode::Block,
            since: now,
            spin_at: 0,
            blocked: false,
        });
        self.q
            .schedule(done, Ev::IoDone { to: pid })
            .expect("future");
        self.block(pid, now);
    }

    /// The OS noise a compute burst of `ns` that `pid` starts now meets ([`osnoise`]).
    pub(super) fn os_noise_extra(&mut self, pid: Pid, ns: i64, now: SimTime) -> i64 {
        if !self.os_noise.is_on() {
            return 0;
        }
        let p = &mut self.procs[pid as usize];
        let phase = self.nodes[p.node as usize].tick_phase;
        let (job, rank, streams) = (p.job, p.rank, &self.streams);
        let rng = p
            .os_noise_rng
            .get_or_insert_with(|| streams.stream(&format!("os-noise/{job}/{rank}")));
        self.os_noise.extra(ns, now, phase, rng)
    }

    /// The next operation of a process, expanding loops; `None` at the end.
    pub(super) fn next_op(&mut self, pid: Pid) -> Option<Op> {
        let p = &mut self.procs[pid as usize];
        loop {
            if let Some(&(start, end, left)) = p.loops.last() {
                if p.pc == end {
                    if p.untils
                        .last()
                        .is_some_and(|&(d, _)| d + 1 == p.loops.len())
                    {
                        p.pc = start; // a LoopUntil repeats until its stop message
                    } else if left > 0 {
                        p.loops.last_mut().expect("nonempty").2 -= 1;
                        p.pc = start;
                    } else {
                        p.loops.pop();
                    }
                    continue;
                }
            }
            let op = *p.ops.get(p.pc)?;
            p.pc += 1;
            if let Op::Loop { count, len } = op {
                if count == 0 || len == 0 {
                    p.pc += len as usize;
                } else {
                    p.loops.push((p.pc, p.pc + len as usize, count - 1));
                }
                continue;
            }
            if let Op::LoopUntil { stop_tag, len } = op {
                if len > 0 {
                    p.untils.push((p.loops.len(), stop_tag));
                    p.loops.push((p.pc, p.pc + len as usize, 0));
                }
                continue;
            }
            return Some(op);
        }
    }
}
