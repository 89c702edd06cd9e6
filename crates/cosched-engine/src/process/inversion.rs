//! Priority inversion of processes woken by their disk (seed 003 §3.1: gang
//! schedulers "cause priority inversion problems whenever they permit a
//! compute-bound job to use the CPU while processes of an I/O-bound job is
//! ready to run"; DESIGN.md §6).
//!
//! Definition (docs/formats/summary.md, `measures.priority_inversion`): from the
//! moment a disk completion makes a process runnable until it next gets a CPU,
//! the time during which at least one CPU of its node runs a process of another
//! job. Time the process waits while its node's CPUs are idle (a gang switch, a
//! slot reserved for a blocked owner) or run only its own job's processes is not
//! inversion. Every process-level run measures it (gang, time sharing, batch).
//!
//! An observer ([`super::observe`]): it settles a node's waiting processes at
//! the signals that come before every change of what its CPUs run (a dispatch,
//! a release) and at each disk wake-up, so the condition is constant between
//! two settlements; the engine's probe says, at each settlement, which waiting
//! process is kept from a CPU by another job.

use super::observe::{Measures, Observer, Probe, Signal, Signals, TotalNs};
use crate::os::Pid;
use cosched_des::SimTime;

/// The report's entry name in [`Measures`] (summary `process.measures`).
pub const NAME: &str = "priority_inversion";

/// Per node: processes woken by their disk and not yet run, and the time
/// since which the node's inversion is counted; the total so far.
#[derive(Clone, Debug, Default)]
pub struct Inversion {
    waiting: Vec<Vec<Pid>>,
    last: Vec<SimTime>,
    /// Processes waiting, all nodes.
    waiting_n: usize,
    total_ns: i64,
}

impl Inversion {
    pub fn new(nodes: u32) -> Self {
        Self {
            waiting: vec![Vec::new(); nodes as usize],
            last: vec![SimTime::ZERO; nodes as usize],
            waiting_n: 0,
            total_ns: 0,
        }
    }

    /// Settles `node` at `now`: adds the time since the node's last
    /// settlement for each waiting process that `inverted` says is kept from a
    /// CPU by another job (`inverted` is not called when none waits). A node
    /// with no waiting process is not settled: its count restarts when a
    /// process starts waiting ([`Inversion::woken`]).
    pub fn settle(&mut self, node: u32, now: SimTime, inverted: impl Fn(Pid) -> bool) {
        let k = node as usize;
        if self.waiting[k].is_empty() {
            return;
        }
        let dt = (now - self.last[k]).as_ns();
        self.last[k] = now;
        if dt > 0 {
            self.total_ns += dt * self.waiting[k].iter().filter(|&&p| inverted(p)).count() as i64;
        }
    }

    /// A disk completion made `pid` of `node` runnable (the node was settled at
    /// this instant): it waits until it gets a CPU.
    pub fn woken(&mut self, node: u32, pid: Pid, now: SimTime) {
        let w = &mut self.waiting[node as usize];
        if w.is_empty() {
            self.last[node as usize] = now;
        }
        if !w.contains(&pid) {
            w.push(pid);
            self.waiting_n += 1;
        }
    }

    /// `pid` of `node` got a CPU (the node was settled at this instant).
    pub fn dispatched(&mut self, node: u32, pid: Pid) {
        let w = &mut self.waiting[node as usize];
        let before = w.len();
        w.retain(|&p| p != pid);
        self.waiting_n -= before - w.len();
    }
}

/// The measure as an observer: it settles a node before every change of what
/// the node's CPUs run (dispatch, release) and at each disk wake-up; while no
/// process waits it takes only the disk wake-ups (a node with none waiting is
/// not settled).
impl Observer for Inversion {
    fn signals(&self) -> Signals {
        if self.waiting_n == 0 {
            Signals::IO_WOKEN
        } else {
            Signals::IO_WOKEN | Signals::DISPATCHED | Signals::RELEASED
        }
    }

    fn on(&mut self, s: &Signal<'_>, probe: &Probe<'_, '_>) {
        let now = probe.now();
        match *s {
            Signal::Dispatched { node, pid } => {
                self.settle(node, now, |p| probe.other_job_runs(p));
                self.dispatched(node, pid);
            }
            Signal::Released { node, .. } => self.settle(node, now, |p| probe.other_job_runs(p)),
            Signal::IoWoken { pid } => {
                let node = probe.node_of(pid);
                self.settle(node, now, |p| probe.other_job_runs(p));
                self.woken(node, pid, now);
            }
            _ => {}
        }
    }

    fn report(self: Box<Self>, _probe: &Probe<'_, '_>, into: &mut Measures) {
        into.put(NAME, TotalNs(self.total_ns));
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn a_node_counts_from_the_wake_up_while_another_job_runs() {
        // One node. Process 7 is woken by its disk at 10 ns; at 15 ns the node
        // is settled with another job running: 15 - 10 = 5 ns. At 20 ns it gets a
        // CPU (settled, another job still running: + 5 = 10 ns). Settlements with
        // no process waiting (30 ns) count nothing. Woken again at 40 ns and
        // settled at 47 ns with another job running: + 7 = 17 ns (counted from
        // the wake-up at 40, not from the last settlement at 20).
        let mut inv = Inversion::new(1);
        let other_job = |_: Pid| true;
        inv.woken(0, 7, SimTime(10));
        inv.settle(0, SimTime(15), other_job);
        assert_eq!(inv.total_ns, 5);
        inv.settle(0, SimTime(20), other_job);
        inv.dispatched(0, 7);
        assert_eq!(inv.total_ns, 10);
        inv.settle(0, SimTime(30), other_job);
        assert_eq!(inv.total_ns, 10);
        inv.woken(0, 7, SimTime(40));
        inv.settle(0, SimTime(47), other_job);
        assert_eq!(inv.total_ns, 17);
        // Its own job's processes only: nothing more.
        inv.settle(0, SimTime(60), |_| false);
        assert_eq!(inv.total_ns, 17);
    }
}
