//! Flexible gang scheduling (seed 003) on tiny scenarios: per-job quanta, I/O
//! interrupts, the gang bit, fragment filling and the round cost.

use super::gang::GangParams;
use super::tests::Spin;
use super::*;
use cosched_contract::process::{FlexParams, GangBit, LowGang};
use cosched_model::node::OsConfig;
use cosched_model::program::Builder;

/// The engine tests' platform on one node, with no context-switch or interrupt cost,
/// so slot boundaries are exact.
fn platform() -> NodePlatform {
    NodePlatform {
        interrupt_us: 0.0,
        ..super::tests::platform(1, OsConfig::default())
    }
}

const MS: i64 = 1_000_000;

fn compute(name: &str, ms: i64) -> ProcJob {
    let mut b = Builder::new(1);
    b.all(Op::Compute { ns: ms * MS });
    ProcJob::new(b.build(name, 10.0), SimTime::ZERO)
}

/// Computes 1 ms, waits for an `io_ms` disk request, computes 1 ms.
fn io_job(io_ms: i64) -> ProcJob {
    let mut b = Builder::new(1);
    b.all(Op::Compute { ns: MS });
    b.all(Op::Io { ns: io_ms * MS });
    b.all(Op::Compute { ns: MS });
    ProcJob::new(b.build("io-bound", 10.0), SimTime::ZERO)
}

fn opts(quantum_ms: i64, rows: u32, switch_us: i64, flex: FlexParams) -> ProcOptions {
    ProcOptions {
        record_timeline: true,
        ..super::testkit::gang_options(GangParams {
            quantum: SimTime::from_ms(quantum_ms),
            rows,
            switch: SimTime::from_us(switch_us),
            alternate: false,
            flex,
        })
    }
}

fn run(jobs: &[ProcJob], opts: &ProcOptions) -> ProcOutput {
    simulate_processes(&platform(), jobs, &|| Box::new(Spin), opts).expect("run")
}

fn ms(t: SimTime) -> f64 {
    t.as_ns() as f64 / MS as f64
}

#[test]
fn per_job_quanta_give_each_job_its_own_slot_length() {
    // Row 0: job a (19 ms of work, quantum 10 ms); row 1: job b (55 ms, 30 ms).
    let jobs = [compute("a", 19), compute("b", 55)];
    let flex = FlexParams {
        quanta: vec![
            ("a".into(), SimTime::from_ms(10)),
            ("b".into(), SimTime::from_ms(30)),
        ],
        ..Default::default()
    };
    let out = run(&jobs, &opts(10, 2, 0, flex));
    // a 0-10, b 10-40, a 40-49 (done), b alone 49-74.
    let segs: Vec<(usize, f64, f64)> = out
        .timeline
        .iter()
        .filter(|s| s.cpu.is_some())
        .map(|s| (s.job, ms(s.start), ms(s.end)))
        .collect();
    assert_eq!(segs[0], (0, 0.0, 10.0), "{segs:?}");
    assert_eq!(segs[1], (1, 10.0, 40.0), "{segs:?}");
    assert_eq!(segs[2], (0, 40.0, 49.0), "{segs:?}");
    assert_eq!(ms(out.jobs[0].end), 49.0);
    assert_eq!(ms(out.jobs[1].end), 74.0);
    // The same jobs with one 10 ms quantum for all: a ends at 29 ms.
    let plain = run(&jobs, &opts(10, 2, 0, FlexParams::default()));
    assert_eq!(ms(plain.jobs[0].end), 29.0);
    assert_eq!(ms(plain.jobs[1].end), 74.0);
}

#[test]
fn io_completion_preempts_the_active_row_only_with_io_preempt() {
    // Row 0: the I/O job, blocked 1-61 ms; row 1: a compute job, slot 50-100 ms.
    let jobs = [io_job(60), compute("hog", 200)];
    let on = FlexParams {
        io_preempt: true,
        ..Default::default()
    };
    let with = run(&jobs, &opts(50, 2, 0, on));
    assert_eq!(with.counters.gang_io_preemptions, 1);
    assert_eq!(ms(with.jobs[0].end), 62.0, "runs at once at 61 ms");
    let without = run(&jobs, &opts(50, 2, 0, FlexParams::default()));
    assert_eq!(without.counters.gang_io_preemptions, 0);
    assert_eq!(
        ms(without.jobs[0].end),
        101.0,
        "waits for its own slot at 100 ms"
    );
    // The hog lost 1 ms of its slot to the interrupt.
    assert!(with.measures.ns(super::fragment::NAME) == MS);
    // The interrupt per job: the I/O job (0) took the hog's (1) CPU, once.
    let per_job = |o: &ProcOutput| -> Vec<(u64, u64)> {
        use super::io_interrupts::{IoInterrupts, NAME};
        let m = o.measures.get::<IoInterrupts>(NAME).expect("gang runs");
        m.jobs
            .iter()
            .map(|j| (j.interrupting, j.interrupted))
            .collect()
    };
    assert_eq!(per_job(&with), [(1, 0), (0, 1)]);
    assert_eq!(per_job(&without), [(0, 0), (0, 0)]);
}

