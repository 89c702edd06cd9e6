//! Paging on an overcommitted node: the page-in queue's victim rule.

use super::tests::{platform, Block, Spin};
use super::wait::tests::Yielding;
use super::*;
use crate::process::testkit::os_model;
use cosched_model::node::OsConfig;
use cosched_model::program::Builder;
use proptest::prelude::*;

/// Page-in and swap-out segments of a run: (kind, pid whose pages are read or
/// written, start, end), times in units of 10 us.
fn disk(out: &ProcOutput) -> Vec<(SegmentKind, Pid, i64, i64)> {
    out.timeline
        .iter()
        .filter(|s| matches!(s.kind, SegmentKind::PageIn | SegmentKind::SwapOut))
        .map(|s| {
            (
                s.kind,
                s.pid,
                s.start.as_ns() / 10_000,
                s.end.as_ns() / 10_000,
            )
        })
        .collect()
}

/// Runs `jobs` on `plat` under `make`'s policy at MPL `mpl`, the timeline recorded.
fn traced(
    plat: &NodePlatform,
    jobs: &[ProcJob],
    make: &dyn Fn() -> Box<dyn NodePolicy>,
    mpl: u32,
) -> ProcOutput {
    let opts = ProcOptions {
        mpl,
        record_timeline: true,
        ..Default::default()
    };
    simulate_processes(plat, jobs, make, &opts).expect("the run ends")
}

fn one_rank(mb: f64, submit_ms: i64, reps: u32, op: Op) -> ProcJob {
    let mut b = Builder::new(1);
    b.repeat(reps, |b| {
        b.all(op);
    });
    ProcJob::new(b.build("p", mb), SimTime::from_ms(submit_ms))
}

