//! Page-granular paging on an overcommitted node ([`super::paging`]): when a
//! process faults, what a fault costs, which pages are taken and written.

use super::tests::{bounded, platform, Block, Spin};
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

fn one_rank(mb: f64, submit_ms: i64, reps: u32, op: Op) -> ProcJob {
    let mut b = Builder::new(1);
    b.repeat(reps, |b| {
        b.all(op);
    });
    ProcJob::new(b.build("p", mb), SimTime::from_ms(submit_ms))
}

/// A 900 KB node with one CPU (round robin, 100 ms quanta, no switch cost, 5 us
/// interrupts), a disk of 20 MB/s with 10 ms per request, 64 KB read per fault:
/// a paging request of 64 KB takes 10 + 3.2 = 13.2 ms.
fn small_node() -> NodePlatform {
    let mut plat = platform(1, OsConfig::Rr { quantum_ms: 100.0 });
    plat.job_memory_mb = 0.9;
    plat.disk_mb_s = 20.0;
    plat.swap.access_ms = 10.0;
    plat.swap.readahead_kb = 64;
    plat
}

fn run_small(jobs: &[ProcJob]) -> ProcOutput {
    let make: &dyn Fn() -> Box<dyn NodePolicy> = &|| Box::new(Spin);
    let opts = ProcOptions {
        mpl: 4,
        record_timeline: true,
        ..Default::default()
    };
    simulate_processes(&small_node(), jobs, make, &opts).expect("runs")
}

/// The first blocked interval of `pid` on the timeline, in units of 10 us.
fn first_blocked(out: &ProcOutput, pid: Pid) -> (i64, i64) {
    let s = out
        .timeline
        .iter()
        .find(|s| s.pid == pid && s.kind == SegmentKind::Blocked)
        .expect("it blocked");
    (s.start.as_ns() / 10_000, s.end.as_ns() / 10_000)
}

/// Two processes of 400 and 500 KB fill the 900 KB node exactly and compute three
/// 100 ms iterations each, taking turns: neither ever faults. P0 runs 0-100,
/// 200-300 and 400-500 ms, P1 the quanta between and 500-600 ms.
#[test]
fn a_process_with_its_footprint_resident_never_faults() {
    let out = run_small(&[
        one_rank(0.4, 0, 3, Op::Compute { ns: 100_000_000 }),
        one_rank(0.5, 0, 3, Op::Compute { ns: 100_000_000 }),
    ]);
    assert!(disk(&out).is_empty());
    assert_eq!(
        (
            out.counters.page_ins,
            out.counters.paged_in_kb,
            out.counters.paged_out_kb
        ),
        (0, 0, 0)
    );
    assert_eq!(out.jobs[0].end, SimTime::from_ms(500));
    assert_eq!(out.jobs[1].end, SimTime::from_ms(600));
}

/// P0 (600 KB, one 1 s iteration) starts alone at 0 with its footprint resident;
/// P1 (600 KB, two 100 ms iterations: it touches 6 KB per ms of CPU) starts at 1
/// ms with the 300 free KB, the rest fresh. By hand:
/// - P1 runs from 100 ms, touches its 300 resident KB in 50 ms of CPU and faults
///   at 150 ms on a fresh page: no free frame, so 64 KB are taken from P0 (the
///   oldest pages, at P0's position), dirty: written 150 to 163.2 ms; fresh pages
///   need no read, so P1 sleeps until the write is done.
/// - P0 runs at 150 ms and faults at once on the 64 KB it lost: it takes 64 KB of
///   P1's touched pages (P1's new cluster is spared while being made resident),
///   written 163.2 to 176.4 ms, and only then reads its own 64 KB, 176.4 to 189.6
///   ms (10 ms access + 3.2 ms transfer); it is blocked from 150 to 189.6 ms.
#[test]
fn a_half_resident_process_faults_after_touching_its_resident_half_and_dirty_frames_are_written_before_reuse(
) {
    let out = run_small(&[
        one_rank(0.6, 0, 1, Op::Compute { ns: 1_000_000_000 }),
        one_rank(0.6, 1, 2, Op::Compute { ns: 100_000_000 }),
    ]);
    use SegmentKind::{PageIn, SwapOut};
    assert_eq!(
        disk(&out)[..3],
        [
            (SwapOut, 0, 15_000, 16_320),
            (SwapOut, 1, 16_320, 17_640),
            (PageIn, 0, 17_640, 18_960),
        ]
    );
    assert_eq!(first_blocked(&out, 1), (15_000, 16_320));
    assert_eq!(first_blocked(&out, 0), (15_000, 18_960));
}