#[test]
fn gang_bit_gives_a_blocked_processs_slot_to_another_row() {
    // Row 0: the I/O job, blocked 1-31 ms of its 50 ms slot; row 1: 40 ms of work.
    let jobs = [io_job(30), compute("cpu", 40)];
    let on = FlexParams {
        gang_bit: GangBit::All,
        ..Default::default()
    };
    let with = run(&jobs, &opts(50, 2, 0, on));
    let segs: Vec<(usize, f64, f64)> = with
        .timeline
        .iter()
        .filter(|s| s.cpu.is_some())
        .map(|s| (s.job, ms(s.start), ms(s.end)))
        .collect();
    assert_eq!(segs[1], (1, 1.0, 31.0), "the cpu job runs in the fragment");
    assert_eq!(segs[2], (0, 31.0, 32.0), "the owner takes its slot back");
    assert_eq!(ms(with.jobs[0].end), 32.0);
    assert_eq!(ms(with.jobs[1].end), 42.0);
    assert_eq!(with.measures.ns(super::fragment::NAME), 30 * MS);
    // Without the gang bit the node idles while the owner is blocked.
    let without = run(&jobs, &opts(50, 2, 0, FlexParams::default()));
    assert_eq!(ms(without.jobs[0].end), 32.0);
    assert_eq!(ms(without.jobs[1].end), 72.0);
    assert_eq!(without.measures.ns(super::fragment::NAME), 0);
}

#[test]
fn fill_gives_fragments_to_low_gangedness_jobs_only() {
    // Row 0: the I/O job; row 1: "hi" (high gangedness); row 2: "lo".
    let jobs = [io_job(30), compute("hi", 100), compute("lo", 100)];
    let fragment_job = |fill: bool| {
        let flex = FlexParams {
            gang_bit: GangBit::All,
            fill,
            low: LowGang::Declared(vec!["lo".into()]),
            ..Default::default()
        };
        let out = run(&jobs, &opts(50, 3, 0, flex));
        out.timeline
            .iter()
            .find(|s| s.cpu.is_some() && s.start == SimTime::from_ms(1))
            .map(|s| s.job)
    };
    assert_eq!(
        fragment_job(false),
        Some(1),
        "plain: the next row's process"
    );
    assert_eq!(fragment_job(true), Some(2), "fill: the low-gangedness job");
    // With no low-gangedness job the fragment stays idle.
    let flex = FlexParams {
        gang_bit: GangBit::All,
        fill: true,
        ..Default::default()
    };
    let out = run(&jobs[..2], &opts(50, 3, 0, flex));
    assert_eq!(out.measures.ns(super::fragment::NAME), 0);
}

#[test]
fn round_precomputation_adds_to_the_switch_starting_each_round() {
    // Rows 0 and 1: jobs a and b, 25 ms of work each, on the one node; 10 ms
    // slots, 1 ms switches. By hand: a [0, 10), switch, b [11, 21), switch,
    // a [22, 32), switch, b [33, 43), switch, a [44, 49): a ends and its
    // emptied row ends the slot; switch, b [50, 55): b ends at 55 ms.
    // 5 switches (at 10, 21, 32, 43 and 49 ms).
    let jobs = [compute("a", 25), compute("b", 25)];
    let plain = run(&jobs, &opts(10, 2, 1000, FlexParams::default()));
    assert_eq!(plain.counters.gang_switches, 5);
    assert_eq!(ms(plain.jobs[0].end), 49.0);
    assert_eq!(ms(plain.jobs[1].end), 55.0);
    let rounds = FlexParams {
        round_slots: 2,
        round: SimTime::from_us(500),
        ..Default::default()
    };
    let out = run(&jobs, &opts(10, 2, 1000, rounds.clone()));
    // Switches 1, 3 and 5 start a round: 0.5 ms more each; a passes two of
    // them (1 and 3) before its end, b all three.
    assert_eq!(ms(out.jobs[0].end), 49.0 + 2.0 * 0.5);
    assert_eq!(ms(out.jobs[1].end), 55.0 + 3.0 * 0.5);
    // One row alone: its slots follow each other without a switch, so no
    // round is precomputed either: 25 ms of work end at 25 ms.
    let alone = run(&jobs[..1], &opts(10, 1, 1000, rounds));
    assert_eq!(alone.counters.gang_switches, 0);
    assert_eq!(ms(alone.jobs[0].end), 25.0);
}

