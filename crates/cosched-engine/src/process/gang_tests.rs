//! Gang scheduling on tiny scenarios.

use super::gang::GangParams;
use super::tests::Spin;
use super::*;
use cosched_contract::slots::{
    MatrixView, SlotDecision, SlotError, SlotFactory, SlotPolicy, SlotView,
};
use cosched_model::node::OsConfig;
use cosched_model::program::Builder;
use cosched_rules::admission::Fcfs;

/// The engine tests' platform with a context switch of `cs_us`.
fn platform(nodes: u32, cs_us: f64) -> NodePlatform {
    NodePlatform {
        context_switch_us: cs_us,
        ..super::tests::platform(nodes, OsConfig::default())
    }
}

/// `p` ranks, `iters` times: compute `ms`, then a barrier.
fn bsp(p: u32, iters: u32, ms: i64) -> ProcJob {
    let mut b = Builder::new(p);
    b.repeat(iters, |b| {
        b.all(Op::Compute { ns: ms * 1_000_000 });
        b.barrier();
    });
    ProcJob::new(b.build("bsp", 10.0), SimTime::ZERO)
}

fn compute(p: u32, ms: i64) -> ProcJob {
    let mut b = Builder::new(p);
    b.all(Op::Compute { ns: ms * 1_000_000 });
    ProcJob::new(b.build("compute", 10.0), SimTime::ZERO)
}

fn gang(quantum_ms: i64, switch_us: i64, alternate: bool) -> ProcOptions {
    ProcOptions {
        record_timeline: true,
        ..super::testkit::gang_options(GangParams {
            quantum: SimTime::from_ms(quantum_ms),
            rows: 3,
            switch: SimTime::from_us(switch_us),
            alternate,
            flex: Default::default(),
        })
    }
}

fn run(plat: &NodePlatform, jobs: &[ProcJob], opts: &ProcOptions) -> ProcOutput {
    simulate_processes(plat, jobs, &|| Box::new(Spin), opts).expect("run")
}

/// CPU segments sorted by start.
fn cpu_segments(out: &ProcOutput) -> Vec<Segment> {
    let mut s: Vec<Segment> = out
        .timeline
        .iter()
        .copied()
        .filter(|s| s.cpu.is_some())
        .collect();
    s.sort_by_key(|s| (s.start, s.node));
    s
}

#[test]
fn gang_runs_one_row_per_slot_and_switches_cost_the_parameters() {
    // Three 4-process jobs on 4 nodes: each fills a row (first fit), rows 0, 1, 2.
    let plat = platform(4, 5.0);
    let jobs = vec![bsp(4, 30, 3), bsp(4, 30, 3), bsp(4, 30, 3)];
    let (q, sw) = (SimTime::from_ms(20), SimTime::from_us(1000));
    let out = run(&plat, &jobs, &gang(20, 1000, false));
    for (j, r) in out.jobs.iter().enumerate() {
        assert_eq!(r.start, SimTime::ZERO, "job {j} admitted at once (3 rows)");
    }
    let segs = cpu_segments(&out);
    // Slots: maximal runs of segments of one job; between two slots of different
    // jobs, no CPU of the machine works for at least the switch cost.
    let mut slots: Vec<(usize, SimTime, SimTime)> = Vec::new();
    for s in &segs {
        match slots.last_mut() {
            Some((j, _, end)) if *j == s.job => *end = (*end).max(s.end),
            Some((_, _, end)) => {
                assert!(
                    s.start >= *end + sw,
                    "job {} at {} less than a switch after the previous slot ended at {}",
                    s.job,
                    s.start,
                    end
                );
                slots.push((s.job, s.start, s.end));
            }
            None => slots.push((s.job, s.start, s.end)),
        }
    }
    // While all three jobs run, slot k belongs to job k % 3 and starts at k (Q + S).
    for (k, &(j, start, end)) in slots.iter().take(6).enumerate() {
        assert_eq!(j, k % 3, "slot {k}: {slots:?}");
        assert_eq!(
            start,
            SimTime((q + sw).as_ns() * k as i64),
            "slot {k} start"
        );
        assert!(end <= start + q, "slot {k} overruns its quantum");
    }
    // Each slot resumption costs one context switch per node (another process ran last).
    let switches = segs.iter().filter(|s| s.kind == SegmentKind::Switch);
    assert!(switches
        .clone()
        .all(|s| s.end - s.start == SimTime::from_us(5)));
    assert!(out.counters.gang_switches >= slots.len() as u64 - 1);
}