/// One 900 MB node with two CPUs (CFS, spin waits, 5 us switches): pid 0 (353 MB,
/// three 0.33 ms disk bursts) and pid 1 (549 MB, two 3 ms bursts) start at 15 ms,
/// pid 2 (353 MB, 1 ns) at 17 ms, pid 3 (549 MB, 1 ns) at 23 ms. Disk: 20 MB/s
/// (2 MB: 0.1 s; 194: 9.7 s; 198: 9.9 s; 351: 17.55 s; 353: 17.65 s; 549: 27.45 s).
///
/// By hand: at 15 ms pid 0 gets 353 MB and pid 1 the 547 free MB (2 MB fresh);
/// pid 1 is picked and takes 2 MB from pid 0, written out after pid 0's first burst
/// (15.33 to 115.33 ms). pid 0 queues at 15.33 ms for its 2 MB, then pid 2 (17 ms)
/// and pid 3 (23 ms), started with nothing free (all fresh): queue [0, 2, 3]. At
/// 115.33 ms pid 1 runs and the queue takes its pages: pid 0 2 MB (written until
/// 215.33 ms, then read until 315.33 ms), pid 2 353 MB (written until 17.96533 s; no
/// read), and the head pid 3 the last 194 MB (written until 27.66533 s), still 355
/// MB short. pid 1, emptied, queues behind pid 3 after its slice. At 315.33 ms pid 0
/// runs and pid 3, still at the head, takes its 353 MB (written until 45.31533 s):
/// pid 0's next burst waits for the disk (until 45.31566 s) and pid 0 queues again.
/// At 17.96533 s pid 2 runs: pid 3 takes the 2 MB it lacks (written until 45.41566
/// s), the new head pid 1 takes 351 MB (written until 62.96566 s) and waits. At
/// 45.41566 s pid 3 runs: pid 1 takes its 198 MB (written until 72.86566 s) and
/// reads its 549 MB (until 100.31566 s); pid 0 takes pid 3's other 351 MB (written
/// until 117.86566 s). At 100.31566 s pid 1 runs: pid 0 takes its last 2 MB
/// (written until 117.96566 s), reads its 353 MB (until 135.61566 s) and ends with
/// its last burst.
///
/// Before queued processes were victims, the head could not take pages from the
/// processes queued behind it, and every process ended up waiting in the queue with
/// nothing running.
#[test]
fn the_page_in_queue_head_takes_pages_from_processes_queued_behind_it() {
    let mut plat = platform(
        1,
        OsConfig::Cfs {
            latency_ms: 6.0,
            min_granularity_ms: 0.75,
            wakeup_granularity_ms: 1.0,
            slice_cv: 0.0,
        },
    );
    plat.cpus_per_node = 2;
    plat.context_switch_us = 5.0;
    let jobs = [
        one_rank(353.0, 15, 3, Op::Io { ns: 330_000 }),
        one_rank(549.0, 15, 2, Op::Compute { ns: 3_000_001 }),
        one_rank(353.0, 17, 1, Op::Compute { ns: 1 }),
        one_rank(549.0, 23, 1, Op::Compute { ns: 1 }),
    ];
    let make: &dyn Fn() -> Box<dyn NodePolicy> = &|| Box::new(Spin);
    let out = traced(&plat, &jobs, make, 4);
    use SegmentKind::{PageIn, SwapOut};
    let reads = disk(&out);
    // (kind, pid whose pages are read or written, start, end) in units of 10 us.
    assert_eq!(
        reads,
        [
            (SwapOut, 0, 1_533, 11_533),
            (SwapOut, 1, 11_533, 21_533),
            (PageIn, 0, 21_533, 31_533),
            (SwapOut, 1, 31_533, 1_796_533),
            (SwapOut, 1, 1_796_533, 2_766_533),
            (SwapOut, 0, 2_766_533, 4_531_533),
            (SwapOut, 2, 4_531_566, 4_541_566),
            (SwapOut, 2, 4_541_566, 6_296_566),
            (SwapOut, 3, 6_296_566, 7_286_566),
            (PageIn, 1, 7_286_566, 10_031_566),
            (SwapOut, 3, 10_031_566, 11_786_566),
            (SwapOut, 1, 11_786_566, 11_796_566),
            (PageIn, 0, 11_796_566, 13_561_566),
        ]
    );
    assert_eq!(
        (out.counters.paged_in_kb, out.counters.paged_out_kb),
        (
            2_000 + 549_000 + 353_000,
            2 * 2_000 + 353_000 + 194_000 + 353_000 + 2_000 + 351_000 + 198_000 + 351_000 + 2_000
        )
    );
    assert!(out.jobs[0].end > SimTime::from_ns(135_615_660_000));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// One 900 MB node, two to four single-process jobs of 353 or 549 MB (any two of
    /// which overcommit it) computing and doing disk bursts, under every OS model,
    /// spin or blocking waits, one or two CPUs: paging never deadlocks.
    #[test]
    fn paging_never_deadlocks_one_node(
        jobs in proptest::collection::vec((prop_oneof![Just(353u32), Just(549u32)], 0i64..30, 1u32..4, any::<bool>(), 1i64..10_000_000), 2..5),
        os in 0u8..4,
        block in any::<bool>(),
        cpus in 1u32..=2,
    ) {
        let mut plat = platform(1, os_model(os));
        plat.cpus_per_node = cpus;
        plat.context_switch_us = 5.0;
        let mut pj: Vec<ProcJob> = jobs.iter().map(|&(mb, at, reps, io, ns)| {
            one_rank(f64::from(mb), at, reps, if io { Op::Io { ns } } else { Op::Compute { ns } })
        }).collect();
        pj.sort_by_key(|j| j.submit);
        let make: Box<dyn Fn() -> Box<dyn NodePolicy>> = if block {
            Box::new(|| Box::new(Block) as Box<dyn NodePolicy>)
        } else {
            Box::new(|| Box::new(Spin) as Box<dyn NodePolicy>)
        };
        let opts = ProcOptions { mpl: 4, ..Default::default() };
        let out = simulate_processes(&plat, &pj, make.as_ref(), &opts);
        prop_assert!(out.is_ok(), "{:?}", out.err());
    }
}

/// Swap-out and fresh pages, one 900 MB node, one CPU (round robin, 50 ms), disk
/// 20 MB/s. pid 0 (600 MB, 100 ms of compute) starts at 0 with 600 MB; pid 1 (600
/// MB, 10 ms) at 1 ms gets the 300 free MB, its other 300 MB fresh (never touched).
/// By hand: at 50 ms pid 0's quantum ends and pid 1 is picked with 300 MB missing:
/// it takes 300 MB from pid 0, which are written to swap first (15 s, 50 ms to
/// 15.05 s); its fresh pages need no read. Meanwhile pid 0 is picked with 300 MB
/// missing and waits (pid 1's page-in is under way). At 15.05 s pid 1 runs (woken:
/// 5 us interrupt): pid 0 takes 300 MB from it, written out from 15.05 to 30.05 s,
/// then reads its own 300 MB back (30.05 to 45.05 s). pid 1 ends at 15.060005 s;
/// pid 0 runs its last 50 ms from 45.05 s and ends at 45.100005 s.
#[test]
fn taken_pages_are_written_to_swap_before_the_read_and_fresh_pages_are_not_read() {
    let plat = platform(1, OsConfig::Rr { quantum_ms: 50.0 });
    let jobs = [
        one_rank(600.0, 0, 1, Op::Compute { ns: 100_000_000 }),
        one_rank(600.0, 1, 1, Op::Compute { ns: 10_000_000 }),
    ];
    let make: &dyn Fn() -> Box<dyn NodePolicy> = &|| Box::new(Spin);
    let out = traced(&plat, &jobs, make, 2);
    assert_eq!(
        disk(&out),
        [
            (SegmentKind::SwapOut, 0, 5_000, 1_505_000),
            (SegmentKind::SwapOut, 1, 1_505_000, 3_005_000),
            (SegmentKind::PageIn, 0, 3_005_000, 4_505_000),
        ]
    );
    assert_eq!(out.jobs[1].end, SimTime::from_ns(15_060_005_000));
    assert_eq!(out.jobs[0].end, SimTime::from_ns(45_100_005_000));
    assert_eq!(
        (
            out.counters.page_ins,
            out.counters.paged_in_kb,
            out.counters.paged_out_kb
        ),
        (2, 300_000, 600_000)
    );
}