/// A fault read blocks for the access cost plus the cluster's transfer: every
/// page-in of the run above takes 13.2 ms (64 KB) or less (the last cluster of a
/// run can be shorter: 10 ms + its KB at 20 MB/s).
#[test]
fn a_fault_blocks_for_the_access_and_the_cluster_transfer() {
    let out = run_small(&[
        one_rank(0.6, 0, 1, Op::Compute { ns: 1_000_000_000 }),
        one_rank(0.6, 1, 2, Op::Compute { ns: 100_000_000 }),
    ]);
    let reads: Vec<_> = out
        .timeline
        .iter()
        .filter(|s| s.kind == SegmentKind::PageIn)
        .collect();
    assert!(!reads.is_empty());
    // Faults for fresh pages block without a read.
    assert!(out.counters.page_ins as usize > reads.len());
    let total: i64 = reads.iter().map(|s| (s.end - s.start).as_ns()).sum();
    // 10 ms per request plus 50 ns per KB (20 MB/s).
    assert_eq!(
        total,
        reads.len() as i64 * 10_000_000 + out.counters.paged_in_kb * 50_000
    );
    assert!(reads
        .iter()
        .all(|s| (s.end - s.start).as_ns() <= 13_200_000));
}

/// Three 300 KB processes fill the node; P3 (300 KB, all fresh) arrives at 150 ms.
/// Round robin runs P0 0-100, P1 100-200, P2 200-300, P0 300-400 ms; P3 runs at
/// 400 ms and faults at once. The least recently run is P1 (200 ms; P2 300, P0
/// 400): its 64 KB are taken and written, 400 to 413.2 ms, not the lowest pid's.
#[test]
fn the_pages_taken_are_the_least_recently_run_processs() {
    let out = run_small(&[
        one_rank(0.3, 0, 1, Op::Compute { ns: 1_000_000_000 }),
        one_rank(0.3, 0, 1, Op::Compute { ns: 1_000_000_000 }),
        one_rank(0.3, 0, 1, Op::Compute { ns: 1_000_000_000 }),
        one_rank(0.3, 150, 1, Op::Compute { ns: 100_000_000 }),
    ]);
    assert_eq!(disk(&out)[0], (SegmentKind::SwapOut, 1, 40_000, 41_320));
    assert_eq!(first_blocked(&out, 3).0, 40_000);
}