/// Gang with 3 rows, `quantum_ms` slots and `switch_us` switches, no
/// context-switch cost on the platform of the test.
fn gang3(quantum_ms: i64, switch_us: i64) -> ProcOptions {
    gang(quantum_ms, switch_us, false)
}

#[test]
fn a_single_job_under_gang_runs_at_its_dedicated_time_without_switches() {
    // One job of 2 ranks computing 2500 ms, alone in a 3-row matrix, 1 s slots,
    // 1 ms switches: row 0 is the only non-empty row, so at 1 s and 2 s a new
    // slot of row 0 starts without a switch (the same processes keep their
    // CPUs). By hand: 0 switches, no idle time, the job ends at 2500 ms, its
    // dedicated time.
    let plat = platform(2, 0.0);
    let jobs = vec![compute(2, 2500)];
    let dedicated = run(&plat, &jobs, &ProcOptions::default()).jobs[0].end;
    let out = run(&plat, &jobs, &gang3(1000, 1000));
    assert_eq!(dedicated, SimTime::from_ms(2500));
    assert_eq!(out.jobs[0].end, SimTime::from_ms(2500));
    assert_eq!(out.counters.gang_switches, 0);
}

#[test]
fn a_single_bsp_job_under_gang_pays_no_switch_and_no_context_switch() {
    // 4 ranks, 40 x (2 ms compute + barrier), 10 ms slots, 0.5 ms switches, a
    // 5 us context switch: the job alone never changes rows, so the slots
    // renew without a switch and every CPU resumes the process it held (no
    // context switch): the gang run ends exactly at the dedicated time.
    let plat = platform(4, 5.0);
    let jobs = vec![bsp(4, 40, 2)];
    let dedicated = run(&plat, &jobs, &ProcOptions::default());
    let out = run(&plat, &jobs, &gang(10, 500, false));
    assert_eq!(out.jobs[0].end, dedicated.jobs[0].end);
    assert_eq!(out.counters.gang_switches, 0);
    assert_eq!(
        out.counters.context_switches,
        dedicated.counters.context_switches
    );
}

#[test]
fn two_rows_pay_a_switch_per_quantum_until_one_job_is_left() {
    // Job 0 computes 1500 ms (row 0), job 1 2900 ms (row 1), 2 ranks each on 2
    // nodes; 1 s slots, 1 ms switches, no context-switch cost. By hand:
    // row 0 [0, 1000) ms, switch, row 1 [1001, 2001), switch, row 0
    // [2002, 2502): job 0 ends (1500 ms done) and its emptied row ends its slot
    // at once: switch [2502, 2503), row 1 from 2503 with 1900 ms left. Job 1 is
    // alone: at 3503 its slot renews without a switch and it ends at 4403 ms.
    // Switches: 3 (at 1000, 2001, 2502 ms), each idling 1 ms.
    let plat = platform(2, 0.0);
    let jobs = vec![compute(2, 1500), compute(2, 2900)];
    let out = run(&plat, &jobs, &gang3(1000, 1000));
    assert_eq!(out.jobs[0].end, SimTime::from_ms(2502));
    assert_eq!(out.jobs[1].end, SimTime::from_ms(4403));
    assert_eq!(out.counters.gang_switches, 3);
}

/// The gang policy, except that at a slot timer it asks for the row after
/// the one the gang policy runs, without a switch.
struct RunsAnotherRow(Box<dyn SlotPolicy>);

