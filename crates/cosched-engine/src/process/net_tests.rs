//! The MPI protocols of [`super::net`] on tiny scenarios worked by hand.

use super::tests::{job, linux, platform, run};
use super::*;
use cosched_model::program::Builder;

/// Two ranks on the test platform with MPICH-GM's eager limit; rank 0 runs `r0`,
/// rank 1 runs `r1`.
fn pair(r0: Vec<Op>, r1: Vec<Op>) -> (NodePlatform, Vec<ProcJob>) {
    let mut plat = platform(2, linux());
    plat.eager_limit_bytes = Some(16_288);
    let mut b = Builder::new(2);
    b.each(|r| if r == 0 { r0.clone() } else { r1.clone() });
    (plat, vec![job(b.build("pair", 1.0))])
}

/// (send overhead, receive overhead, latency, interrupt) of the platform, ns.
fn costs(plat: &NodePlatform) -> (i64, i64, i64, i64) {
    (
        us(plat.send_overhead_us),
        us(plat.recv_overhead_us),
        us(plat.latency_us),
        us(plat.interrupt_us),
    )
}

fn wire(plat: &NodePlatform, bytes: u64) -> i64 {
    (bytes as f64 * 1000.0 / plat.bandwidth_mb_s).round() as i64
}

const MS: i64 = 1_000_000;

/// Rank 1: computes 5 ms, then receives from rank 0.
fn late_receiver() -> Vec<Op> {
    vec![
        Op::Compute { ns: 5 * MS },
        Op::Recv {
            from: Some(0),
            tag: 1,
        },
    ]
}

/// Rank 0: sends 1000 bytes (below the eager limit) to rank 1, then computes 1 ms.
fn eager_sender() -> Vec<Op> {
    vec![
        Op::Send {
            to: 1,
            bytes: 1000,
            tag: 1,
        },
        Op::Compute { ns: MS },
    ]
}

#[test]
fn an_eager_send_completes_without_blocking() {
    // Rank 0 sends 1000 bytes (below the limit) while rank 1 computes for 5 ms, then
    // computes 1 ms; both block at once in any wait.
    let (plat, jobs) = pair(eager_sender(), late_receiver());
    let out = run(&plat, &jobs, true, 1);
    let (o_s, o_r, _, _) = costs(&plat);
    // The send is complete once copied out: no wait, no wake-up.
    assert_eq!(out.proc_end[0].as_ns(), o_s + MS);
    assert_eq!(out.proc_cpu_ns[0], o_s + MS);
    // The message waits in rank 1's buffer; it consumes it at 5 ms.
    assert_eq!(out.proc_end[1].as_ns(), 5 * MS + o_r);
    assert_eq!(out.counters.interrupts, 0);
    assert_eq!(out.counters.rendezvous, 0);
}

#[test]
fn each_end_pays_the_per_byte_cpu_of_a_message() {
    // A TCP-like host cost of 2 ns per byte at each end (`byte_overhead_ns`). Rank 0
    // sends 1000 bytes, then computes 1 ms; rank 1 computes 5 ms, then receives. By
    // hand (o_s = 1 us, o_r = 1.5 us): the send costs 1,000 + 1,000 x 2 = 3,000 ns of
    // CPU, so rank 0 ends at 3,000 ns + 1 ms = 1,003,000 ns; the message waits in rank
    // 1's buffer, whose receive costs 1,500 + 2,000 = 3,500 ns: it ends at 5 ms +
    // 3,500 ns = 5,003,500 ns. Useful CPU: 6 ms of compute + 3,000 + 3,500 ns.
    let (mut plat, jobs) = pair(eager_sender(), late_receiver());
    plat.byte_overhead_ns = 2.0;
    let out = run_with_byte_costs(&plat, &jobs);
    assert_eq!(out.proc_end[0].as_ns(), 1_003_000);
    assert_eq!(out.proc_cpu_ns[0], 1_003_000);
    assert_eq!(out.proc_end[1].as_ns(), 5_003_500);
    assert_eq!(out.proc_cpu_ns[1], 5_003_500);
    assert_eq!(out.counters.useful_ns, 6 * MS + 3_000 + 3_500);
}

