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
//! two settlements. This module knows nothing of the engine: the engine tells it
//! of disk wake-ups and dispatches and says, at each settlement, which waiting
//! process is kept from a CPU by another job.

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

    /// Settles `node` at `now`: adds to `total` the time since the node's last
    /// settlement for each waiting process that `inverted` says is kept from a
    /// CPU by another job (`inverted` is not called when none waits).
    pub fn settle(
        &mut self,
        node: u32,
        now: SimTime,
        total: &mut i64,
        inverted: impl Fn(Pid) -> bool,
    ) {
        let k = node as usize;
        let dt = (now - self.last[k]).as_ns();
        self.last[k] = now;
        if dt > 0 && !self.waiting[k].is_empty() {
            *total += dt * self.waiting[k].iter().filter(|&&p| inverted(p)).count() as i64;
        }
    }

    /// A disk completion made `pid` of `node` runnable (the node was settled at
    /// this instant): it waits until it gets a CPU.
    pub fn woken(&mut self, node: u32, pid: Pid) {
        let w = &mut self.waiting[node as usize];
        if !w.contains(&pid) {
            w.push(pid);
        }
    }

    /// `pid` of `node` got a CPU (the node was settled at this instant).
    pub fn dispatched(&mut self, node: u32, pid: Pid) {
        self.waiting[node as usize].retain(|&p| p != pid);
    }
}