#[test]
fn gang_bit_is_per_job() {
    // Row 0: the I/O job; row 1: a compute job. With the gang bit only on the
    // compute job's application, the I/O job's blocked slot is not lent.
    let jobs = [io_job(30), compute("cpu", 100)];
    let lent = |bit: GangBit| {
        let flex = FlexParams {
            gang_bit: bit,
            ..Default::default()
        };
        run(&jobs, &opts(50, 2, 0, flex))
            .measures
            .ns(super::fragment::NAME)
    };
    assert!(lent(GangBit::All) > 0);
    assert!(lent(GangBit::Apps(vec!["io-bound".into()])) > 0);
    assert_eq!(lent(GangBit::Apps(vec!["cpu".into()])), 0);
    assert_eq!(lent(GangBit::Off), 0);
}

#[test]
fn priority_inversion_counts_a_disk_woken_process_waiting_behind_another_job() {
    // Row 0: an I/O job whose 60 ms disk request ends at 61 ms, inside row 1's
    // slot [50, 100): it waits 39 ms while the compute job holds the CPU.
    let jobs = [io_job(60), compute("cpu", 200)];
    let inv = |io_preempt: bool| {
        let flex = FlexParams {
            io_preempt,
            ..Default::default()
        };
        let out = run(&jobs, &opts(50, 2, 0, flex));
        out.measures.ns(super::inversion::NAME)
    };
    assert_eq!(inv(false), 39 * MS);
    assert_eq!(inv(true), 0, "the I/O interrupt runs it at once");
    // Time sharing measures it too: under FCFS with MPL 2 on Linux 2.4 the woken
    // process, with more counter left, preempts the compute job at once.
    let plat = platform();
    let fcfs = ProcOptions {
        mpl: 2,
        ..Default::default()
    };
    let out = simulate_processes(&plat, &jobs, &|| Box::new(Spin), &fcfs).expect("run");
    let wait_ns = out.measures.ns(super::inversion::NAME);
    assert_eq!(wait_ns, 0);
    assert_eq!(ms(out.jobs[0].end), 62.0, "1 ms + 60 ms of I/O + 1 ms");
}

/// Enum (non-blocking messages), Water (blocking request/reply) and an I/O job
/// gang scheduled on lee4 with the flexible options and `low=auto`.
fn auto_mix(low: LowGang) -> ProcOutput {
    let plat = NodePlatform::preset("lee4").unwrap();
    let app = |s: &str| cosched_model::apps::build(s, '-', 4).expect("app");
    let jobs = [
        ProcJob::new(app("lee-Enum[quanta=2000]"), SimTime::ZERO),
        ProcJob::new(app("lee-Water[quanta=2000]"), SimTime::ZERO),
        ProcJob::new(app("io-bound[bursts=100]"), SimTime::ZERO),
    ];
    let opts = ProcOptions {
        mpl: 3,
        ..super::testkit::gang_options(GangParams {
            quantum: SimTime::from_ms(10),
            rows: 3,
            switch: SimTime::ZERO,
            alternate: false,
            flex: FlexParams {
                io_preempt: true,
                gang_bit: GangBit::Apps(vec!["io-bound".into()]),
                fill: true,
                low,
                est_quantum: SimTime::from_ms(1),
                ..Default::default()
            },
        })
    };
    simulate_processes(&plat, &jobs, &|| Box::new(Spin), &opts).expect("run")
}

#[test]
fn auto_classifies_enum_low_and_water_high_after_warm_up() {
    use super::gangedness::{GangClass, GangednessParams};
    let out = auto_mix(LowGang::Auto(GangednessParams::default()));
    let est = &out
        .measures
        .get::<super::gangedness::Estimates>(super::gangedness::NAME)
        .expect("gang runs export the estimate")
        .jobs;
    let (enum_, water) = (&est[0], &est[1]);
    assert!(
        enum_.counts.gang.n >= 32 && enum_.counts.non_gang_non_running.n >= 32,
        "{enum_:?}"
    );
    assert_eq!(enum_.class, GangClass::Low, "{enum_:?}");
    assert_eq!(water.class, GangClass::High, "{water:?}");
    assert!(enum_.ratio > 0.15 && water.ratio < 0.15);
    // Both were classified during the run, before it ended.
    let end = out.end;
    for e in [enum_, water] {
        assert!(e.decided.is_some_and(|t| t < end), "{e:?}");
    }
    // Water, once high, gets no more fragments: fewer non-gang-running records
    // than Enum, which keeps receiving them.
    assert!(water.counts.non_gang_running.n < enum_.counts.non_gang_running.n);
}