impl SlotPolicy for RunsAnotherRow {
    fn name(&self) -> String {
        "runs-another-row".into()
    }
    fn on_arrival(&mut self, job: usize, v: &dyn SlotView) {
        self.0.on_arrival(job, v);
    }
    fn next(&mut self, v: &dyn SlotView) -> Option<SlotDecision> {
        self.0.next(v)
    }
    fn on_started(&mut self, j: usize, p: Pid, n: &[u32], v: &dyn SlotView) -> Vec<SlotDecision> {
        self.0.on_started(j, p, n, v)
    }
    fn on_job_end(&mut self, job: usize, v: &dyn SlotView) {
        self.0.on_job_end(job, v);
    }
    fn on_slot_timer(&mut self, v: &dyn SlotView) -> Vec<SlotDecision> {
        let ds = self.0.on_slot_timer(v);
        ds.into_iter()
            .map(|d| match d {
                SlotDecision::Run { row, until } => SlotDecision::Run {
                    row: row + 1,
                    until,
                },
                d => d,
            })
            .collect()
    }
    fn pick(&self, node: u32, v: &dyn SlotView) -> Option<Pid> {
        self.0.pick(node, v)
    }
    fn matrix(&self) -> Option<&dyn MatrixView> {
        self.0.matrix()
    }
    fn gang(&self) -> Option<&GangParams> {
        self.0.gang()
    }
}

#[test]
fn a_slot_timer_run_of_another_row_without_a_switch_is_refused() {
    // One job in row 0, 10 ms slots: at 10 ms the wrapped policy asks for row 1
    // without a switch, which the engine refuses (a new row needs a Switch).
    let params = GangParams {
        quantum: SimTime::from_ms(10),
        rows: 3,
        switch: SimTime::from_us(1000),
        alternate: false,
        flex: Default::default(),
    };
    let opts = ProcOptions {
        slots: Some(SlotFactory::new(move |setup| {
            let inner = cosched_policies::process::gang::Gang::new(params.clone(), setup);
            Box::new(RunsAnotherRow(Box::new(inner)))
        })),
        ..Default::default()
    };
    let r = simulate_processes(
        &platform(2, 0.0),
        &[compute(2, 50)],
        &|| Box::new(Spin),
        &opts,
    );
    assert!(
        matches!(&r, Err(ProcError::Slot(SlotError::Misplaced(m)))
            if m.contains("row 1") && m.contains("row 0 runs")),
        "{r:?}"
    );
}

#[test]
fn alternate_scheduling_fills_nodes_without_a_process_in_the_active_row() {
    // Job 0: 1 process (row 0, node 0); job 1: 2 processes (row 1, nodes 0 and 1).
    let plat = platform(2, 0.0);
    let jobs = vec![compute(1, 100), compute(2, 100)];
    let q = SimTime::from_ms(20);
    for alternate in [false, true] {
        let out = run(&plat, &jobs, &gang(20, 100, alternate));
        assert_eq!(out.jobs[0].nodes, vec![0]);
        assert_eq!(out.jobs[1].nodes, vec![0, 1]);
        let segs = cpu_segments(&out);
        // On node 0 only one job runs per slot in any case.
        let in_first_slot = |s: &&Segment| s.start < q;
        let early: Vec<(u32, usize)> = segs
            .iter()
            .filter(in_first_slot)
            .map(|s| (s.node, s.job))
            .collect();
        assert!(early.contains(&(0, 0)));
        assert!(
            !early.contains(&(0, 1)),
            "row 1 never runs on node 0 in row 0's slot"
        );
        assert_eq!(early.contains(&(1, 1)), alternate, "{early:?}");
    }
}

