//! Hand-worked checks of the yielding wait ([`WaitMode::Yield`]).

use super::super::policy::{NodePolicy, NodeView, WaitKind, WaitMode};
use super::super::testkit::{late_message, SendBy};
use super::super::tests::{check_work, job, platform, Spin};
use super::super::*;
use cosched_model::node::OsConfig;
use cosched_model::program::Builder;

/// Every wait yields.
pub(in crate::process) struct Yielding;
impl NodePolicy for Yielding {
    fn name(&self) -> String {
        "yielding".into()
    }
    fn wait_mode(&mut self, _v: &dyn NodeView, _p: Pid, _k: WaitKind) -> WaitMode {
        WaitMode::Yield
    }
}

const MS: i64 = 1_000_000;
/// Round robin's quantum in these runs.
const QUANTUM: i64 = 2 * MS;

/// Job A: rank 0 (node 0) waits for a message that rank 1 (node 1) sends after
/// 10 ms of compute. With `other`, job B: rank 0 computes 50 ms on node 0 (rank 1
/// nothing).
fn jobs(other: bool) -> Vec<ProcJob> {
    let a = late_message(10 * MS, SendBy::IsendWait);
    let mut out = vec![job(a.build("waiter", 1.0))];
    if other {
        let mut b = Builder::new(2);
        b.each(|r| {
            if r == 0 {
                vec![Op::Compute { ns: 50 * MS }]
            } else {
                vec![]
            }
        });
        out.push(job(b.build("cpu", 1.0)));
    }
    out
}

fn run(jobs: &[ProcJob], policy: &dyn Fn() -> Box<dyn NodePolicy>) -> (NodePlatform, ProcOutput) {
    let plat = platform(2, OsConfig::Rr { quantum_ms: 2.0 });
    let out = simulate_processes(
        &plat,
        jobs,
        policy,
        &ProcOptions {
            mpl: 2,
            ..Default::default()
        },
    )
    .expect("run");
    check_work(&plat, jobs, &out);
    (plat, out)
}

/// When the message reaches rank 0 of job A: rank 1 ends right after its send
/// (the eager send is complete at its `Wait`), so its end + the wire + latency.
fn arrival(plat: &NodePlatform, out: &ProcOutput) -> i64 {
    let wire = (8.0 * 1000.0 / plat.bandwidth_mb_s).round() as i64;
    out.proc_end[1].as_ns() + wire + us(plat.latency_us)
}

#[test]
fn a_yielding_waiter_alone_on_its_cpu_spins_until_its_message() {
    let js = jobs(false);
    let (plat, out) = run(&js, &|| Box::new(Yielding));
    let at = arrival(&plat, &out);
    // Alone from 0 on node 0: it polls (spins) until the message, then pays the
    // receive overhead; no interrupt.
    assert_eq!(out.proc_spin_ns[0], at);
    assert_eq!(out.proc_cpu_ns[0], at + us(plat.recv_overhead_us));
    assert_eq!(out.proc_end[0].as_ns(), at + us(plat.recv_overhead_us));
    assert_eq!(out.counters.interrupts, 0);
}

#[test]
fn a_yielding_waiter_gives_its_cpu_to_the_other_process_for_whole_slices() {
    let js = jobs(true);
    let (plat, out) = run(&js, &|| Box::new(Yielding));
    let o_r = us(plat.recv_overhead_us);
    let at = arrival(&plat, &out);
    // Rank 0 of job A never spins: it gives the CPU up at the start of its wait.
    assert_eq!(out.proc_spin_ns[0], 0);
    assert_eq!(out.proc_cpu_ns[0], o_r);
    assert_eq!(out.counters.interrupts, 0);
    // Job B's rank runs its whole 2 ms quanta (switches at multiples of 2 ms): the
    // waiter, runnable again at the arrival, gets the CPU at the next quantum end
    // (no wake-up preemption) and ends after its receive overhead.
    let next = (at + QUANTUM - 1) / QUANTUM * QUANTUM;
    assert_eq!(out.proc_end[0].as_ns(), next + o_r);
    // Node 0 never idles: job B's 50 ms plus the waiter's receive overhead.
    assert_eq!(out.proc_end[2].as_ns(), 50 * MS + o_r);
    // Spinning instead, the waiter takes every other quantum until the message.
    let (_, spin) = run(&js, &|| Box::new(Spin));
    assert!(spin.proc_spin_ns[0] >= 4 * MS, "{}", spin.proc_spin_ns[0]);
    assert_eq!(
        spin.proc_end[2].as_ns(),
        50 * MS + o_r + spin.proc_spin_ns[0]
    );
}

#[test]
fn a_spinning_yielder_gives_its_cpu_up_when_another_process_becomes_runnable() {
    // Job B's rank 0 on node 0 first waits 4 ms for a message of its rank 1: the
    // yielder (job A's rank 0) is then alone and spins; when B's rank 0 is woken
    // by its message, the yielder gives its CPU up at once.
    let mut b = late_message(4 * MS, SendBy::IsendWait);
    b.each(|r| {
        if r == 0 {
            vec![Op::Compute { ns: 20 * MS }]
        } else {
            vec![]
        }
    });
    let mut js = jobs(false);
    js.push(job(b.build("late", 1.0)));
    // Job B's rank 0 blocks (so that it is woken); job A's rank 0 yields.
    let (plat, out) = run(&js, &|| Box::new(YieldOrBlock));
    // The yielder spun while alone only: from 0 (B's rank 0 blocks at once) to
    // B's wake-up at its message's arrival, never during B's 20 ms of compute.
    let wire = (8.0 * 1000.0 / plat.bandwidth_mb_s).round() as i64;
    let woken = out.proc_end[3].as_ns() + wire + us(plat.latency_us);
    assert_eq!(out.proc_spin_ns[0], woken);
    assert_eq!(out.counters.interrupts, 1, "only B's wake-up");
}

/// Job A's ranks (pids 0, 1) yield; every other process blocks.
struct YieldOrBlock;
impl NodePolicy for YieldOrBlock {
    fn name(&self) -> String {
        "yield-or-block".into()
    }
    fn wait_mode(&mut self, _v: &dyn NodeView, p: Pid, _k: WaitKind) -> WaitMode {
        if p < 2 {
            WaitMode::Yield
        } else {
            WaitMode::Block
        }
    }
}