/// The wake-up interrupt that ends a fault touches no pages. P0 (600 KB, one 1 s
/// iteration) starts at 0 with its footprint resident; P1 (364 KB, one 364 us
/// iteration: it touches 1 KB per us of computation) comes at 1 ms with the 300 free
/// KB, 64 KB fresh. By hand (13.2 ms per 64 KB request, 5 us interrupt):
/// - P1 runs from 100 ms, touches its 300 resident KB and faults at 100.3 ms on its
///   fresh pages: 64 KB of P0's are taken and written, 100.3 to 113.5 ms.
/// - P0 runs at 100.3 ms and faults at once on the 64 KB it lost: it takes 64 KB of
///   P1's touched pages (written 113.5 to 126.7 ms) and reads its own (126.7 to
///   139.9 ms).
/// - At 113.5 ms P1 wakes and runs: 5 us of interrupt, then 64 us of computation on
///   its new cluster, the last of its work: it ends at 113.569 ms without faulting
///   again, although the 64 KB taken from it are missing. (Had the interrupt been
///   computation, P1 would have touched its cluster with 5 us of work left and
///   faulted again.)
/// - At 139.9 ms P0 wakes, fully resident, and computes its last 900 ms:
///   1039.905 ms.
#[test]
fn the_interrupt_that_ends_a_fault_touches_no_pages() {
    let out = run_small(&[
        one_rank(0.6, 0, 1, Op::Compute { ns: 1_000_000_000 }),
        one_rank(0.364, 1, 1, Op::Compute { ns: 364_000 }),
    ]);
    use SegmentKind::{PageIn, SwapOut};
    assert_eq!(
        disk(&out),
        [
            (SwapOut, 0, 10_030, 11_350),
            (SwapOut, 1, 11_350, 12_670),
            (PageIn, 0, 12_670, 13_990),
        ]
    );
    assert_eq!(out.counters.page_ins, 2, "one fault each");
    assert_eq!(out.jobs[1].end, SimTime::from_us(113_569));
    assert_eq!(out.jobs[0].end, SimTime::from_us(1_039_905));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// One 900 KB node, two to four single-process jobs of 353 or 549 KB (any two of
    /// which overcommit it; 6 to 9 fault clusters each) computing and doing disk
    /// bursts, under every OS model, spin or blocking waits, one or two CPUs: paging
    /// never deadlocks.
    #[test]
    fn paging_never_deadlocks_one_node(
        jobs in proptest::collection::vec((prop_oneof![Just(353u32), Just(549u32)], 0i64..30, 1u32..4, any::<bool>(), 1i64..10_000_000), 2..5),
        os in 0u8..4,
        block in any::<bool>(),
        cpus in 1u32..=2,
    ) {
        let mut plat = platform(1, os_model(os));
        plat.job_memory_mb = 0.9;
        plat.cpus_per_node = cpus;
        plat.context_switch_us = 5.0;
        let mut pj: Vec<ProcJob> = jobs.iter().map(|&(mb, at, reps, io, ns)| {
            one_rank(f64::from(mb) / 1000.0, at, reps, if io { Op::Io { ns } } else { Op::Compute { ns } })
        }).collect();
        pj.sort_by_key(|j| j.submit);
        let make: Box<dyn Fn() -> Box<dyn NodePolicy>> = if block {
            Box::new(|| Box::new(Block) as Box<dyn NodePolicy>)
        } else {
            Box::new(|| Box::new(Spin) as Box<dyn NodePolicy>)
        };
        let opts = ProcOptions { mpl: 4, ..bounded() };
        let out = simulate_processes(&plat, &pj, make.as_ref(), &opts);
        prop_assert!(out.is_ok(), "{:?}", out.err());
    }
}

/// A process in a wait touches no pages, so it never faults: its pages may be
/// taken while it waits, and it receives without reading them back. Two 900 KB
/// nodes of one CPU (round robin, 50 ms), 64 KB per fault, 10 ms per request at 20
/// MB/s, yielding waits. Job 0 (two 600 KB ranks, at 0): rank 0 (pid 0, node 0)
/// receives from rank 1 (pid 1, node 1), which computes 1 s and sends 8 bytes. Job 1
/// (pid 2, one 600 KB rank, 10 ms of compute) comes at 1 ms to node 0 with 300 KB
/// free: its 300 fresh KB take pid 0's pages in five faults (64 KB x 4 + 44 KB), all
/// five write-outs pid 0's. By hand, pid 0's message arrives at 1.000001 s (1 us send
/// overhead) + 7.04 us; pid 0, spinning again once pid 2 has ended, receives it (1.5
/// us): 1.00000954 s, with no fault of its own.
#[test]
fn a_process_in_a_wait_never_faults_and_receives_without_its_pages() {
    let mut plat = platform(2, OsConfig::Rr { quantum_ms: 50.0 });
    plat.job_memory_mb = 0.9;
    plat.swap.access_ms = 10.0;
    plat.swap.readahead_kb = 64;
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
        ProcJob::new(a.build("a", 0.6), SimTime::ZERO),
        one_rank(0.6, 1, 1, Op::Compute { ns: 10_000_000 }),
    ];
    let make: &dyn Fn() -> Box<dyn NodePolicy> = &|| Box::new(Yielding);
    let opts = ProcOptions {
        mpl: 2,
        record_timeline: true,
        ..bounded()
    };
    let out = simulate_processes(&plat, &jobs, make, &opts).expect("the run ends");
    let d = disk(&out);
    assert_eq!(d.len(), 5);
    assert!(d
        .iter()
        .all(|&(k, pid, _, _)| k == SegmentKind::SwapOut && pid == 0));
    assert_eq!(out.counters.page_ins, 5, "pid 2's five faults");
    assert_eq!(out.counters.paged_out_kb, 300);
    assert_eq!(out.jobs[0].end, SimTime::from_ns(1_000_009_540));
}