/// A run in which every wait blocks, without the test runner's work check (which
/// counts no per-byte CPU; the engine's own invariant does).
fn run_with_byte_costs(plat: &NodePlatform, jobs: &[ProcJob]) -> ProcOutput {
    let make = || -> Box<dyn NodePolicy> { Box::new(super::tests::Block) };
    simulate_processes(plat, jobs, &make, &ProcOptions::default()).expect("run")
}

/// [`pair`] with rank 0 sending `bytes` to the late receiver, at `copy` ns of eager
/// copy per byte at each end, every wait blocking.
fn copy_run(bytes: u64, copy: f64) -> ProcOutput {
    let mut sender = eager_sender();
    sender[0] = Op::Send {
        to: 1,
        bytes,
        tag: 1,
    };
    let (mut plat, jobs) = pair(sender, late_receiver());
    plat.eager_copy_ns = copy;
    run_with_byte_costs(&plat, &jobs)
}

#[test]
fn an_eager_message_pays_the_copies_a_rendezvous_one_does_not() {
    // MPICH-GM's eager copies at 1.5 ns per byte at each end (`eager_copy_ns`), no
    // TCP cost. Rank 0 sends 1000 bytes (eager), then computes 1 ms; rank 1 computes
    // 5 ms, then receives. By hand (o_s = 1 us, o_r = 1.5 us): the send costs 1,000 +
    // 1,000 x 1.5 = 2,500 ns of CPU, so rank 0 ends at 1,002,500 ns; the receive
    // costs 1,500 + 1,500 = 3,000 ns: rank 1 ends at 5,003,000 ns.
    let out = copy_run(1000, 1.5);
    assert_eq!(out.proc_end[0].as_ns(), 1_002_500);
    assert_eq!(out.proc_cpu_ns[0], 1_002_500);
    assert_eq!(out.proc_end[1].as_ns(), 5_003_000);
    assert_eq!(out.counters.useful_ns, 6 * MS + 2_500 + 3_000);
    // 16,288 bytes (the limit) go by rendezvous: DMA from and to the user's
    // buffers, no copy, so the run is the one without the copy cost.
    let big = |copy: f64| {
        let out = copy_run(16_288, copy);
        assert_eq!(out.counters.rendezvous, 1);
        (out.proc_end, out.proc_cpu_ns)
    };
    assert_eq!(big(1.5), big(0.0));
    // One byte less is eager: 16,287 x 1.5 = 24,430.5, rounded to 24,431 ns at each end.
    let out = copy_run(16_287, 1.5);
    assert_eq!(out.counters.rendezvous, 0);
    assert_eq!(out.proc_cpu_ns[0], 1_000 + 24_431 + MS);
    assert_eq!(out.proc_cpu_ns[1], 5 * MS + 1_500 + 24_431);
}

/// A blocking receive from rank `from` with `tag`.
fn recv(from: Rank, tag: u32) -> Op {
    Op::Recv {
        from: Some(from),
        tag,
    }
}

/// Rank 0 sends 1000 bytes (tag 1) to rank 1, computes 1 ms and receives rank
/// 1's empty message (tag 9); rank 1 runs `r1`; eager copies at 1.5 ns per byte,
/// every wait blocking.
fn unexpected_run(r1: Vec<Op>) -> ProcOutput {
    let mut r0 = eager_sender();
    r0.push(recv(1, 9));
    let (mut plat, jobs) = pair(r0, r1);
    plat.eager_copy_ns = 1.5;
    run_with_byte_costs(&plat, &jobs)
}

/// An empty message to rank 0 (tag 9).
fn empty_to_0() -> Op {
    Op::Send {
        to: 0,
        bytes: 0,
        tag: 9,
    }
}