#[test]
fn bad_gang_options_are_errors() {
    let plat = platform(2, 0.0);
    let jobs = vec![compute(1, 1)];
    let mut o = gang(0, 1, false);
    let e = simulate_processes(&plat, &jobs, &|| Box::new(Spin), &o).unwrap_err();
    assert!(e.to_string().contains("quantum > 0"), "{e}");
    o = ProcOptions {
        admission: Some(admit::AdmissionFactory::new(|| Box::new(Fcfs::default()))),
        ..gang(10, 1, false)
    };
    let e = simulate_processes(&plat, &jobs, &|| Box::new(Spin), &o).unwrap_err();
    assert!(
        e.to_string().contains("no admission policy with gang"),
        "{e}"
    );
}

#[test]
fn several_jobs_per_row_share_slots_only_on_distinct_nodes() {
    // Rows by first fit on 4 nodes: row 0 = jobs 0 (nodes 0-1) and 1 (2-3);
    // row 1 = jobs 2 (0-2) and 3 (3); row 2 = job 4 (0-3); job 5 waits for room.
    let plat = platform(4, 5.0);
    let jobs = vec![
        bsp(2, 20, 2),
        bsp(2, 40, 3),
        bsp(3, 30, 2),
        compute(1, 150),
        bsp(4, 25, 4),
        bsp(2, 20, 2),
    ];
    let (q, sw) = (SimTime::from_ms(15), SimTime::from_us(700));
    let out = run(&plat, &jobs, &gang(15, 700, false));
    assert_eq!(out.jobs[3].nodes, vec![3]);
    assert_eq!(out.jobs[4].nodes, vec![0, 1, 2, 3]);
    assert!(
        out.jobs[5].start > SimTime::ZERO,
        "no row had room for job 5 at first"
    );
    // Slots are separated by machine-wide idle gaps of at least the switch cost.
    let segs = cpu_segments(&out);
    let mut slots: Vec<(SimTime, SimTime, std::collections::BTreeSet<usize>)> = Vec::new();
    for s in &segs {
        match slots.last_mut() {
            Some((_, end, jobs)) if s.start < *end + sw => {
                *end = (*end).max(s.end);
                jobs.insert(s.job);
            }
            _ => slots.push((s.start, s.end, [s.job].into())),
        }
    }
    assert!(slots.len() > 6, "{}", slots.len());
    // Every job runs only in its row's slots (job 5 took row 0's free cells).
    let row = [0, 0, 1, 1, 2, 0];
    for (start, end, in_slot) in &slots {
        let in_slot: Vec<usize> = in_slot.iter().copied().collect();
        // A slot lasts at most a quantum, unless its row is the only one left
        // (its slots then follow each other without a switch).
        let others_later = segs
            .iter()
            .any(|s| s.start >= *end && row[s.job] != row[in_slot[0]]);
        assert!(
            *end - *start <= q || !others_later,
            "slot at {start} lasts {}",
            *end - *start
        );
        assert!(
            in_slot.iter().all(|&j| row[j] == row[in_slot[0]]),
            "slot at {start} mixes rows: jobs {in_slot:?}"
        );
        for (k, &a) in in_slot.iter().enumerate() {
            for &b in &in_slot[k + 1..] {
                // Two jobs alive together in one slot are in one row: distinct nodes.
                // (A job may take the cells of a job of its row that ended.)
                let (ra, rb) = (&out.jobs[a], &out.jobs[b]);
                let shared = ra.nodes.iter().any(|n| rb.nodes.contains(n));
                let together = ra.start < rb.end && rb.start < ra.end;
                assert!(
                    !(shared && together),
                    "jobs {a} and {b} share a node in the slot at {start}"
                );
            }
        }
    }
}

