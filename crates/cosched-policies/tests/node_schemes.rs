//! Each node scheme's defining behaviour on a tiny process-level scenario, run by
//! the engine with the policy built from the registry (the adaptive schemes `ics`
//! and `fcs` at the end).

use cosched_des::SimTime;
use cosched_engine::os::Pid;
use cosched_engine::process::policy::{NodeAction, NodePolicy, NodeView, WaitKind, WaitMode};
use cosched_engine::process::{simulate_processes, ProcJob, ProcOptions, ProcOutput};
use cosched_model::node::{NodePlatform, OsConfig};
use cosched_model::program::{Builder, Op};
use cosched_policies::build_node;
use std::sync::{Arc, Mutex};

/// Linux 2.4 with a 50 ms slice (5 ticks: the slice ends at the node's 5th tick
/// boundary after the dispatch, 40 to 50 ms later, as each node's timer has its own
/// seeded phase), no context-switch cost.
fn platform(nodes: u32) -> NodePlatform {
    NodePlatform {
        nodes,
        cpus_per_node: 1,
        job_memory_mb: 900.0,
        latency_us: 7.0,
        bandwidth_mb_s: 200.0,
        send_overhead_us: 1.0,
        recv_overhead_us: 1.0,
        byte_overhead_ns: 0.0,
        eager_copy_ns: 0.0,
        interrupt_us: 10.0,
        context_switch_us: 0.0,
        eager_limit_bytes: None,
        idle_watts: 219.10,
        busy_watts: 238.068,
        disk_mb_s: 20.0,
        swap: Default::default(),
        os_noise_tick_us: 0.0,
        boost_recheck: Default::default(),
        cpu_speed: 1.0,
        os: OsConfig::Linux24 {
            tick_ms: 10.0,
            base_ticks: 5,
        },
    }
}

fn job(b: Builder, name: &str) -> ProcJob {
    ProcJob::new(b.build(name, 1.0), SimTime::ZERO)
}