#[test]
fn an_unexpected_eager_message_is_copied_twice_at_the_receiver() {
    // MPICH-GM's ch_gm at 1.5 ns per byte of copy, 1000 bytes: 1,500 ns a copy.
    // (o_s = 1 us, o_r = 1.5 us.) The message lands in rank 1's GM receive queue
    // at about 12 us, while rank 1 computes 5 ms.
    //
    // Rank 1 then sends (0 bytes, 1,000 ns), whose poll finds the message with no
    // receive posted: saved as unexpected (first copy); its receive copies it again.
    // Receive: 1,500 + 2 x 1,500 = 4,500 ns. Rank 1 ends at 5 ms + 1,000 + 4,500 =
    // 5,005,500 ns.
    let out = unexpected_run(vec![Op::Compute { ns: 5 * MS }, empty_to_0(), recv(0, 1)]);
    assert_eq!(out.proc_cpu_ns[1], 5_005_500);
    assert_eq!(out.proc_end[1].as_ns(), 5_005_500);
    // Receive first, send after: the receive is posted, then polls (MPICH's
    // `MPID_RecvContig`): one copy, 1,500 + 1,500 = 3,000 ns, the same total
    // 5 ms + 3,000 + 1,000 = 5,004,000 ns.
    let out = unexpected_run(vec![Op::Compute { ns: 5 * MS }, recv(0, 1), empty_to_0()]);
    assert_eq!(out.proc_cpu_ns[1], 5_004_000);
    // Posted before it lands (rank 1 waits in its receive from t = 0, blocked; woken
    // by the interrupt): one copy, 3,000 ns of receive, plus the interrupt and the
    // send: 3,000 + i + 1,000 ns of CPU.
    let out = unexpected_run(vec![recv(0, 1), empty_to_0()]);
    let i = us(platform(2, linux()).interrupt_us);
    assert_eq!(out.proc_cpu_ns[1], 3_000 + i + 1_000);
}

#[test]
fn a_non_blocking_receive_does_not_poll_and_a_wait_stops_once_complete() {
    // 1.5 ns per byte of copy. Rank 0 sends 1000 bytes with tag 1 then (after
    // computing 1 ms) receives rank 1's empty message; rank 1 computes 5 ms, posts a
    // receive for tag 1 (`Irecv`: no poll) and waits for it: the wait's poll finds the
    // message and the posted receive: one copy. Receive 1,500 + 1,500 = 3,000 ns:
    // rank 1 ends at 5 ms + 3,000 + 1,000 (its send) = 5,004,000 ns of CPU.
    let out = unexpected_run(vec![
        Op::Compute { ns: 5 * MS },
        Op::Irecv {
            from: Some(0),
            tag: 1,
        },
        Op::Wait,
        empty_to_0(),
    ]);
    assert_eq!(out.proc_cpu_ns[1], 5_004_000);
    // Waiting in MPI (blocked in a receive for tag 2, which rank 0 sends after its
    // 1 ms of compute), rank 1 polls the tag 1 message as it lands: unexpected. Its
    // later receive pays 1,500 + 3,000 = 4,500 ns; the tag 2 message (empty, posted)
    // 1,500 ns; one interrupt wakes it. CPU: 4,500 + 1,500 + i + 1,000 ns.
    let mut r0 = eager_sender();
    r0.push(Op::Send {
        to: 1,
        bytes: 0,
        tag: 2,
    });
    r0.push(recv(1, 9));
    let r1 = vec![recv(0, 2), recv(0, 1), empty_to_0()];
    let (mut plat, jobs) = pair(r0, r1);
    plat.eager_copy_ns = 1.5;
    let i = us(plat.interrupt_us);
    let out = run_with_byte_costs(&plat, &jobs);
    assert_eq!(out.proc_cpu_ns[1], 4_500 + 1_500 + i + 1_000);
}

#[test]
fn past_the_unexpected_queue_limit_a_message_stays_in_gms_buffer() {
    // Every message eager, 1.5 ns per byte of copy. Rank 0 sends 100,000,000 bytes
    // (tag 1), then 1000 bytes (tag 2); rank 1 computes 5 s, sends an empty message
    // (its poll saves both: the first as unexpected, 100,000,000 bytes, which
    // reaches `GMPI_MAX_UNEXPECTED_QUEUE_SIZE`; the second stays in GM's buffer),
    // then receives tag 2 and tag 1. Receives: 1,500 + 1,000 x 1.5 = 3,000 ns for
    // tag 2 (one copy) and 1,500 + 2 x 150,000,000 = 300,001,500 ns for tag 1.
    // CPU: 5 s + 1,000 + 3,000 + 300,001,500 ns.
    let r0 = vec![
        Op::Send {
            to: 1,
            bytes: 100_000_000,
            tag: 1,
        },
        Op::Send {
            to: 1,
            bytes: 1000,
            tag: 2,
        },
        recv(1, 9),
    ];
    let r1 = vec![
        Op::Compute { ns: 5_000 * MS },
        empty_to_0(),
        recv(0, 2),
        recv(0, 1),
    ];
    let (mut plat, jobs) = pair(r0, r1);
    plat.eager_limit_bytes = None;
    plat.eager_copy_ns = 1.5;
    let out = run_with_byte_costs(&plat, &jobs);
    assert_eq!(out.proc_cpu_ns[1], 5_000 * MS + 1_000 + 3_000 + 300_001_500);
}

