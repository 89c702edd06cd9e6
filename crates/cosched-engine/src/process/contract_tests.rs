//! The node-policy contract's adaptive parts on tiny scenarios worked out by
//! hand: `wait_mode` with the process and a view, `on_wait_end`, the spin
//! change action and the typed errors of actions that cannot apply.
//!
//! Scenario (two nodes, one CPU each): rank 0 receives from rank 1 at once;
//! rank 1 computes 1 ms, then sends 8 bytes. The message lands at
//! `A = 1 ms + send overhead + latency + transfer` (1,008,040 ns on the test
//! platform), so rank 0 waits from 0 to `A`.

use super::policy::{
    ActionErrorCounts, EnqueueReason, NodeAction, NodePolicy, NodeView, Ops, WaitEnd, WaitEndCause,
    WaitKind, WaitMode,
};
use super::testkit::{self, SendBy};
use super::tests::{check_work, job, linux, platform};
use super::*;
use cosched_model::program::Builder;
use std::sync::{Arc, Mutex};

/// What the scripted policy saw: each ended wait with the waiter's job, and the
/// view's `waited` at each message.
#[derive(Default)]
struct Seen {
    ends: Vec<(Pid, Option<u32>, WaitEnd)>,
    waited_at_message: Vec<(Pid, Option<SimTime>)>,
}

/// A node policy driven by a script: a fixed wait mode, the declared ops, and
/// actions at the start of a wait, at a message and at an admission (`enqueue`,
/// called only when `ops` declares it).
struct Scripted {
    mode: WaitMode,
    ops: Ops,
    begin: fn(Pid) -> Vec<NodeAction>,
    message: fn(Pid) -> Vec<NodeAction>,
    admitted: fn(Pid) -> Vec<NodeAction>,
    seen: Arc<Mutex<Seen>>,
}

impl Scripted {
    fn new(mode: WaitMode) -> Self {
        Self {
            mode,
            ops: Ops::WAIT_END,
            begin: |_| vec![],
            message: |_| vec![],
            admitted: |_| vec![],
            seen: Arc::default(),
        }
    }
}

impl NodePolicy for Scripted {
    fn name(&self) -> String {
        "scripted".into()
    }
    fn ops(&self) -> Ops {
        self.ops
    }
    fn wait_mode(&mut self, v: &dyn NodeView, p: Pid, _k: WaitKind) -> WaitMode {
        assert!(v.is_running(p), "asked while the process runs");
        self.mode
    }
    fn on_wait_begin(
        &mut self,
        _v: &dyn NodeView,
        p: Pid,
        _k: WaitKind,
        out: &mut Vec<NodeAction>,
    ) {
        out.extend((self.begin)(p));
    }
    fn on_message(&mut self, v: &dyn NodeView, p: Pid, _running: bool, out: &mut Vec<NodeAction>) {
        self.seen
            .lock()
            .unwrap()
            .waited_at_message
            .push((p, v.waited(p)));
        out.extend((self.message)(p));
    }
    fn on_wait_end(&mut self, v: &dyn NodeView, p: Pid, end: &WaitEnd, _o: &mut Vec<NodeAction>) {
        self.seen.lock().unwrap().ends.push((p, v.job_of(p), *end));
    }
    fn enqueue(
        &mut self,
        _v: &dyn NodeView,
        p: Pid,
        why: EnqueueReason,
        out: &mut Vec<NodeAction>,
    ) {
        if why == EnqueueReason::Admitted {
            out.extend((self.admitted)(p));
        }
    }
}

/// The arrival time `A` of the module doc.
fn arrival(plat: &NodePlatform) -> i64 {
    1_000_000
        + us(plat.send_overhead_us)
        + us(plat.latency_us)
        + (8.0 * 1000.0 / plat.bandwidth_mb_s) as i64
}

fn late_message() -> ProcJob {
    job(testkit::late_message(1_000_000, SendBy::Isend).build("late", 1.0))
}

/// Runs the scenario under copies of `policy` (its script and shared record).
fn run_scripted(policy: &Scripted, jobs: &[ProcJob], nodes: u32, mpl: u32) -> ProcOutput {
    let plat = platform(nodes, linux());
    let make = || {
        Box::new(Scripted {
            seen: policy.seen.clone(),
            ..*policy
        }) as Box<dyn NodePolicy>
    };
    let out = simulate_processes(
        &plat,
        jobs,
        &make,
        &ProcOptions {
            mpl,
            ..Default::default()
        },
    )
    .expect("run");
    check_work(&plat, jobs, &out);
    out
}