fn run(spec: &str, plat: &NodePlatform, jobs: &[ProcJob], mpl: u32) -> ProcOutput {
    let make = || build_node(spec).unwrap();
    simulate_processes(
        plat,
        jobs,
        &make,
        &ProcOptions {
            mpl,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{spec}: {e}"))
}

const MS: i64 = 1_000_000;

/// Rank 1 computes 10 ms then sends `bytes` to rank 0, which waits in a receive.
fn late_sender(bytes: u64) -> ProcJob {
    let mut b = Builder::new(2);
    b.each(|r| match r {
        0 => vec![Op::Recv {
            from: Some(1),
            tag: 1,
        }],
        _ => vec![
            Op::Compute { ns: 10 * MS },
            Op::Send {
                to: 0,
                bytes,
                tag: 1,
            },
        ],
    });
    job(b, "late_sender")
}

#[test]
fn sb_receiver_spins_at_most_the_spin_time_and_nls_does_not() {
    let plat = platform(2);
    let jobs = [late_sender(8)];
    let sb = run("sb", &plat, &jobs, 1);
    let nls = run("nls", &plat, &jobs, 1);
    // One receive wait: SB spins exactly its 300 us, then blocks until the message.
    assert_eq!(sb.proc_spin_ns[0], 300_000);
    assert_eq!(
        sb.counters.interrupts, 1,
        "the blocked receiver is woken once"
    );
    // NLS spins through the sender's whole 10 ms compute.
    assert!(nls.proc_spin_ns[0] > 10 * MS - 1, "{}", nls.proc_spin_ns[0]);
    // A different limit is honoured.
    let sb50 = run("sb[spin_us=50]", &plat, &jobs, 1);
    assert_eq!(sb50.proc_spin_ns[0], 50_000);
}

#[test]
fn sb_sender_spins_and_cc_sender_spin_blocks() {
    // 200 KB, a rendezvous, take 1 ms on the wire: the request (1 latency) wakes
    // the blocked receiver, which answers at once (1 latency back), the data
    // crosses and the acknowledgement returns: 1 ms + 4 latencies.
    let mut plat = platform(2);
    plat.eager_limit_bytes = Some(16_288);
    let jobs = [late_sender(200_000)];
    let sb = run("sb", &plat, &jobs, 1);
    let cc = run("cc", &plat, &jobs, 1);
    let ack_wait = MS + 4 * 7_000;
    assert_eq!(
        sb.proc_spin_ns[1], ack_wait,
        "SB's sender spins the whole wait"
    );
    assert_eq!(
        cc.proc_spin_ns[1], 300_000,
        "CC's sender spins 300 us then blocks"
    );
    assert_eq!(cc.proc_spin_ns[0], 300_000, "CC's receiver too");
}

/// Node 0 holds a CPU hog (admitted first, so it runs first) and rank 0 of a pair
/// whose rank 1 (node 1) sends it a message after 1 ms. Returns the run.
fn hog_and_pair(spec: &str) -> ProcOutput {
    run(spec, &platform(2), &[hog(), pair()], 2)
}

/// A CPU hog computing 200 ms.
fn hog() -> ProcJob {
    let mut hog = Builder::new(1);
    hog.all(Op::Compute { ns: 200 * MS });
    job(hog, "hog")
}

/// A pair: rank 0 waits in a receive, rank 1 computes 1 ms then sends it 8 bytes.
fn pair() -> ProcJob {
    let mut pair = Builder::new(2);
    pair.each(|r| match r {
        0 => vec![Op::Recv {
            from: Some(1),
            tag: 1,
        }],
        _ => vec![
            Op::Compute { ns: MS },
            Op::Isend {
                to: 0,
                bytes: 8,
                tag: 1,
            },
            Op::Wait,
        ],
    });
    job(pair, "pair")
}

/// Pids: 0 is the hog, 1 the pair's receiver on node 0, 2 its sender.
const RECEIVER: usize = 1;

#[test]
fn dcs_interrupts_and_boosts_a_descheduled_receiver() {
    let dcs = hog_and_pair("dcs");
    assert_eq!(dcs.counters.policy_interrupts, 1);
    assert_eq!(dcs.counters.boosts, 1);
    assert_eq!(
        dcs.counters.boost_preemptions, 1,
        "the boost preempts the hog at once"
    );
    // The receiver runs as soon as its message lands (~1 ms), not after the hog's slice.
    let end = dcs.proc_end[RECEIVER].as_ns();
    assert!(end < 2 * MS, "receiver ended at {end} ns");
    // Without a boost it waits for the hog's slice (5 ticks: at least 40 ms).
    let nls = hog_and_pair("nls");
    assert_eq!(nls.counters.policy_interrupts + nls.counters.boosts, 0);
    assert!(nls.proc_end[RECEIVER].as_ns() >= 40 * MS);
}

#[test]
fn pb_recommends_at_the_next_scheduling_point_without_preempting() {
    // Node 0: hog 1 (admitted first, runs first), the pair's receiver, rank 0 of
    // hog 2 (admitted last: at the head of the run queue; two processes, so that it
    // has a process on node 0 whatever the placement). The message lands at ~1 ms
    // and the 2 ms scan selects the receiver, but nothing is preempted: hog 1 keeps
    // the CPU until its slice ends (5 ticks: 40 to 50 ms), and there PB's
    // recommendation puts the receiver before hog 2.
    let plat = platform(2);
    let mut hog2 = Builder::new(2);
    hog2.all(Op::Compute { ns: 200 * MS });
    let jobs = [hog(), pair(), job(hog2, "hog2")];
    // Pids: 0 hog 1, 1 the receiver, 2 the sender, 3 and 4 hog 2.
    let pb = run("pb[period_us=2000]", &plat, &jobs, 3);
    assert_eq!(pb.counters.boosts, 0);
    assert_eq!(pb.counters.boost_preemptions, 0);
    assert_eq!(pb.counters.policy_interrupts, 0);
    assert!(pb.counters.hints_followed >= 1);
    let end = pb.proc_end[1].as_ns();
    assert!(
        (40 * MS..=50 * MS + MS / 10).contains(&end),
        "receiver ended at {end} ns"
    );
    // Without the recommendation hog 2 (first on the list among equals) runs first.
    let nls = run("nls", &plat, &jobs, 3);
    assert!(nls.proc_end[1].as_ns() >= 80 * MS);
}

#[test]
fn a_pb_recommendation_never_preempts_a_process_of_the_same_job() {
    // One job, ranks 0 and 1 on node 0, rank 2 on node 1. Rank 1 (at the head of
    // the run queue, it runs first) computes 30 ms, shorter than its slice; rank 0
    // waits for rank 2's message, which lands at ~1 ms and is selected by the 2 ms
    // scan. Rank 1 is not preempted: it ends at exactly 30 ms (no switch cost), and
    // rank 0 runs then.
    let plat = platform(2);
    let mut b = Builder::new(3);
    b.each(|r| match r {
        0 => vec![Op::Recv {
            from: Some(2),
            tag: 1,
        }],
        1 => vec![Op::Compute { ns: 30 * MS }],
        _ => vec![
            Op::Compute { ns: MS },
            Op::Isend {
                to: 0,
                bytes: 8,
                tag: 1,
            },
            Op::Wait,
        ],
    });
    let jobs = [job(b, "trio").with_ranks_per_node(2)];
    let pb = run("pb[period_us=2000]", &plat, &jobs, 2);
    assert_eq!(pb.proc_end[1].as_ns(), 30 * MS);
    assert_eq!(pb.counters.boost_preemptions, 0);
    assert!(pb.proc_end[0].as_ns() > 30 * MS);
}

#[test]
fn at_an_epoch_boundary_pb_recommends_away_from_the_process_linux_keeps() {
    // The rule behind PB's loss of lockstep on spin-only jobs (docs/models/pb-lockstep.md).
    // Node 0: rank 0 of a pair (admitted first, runs first) computes 60 ms, then receives;
    // a hog. Node 1: the pair's sender (computes 10 ms, sends 8 bytes, ends) and the hog's
    // other rank. Node 0's slices (5 ticks, boundaries at the node's own phase):
    // rank 0 runs 0..r1 (r1 in 40..50 ms, the 5th boundary) with 60 - r1 ms left and the
    // message unconsumed since ~10 ms; the hog runs r1..r1 + 50. Both counters are spent:
    // the epoch gives both 5 ticks. Linux keeps the hog (the same-address-space +1), so
    // rank 0 resumes at r1 + 100 and ends at 160 ms; PB recommends rank 0 (not running,
    // a message unconsumed), which resumes at r1 + 50 and ends at 110 ms, whatever r1.
    let plat = platform(2);
    let mut pair = Builder::new(2);
    pair.each(|r| match r {
        0 => vec![
            Op::Compute { ns: 60 * MS },
            Op::Recv {
                from: Some(1),
                tag: 1,
            },
        ],
        _ => vec![
            Op::Compute { ns: 10 * MS },
            Op::Isend {
                to: 0,
                bytes: 8,
                tag: 1,
            },
            Op::Wait,
        ],
    });
    let mut hog = Builder::new(2);
    hog.all(Op::Compute { ns: 200 * MS });
    let jobs = [job(pair, "pair"), job(hog, "hog")];
    // Pids: 0 rank 0 (node 0), 1 the sender (node 1), 2 and 3 the hog.
    let window = |out: &ProcOutput, at_ms: i64| {
        let end = out.proc_end[0].as_ns();
        assert!(
            (at_ms * MS..=at_ms * MS + MS / 10).contains(&end),
            "rank 0 ended at {end} ns, expected {at_ms} ms"
        );
    };
    let nls = run("nls", &plat, &jobs, 2);
    window(&nls, 160);
    assert_eq!(nls.counters.hints_followed, 0);
    let pb = run("pb[period_us=2000]", &plat, &jobs, 2);
    window(&pb, 110);
    assert!(pb.counters.hints_followed >= 1);
    assert_eq!(pb.counters.boost_preemptions, 0);
}

#[test]
fn cc_boosts_on_arrival_like_dcs() {
    let cc = hog_and_pair("cc");
    assert_eq!(cc.counters.policy_interrupts, 1);
    assert_eq!(cc.counters.boost_preemptions, 1);
    assert!(cc.proc_end[RECEIVER].as_ns() < 2 * MS);
}

/// (process, entering, actions answered) per `on_collective` call.
type CollectiveLog = Arc<Mutex<Vec<(Pid, bool, Vec<NodeAction>)>>>;

/// Records what HYBRID answers at collectives and messages, and whether the
/// engine applied it (the boost counter).
struct Recorder {
    inner: Box<dyn NodePolicy>,
    log: CollectiveLog,
    other: Arc<Mutex<Vec<NodeAction>>>,
}

impl NodePolicy for Recorder {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn wait_mode(&mut self, v: &dyn NodeView, p: Pid, kind: WaitKind) -> WaitMode {
        self.inner.wait_mode(v, p, kind)
    }
    fn on_message(&mut self, v: &dyn NodeView, p: Pid, running: bool, out: &mut Vec<NodeAction>) {
        self.inner.on_message(v, p, running, out);
        self.other.lock().unwrap().extend(out.iter().copied());
    }
    fn on_wait_begin(&mut self, v: &dyn NodeView, p: Pid, k: WaitKind, out: &mut Vec<NodeAction>) {
        self.inner.on_wait_begin(v, p, k, out);
        self.other.lock().unwrap().extend(out.iter().copied());
    }
    fn on_collective(&mut self, v: &dyn NodeView, p: Pid, enter: bool, out: &mut Vec<NodeAction>) {
        self.inner.on_collective(v, p, enter, out);
        self.log.lock().unwrap().push((p, enter, out.clone()));
    }
}

#[test]
fn hybrid_blocks_at_once_and_boosts_exactly_inside_collectives() {
    let plat = platform(4);
    let mut b = Builder::new(4);
    b.all(Op::Compute { ns: MS });
    b.barrier();
    // Point-to-point exchange between the collectives: no boost there.
    b.each(|r| {
        vec![
            Op::Isend {
                to: r ^ 1,
                bytes: 8,
                tag: 7,
            },
            Op::Recv {
                from: Some(r ^ 1),
                tag: 7,
            },
            Op::Wait,
        ]
    });
    b.allreduce(8);
    let jobs = [job(b, "hybrid")];
    let log = Arc::new(Mutex::new(Vec::new()));
    let other = Arc::new(Mutex::new(Vec::new()));
    let make = || -> Box<dyn NodePolicy> {
        Box::new(Recorder {
            inner: build_node("hybrid").unwrap(),
            log: log.clone(),
            other: other.clone(),
        })
    };
    let out = simulate_processes(&plat, &jobs, &make, &ProcOptions::default()).unwrap();
    let log = log.lock().unwrap();
    // Two collectives per rank: boost on each entry, restore on each exit, in order.
    assert_eq!(log.len(), 4 * 2 * 2);
    for p in 0..4u32 {
        let mine: Vec<_> = log.iter().filter(|(q, _, _)| *q == p).collect();
        let expect = [true, false, true, false];
        for ((_, enter, acts), e) in mine.iter().zip(expect) {
            assert_eq!(*enter, e);
            let want = if e {
                NodeAction::Boost(p)
            } else {
                NodeAction::Unboost(p)
            };
            assert_eq!(acts, &vec![want]);
        }
    }
    assert!(
        other.lock().unwrap().is_empty(),
        "no action outside collectives"
    );
    assert_eq!(out.counters.boosts, 4 * 2, "the engine applied every boost");
    assert_eq!(out.counters.spin_ns, 0, "immediate blocking: no spinning");
    assert_eq!(out.counters.policy_interrupts, 0);
}

/// Node 0: a CPU hog (admitted first) and rank 0 of a pair, which computes 45 ms
/// of its 50 ms slice, then waits for rank 1's message (sent at 96 ms). When the
/// message lands, the hog has just started a fresh slice after an epoch
/// recomputation, and Linux 2.4's goodness alone (26 vs 25) does not let the woken
/// receiver preempt it. With `coll`, the wait is inside a collective.
fn collective_wake(spec: &str, coll: bool) -> ProcOutput {
    use cosched_model::program::Collective;
    let plat = platform(2);
    let mut hog = Builder::new(1);
    hog.all(Op::Compute { ns: 300 * MS });
    let mut pair = Builder::new(2);
    pair.each(|r| {
        let mut ops = match r {
            0 => vec![
                Op::Compute { ns: 45 * MS },
                Op::Recv {
                    from: Some(1),
                    tag: 1,
                },
            ],
            _ => vec![
                Op::Compute { ns: 96 * MS },
                Op::Send {
                    to: 0,
                    bytes: 8,
                    tag: 1,
                },
            ],
        };
        if coll {
            let at = ops.len() - 1;
            ops.insert(at, Op::CollBegin(Collective::Barrier));
            ops.push(Op::CollEnd(Collective::Barrier));
        }
        ops
    });
    run(spec, &plat, &[job(hog, "hog"), job(pair, "pair")], 2)
}

#[test]
fn hybrid_collective_boost_lets_the_woken_receiver_preempt() {
    let boosted = collective_wake("hybrid", true);
    let end = boosted.proc_end[RECEIVER].as_ns();
    assert!(
        (96 * MS..97 * MS).contains(&end),
        "receiver ended at {end} ns"
    );
    // The same wait outside a collective, or without HYBRID, waits for the hog's slice
    // (which ends on a tick boundary at least 130 ms in).
    for (spec, coll) in [("hybrid", false), ("block", true)] {
        let out = collective_wake(spec, coll);
        let end = out.proc_end[RECEIVER].as_ns();
        assert!(
            end >= 130 * MS,
            "{spec} coll={coll}: receiver ended at {end} ns"
        );
        assert_eq!(out.counters.boosts, 0);
    }
}

#[test]
fn gm_block_spins_a_millisecond_then_blocks() {
    // GM's gm_blocking_receive: 1 ms of polling, then sleep; the sender computes 10 ms.
    let out = run("block[spin_us=1000]", &platform(2), &[late_sender(8)], 1);
    assert_eq!(out.proc_spin_ns[0], MS, "the receiver spins exactly 1 ms");
    assert_eq!(out.counters.interrupts, 1, "then blocks and is woken by the message");
    // Immediate blocking spins not at all.
    let out = run("block", &platform(2), &[late_sender(8)], 1);
    assert_eq!(out.proc_spin_ns[0], 0);
    assert_eq!(out.counters.interrupts, 1);
}

/// As [`collective_wake`], the wait being rank 0's part of an `MPI_Reduce` to it
/// (rank 1 computes 96 ms, then sends its partial result).
fn reduce_wake(spec: &str) -> ProcOutput {
    let plat = platform(2);
    let mut hog = Builder::new(1);
    hog.all(Op::Compute { ns: 300 * MS });
    let mut pair = Builder::new(2);
    pair.each(|r| vec![Op::Compute { ns: if r == 0 { 45 * MS } else { 96 * MS } }]);
    pair.reduce(0, 8);
    run(spec, &plat, &[job(hog, "hog"), job(pair, "pair")], 2)
}

#[test]
fn hybrid_boosts_a_process_waiting_in_a_reduce() {
    let boosted = reduce_wake("hybrid");
    let end = boosted.proc_end[RECEIVER].as_ns();
    assert!(
        (96 * MS..97 * MS).contains(&end),
        "reduce root ended at {end} ns"
    );
    assert_eq!(boosted.counters.boosts, 2, "one boost per rank entering the reduce");
    // Without the collective boost it waits for the hog's slice.
    let out = reduce_wake("block");
    assert!(out.proc_end[RECEIVER].as_ns() >= 130 * MS);
}

#[test]
fn sb_spins_for_send_completions_and_spin_blocks_for_receive_completions() {
    // Rank 0: a 1 ms non-blocking send and its Wait (send completion only), then a
    // posted receive and its Wait (rank 1 sends 10 ms later: receive completion).
    let mut plat = platform(2);
    plat.eager_limit_bytes = Some(16_288);
    let mut b = Builder::new(2);
    b.each(|r| match r {
        0 => vec![
            Op::Isend {
                to: 1,
                bytes: 200_000,
                tag: 1,
            },
            Op::Wait,
            Op::Irecv {
                from: Some(1),
                tag: 2,
            },
            Op::Wait,
        ],
        _ => vec![
            Op::Recv {
                from: Some(0),
                tag: 1,
            },
            Op::Compute { ns: 10 * MS },
            Op::Isend {
                to: 0,
                bytes: 8,
                tag: 2,
            },
            Op::Wait,
        ],
    });
    let jobs = [job(b, "completions")];
    let sb = run("sb", &plat, &jobs, 1);
    // The send completion (a rendezvous answered by the spinning receiver) spins
    // through request, answer, 1 ms of data and acknowledgement; the receive
    // completion spins 300 us, then blocks.
    assert_eq!(sb.proc_spin_ns[0], MS + 4 * 7_000 + 300_000);
    // CC spin-blocks both.
    let cc = run("cc", &plat, &jobs, 1);
    assert_eq!(cc.proc_spin_ns[0], 300_000 + 300_000);
}

/// Node 0 holds A (rank 0 of job 0), a hog H (job 1) and B (rank 0 of job 2); A's
/// and B's partners on node 1 send them 3 and 1 messages while they compute (so no
/// arrival boost: they are running). A, admitted first, runs at once; Linux 2.4 puts
/// each new process at the head of its run queue, so B (admitted last) runs next,
/// then H; A and B wait in the queue with 3 and 1 unconsumed messages, their counters
/// spent, B first on the queue. Returns the run
/// with its timeline.
fn most_messages(spec: &str) -> ProcOutput {
    let plat = platform(2);
    let pair = |n: u32, send_at_ms: i64| {
        let mut b = Builder::new(2);
        b.each(|r| match r {
            0 => {
                let mut ops = vec![Op::Compute { ns: 100 * MS }];
                ops.extend((0..n).map(|_| Op::Recv {
                    from: Some(1),
                    tag: 1,
                }));
                ops
            }
            _ => {
                let mut ops = vec![Op::Compute {
                    ns: send_at_ms * MS,
                }];
                ops.extend((0..n).map(|_| Op::Isend {
                    to: 0,
                    bytes: 8,
                    tag: 1,
                }));
                ops.push(Op::Wait);
                ops
            }
        });
        b
    };
    let mut hog = Builder::new(1);
    hog.all(Op::Compute { ns: 300 * MS });
    let jobs = [job(pair(3, 1), "a"), job(hog, "hog"), job(pair(1, 60), "b")];
    let make = || build_node(spec).unwrap();
    simulate_processes(
        &plat,
        &jobs,
        &make,
        &ProcOptions {
            mpl: 3,
            record_timeline: true,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{spec}: {e}"))
}

/// Which of A (pid 0) and B (pid 3) runs first once the hog (pid 2) has had its slice.
fn first_after_hog(out: &ProcOutput) -> u32 {
    let cpu = |pid: u32| {
        out.timeline
            .iter()
            .filter(move |s| s.pid == pid && s.cpu.is_some())
    };
    let hog_start = cpu(2).map(|s| s.start).min().unwrap();
    cpu(0)
        .chain(cpu(3))
        .filter(|s| s.start > hog_start)
        .min_by_key(|s| s.start)
        .unwrap()
        .pid
}

#[test]
fn cc_periodic_pick_runs_the_process_with_most_unconsumed_messages_first() {
    // With CC's 10 ms period, the timers during the hog's slice recommend A (3
    // messages) over B (1); when the hog's slice ends every counter is spent, the
    // epoch is recomputed, and the recommendation is followed.
    let cc = most_messages("cc");
    assert_eq!(first_after_hog(&cc), 0, "A runs first");
    assert!(cc.counters.hints_followed >= 1);
    assert_eq!(
        cc.counters.boosts, 0,
        "no arrival boost: the receivers were running"
    );
    // With a period longer than the run, nothing is recommended: Linux 2.4 runs the
    // process first on its run queue, B.
    let slow = most_messages("cc[period_us=10000000]");
    assert_eq!(first_after_hog(&slow), 3, "B runs first");
    assert_eq!(slow.counters.hints_followed, 0);
}

/// A policy with every op of `inner` but `on_ack`.
struct NoAck(Box<dyn NodePolicy>);

impl NodePolicy for NoAck {
    fn name(&self) -> String {
        self.0.name()
    }
    fn wait_mode(&mut self, v: &dyn NodeView, p: Pid, kind: WaitKind) -> WaitMode {
        self.0.wait_mode(v, p, kind)
    }
    fn recommend(&mut self, v: &dyn NodeView) -> Option<Pid> {
        self.0.recommend(v)
    }
    fn on_message(&mut self, v: &dyn NodeView, p: Pid, running: bool, out: &mut Vec<NodeAction>) {
        self.0.on_message(v, p, running, out)
    }
    fn period(&self) -> Option<SimTime> {
        self.0.period()
    }
    fn on_timer(&mut self, v: &dyn NodeView, out: &mut Vec<NodeAction>) {
        self.0.on_timer(v, out)
    }
}

#[test]
fn cc_interrupts_and_boosts_a_sender_blocked_on_the_acknowledgement() {
    // Node 0: the sender S (admitted first, so it runs first) and a hog; S's
    // blocking 200 KB send (a rendezvous, answered at once by the spinning receiver)
    // is acknowledged after 1 ms + 4 latencies, by which time S has spun 300 us and
    // blocked, and the hog runs.
    let mut plat = platform(2);
    plat.eager_limit_bytes = Some(16_288);
    let mut pair = Builder::new(2);
    pair.each(|r| match r {
        0 => vec![Op::Send {
            to: 1,
            bytes: 200_000,
            tag: 1,
        }],
        _ => vec![Op::Recv {
            from: Some(0),
            tag: 1,
        }],
    });
    let mut hog = Builder::new(1);
    hog.all(Op::Compute { ns: 200 * MS });
    let jobs = [job(pair, "pair"), job(hog, "hog")];
    let ack_at = 1_000 + MS + 4 * 7_000;
    let cc = run("cc", &plat, &jobs, 2);
    assert_eq!(cc.counters.ack_boosts, 1);
    // The acknowledgement's interrupt is the sender's wake-up: charged once.
    assert_eq!(cc.counters.policy_interrupts, 0);
    assert_eq!(cc.counters.boost_preemptions, 0);
    // The boosted sender preempts the hog at once and ends after the interrupt.
    assert_eq!(cc.proc_end[0].as_ns(), ack_at + 10_000);
    // Without the acknowledgement op the woken sender does not beat the hog's
    // goodness and waits for its slice (5 ticks: at least 40 ms).
    let make = || -> Box<dyn NodePolicy> { Box::new(NoAck(build_node("cc").unwrap())) };
    let plain = simulate_processes(
        &plat,
        &jobs,
        &make,
        &ProcOptions {
            mpl: 2,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(plain.counters.ack_boosts, 0);
    assert!(
        plain.proc_end[0].as_ns() >= 40 * MS,
        "{}",
        plain.proc_end[0]
    );
}

/// One job of `program` alone on the 2-node platform under `spec`.
fn run_one(spec: &str, program: &cosched_model::program::Program) -> ProcOutput {
    run(
        spec,
        &platform(2),
        &[ProcJob::new(program.clone(), SimTime::ZERO)],
        1,
    )
}

/// Rank 0 waits for tag 1; rank 1 first sends three tag-2 messages `gap_us`
/// apart (computing in between), then the tag-1 message; rank 0 then takes the
/// tag-2 messages, already buffered.
fn chatty_sender(gap_us: i64) -> cosched_model::program::Program {
    let mut b = Builder::new(2);
    b.each(|r| {
        let send = |tag| Op::Isend {
            to: 0,
            bytes: 8,
            tag,
        };
        let recv = |tag| Op::Recv { from: Some(1), tag };
        if r == 0 {
            vec![recv(1), recv(2), recv(2), recv(2)]
        } else {
            let gap = Op::Compute { ns: gap_us * 1000 };
            vec![send(2), gap, send(2), gap, send(2), gap, send(1)]
        }
    });
    b.build("chatty", 1.0)
}

/// Baseline spin 18 us (rtt 18 us, no switch cost). A tag-2 message lands 8.04
/// us after its send starts (1 us overhead, 7 us latency, 40 ns on the wire),
/// the next ones every `gap + 1` us.
/// - ICS, gap 10 us: each arrival while rank 0 spins extends its spin by 18 us,
///   and the next comes 11 us later: it spins until the tag-1 message, never
///   blocks, no wake-up interrupt.
/// - SB with the same 18 us spin: it blocks at 18 us and the tag-1 message wakes
///   it: one interrupt.
/// - ICS, gap 30 us: the first arrival (8.04 us) extends the spin to 26.04 us,
///   the next comes at 39.04 us: it blocks at 26.04 us; one interrupt.
#[test]
fn ics_keeps_spinning_while_messages_keep_arriving() {
    let fast = chatty_sender(10);
    let ics = run_one("ics[rtt_us=18,switch_us=0]", &fast);
    assert_eq!(ics.counters.interrupts, 0);
    assert!(ics.proc_spin_ns[0] > 30_000, "{}", ics.proc_spin_ns[0]);
    let sb = run_one("sb[spin_us=18]", &fast);
    assert_eq!(sb.counters.interrupts, 1);
    assert_eq!(sb.proc_spin_ns[0], 18_000);
    let slow = run_one("ics[rtt_us=18,switch_us=0]", &chatty_sender(30));
    assert_eq!(slow.counters.interrupts, 1);
    assert_eq!(slow.proc_spin_ns[0], 26_040);
    for out in [&ics, &sb, &slow] {
        assert_eq!(out.counters.action_errors.total(), 0);
    }
}

/// A coarse-grained exchange, 4 rounds: rank 0 computes 20 ms, sends to rank 1
/// and waits for its answer; rank 1 waits, computes 20 ms, answers. Every wait
/// lasts about 20 ms. Each process waits 4 times; under FCS with a window of 2
/// its first two waits are CS (spin 300 us, then block); then:
/// - `gran_ms=10`: 20 ms between waits is coarse: DC, it blocks at once;
/// - `gran_ms=1000`: fine-grained with 20 ms waits: F, it spins 29.4 us;
/// - a window longer than the run: it stays CS and spins 300 us every time.
#[test]
fn fcs_classes_follow_granularity_and_wait_time() {
    let mut b = Builder::new(2);
    b.each(|r| {
        let compute = Op::Compute { ns: 20_000_000 };
        let one = if r == 0 {
            vec![
                compute,
                Op::Isend {
                    to: 1,
                    bytes: 8,
                    tag: 1,
                },
                Op::Recv {
                    from: Some(1),
                    tag: 1,
                },
            ]
        } else {
            vec![
                Op::Recv {
                    from: Some(0),
                    tag: 1,
                },
                compute,
                Op::Isend {
                    to: 0,
                    bytes: 8,
                    tag: 1,
                },
            ]
        };
        one.iter().cycle().take(4 * one.len()).copied().collect()
    });
    let program = b.build("coarse", 1.0);
    let spin = |spec| run_one(spec, &program).proc_spin_ns.iter().sum::<i64>();
    assert_eq!(spin("fcs[window=1000]"), 2 * 4 * 300_000);
    assert_eq!(
        spin("fcs[window=2,gran_ms=1000]"),
        2 * (2 * 300_000 + 2 * 29_400)
    );
    assert_eq!(spin("fcs[window=2]"), 2 * 2 * 300_000);
}