#[test]
fn a_rendezvous_send_waits_for_the_receivers_post() {
    // The same with 100 kB (above the limit): the request reaches rank 1 at
    // o_s + lat, but rank 1 computes until 5 ms, so it answers only when it posts
    // its receive; the clear-to-send crosses back (lat), the data crosses
    // (wire + lat) and the acknowledgement returns (lat).
    let bytes = 100_000;
    let (plat, jobs) = pair(
        vec![
            Op::Send {
                to: 1,
                bytes,
                tag: 1,
            },
            Op::Compute { ns: MS },
        ],
        late_receiver(),
    );
    let out = run(&plat, &jobs, true, 1);
    let (_, o_r, lat, irq) = costs(&plat);
    let t = wire(&plat, bytes);
    let arrival = 5 * MS + lat + t + lat;
    // Rank 1 blocked in its receive; the data's interrupt wakes it.
    assert_eq!(out.proc_end[1].as_ns(), arrival + irq + o_r);
    // Rank 0 blocked in its send until the acknowledgement, then computes 1 ms.
    assert_eq!(out.proc_end[0].as_ns(), arrival + lat + irq + MS);
    assert_eq!(out.counters.interrupts, 2);
    assert_eq!(out.counters.rendezvous, 1);
    // With spin waits the sender holds its CPU the whole time.
    let spin = run(&plat, &jobs, false, 1);
    assert_eq!(spin.proc_end[0].as_ns(), arrival + lat + MS);
    assert_eq!(spin.proc_end[1].as_ns(), arrival + o_r);
}

#[test]
fn a_blocked_receiver_is_woken_by_the_request_answers_and_sleeps_again() {
    // Rank 1 blocks in its receive at once; rank 0 computes 1 ms and sends 100 kB.
    let bytes = 100_000;
    let (plat, jobs) = pair(
        vec![
            Op::Compute { ns: MS },
            Op::Send {
                to: 1,
                bytes,
                tag: 1,
            },
        ],
        vec![Op::Recv {
            from: Some(0),
            tag: 1,
        }],
    );
    let out = run(&plat, &jobs, true, 1);
    let (o_s, o_r, lat, irq) = costs(&plat);
    let t = wire(&plat, bytes);
    // The request arrives at 1 ms + o_s + lat and wakes rank 1 (an interrupt), which
    // answers at once and blocks again after the interrupt's CPU time.
    let rts = MS + o_s + lat;
    let arrival = rts + lat + t + lat;
    assert_eq!(out.proc_end[1].as_ns(), arrival + irq + o_r);
    assert_eq!(out.proc_end[0].as_ns(), arrival + lat + irq);
    // Rank 1 woken twice (the request, the data), rank 0 once (the acknowledgement).
    assert_eq!(out.counters.interrupts, 3);
    assert_eq!(out.proc_cpu_ns[1], 2 * irq + o_r);
}

#[test]
fn an_exchange_of_rendezvous_sends_completes_through_the_posted_receives() {
    // Both ranks post an Irecv, send 100 kB blocking, then Wait (NPB's exchange).
    // Each answers the other's request from inside its own send, through its posted
    // receive; no deadlock.
    let bytes = 100_000;
    let ops = |peer| {
        vec![
            Op::Irecv {
                from: Some(peer),
                tag: 1,
            },
            Op::Send {
                to: peer,
                bytes,
                tag: 1,
            },
            Op::Wait,
        ]
    };
    let (plat, jobs) = pair(ops(1), ops(0));
    let out = run(&plat, &jobs, false, 1);
    let (o_s, o_r, lat, _) = costs(&plat);
    let t = wire(&plat, bytes);
    let end = o_s + lat + lat + t + lat + lat + o_r;
    assert_eq!(out.proc_end[0].as_ns(), end);
    assert_eq!(out.proc_end[1].as_ns(), end);
}