#[test]
fn dual_cpu_nodes_run_two_processes_of_the_active_row_per_slot() {
    // Dual-CPU nodes: a 4-rank job at 2 ranks per node fills row 0 of nodes 0-1;
    // two single-process loads share row 1 of node 0; a third load takes row 1
    // of node 1 (first row with a free column).
    let mut plat = platform(2, 0.0);
    plat.cpus_per_node = 2;
    let jobs = vec![
        bsp(4, 10, 10).with_ranks_per_node(2),
        compute(1, 200),
        compute(1, 200),
        compute(1, 200),
    ];
    let opts = ProcOptions {
        mpl: 3,
        ..gang(50, 0, false)
    };
    let out = run(&plat, &jobs, &opts);
    assert_eq!(out.jobs[0].nodes, vec![0, 0, 1, 1]);
    assert_eq!(out.jobs[1].nodes, vec![0]);
    assert_eq!(out.jobs[2].nodes, vec![0]);
    assert_eq!(out.jobs[3].nodes, vec![1]);
    let segs = cpu_segments(&out);
    // In the first slot (row 0) both CPUs of both nodes run the job's ranks.
    let q = SimTime::from_ms(50);
    let mut first: Vec<(u32, Option<u32>, usize)> = segs
        .iter()
        .filter(|s| s.start < q)
        .map(|s| (s.node, s.cpu, s.job))
        .collect();
    first.sort_unstable();
    first.dedup();
    assert_eq!(
        first,
        vec![
            (0, Some(0), 0),
            (0, Some(1), 0),
            (1, Some(0), 0),
            (1, Some(1), 0)
        ]
    );
    // In the second slot node 0 runs both loads at once, node 1 one load.
    let mut second: Vec<(u32, usize)> = segs
        .iter()
        .filter(|s| s.start >= q && s.start < q + q)
        .map(|s| (s.node, s.job))
        .collect();
    second.sort_unstable();
    second.dedup();
    assert_eq!(second, vec![(0, 1), (0, 2), (1, 3)]);
    // The job's 100 ms of compute (plus its barriers) runs at full speed in its
    // row's slots [0, 50), [100, 150), [200, 250): it ends early in the third
    // (with one CPU per node in a slot it would need twice the slots).
    let end = out.jobs[0].end.as_secs_f64();
    assert!((0.200..0.210).contains(&end), "job 0 ends at {end} s");
}

#[test]
fn a_run_subscribes_the_observers_its_options_ask_for() {
    // Time sharing: only the priority-inversion measure; gang mode adds the
    // fragment time and the gangedness estimator (no perturbation: the gang
    // policy does not perturb). Two 2-rank jobs of 3 ms on 2 nodes, one row
    // each: no disk burst (no inversion) and every process runs in its own
    // row's slot (no fragment time).
    let plat = platform(2, 5.0);
    let jobs = vec![compute(2, 3), compute(2, 3)];
    let names =
        |out: &ProcOutput| -> Vec<&'static str> { out.measures.iter().map(|(n, _)| n).collect() };
    let shared = run(&plat, &jobs, &ProcOptions::default());
    assert_eq!(names(&shared), ["priority_inversion"]);
    let waits = ProcOptions {
        measure_waits: true,
        ..ProcOptions::default()
    };
    assert_eq!(
        names(&run(&plat, &jobs, &waits)),
        ["priority_inversion", "wait_time"]
    );
    assert!(shared.measures.entry(gangedness::NAME).is_none());
    let g = run(&plat, &jobs, &gang(20, 1000, false));
    assert_eq!(
        names(&g),
        [
            "priority_inversion",
            "gang_fragment",
            "gangedness",
            "io_interrupts"
        ]
    );
    assert_eq!(g.measures.ns(super::inversion::NAME), 0);
    assert_eq!(g.measures.ns(super::fragment::NAME), 0);
    let est = g.measures.get::<gangedness::Estimates>(gangedness::NAME);
    assert_eq!(est.map(|e| e.jobs.len()), Some(2));
}

/// Two ranks on two nodes under gang (one 20 ms slot after another, switches
/// of 1 ms): rank 0 computes 1 ms then receives from rank 1, which receives
/// from rank 0 first.
fn both_receive_first() -> ProcJob {
    let mut b = Builder::new(2);
    b.each(|r| {
        let recv = Op::Recv {
            from: Some(1 - r),
            tag: 9,
        };
        if r == 0 {
            vec![Op::Compute { ns: 1_000_000 }, recv]
        } else {
            vec![recv]
        }
    });
    ProcJob::new(b.build("dead", 1.0), SimTime::ZERO)
}