/// A fault's cluster is kept until its process has computed on it, not only until
/// its dispatch. The node of [`small_node`] with a 150 ms wake-up interrupt, longer
/// than the 100 ms quantum, so that the first run after a fault can be interrupt
/// only. W (pid 0, 900 KB, 900 ms of compute) fills the node at 0; X (pid 1, 64 KB
/// all fresh, 32 ms) comes at 1 ms; Z (pid 2, no memory, 300 ms) at 2 ms. By hand
/// (13.2 ms per 64 KB request):
/// - W runs 0-100 ms. X runs at 100 ms and faults on its fresh pages: 64 KB of W's
///   are taken and written, 100 to 113.2 ms (no read for fresh pages); Z runs
///   100-200 ms; X wakes at 113.2 ms with its cluster and 150 ms of interrupt owed.
/// - W runs at 200 ms and faults at once on the 64 KB it lost. X's only pages are
///   its new cluster, which it has not computed on: nothing can be taken and W waits.
///   X runs its interrupt 200-300 ms, Z 300-400 ms, X the rest of its interrupt
///   400-450 ms, then computes 32 ms and ends at 482 ms, its 64 KB freed.
/// - W's read has free frames: 482 to 495.2 ms, no write. Z ends its last 100 ms at
///   582 ms; W runs 150 ms of interrupt and its last 800 ms: 1532 ms.
///
/// Kept only until dispatch, X's cluster is taken when its interrupt-only run is
/// preempted at 300 ms (written 300 to 313.2 ms; W's read 313.2 to 326.4 ms); X
/// faults again at 450 ms, takes 64 KB of W's (written 450 to 463.2 ms) and reads
/// its own back (463.2 to 476.4 ms), and W faults once more later: six disk
/// requests instead of two (checked by moving the release to the dispatch).
#[test]
fn a_fault_cluster_is_kept_until_its_process_has_computed_on_it() {
    let mut plat = small_node();
    plat.interrupt_us = 150_000.0;
    let make: &dyn Fn() -> Box<dyn NodePolicy> = &|| Box::new(Spin);
    let opts = ProcOptions {
        mpl: 4,
        record_timeline: true,
        ..bounded()
    };
    let jobs = [
        one_rank(0.9, 0, 1, Op::Compute { ns: 900_000_000 }),
        one_rank(0.064, 1, 1, Op::Compute { ns: 32_000_000 }),
        one_rank(0.0, 2, 1, Op::Compute { ns: 300_000_000 }),
    ];
    let out = simulate_processes(&plat, &jobs, make, &opts).expect("runs");
    use SegmentKind::{PageIn, SwapOut};
    assert_eq!(
        disk(&out),
        [(SwapOut, 0, 10_000, 11_320), (PageIn, 0, 48_200, 49_520)]
    );
    assert_eq!(out.counters.page_ins, 2, "X's fresh fault and W's");
    assert_eq!(first_blocked(&out, 0), (20_000, 49_520));
    assert_eq!(out.jobs[1].end, SimTime::from_ms(482));
    assert_eq!(out.jobs[2].end, SimTime::from_ms(582));
    assert_eq!(out.jobs[0].end, SimTime::from_ms(1532));
}
