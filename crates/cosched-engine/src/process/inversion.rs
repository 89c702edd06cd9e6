//! Priority inversion of processes woken by their disk (seed 003 §3.1: gang
//! schedulers "cause priority inversion problems whenever they permit a
//! compute-bound job to use the CPU while processes of an I/O-bound job is
//! ready to run"; DESIGN.md §6).
//!
//! Definition (docs/formats/summary.md, `priority_inversion_s`): from the
//! moment a disk completion makes a process runnable until it next gets a CPU,
//! the time during which at least one CPU of its node runs a process of another
//! job. Time the process waits while its node's CPUs are idle (a gang switch, a
//! slot reserved for a blocked owner) or run only its own job's processes is not
//! inversion. Every process-level run measures it (gang, time sharing, batch).
//!
//! The engine settles a node's waiting processes before every change of what
//! its CPUs run (dispatch and release), so the condition is constant between
//! two settlements.

use super::Sim;
use crate::os::Pid;
use cosched_des::SimTime;

/// Per node: processes woken by their disk and not yet run, and the last
/// settlement time.
#[derive(Clone, Debug, Default)]
pub struct Inversion {
    waiting: Vec<Vec<Pid>>,
    last: Vec<SimTime>,
}

impl Inversion {
    pub fn new(nodes: u32) -> Self {
        Self {
            waiting: vec![Vec::new(); nodes as usize],
            last: vec![SimTime::ZERO; nodes as usize],
        }
    }

    /// Adds to `total` the time since the node's last settlement for each waiting
    /// process that `inverted` says is kept from a CPU by another job.
    fn settle(
        &mut self,
        node: u32,
        now: SimTime,
        total: &mut i64,
        inverted: impl Fn(Pid) -> bool,
    ) {
        let k = node as usize;
        let dt = (now - self.last[k]).as_ns();
        self.last[k] = now;
        if dt > 0 {
            *total += dt * self.waiting[k].iter().filter(|&&p| inverted(p)).count() as i64;
        }
    }
}

impl Sim<'_> {
    /// Settles `node` at `now` (before its CPUs change what they run).
    pub(super) fn inversion_settle(&mut self, node: u32, now: SimTime) {
        if self.inversion.waiting[node as usize].is_empty() {
            self.inversion.last[node as usize] = now;
            return;
        }
        let (cpus, procs) = (&self.nodes[node as usize].cpus, &self.procs);
        let inverted = |p: Pid| {
            let j = procs[p as usize].job;
            cpus.iter()
                .any(|c| c.cur.is_some_and(|q| procs[q as usize].job != j))
        };
        self.inversion.settle(
            node,
            now,
            &mut self.counters.priority_inversion_ns,
            inverted,
        );
    }

    /// A disk completion is about to wake `pid`: it waits from now until it runs.
    pub(super) fn inversion_io_woken(&mut self, pid: Pid, now: SimTime) {
        let p = &self.procs[pid as usize];
        if p.state != super::PState::Blocked || p.paging {
            return; // the wake-up will not make it runnable
        }
        let node = p.node;
        self.inversion_settle(node, now);
        let w = &mut self.inversion.waiting[node as usize];
        if !w.contains(&pid) {
            w.push(pid);
        }
    }

    /// `pid` gets a CPU of `node` (before the dispatch changes the CPU).
    pub(super) fn inversion_dispatch(&mut self, node: u32, pid: Pid, now: SimTime) {
        self.inversion_settle(node, now);
        self.inversion.waiting[node as usize].retain(|&p| p != pid);
    }
}