/// `n` ranks on `n` nodes of the test platform (MPICH-GM's eager limit), rank `r`
/// running `ops(r)`; run with spin waits.
fn ranks(n: u32, ops: impl Fn(u32) -> Vec<Op>) -> (NodePlatform, ProcOutput) {
    let mut plat = platform(n, linux());
    plat.eager_limit_bytes = Some(16_288);
    let mut b = Builder::new(n);
    b.each(&ops);
    let out = run(&plat, &[job(b.build("ranks", 1.0))], false, 1);
    (plat, out)
}

fn send(to: Rank, bytes: u64) -> Op {
    Op::Send { to, bytes, tag: 1 }
}

fn recv_any() -> Op {
    Op::Recv { from: None, tag: 1 }
}

#[test]
fn two_senders_to_one_receiver_take_twice_the_serialization_time_of_one() {
    // 16,000 bytes (eager) take t = 80 us on a 200 MB/s link. One sender: rank 2
    // has the message at o_s + lat + t. Two senders at once: the receiving NIC takes
    // one in, then the other, so the second is there at o_s + lat + 2t; rank 2
    // consumed the first meanwhile (o_r < t).
    let bytes = 16_000;
    let (plat, one) = ranks(3, |r| match r {
        0 => vec![send(2, bytes)],
        1 => vec![],
        _ => vec![recv_any()],
    });
    let (o_s, o_r, lat, _) = costs(&plat);
    let t = wire(&plat, bytes);
    assert_eq!(t, 80_000);
    assert_eq!(one.proc_end[2].as_ns(), o_s + lat + t + o_r);
    let (_, two) = ranks(3, |r| match r {
        0 | 1 => vec![send(2, bytes)],
        _ => vec![recv_any(), recv_any()],
    });
    assert_eq!(two.proc_end[2].as_ns(), o_s + lat + 2 * t + o_r);
    // Serialization at the receiver: 2t against t.
    let serial = |o: &ProcOutput| o.proc_end[2].as_ns() - (o_s + lat + o_r);
    assert_eq!(serial(&two), 2 * serial(&one));
    // The eager sends completed once copied out, whatever the receiving NIC does.
    assert_eq!(two.proc_end[0].as_ns(), o_s);
    assert_eq!(two.proc_end[1].as_ns(), o_s);
}

#[test]
fn sends_to_distinct_receivers_do_not_interfere() {
    // Ranks 0 and 1 send 16,000 bytes at once to ranks 2 and 3: each message takes
    // one serialization time, as alone.
    let bytes = 16_000;
    let (plat, out) = ranks(4, |r| match r {
        0 => vec![send(2, bytes)],
        1 => vec![send(3, bytes)],
        _ => vec![recv_any()],
    });
    let (o_s, o_r, lat, _) = costs(&plat);
    let t = wire(&plat, bytes);
    assert_eq!(out.proc_end[2].as_ns(), o_s + lat + t + o_r);
    assert_eq!(out.proc_end[3].as_ns(), o_s + lat + t + o_r);
}

/// Time of one GM packet (4096 bytes) on the test platform's 200 MB/s link, ns.
const PACKET_NS: i64 = 20_480;