#[test]
fn a_deadlock_under_gang_is_reported_when_it_forms() {
    // The job starts at 0 in row 0's slot. Rank 1 waits at 0; rank 0 computes
    // 1 ms (no context-switch cost, no OS noise) and waits at 1 ms: from then no
    // rank can progress, whether the ranks spin or block. Reported at 1 ms, not
    // at the time limit (1 s).
    let plat = platform(2, 0.0);
    let jobs = [both_receive_first()];
    let opts = ProcOptions {
        time_limit: SimTime::from_secs(1),
        ..gang(20, 1000, false)
    };
    for make in [
        &(|| Box::new(Spin) as Box<dyn NodePolicy>) as &dyn Fn() -> Box<dyn NodePolicy>,
        &|| Box::new(super::tests::Block),
    ] {
        let r = simulate_processes(&plat, &jobs, make, &opts);
        assert!(
            matches!(&r, Err(ProcError::ProgramDeadlock { job: 0, time, .. }) if *time == SimTime::from_ms(1)),
            "{r:?}"
        );
    }
}

#[test]
fn the_global_check_alone_reports_a_gang_deadlock_at_the_next_slot_timer() {
    // The same job with the per-job check off: only the engine's global check
    // can see it. From 1 ms both ranks sleep in their receives (blocking waits)
    // with nothing on the way, no CPU runs and nothing is runnable; the next
    // event is row 0's slot timer at 20 ms (the quantum), after which the
    // check runs: a deadlock at 20 ms, not the time limit (1 s).
    super::deadlock::NO_PROGRAM_CHECK.set(true);
    let r = simulate_processes(
        &platform(2, 0.0),
        &[both_receive_first()],
        &|| Box::new(super::tests::Block),
        &ProcOptions {
            time_limit: SimTime::from_secs(1),
            ..gang(20, 1000, false)
        },
    );
    super::deadlock::NO_PROGRAM_CHECK.set(false);
    assert!(
        matches!(&r, Err(ProcError::Deadlock { time, waiting: 2, .. }) if *time == SimTime::from_ms(20)),
        "{r:?}"
    );
}

#[test]
fn a_descheduled_gang_job_waiting_for_its_slot_is_not_reported() {
    // Job 0 (row 0): rank 0 receives from rank 1, rank 1 computes 15 ms then
    // sends 1000 bytes. Job 1 (row 1): two ranks computing 25 ms. Blocking
    // waits, 10 ms slots, 1 ms switches, no context-switch cost: row 0 runs
    // [0, 10) (rank 1 computes 10 ms; rank 0 sleeps in its receive), switch,
    // row 1 [11, 21), switch, row 0 [22, 32): rank 1 ends its compute at 27 ms.
    // At the switches at 10 and 21 ms no CPU runs and job 0's rank 0 sleeps with
    // nothing on the way, but rank 1 waits for its slot (runnable in its node's
    // dispatcher): nothing is stuck. Rank 1's send costs 1 us (27.001 ms); the
    // message takes 1000 B / 200 MB/s = 5 us on the link and 7 us of latency
    // (27.013 ms); rank 0, woken, pays the 5 us interrupt and the 1.5 us
    // receive: job 0 ends at 27.0195 ms.
    let plat = platform(2, 0.0);
    let pair = super::testkit::late_message_of(15_000_000, 1000, super::testkit::SendBy::Send);
    let jobs = [
        ProcJob::new(pair.build("pair", 1.0), SimTime::ZERO),
        compute(2, 25),
    ];
    let out = simulate_processes(
        &plat,
        &jobs,
        &|| Box::new(super::tests::Block),
        &gang(10, 1000, false),
    )
    .expect("not a deadlock");
    assert_eq!(out.jobs[0].end, SimTime(27_019_500));
}
