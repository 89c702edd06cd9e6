//! Paging on an overcommitted node: the page-in queue's victim rule.

use super::tests::{platform, Block, Spin};
use super::*;
use crate::process::testkit::os_model;
use cosched_model::node::OsConfig;
use cosched_model::program::Builder;
use proptest::prelude::*;

fn one_rank(mb: f64, submit_ms: i64, reps: u32, op: Op) -> ProcJob {
    let mut b = Builder::new(1);
    b.repeat(reps, |b| {
        b.all(op);
    });
    ProcJob::new(b.build("p", mb), SimTime::from_ms(submit_ms))
}

/// One 900 MB node with two CPUs (CFS, spin waits, 5 us switches): pid 0 (353 MB,
/// three 0.33 ms disk bursts) and pid 1 (549 MB, two 3 ms bursts) start at 15 ms,
/// pid 2 (353 MB, 1 ns) at 17 ms, pid 3 (549 MB, 1 ns) at 23 ms. Disk: 20 MB/s.
///
/// By hand: pid 1's fresh pages take 2 MB from pid 0, which pages them back in
/// when its first burst ends (15.33 ms, taking 2 MB from pid 1; read 0.1 s, until
/// 115.33 ms). pid 2 takes the other 353 MB from pid 1 (194 MB left) and ends at
/// 17 ms. pid 1 is picked at 21 ms and queues for its 355 missing MB: pid 0's pages
/// are being read. pid 3 starts at 23 ms with the 353 free MB and 194 MB taken from
/// queued pid 1, is picked and queues behind pid 1. The head, pid 1, now takes pid
/// 3's 547 MB (queued, not reading) and waits for the last 2 MB, held by pid 0
/// until it has run. At 115.33 ms pid 0 runs: pid 1 takes 2 MB from it and reads
/// its whole 549 MB (27.45 s, until 27.56533 s); the new head, pid 3, takes pid 0's
/// other 351 MB and waits. pid 0 is picked after its next burst (115.66 ms) with
/// nothing resident and queues. pid 1 runs at 27.56533 s: pid 3 takes 198 MB from
/// it and reads 549 MB (until 55.01566 s); pid 1 ends. pid 3 runs (1 ns) at
/// 55.01566 s: pid 0 takes 2 MB from it and reads 353 MB (17.65 s, until
/// 72.66566 s), then does its last burst.
///
/// Before queued processes were victims, the head (pid 1) could not take pages
/// from pid 3 queued behind it: every process waited in the queue and nothing ran.
#[test]
fn the_page_in_queue_head_takes_pages_from_processes_queued_behind_it() {
    let mut plat = platform(
        1,
        OsConfig::Cfs {
            latency_ms: 6.0,
            min_granularity_ms: 0.75,
            wakeup_granularity_ms: 1.0,
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
    let opts = ProcOptions {
        mpl: 4,
        record_timeline: true,
        ..Default::default()
    };
    let out = simulate_processes(&plat, &jobs, make, &opts).expect("no paging deadlock");
    let reads: Vec<(Pid, i64, i64)> = out
        .timeline
        .iter()
        .filter(|s| s.kind == SegmentKind::PageIn)
        .map(|s| (s.pid, s.start.as_ns() / 10_000, s.end.as_ns() / 10_000))
        .collect();
    // (pid, start, end) in units of 10 us.
    assert_eq!(
        reads,
        [
            (0, 1_533, 11_533),
            (1, 11_533, 2_756_533),
            (3, 2_756_566, 5_501_566),
            (0, 5_501_566, 7_266_566),
        ]
    );
    assert_eq!(
        out.counters.paged_in_kb,
        2_000 + 549_000 + 549_000 + 353_000
    );
    assert_eq!(out.jobs[2].end - out.jobs[2].start, SimTime(5_001));
    assert!(out.jobs[0].end > SimTime::from_ns(72_665_660_000));
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