#[test]
fn a_message_waiting_for_a_busy_receiver_leaves_its_senders_link_to_others() {
    // Rank 0 sends 16,000 bytes (t = 80 us) to rank 2 at o_s = 1 us: links [1, 81)
    // us (sender's time; the receiver's is lat later). Rank 1 computes 1 us, sends
    // 16,000 bytes to rank 2 at 2 us, then 16,000 bytes to rank 3 at 3 us. Its
    // message to rank 2 waits for rank 2's link: [81, 161). Its message to rank 3
    // takes rank 1's link while that message waits: [3, 81) holds 78 us, three
    // whole packets (3 x 20.48 = 61.44 us, [3, 64.44)); its last 18.56 us follow
    // rank 1's packets to rank 2: [161, 179.56). Rank 3 has it at 179.56 + lat =
    // o_s + 2t + (t - 3 packets) + lat. (Holding rank 1's link until its message to
    // rank 2 was through, the message to rank 3 came at o_s + 3t + lat.)
    let bytes = 16_000;
    let (plat, out) = ranks(4, |r| match r {
        0 => vec![send(2, bytes)],
        1 => vec![Op::Compute { ns: 1_000 }, send(2, bytes), send(3, bytes)],
        2 => vec![recv_any(), recv_any()],
        _ => vec![recv_any()],
    });
    let (o_s, o_r, lat, _) = costs(&plat);
    let t = wire(&plat, bytes);
    assert_eq!(wire(&plat, 4096), PACKET_NS);
    assert_eq!(out.proc_end[2].as_ns(), o_s + lat + 2 * t + o_r);
    assert_eq!(
        out.proc_end[3].as_ns(),
        o_s + 2 * t + (t - 3 * PACKET_NS) + lat + o_r
    );
    // Rank 1's sends are eager: complete once copied out.
    assert_eq!(out.proc_end[1].as_ns(), 1_000 + 2 * o_s);
}

#[test]
fn a_message_to_a_free_receiver_is_not_delayed_by_one_to_a_busy_receiver() {
    // 3 ranks, every message eager. Rank 2 sends 800,000 bytes (t0 = 4 ms) to rank 1
    // at o_s: rank 1's link is busy until o_s + t0 (sender's time). Rank 0 computes
    // 10 us, then sends 16,000 bytes (t = 80 us) to rank 1 at 10 us + o_s (it waits
    // for rank 1's link: [o_s + t0, o_s + t0 + t)) and 16,000 bytes to rank 2 at
    // 10 us + 2 o_s, whose link is free: it goes at once and rank 2 has it at
    // 10 us + 2 o_s + t + lat, as if rank 0 had sent nothing before (whole-message
    // back-pressure held it to o_s + t0 + 2t + lat, 4 ms later).
    let mut plat = platform(3, linux());
    plat.eager_limit_bytes = None;
    let mut b = Builder::new(3);
    b.each(|r| match r {
        0 => vec![Op::Compute { ns: 10_000 }, send(1, 16_000), send(2, 16_000)],
        1 => vec![recv_any(), recv_any()],
        _ => vec![send(1, 800_000), recv_any()],
    });
    let out = run(&plat, &[job(b.build("three", 1.0))], false, 1);
    let (o_s, o_r, lat, _) = costs(&plat);
    let (t0, t) = (wire(&plat, 800_000), wire(&plat, 16_000));
    assert_eq!(t0, 4_000_000);
    let alone = 10_000 + 2 * o_s + t + lat;
    assert_eq!(out.proc_end[2].as_ns(), alone + o_r);
    // Rank 1 takes the long message in, then rank 0's.
    assert_eq!(out.proc_end[1].as_ns(), o_s + t0 + t + lat + o_r);
}

/// Each rank sends 100 kB (rendezvous) to the other, then receives from it; with
/// `safe`, each posts its receive (`Irecv`) before its send and ends with a `Wait`.
fn exchange(safe: bool) -> (NodePlatform, Vec<ProcJob>) {
    let ops = |peer: Rank| {
        let send = send(peer, 100_000);
        let recv = Op::Recv {
            from: Some(peer),
            tag: 1,
        };
        if safe {
            vec![
                Op::Irecv {
                    from: Some(peer),
                    tag: 1,
                },
                send,
                Op::Wait,
            ]
        } else {
            vec![send, recv]
        }
    };
    pair(ops(1), ops(0))
}

