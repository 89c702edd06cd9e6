//! Strict round robin.
//!
//! Algorithm: one FIFO queue; a free CPU runs the head for at most `quantum`;
//! a process that used its quantum, was preempted or woke up joins the tail.
//! No priorities: recommendations and boosts are ignored and a wake-up never
//! preempts.
//!
//! Parameter: `quantum_ms` (50, seed 002's Linux time slice).

use super::{NativeScheduler, Pick, Pid, Stop, Wake};
use cosched_des::SimTime;
pub use cosched_model::node::default_quantum_ms;
use std::collections::VecDeque;

pub struct RoundRobin {
    quantum: SimTime,
    queue: VecDeque<Pid>,
}

impl RoundRobin {
    pub fn new(quantum: SimTime) -> Self {
        Self {
            quantum,
            queue: VecDeque::new(),
        }
    }
}

impl NativeScheduler for RoundRobin {
    fn name(&self) -> String {
        format!("rr[quantum_ms={}]", self.quantum.as_ns() as f64 / 1e6)
    }
    fn add(&mut self, _p: Pid, _now: SimTime) {}
    fn exit(&mut self, p: Pid) {
        self.queue.retain(|&q| q != p);
    }
    fn enqueue(&mut self, p: Pid, _how: Wake, _now: SimTime) {
        self.queue.push_back(p);
    }
    fn remove(&mut self, p: Pid, _now: SimTime) {
        self.queue.retain(|&q| q != p);
    }
    fn pick(&mut self, _now: SimTime, _hint: Option<Pid>) -> Option<Pick> {
        self.queue.pop_front().map(|pid| Pick {
            pid,
            slice: self.quantum,
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
        self.queue.len()
    }
    fn dump(&self) -> String {
        format!("{} runnable={:?}", self.name(), self.queue)
    }
}
