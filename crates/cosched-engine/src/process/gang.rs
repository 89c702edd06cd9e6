//! Gang scheduling at process level (SCore-D like): the per-node dispatcher
//! that replaces the native scheduler's choice on each node. The scheme itself
//! (below, as the default gang policy runs it) is a slot policy
//! (`cosched_policies::process::gang`) behind the contract
//! [`cosched_contract::slots`]; the engine carries its decisions out
//! ([`super::slots`]).
//!
//! The matrix has `rows` time slots (rows) and one column per CPU of every node
//! (node-major: node n's CPUs are columns n·C .. n·C + C - 1). A job of P
//! processes with k ranks per node occupies P cells of one row, k columns on
//! each of its P / k nodes; the number of rows is the multiprogramming level. A
//! new job takes the first row with enough eligible nodes that have k free
//! columns there (PACKING: the first run of consecutive eligible nodes, else
//! the lowest-numbered; NO PACKING: eligible nodes of that row drawn at
//! random), otherwise it waits (FCFS: later jobs wait behind it).
//!
//! Time is cut into slots: the active row runs for `quantum`; then every CPU of
//! the machine is taken from its process and the whole machine stays idle for
//! `switch` (the global synchronization), after which the next non-empty row
//! (cyclically) becomes active. Each node then pays its own context switch when
//! its CPU resumes a different process than it last ran. Inside a slot a node's
//! CPUs run only the active row's processes on that node (up to one per
//! column, so a dual-CPU node runs two); with `alternate` an empty column of
//! the active row lends its CPU to another row's process on the node (first
//! runnable one, rows in cyclic order after the active one).
//! When the active row empties (its jobs finished) the switch happens at once;
//! when the matrix is empty the cycle stops and restarts, without a switch
//! cost, at the next admission. Waiting processes spin inside their slot
//! (the node policy decides the wait mode; NLS spins).
//!
//! Policies decide, the engine acts: the slot policy decides (placement, next
//! row, which process a node's CPU runs); the engine preempts, idles and
//! dispatches. [`Dispatcher`] is the per-node [`NativeScheduler`] of gang mode:
//! it keeps the runnable set and runs exactly the process the engine names.

use crate::os::{NativeScheduler, Pick, Pid, Stop, Wake};
pub use cosched_contract::process::GangParams;
use cosched_des::SimTime;
pub use cosched_rules::gang::Ousterhout;

/// The per-node scheduler of gang mode: it keeps the runnable set and runs the
/// process it is told to (the `hint` of [`NativeScheduler::pick`], which in gang
/// mode is the slot dispatcher's decision, not a recommendation). A process runs
/// until the engine's slot switch takes the CPU back (the slice is unbounded);
/// a wake-up never preempts.
#[derive(Default)]
pub struct Dispatcher {
    runnable: Vec<Pid>,
}

/// A slice longer than any run: the slot switch ends a process's turn.
const UNBOUNDED: SimTime = SimTime(1 << 60);

impl NativeScheduler for Dispatcher {
    fn name(&self) -> String {
        "gang-dispatcher".into()
    }
    fn add(&mut self, _p: Pid, _now: SimTime) {}
    fn exit(&mut self, p: Pid) {
        self.runnable.retain(|&q| q != p);
    }
    fn enqueue(&mut self, p: Pid, _how: Wake, _now: SimTime) {
        self.runnable.push(p);
    }
    fn remove(&mut self, p: Pid, _now: SimTime) {
        self.runnable.retain(|&q| q != p);
    }
    fn pick(&mut self, _now: SimTime, hint: Option<Pid>) -> Option<Pick> {
        let p = hint?;
        let k = self.runnable.iter().position(|&q| q == p)?;
        self.runnable.remove(k);
        Some(Pick {
            pid: p,
            slice: UNBOUNDED,
            followed_hint: false,
        })
    }
    fn stop(&mut self, _p: Pid, _ran: SimTime, _why: Stop, _now: SimTime) {}
    fn should_preempt(&self, _w: Pid, _r: Pid, _ran: SimTime) -> bool {
        false
    }
    fn boost(&mut self, _p: Pid, _now: SimTime) {}
    fn unboost(&mut self, _p: Pid) {}
    fn runnable(&self) -> usize {
        self.runnable.len()
    }
    fn dump(&self) -> String {
        format!("gang-dispatcher runnable={:?}", self.runnable)
    }
}