/// A yielder whose wait ends while it waits for a page-in stays in the page-in
/// queue. Two 900 MB nodes of one CPU (round robin, 50 ms), disk 20 MB/s (300 MB:
/// 15 s), 5 us wake-up interrupt, 1.5 us receive overhead. Job 0 (two 600 MB ranks,
/// at 0): rank 0 (pid 0, node 0) receives from rank 1 (pid 1, node 1), which
/// computes 1 s and sends 8 bytes. Job 1 (pid 2, one 600 MB rank, 10 ms of compute)
/// comes at 1 ms to node 0 (PACKING: both nodes hold one process) with 300 MB free.
///
/// By hand: pid 0 spins until 1 ms, then parks (pid 2 is runnable). pid 2 gets 300
/// MB, is picked with 300 fresh MB missing and takes pid 0's 300 MB (written 1 ms to
/// 15.001 s; no read). The CPU is idle: pid 0 is unparked, picked with 300 MB
/// missing and queues (no victim: pid 2's page-in is under way). At about 1.000008 s
/// the message arrives: pid 0's wait ends, but it stays blocked in the queue (before
/// the fix it was unparked as a yielder, picked again and queued twice: three
/// page-ins). At 15.001 s pid 2 wakes (5 us) and runs 10 ms to 15.011005 s; at its
/// dispatch pid 0 takes its 300 MB (written until 30.001 s) and reads its own 300 MB
/// (until 45.001 s), then wakes and receives: 45.0010065 s.
#[test]
fn a_yielder_waiting_for_its_page_in_stays_queued_when_its_message_arrives() {
    let plat = platform(2, OsConfig::Rr { quantum_ms: 50.0 });
    let mut a = Builder::new(2);
    a.each(|r| {
        if r == 0 {
            vec![Op::Recv {
                from: Some(1),
                tag: 0,
            }]
        } else {
            vec![
                Op::Compute { ns: 1_000_000_000 },
                Op::Send {
                    to: 0,
                    bytes: 8,
                    tag: 0,
                },
            ]
        }
    });
    let jobs = [
        ProcJob::new(a.build("a", 600.0), SimTime::ZERO),
        one_rank(600.0, 1, 1, Op::Compute { ns: 10_000_000 }),
    ];
    let make: &dyn Fn() -> Box<dyn NodePolicy> = &|| Box::new(Yielding);
    let out = traced(&plat, &jobs, make, 2);
    assert_eq!(
        disk(&out),
        [
            (SegmentKind::SwapOut, 0, 100, 1_500_100),
            (SegmentKind::SwapOut, 2, 1_500_100, 3_000_100),
            (SegmentKind::PageIn, 0, 3_000_100, 4_500_100),
        ]
    );
    assert_eq!(
        out.counters.page_ins, 2,
        "one page-in each for pid 0 and pid 2"
    );
    let pid0: Vec<(SegmentKind, i64, i64)> = out
        .timeline
        .iter()
        .filter(|s| s.pid == 0 && !matches!(s.kind, SegmentKind::PageIn | SegmentKind::SwapOut))
        .map(|s| (s.kind, s.start.as_ns(), s.end.as_ns()))
        .collect();
    assert_eq!(
        pid0,
        [
            (SegmentKind::Spin, 0, 1_000_000),
            (SegmentKind::Blocked, 1_000_000, 45_001_000_000),
            (SegmentKind::Useful, 45_001_000_000, 45_001_006_500),
        ]
    );
    assert_eq!(out.jobs[1].end, SimTime::from_ns(15_011_005_000));
    assert_eq!(out.jobs[0].end, SimTime::from_ns(45_001_006_500));
}