#[test]
fn blocking_rendezvous_sends_to_each_other_end_the_run_with_a_deadlock_error() {
    // Both requests leave at o_s and reach the other rank at o_s + lat, where it
    // waits in its own send with no receive posted: from then on neither rank can
    // progress, so the run ends there, blocking or spinning.
    let (plat, jobs) = exchange(false);
    let (o_s, _, lat, _) = costs(&plat);
    for block in [true, false] {
        let policy = move || -> Box<dyn NodePolicy> {
            if block {
                Box::new(super::tests::Block)
            } else {
                Box::new(super::tests::Spin)
            }
        };
        let r = simulate_processes(&plat, &jobs, &policy, &ProcOptions::default());
        let err = r.unwrap_err();
        let ProcError::ProgramDeadlock { job, time, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!((*job, time.as_ns()), (0, o_s + lat), "block {block}");
        let msg = err.to_string();
        for (r, peer) in [(0, 1), (1, 0)] {
            let line = format!(
                "rank {r} at op 0 (Send {{ to: {peer}, bytes: 100000, tag: 1 }}) waits for its \
                 rendezvous send's completion (its rendezvous request waits at rank {peer}, \
                 which has no matching receive posted)"
            );
            assert!(msg.contains(&line), "{msg}");
        }
    }
}

#[test]
fn the_safe_exchange_completes_under_both_wait_modes() {
    let (plat, jobs) = exchange(true);
    for block in [true, false] {
        let out = run(&plat, &jobs, block, 1);
        assert_eq!(out.counters.rendezvous, 2);
        assert_eq!(out.counters.consumed, 2);
    }
}

#[test]
fn mpich_alltoall_posts_all_at_once_and_its_messages_meet_at_the_receiving_nics() {
    // 4 ranks, MPICH 1.2.5's all-at-once alltoall of 16,000 bytes (eager, t = 80 us
    // each, p = 20.48 us a packet); rank r computes r x t first, then sends to r + 1,
    // r + 2, r + 3 at r t + 1, + 2, + 3 us (o_s = 1 us each). Bookings in request
    // order, in the senders' time (us; each receiving link lat later):
    // - 0->1 [1, 81); 0->2 [81, 161); 0->3 [161, 241) (rank 0's own link in turn).
    // - 1->2 at 81: rank 2's link is busy to 161: [161, 241). 1->3 at 82: both links
    //   free [82, 161): 79 us, three packets [82, 143.44), the rest after rank 3's
    //   link frees: [241, 259.56). 1->0 at 83: [143.44, 161) is under a packet,
    //   skipped: [259.56, 339.56).
    // - 2->3 at 161: rank 3's link busy to 259.56: [259.56, 339.56). 2->0 at 162:
    //   [162, 242). 2->1 at 163: [242, 259.56) under a packet: [339.56, 419.56).
    // - 3->0 at 241: rank 0's link busy to 242, [242, 259.56) under a packet, busy
    //   to 339.56: [339.56, 419.56). 3->1 at 242: [242, 322). 3->2 at 243: rank 3's
    //   link is busy to 322, [322, 339.56) under a packet, busy to 419.56:
    //   [419.56, 499.56).
    // Last message in (+ lat): rank 0 at 419.56 = o_s + 6t - 3p, rank 1 419.56,
    // rank 2 499.56 = o_s + 7t - 3p, rank 3 339.56 = o_s + 5t - 3p. A rank's `Wait`
    // completes once its last message is in; it then consumes its three posted
    // receives (3 o_r). Rank 3's three messages had all left their senders' CPUs by
    // 2t + o_s: links that took messages in at once would end it at o_s + lat + 3t
    // + 3 o_r.
    let bytes = 16_000;
    let mut plat = platform(4, linux());
    plat.eager_limit_bytes = Some(16_288);
    let t = wire(&plat, bytes);
    let mut b = Builder::new(4);
    b.each(|r| {
        vec![Op::Compute {
            ns: i64::from(r) * t,
        }]
    });
    b.alltoall_post_all(bytes);
    let out = run(&plat, &[job(b.build("alltoall", 1.0))], false, 1);
    let (o_s, o_r, lat, _) = costs(&plat);
    let ends: Vec<i64> = out.proc_end.iter().map(|e| e.as_ns()).collect();
    let at = |k: i64| o_s + lat + k * t - 3 * PACKET_NS + 3 * o_r;
    assert_eq!(ends, vec![at(6), at(6), at(7), at(5)]);
    assert_eq!(out.counters.messages, 12);
    assert_eq!(out.counters.rendezvous, 0);
}
