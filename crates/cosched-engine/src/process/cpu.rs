//! CPUs of the process-level engine: filling a node's idle CPUs from its native
//! scheduler, charging a CPU's time to its running process (and the pages it
//! touched, [`super::paging`]), taking a process off its CPU,
//! giving a CPU to the process the native scheduler picked (context switch, the
//! policy's `running` op, the re-check of a wait), planning the running process's
//! next segment end (its CPU work, spin deadline or slice), the segment end
//! itself, and wake-up preemption. The observers ([`super::observe`]) are told
//! of progress, and of every dispatch and release before it changes what a
//! node's CPUs run.

use super::observe::{Signal, Signals};
use super::{Apply, Cond, PState, Pick, Pid, Sim, Stop, Waiting, Wake};
use cosched_contract::node::{Ops, WaitEndCause, WaitMode};
use cosched_des::SimTime;

impl Sim<'_> {
    /// Fills the node's idle CPUs from its native scheduler.
    pub(super) fn schedule(&mut self, node: u32, now: SimTime) {
        if !self.nodes[node as usize].page_queue.is_empty() {
            // A process taken off a CPU may now give pages to a waiting fault.
            self.pump_paging(node, now);
        }
        let mut cpu = 0;
        while cpu < self.plat.cpus_per_node {
            if let Some(r) = self.nodes[node as usize].cpus[cpu as usize].cur {
                // A yielding wait gives its CPU to a process that became runnable.
                if !(self.yields(r) && self.others_runnable(node) && self.sleep_off_cpu(r, now)) {
                    cpu += 1;
                    continue;
                }
            }
            let hint = self.recommend(node, now);
            let n = &mut self.nodes[node as usize];
            n.sched.set_active_mm(n.cpus[cpu as usize].last);
            let Some(pick) = n.sched.pick(now, hint) else {
                // Nothing runnable: a parked yielding wait spins on the CPU.
                if self.unpark_for_idle_cpu(node, now) {
                    continue;
                }
                return;
            };
            self.dispatch(node, cpu, pick, now);
            cpu += 1;
        }
    }

    /// Charges the time since the last accounting to the CPU's running process.
    pub(super) fn account(&mut self, node: u32, cpu: u32, now: SimTime) {
        let c = &mut self.nodes[node as usize].cpus[cpu as usize];
        let Some(pid) = c.cur else { return };
        let (from, progress_from) = (c.acct_at, c.since.min(now));
        c.busy_ns += (now - c.acct_at).as_ns();
        c.acct_at = now;
        let elapsed = (now - c.since).as_ns().max(0);
        c.since = c.since.max(now);
        let p = &mut self.procs[pid as usize];
        p.cpu_ns += elapsed;
        let used = elapsed.min(p.cpu_left.max(0));
        self.touch(pid, used);
        let p = &mut self.procs[pid as usize];
        p.cpu_left -= used;
        self.counters.useful_ns += used;
        let spun = elapsed - used;
        p.spin_ns += spun;
        self.counters.spin_ns += spun;
        if self.obs.wants(Signals::PROGRESS) {
            self.signal(Signal::Progress { pid, used });
        }
        if self.timeline.is_some() {
            self.record_cpu(node, cpu, pid, (from, progress_from), used, now);
        }
    }

    /// Takes `pid` off its CPU (accounted up to now) and tells the native scheduler.
    /// The process becomes ready (preempted, expired: the caller queues it again) or
    /// blocked (it sleeps or ends: the caller says why).
    pub(super) fn release_cpu(&mut self, node: u32, cpu: u32, pid: Pid, why: Stop, now: SimTime) {
        let ran = now - self.nodes[node as usize].cpus[cpu as usize].dispatched_at;
        self.signal(Signal::Released { node, pid, ran });
        let c = &mut self.nodes[node as usize].cpus[cpu as usize];
        self.procs[pid as usize].last_ran = now;
        c.cur = None;
        self.segs
            .clear((node * self.plat.cpus_per_node + cpu) as usize);
        self.slot_ran(pid, self.procs[pid as usize].job, ran);
        let state = match why {
            Stop::Preempted | Stop::Expired => PState::Ready,
            Stop::Blocked => PState::Blocked,
        };
        self.set_state(pid, state, now);
        self.nodes[node as usize].sched.stop(pid, ran, why, now);
        if self.nodes[node as usize].ops.contains(Ops::STOPPING) {
            self.with_policy(node, now, Apply::Deferred, |p, v, out| {
                p.stopping(v, pid, why, out)
            });
        }
    }

    pub(super) fn dispatch(&mut self, node: u32, cpu: u32, pick: Pick, now: SimTime) {
        let pid = pick.pid;
        debug_assert_eq!(
            self.procs[pid as usize].state,
            PState::Ready,
            "a process runs on one CPU at a time"
        );
        debug_assert!(
            self.nodes[node as usize].cpus[cpu as usize].cur.is_none(),
            "a CPU runs one process at a time"
        );
        self.signal(Signal::Dispatched { node, pid });
        if pick.followed_hint {
            self.counters.hints_followed += 1;
        }
        if std::mem::take(&mut self.procs[pid as usize].boost_until_run) {
            self.nodes[node as usize].sched.unboost(pid);
        }
        let c = &mut self.nodes[node as usize].cpus[cpu as usize];
        let switch = if c.last == Some(pid) { 0 } else { self.cs_ns };
        if switch > 0 {
            self.counters.context_switches += 1;
        }
        c.cur = Some(pid);
        c.last = Some(pid);
        c.dispatched_at = now;
        c.acct_at = now;
        c.since = now + SimTime(switch);
        c.slice_end = now + SimTime(switch) + pick.slice;
        self.set_state(pid, PState::Running(cpu), now);
        if self.nodes[node as usize].ops.contains(Ops::RUNNING) {
            self.with_policy(node, now, Apply::Deferred, |p, v, out| {
                p.running(v, pid, out)
            });
        }
        // A waiting process re-checks its condition when it gets the CPU back.
        if let Some(w) = self.procs[pid as usize].wait {
            if w.cond != Cond::Io && self.satisfied(pid, w.cond) {
                self.procs[pid as usize].wait = None;
                self.resume_after_wait(pid, w.cond);
                self.hook_wait_end(pid, w, WaitEndCause::Dispatched, now);
            } else if w.cond != Cond::Io {
                self.answer_rts(pid, w.cond, now);
            }
        }
        self.plan(node, cpu, now);
    }

    /// Plans the running process's next segment: runs ops that need no time,
    /// then schedules the end of its CPU work, spin deadline or slice.
    pub(super) fn plan(&mut self, node: u32, cpu: u32, now: SimTime) {
        let Some(pid) = self.nodes[node as usize].cpus[cpu as usize].cur else {
            return;
        };
        if self.procs[pid as usize].wait.is_none() && self.procs[pid as usize].cpu_left == 0 {
            self.step(pid, now);
        }
        let c = self.nodes[node as usize].cpus[cpu as usize];
        if c.cur != Some(pid) {
            return; // it blocked or finished; the CPU was refilled
        }
        let p = &self.procs[pid as usize];
        let mut end = c.slice_end;
        if p.cpu_left > 0 {
            end = end.min(c.since + SimTime(p.cpu_left));
            if let Some(f) = self.ns_to_fault(pid) {
                end = end.min(c.since + SimTime(f));
            }
        } else if let Some(Waiting {
            mode: WaitMode::SpinBlock(spin),
            since,
            ..
        }) = p.wait
        {
            end = end.min((since + spin).max(now));
        } else if let Some(Waiting {
            mode: WaitMode::Block,
            ..
        }) = p.wait
        {
            // Woken by a rendezvous request it has now answered: it sleeps again.
            end = now;
        } else if self.yields(pid) && self.others_runnable(node) {
            // Dispatched while another process waits for the CPU: it yields.
            end = now;
        }
        let at = end.max(now);
        let id = self.q.reserve(at).expect("future");
        self.segs
            .set((node * self.plat.cpus_per_node + cpu) as usize, at, id.0);
    }

    pub(super) fn seg_end(&mut self, node: u32, cpu: u32, now: SimTime) {
        self.account(node, cpu, now);
        let c = self.nodes[node as usize].cpus[cpu as usize];
        let pid = c.cur.expect("segment of a running process");
        if self.at_fault(pid) {
            self.fault(node, cpu, pid, now);
            return;
        }
        let (cpu_left, wait) = (
            self.procs[pid as usize].cpu_left,
            self.procs[pid as usize].wait,
        );
        if cpu_left == 0 && wait.is_none() {
            self.step(pid, now);
            if self.nodes[node as usize].cpus[cpu as usize].cur != Some(pid) {
                return;
            }
        } else if let Some(Waiting {
            mode: WaitMode::SpinBlock(spin),
            since,
            ..
        }) = wait
        {
            if now >= since + spin {
                self.block(pid, now);
                return;
            }
        } else if let Some(Waiting {
            mode: WaitMode::Block,
            ..
        }) = wait
        {
            if cpu_left == 0 {
                self.block(pid, now);
                return;
            }
        } else if self.yields(pid) && self.others_runnable(node) {
            self.block(pid, now);
            return;
        }
        if now >= c.slice_end {
            self.release_cpu(node, cpu, pid, Stop::Expired, now);
            self.nodes[node as usize]
                .sched
                .enqueue(pid, Wake::Expired, now);
            self.schedule(node, now);
        } else {
            self.plan(node, cpu, now);
        }
    }

    /// Wake-up preemption for the runnable `pid`: when every CPU is busy, a process
    /// spinning in a yielding wait gives its CPU up (parked, [`WaitMode::Yield`]);
    /// otherwise the first running process the native scheduler ranks lower is
    /// preempted (the caller then refills the CPU with [`Sim::schedule`]). Returns
    /// whether one was.
    pub(super) fn preempt_for(&mut self, node: u32, pid: Pid, now: SimTime) -> bool {
        let n = &self.nodes[node as usize];
        if n.cpus.iter().any(|c| c.cur.is_none()) {
            return false;
        }
        if self.displace_yielder(node, now) {
            return true;
        }
        let n = &self.nodes[node as usize];
        let victim = n.cpus.iter().enumerate().find_map(|(k, c)| {
            let r = c.cur.expect("all busy");
            n.sched
                .should_preempt(pid, r, now - c.dispatched_at)
                .then_some((k as u32, r))
        });
        let Some((cpu, r)) = victim else {
            return false;
        };
        self.account(node, cpu, now);
        self.release_cpu(node, cpu, r, Stop::Preempted, now);
        self.nodes[node as usize]
            .sched
            .enqueue(r, Wake::Preempted, now);
        true
    }
}
