//! Waits of the process-level engine: a process going to sleep off its CPU and
//! being woken (interrupt or disk completion), what a waiting process waits for
//! ([`Cond`]), whether it holds, what a satisfied wait consumes, the start of a
//! wait (the node policy's wait mode: spin, spin then block, block, yield) and
//! the re-check when a message, acknowledgement or completion arrives.
//!
//! A yielding wait ([`WaitMode::Yield`]) spins while no other process of its node
//! is runnable and otherwise is *parked*: off its CPU in the blocked state (the
//! native scheduler does not see it), with no interrupt to wake it. It becomes
//! runnable again, without an interrupt, when its condition holds (it notices at
//! its next dispatch) or when a CPU of its node would be idle (it spins there).

use super::net::Landed;
use super::observe::Signal;
use super::{Apply, Cond, PState, Pid, Sim, Stop, View, Waiting, Wake};
use cosched_contract::node::{DequeueReason, EnqueueReason, Ops, WaitEndCause, WaitKind, WaitMode};
use cosched_des::SimTime;
use cosched_model::program::Rank;

impl Sim<'_> {
    /// The running process `pid` gives up its CPU and sleeps.
    pub(super) fn block(&mut self, pid: Pid, now: SimTime) {
        if self.sleep_off_cpu(pid, now) {
            let node = self.procs[pid as usize].node;
            self.schedule(node, now);
        }
    }

    /// [`Sim::block`] without refilling the CPU (the caller does); returns whether
    /// `pid` was running.
    pub(super) fn sleep_off_cpu(&mut self, pid: Pid, now: SimTime) -> bool {
        let (node, cpu) = self.where_running(pid);
        if cpu == u32::MAX {
            return false;
        }
        self.account(node, cpu, now);
        self.release_cpu(node, cpu, pid, Stop::Blocked, now);
        self.slot_block(pid);
        let p = &mut self.procs[pid as usize];
        p.blocked_at = now;
        if let Some(w) = &mut p.wait {
            w.blocked = true;
        }
        let why = match p.wait {
            Some(Waiting {
                kind: Some(kind), ..
            }) => DequeueReason::Blocked(kind),
            _ => DequeueReason::Io,
        };
        self.hook_dequeue(pid, why, now);
        true
    }

    /// Wakes a blocked process (NIC interrupt or disk completion).
    pub(super) fn wake(&mut self, pid: Pid, why: EnqueueReason, now: SimTime) {
        let p = &self.procs[pid as usize];
        if p.state != PState::Blocked || p.paging {
            return;
        }
        self.set_state(pid, PState::Ready, now);
        let p = &mut self.procs[pid as usize];
        p.cpu_left += self.interrupt_ns;
        let slept = now - p.blocked_at;
        let node = p.node;
        self.counters.interrupts += 1;
        self.hook_enqueue(pid, why, now);
        self.nodes[node as usize]
            .sched
            .enqueue(pid, Wake::Woken { slept }, now);
        if !self.preempt_for(node, pid, now) {
            self.slot_preempt(pid, now);
        }
        self.schedule(node, now);
    }

    pub(super) fn where_running(&self, pid: Pid) -> (u32, u32) {
        let p = &self.procs[pid as usize];
        match p.state {
            PState::Running(cpu) => (p.node, cpu),
            _ => (p.node, u32::MAX),
        }
    }

    pub(super) fn find_msg(
        &self,
        pid: Pid,
        from: Option<Rank>,
        tag: u32,
        skip: &[usize],
    ) -> Option<usize> {
        self.procs[pid as usize]
            .mailbox
            .iter()
            .enumerate()
            .position(|(k, &(f, t, _, _))| {
                t == tag && from.is_none_or(|x| x == f) && !skip.contains(&k)
            })
    }

    pub(super) fn satisfied(&self, pid: Pid, cond: Cond) -> bool {
        let p = &self.procs[pid as usize];
        match cond {
            Cond::Msg { from, tag } => self.find_msg(pid, from, tag, &[]).is_some(),
            Cond::MsgOr { from, tag, stop } => {
                self.find_msg(pid, from, tag, &[]).is_some()
                    || self.find_msg(pid, from, stop, &[]).is_some()
            }
            Cond::Ack => p.acks_pending == 0,
            Cond::Completion => {
                p.acks_pending == 0 && p.sends_pending == 0 && self.posted_matched(pid)
            }
            Cond::Io => false,
        }
    }

    /// Whether every posted non-blocking receive of `pid` has a distinct buffered
    /// message to complete it.
    pub(super) fn posted_matched(&self, pid: Pid) -> bool {
        let p = &self.procs[pid as usize];
        match p.posted.as_slice() {
            [] => return true,
            &[(from, tag)] => return self.find_msg(pid, from, tag, &[]).is_some(),
            _ => {}
        }
        let mut used = Vec::with_capacity(p.posted.len());
        for &(from, tag) in &p.posted {
            match self.find_msg(pid, from, tag, &used) {
                Some(k) => used.push(k),
                None => return false,
            }
        }
        true
    }

    /// The condition holds: consume what it waited for and charge the CPU cost.
    pub(super) fn resume_after_wait(&mut self, pid: Pid, cond: Cond) {
        match cond {
            Cond::Msg { from, tag } => self.consume(pid, from, tag),
            Cond::MsgOr { from, tag, stop } => {
                // The earlier of the two kinds in arrival order.
                let p = &self.procs[pid as usize];
                let first = p
                    .mailbox
                    .iter()
                    .find(|&&(f, t, _, _)| (t == tag || t == stop) && from.is_none_or(|x| x == f))
                    .map(|&(_, t, _, _)| t)
                    .expect("a matching message is buffered");
                self.consume(pid, from, first);
                if first == stop {
                    // Leave the innermost LoopUntil: resume after its body.
                    let p = &mut self.procs[pid as usize];
                    let (depth, _) = p.untils.pop().expect("inside a LoopUntil");
                    p.pc = p.loops[depth].1;
                    p.loops.truncate(depth);
                }
            }
            Cond::Completion => {
                for (from, tag) in std::mem::take(&mut self.procs[pid as usize].posted) {
                    self.consume(pid, from, tag);
                }
            }
            Cond::Ack | Cond::Io => {}
        }
    }

    /// Takes the first matching message out of `pid`'s buffer, paying the receive
    /// overhead and the per-byte CPU of its bytes (an unexpected eager message's
    /// two copies: [`super::net`]).
    pub(super) fn consume(&mut self, pid: Pid, from: Option<Rank>, tag: u32) {
        let k = self
            .find_msg(pid, from, tag, &[])
            .expect("a matching message is buffered");
        let (f, _, bytes, landed) = self.procs[pid as usize].mailbox.remove(k);
        let copies = if landed == Landed::Twice {
            self.procs[pid as usize].saved_bytes -= bytes;
            2
        } else {
            1
        };
        let per_byte = self.bytes_cpu_ns(bytes, copies);
        self.byte_cpu_ns += per_byte;
        let p = &mut self.procs[pid as usize];
        p.last_from = Some(f);
        p.cpu_left += self.recv_ns + per_byte;
        self.counters.consumed += 1;
    }

    pub(super) fn begin_wait(&mut self, pid: Pid, cond: Cond, kind: WaitKind, now: SimTime) {
        let node = self.procs[pid as usize].node;
        // Inside an MPI call, on its CPU: answer the rendezvous its receives match.
        self.answer_rts(pid, cond, now);
        let mode = {
            let view = View {
                now,
                node: &self.nodes[node as usize],
                procs: &self.procs,
            };
            self.policies[node as usize].wait_mode(&view, pid, kind)
        };
        self.procs[pid as usize].wait = Some(Waiting {
            cond,
            kind: Some(kind),
            mode,
            since: now,
            spin_at: self.procs[pid as usize].spin_ns,
            blocked: false,
        });
        self.signal(Signal::WaitBegan { pid, kind });
        self.with_policy(node, now, Apply::NextPoint, |pol, v, out| {
            pol.on_wait_begin(v, pid, kind, out)
        });
        let waits = self.procs[pid as usize].wait.is_some();
        if waits
            && (mode == WaitMode::Block || mode == WaitMode::Yield && self.others_runnable(node))
        {
            self.block(pid, now);
        }
        self.check_program_deadlock(pid, now);
    }

    /// A message, acknowledgement or completion changed what `pid` may be waiting for.
    pub(super) fn condition_changed(&mut self, pid: Pid, now: SimTime) {
        let Some(w) = self.procs[pid as usize].wait else {
            return;
        };
        if w.cond == Cond::Io {
            return;
        }
        if !self.satisfied(pid, w.cond) {
            self.check_program_deadlock(pid, now);
            return;
        }
        match self.procs[pid as usize].state {
            PState::Running(cpu) => {
                let node = self.procs[pid as usize].node;
                self.account(node, cpu, now);
                self.procs[pid as usize].wait = None;
                self.resume_after_wait(pid, w.cond);
                self.plan(node, cpu, now);
                self.hook_wait_end(pid, w, WaitEndCause::Spinning, now);
            }
            // A parked yielder: runnable again; it notices when dispatched. One
            // blocked in a page fault is not parked: it stays in the page-in queue
            // and its wait ends like a blocked one's (below).
            PState::Blocked if w.mode == WaitMode::Yield && !self.procs[pid as usize].paging => {
                self.unpark(pid, now);
                let node = self.procs[pid as usize].node;
                self.schedule(node, now);
            }
            PState::Blocked => {
                self.procs[pid as usize].wait = None;
                self.resume_after_wait(pid, w.cond);
                self.wake(pid, EnqueueReason::Woken, now);
                self.hook_wait_end(pid, w, WaitEndCause::Woken, now);
            }
            // Queued while spinning: it notices when it runs again.
            PState::Ready | PState::Done => {}
        }
    }

    /// Whether a process of `node` is runnable and waits for a CPU (a yielding
    /// wait then gives its CPU up).
    pub(super) fn others_runnable(&self, node: u32) -> bool {
        self.nodes[node as usize].sched.runnable() > 0
    }

    /// Whether `pid` is in a yielding wait whose condition does not hold, with no
    /// CPU work left to do first (it would yield at its next poll).
    pub(super) fn yields(&self, pid: Pid) -> bool {
        let p = &self.procs[pid as usize];
        p.cpu_left == 0
            && p.wait.is_some_and(|w| {
                w.mode == WaitMode::Yield && w.cond != Cond::Io && !self.satisfied(pid, w.cond)
            })
    }

    /// The parked yielder `pid` becomes runnable (no interrupt: it was never
    /// asleep in the kernel); the caller schedules its node. The native scheduler
    /// places it as a process that slept since it was parked.
    fn unpark(&mut self, pid: Pid, now: SimTime) {
        self.set_state(pid, PState::Ready, now);
        let p = &self.procs[pid as usize];
        let (node, slept) = (p.node, now - p.blocked_at);
        self.hook_enqueue(pid, EnqueueReason::Woken, now);
        self.nodes[node as usize]
            .sched
            .enqueue(pid, Wake::Woken { slept }, now);
        // A yielder running on a CPU of the node gives it up for this one; nothing
        // else is preempted (no wake-up happened in the kernel).
        self.displace_yielder(node, now);
    }

    /// A process of `node` that spins in a yielding wait (on a CPU, condition
    /// unmet) gives its CPU up, parked; the caller refills the CPU. Returns
    /// whether one did.
    pub(super) fn displace_yielder(&mut self, node: u32, now: SimTime) -> bool {
        let n = &self.nodes[node as usize];
        let Some(y) = n
            .cpus
            .iter()
            .filter_map(|c| c.cur)
            .find(|&r| self.yields(r))
        else {
            return false;
        };
        self.sleep_off_cpu(y, now)
    }

    /// A CPU of `node` would be idle: the yielder parked there longest (then the
    /// lowest pid) becomes runnable to spin on it. Returns whether there was one.
    pub(super) fn unpark_for_idle_cpu(&mut self, node: u32, now: SimTime) -> bool {
        let parked = self.nodes[node as usize]
            .procs
            .iter()
            .copied()
            .filter(|&q| {
                let p = &self.procs[q as usize];
                p.state == PState::Blocked
                    && !p.paging
                    && p.wait
                        .is_some_and(|w| w.mode == WaitMode::Yield && w.blocked)
            })
            .min_by_key(|&q| (self.procs[q as usize].blocked_at, q));
        let Some(pid) = parked else {
            return false;
        };
        self.unpark(pid, now);
        true
    }

    /// A NIC acknowledgement reached the sender `to`: the policy's `on_ack` op
    /// (with [`Ops::ON_ACK`]; its boosts are counted as `ack_boosts`), then the
    /// wait it may end.
    pub(super) fn ack_arrived(&mut self, to: Pid, now: SimTime) {
        self.procs[to as usize].acks_pending -= 1;
        let node = self.procs[to as usize].node;
        if self.nodes[node as usize].ops.contains(Ops::ON_ACK) {
            let running = matches!(self.procs[to as usize].state, PState::Running(_));
            let boosts = self.counters.boosts;
            self.with_policy(node, now, Apply::Now, |p, v, out| {
                p.on_ack(v, to, running, out)
            });
            self.counters.ack_boosts += self.counters.boosts - boosts;
        }
        self.condition_changed(to, now);
    }
}

#[cfg(test)]
#[path = "wait_tests.rs"]
pub(super) mod tests;