#[test]
fn wait_end_reports_spin_block_and_cause() {
    let plat = platform(2, linux());
    let a = SimTime(arrival(&plat));
    // Spinning: the whole wait is spin, ended while on the CPU.
    let spin = Scripted::new(WaitMode::Spin);
    let out = run_scripted(&spin, &[late_message()], 2, 1);
    assert_eq!(out.proc_spin_ns[0], a.as_ns());
    let seen = spin.seen.lock().unwrap();
    assert_eq!(
        seen.ends,
        [(
            0,
            Some(0),
            WaitEnd {
                kind: WaitKind::Recv,
                waited: a,
                spun: a,
                blocked: false,
                by: WaitEndCause::Spinning,
            }
        )]
    );
    assert_eq!(seen.waited_at_message, [(0, Some(a))]);
    drop(seen);
    // Blocking: no spin, woken by the interrupt.
    let block = Scripted::new(WaitMode::Block);
    let out = run_scripted(&block, &[late_message()], 2, 1);
    assert_eq!((out.proc_spin_ns[0], out.counters.interrupts), (0, 1));
    let ends = &block.seen.lock().unwrap().ends;
    assert_eq!(ends.len(), 1);
    let e = ends[0].2;
    assert_eq!(
        (e.waited, e.spun, e.blocked, e.by),
        (a, SimTime::ZERO, true, WaitEndCause::Woken)
    );
    // Not declared: never called.
    let mut quiet = Scripted::new(WaitMode::Spin);
    quiet.ops = Ops::NONE;
    run_scripted(&quiet, &[late_message()], 2, 1);
    assert!(quiet.seen.lock().unwrap().ends.is_empty());
}

#[test]
fn spin_for_extends_or_cuts_a_spin() {
    let plat = platform(2, linux());
    let a = arrival(&plat);
    // A 100 us spin-block wait spins 100 us, then blocks.
    let short = Scripted::new(WaitMode::SpinBlock(SimTime::from_us(100)));
    let out = run_scripted(&short, &[late_message()], 2, 1);
    assert_eq!((out.proc_spin_ns[0], out.counters.interrupts), (100_000, 1));
    // Extended to 2 ms at the start of the wait: it spins until the message.
    let mut long = Scripted::new(WaitMode::SpinBlock(SimTime::from_us(100)));
    long.begin = |p| vec![NodeAction::SpinFor(p, SimTime::from_ms(2))];
    let out = run_scripted(&long, &[late_message()], 2, 1);
    assert_eq!((out.proc_spin_ns[0], out.counters.interrupts), (a, 0));
    let e = long.seen.lock().unwrap().ends[0].2;
    assert_eq!((e.spun.as_ns(), e.blocked), (a, false));
    // A spin wait cut at once blocks like an immediate block.
    let mut cut = Scripted::new(WaitMode::Spin);
    cut.begin = |p| vec![NodeAction::SpinFor(p, SimTime::ZERO)];
    let out = run_scripted(&cut, &[late_message()], 2, 1);
    let block = run_scripted(&Scripted::new(WaitMode::Block), &[late_message()], 2, 1);
    assert_eq!((out.proc_spin_ns[0], out.counters.interrupts), (0, 1));
    assert_eq!(out.proc_end, block.proc_end);
    assert_eq!(out.counters.action_errors, ActionErrorCounts::default());
}

#[test]
fn actions_that_cannot_apply_are_counted_by_kind() {
    // Another node's process (pid 1 runs on node 1) and a pid that does not exist.
    let mut other = Scripted::new(WaitMode::Spin);
    other.begin = |p| vec![NodeAction::Boost(p + 1), NodeAction::Interrupt(99)];
    let out = run_scripted(&other, &[late_message()], 2, 1);
    assert_eq!(
        out.counters.action_errors,
        ActionErrorCounts {
            not_on_node: 2,
            ..Default::default()
        }
    );
    // A spin change for a blocked process (the message arrives while it sleeps).
    let mut blocked = Scripted::new(WaitMode::Block);
    blocked.message = |p| vec![NodeAction::SpinFor(p, SimTime::ZERO)];
    let out = run_scripted(&blocked, &[late_message()], 2, 1);
    assert_eq!(out.counters.action_errors.not_spinning, 1);
    assert_eq!(out.counters.action_errors.total(), 1);
    // A finished process: one node, MPL 1; the second job's admission boosts
    // pid 0, whose job has ended.
    let single = |ns| {
        let mut b = Builder::new(1);
        b.each(|_| vec![Op::Compute { ns }]);
        job(b.build("one", 1.0))
    };
    let mut finished = Scripted::new(WaitMode::Spin);
    finished.ops = Ops::WAIT_END | Ops::ENQUEUE;
    finished.admitted = |p| {
        if p == 1 {
            vec![NodeAction::Boost(0)]
        } else {
            vec![]
        }
    };
    let out = run_scripted(&finished, &[single(10_000), single(20_000)], 1, 1);
    assert_eq!(
        out.proc_end[1].as_ns(),
        30_000,
        "the refused boost changed nothing"
    );
    assert_eq!(
        out.counters.action_errors,
        ActionErrorCounts {
            finished: 1,
            ..Default::default()
        }
    );
}
