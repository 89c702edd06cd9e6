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

#[test]
fn an_eager_send_completes_without_blocking() {
    // Rank 0 sends 1000 bytes (below the limit) while rank 1 computes for 5 ms, then
    // computes 1 ms; both block at once in any wait.
    let (plat, jobs) = pair(
        vec![
            Op::Send {
                to: 1,
                bytes: 1000,
                tag: 1,
            },
            Op::Compute { ns: MS },
        ],
        late_receiver(),
    );
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
