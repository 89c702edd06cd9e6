//! The perturbation harness and the gangedness estimator (seed 003 §4-5) on
//! the `lee4` platform with the seed's synthetic and profiled applications.

use super::gang::GangParams;
use super::perturb::{PerturbOutput, QuantumClass};
use super::policy::NodePolicy;
use super::*;
use cosched_contract::process::{Choice, Kind, PerturbParams};
use cosched_policies::process::perturb::draw;

struct Spin;
impl NodePolicy for Spin {
    fn name(&self) -> String {
        "spin".into()
    }
}

const Q: i64 = cosched_model::apps::lee::QUANTUM_NS;
/// Run length of the apps in these tests, quanta.
const QUANTA: u32 = 60;

fn app(name: &str) -> Program {
    cosched_model::apps::build(name, '-', 4).expect("app")
}

/// `target` gang scheduled against a long Emp competitor, perturbed by `kind`,
/// `choice`, `count`.
fn run(target: &str, kind: Kind, choice: Choice, count: u32, seed: u64) -> PerturbOutput {
    let plat = NodePlatform::preset("lee4").unwrap();
    let jobs = [
        ProcJob::new(app(target), SimTime::ZERO),
        ProcJob::background(app("Emp[quanta=100000]"), SimTime::ZERO),
    ];
    let gang = GangParams {
        quantum: SimTime(Q),
        rows: 2,
        switch: SimTime::ZERO,
        alternate: false,
        flex: Default::default(),
    };
    let perturb = PerturbParams {
        kind,
        choice,
        count,
        span: QUANTA,
        seed,
    };
    let opts = ProcOptions {
        mpl: 2,
        slots: Some(cosched_policies::process::perturb::factory(gang, perturb)),
        ..Default::default()
    };
    let out = simulate_processes(&plat, &jobs, &|| Box::new(Spin), &opts).expect("run");
    // A perturbing slot policy subscribes every observer, each reporting under
    // its name in the order of `observers::of`.
    let names: Vec<&str> = out.measures.iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "priority_inversion",
            "gang_fragment",
            "gangedness",
            "io_interrupts",
            "perturb"
        ]
    );
    out.measures
        .get::<super::perturb::PerturbOutput>(super::perturb::NAME)
        .cloned()
        .expect("perturb output")
}

/// Change of the run time in own quanta per perturbation.
fn slope(target: &str, kind: Kind, choice: Choice, count: u32) -> f64 {
    let base = run(target, kind, choice, 0, 1);
    let p = run(target, kind, choice, count, 1);
    assert_eq!(p.applied, count, "every perturbation lands before the end");
    (p.own_ns - base.own_ns) as f64 / Q as f64 / count as f64
}

#[test]
fn batches_of_four_three_quanta_apart_fixed_or_round_robin() {
    let params = |choice, count| PerturbParams {
        kind: Kind::Takeaway,
        choice,
        count,
        span: 200,
        seed: 7,
    };
    let rr = draw(&params(Choice::RoundRobin, 10), 4);
    assert_eq!(rr.len(), 10);
    for b in rr.chunks(4) {
        for (i, w) in b.windows(2).enumerate() {
            assert_eq!(w[1].0 - w[0].0, 3, "batch {b:?}");
            assert_eq!(w[1].1, (w[0].1 + 1) % 4, "round robin {i}");
        }
    }
    // Batches do not overlap and the draw is seeded.
    for w in rr.chunks(4).collect::<Vec<_>>().windows(2) {
        assert!(w[1][0].0 >= w[0][0].0 + 10, "{rr:?}");
    }
    assert_eq!(rr, draw(&params(Choice::RoundRobin, 10), 4));
    let other = PerturbParams {
        seed: 8,
        ..params(Choice::RoundRobin, 10)
    };
    assert_ne!(rr, draw(&other, 4));
    let fx = draw(&params(Choice::Fixed(3), 8), 4);
    assert!(fx.iter().all(|&(_, r)| r == 3));
}

#[test]
fn unperturbed_gang_runs_the_target_only_in_its_slots_all_ganged() {
    let out = run("Emp[quanta=20]", Kind::Takeaway, Choice::Fixed(1), 0, 1);
    // 20 quanta of work in 20 own slots; every record is a gang record.
    assert_eq!(out.own_ns, 20 * Q);
    assert!(out.quanta.iter().all(|q| q.class == QuantumClass::Gang));
    // The work ends exactly with the 20th slot: 20 full slots of 4 records.
    assert_eq!(out.quanta.len(), 20 * 4);
}

#[test]
fn giveaway_to_a_synchronization_intensive_app_gives_no_speedup() {
    let name = format!("Barrier[quanta={QUANTA}]");
    let rr = slope(&name, Kind::Giveaway, Choice::RoundRobin, 8);
    let fx = slope(&name, Kind::Giveaway, Choice::Fixed(1), 8);
    assert!(rr.abs() < 0.05 && fx.abs() < 0.05, "rr {rr} fx {fx}");
    // ... while a takeaway costs it the whole quantum, whichever processor.
    let take = slope(&name, Kind::Takeaway, Choice::RoundRobin, 8);
    assert!(take > 0.9, "takeaway {take}");
}

#[test]
fn round_robin_takeaway_on_an_embarrassingly_parallel_app_costs_one_over_p() {
    let name = format!("Emp[quanta={QUANTA}]");
    let rr = slope(&name, Kind::Takeaway, Choice::RoundRobin, 8);
    assert!((rr - 0.25).abs() < 0.05, "rr {rr}");
    // Fixed-processor takeaway costs the whole quantum (load imbalance) and
    // round-robin giveaway saves 1/P.
    let fx = slope(&name, Kind::Takeaway, Choice::Fixed(1), 8);
    assert!((fx - 1.0).abs() < 0.05, "fx {fx}");
    let give = slope(&name, Kind::Giveaway, Choice::RoundRobin, 8);
    assert!((give + 0.25).abs() < 0.05, "give {give}");
}

#[test]
fn estimator_ranks_non_blocking_messages_less_ganged_than_request_reply() {
    let enum_ = run(
        "lee-Enum[quanta=60]",
        Kind::Takeaway,
        Choice::Fixed(1),
        16,
        2,
    );
    let water = run(
        "lee-Water[quanta=60]",
        Kind::Takeaway,
        Choice::Fixed(1),
        16,
        2,
    );
    for o in [&enum_, &water] {
        assert!(o.stats(QuantumClass::Gang).n > 0);
        assert!(o.stats(QuantumClass::NonGangNonRunning).n > 0);
        assert!(o.stats(QuantumClass::NonGangRunning).n > 0);
    }
    let (re, rw) = (enum_.message_ratio(), water.message_ratio());
    assert!(re > 2.0 * rw, "Enum ratio {re} vs Water {rw}");
}

#[test]
fn taken_away_node_receives_messages_but_its_rank_makes_no_progress() {
    let out = run(
        "lee-Enum[quanta=60]",
        Kind::Takeaway,
        Choice::Fixed(2),
        8,
        3,
    );
    let slots: Vec<u64> = out
        .quanta
        .iter()
        .filter(|q| q.class == QuantumClass::NonGangNonRunning)
        .map(|q| q.slot)
        .collect();
    assert_eq!(slots.len(), 8);
    for s in slots {
        let row: Vec<_> = out.quanta.iter().filter(|q| q.slot == s).collect();
        assert_eq!(row.len(), 4, "slot {s}: one record per rank");
        // Each record holds the total progress minus its own rank's, so the
        // slot's total is the records' sum / (ranks - 1) and a rank's own
        // progress is the total minus its record.
        let sum: i64 = row.iter().map(|q| q.sender_progress_ns).sum();
        assert_eq!(sum % 3, 0, "slot {s}");
        let total = sum / 3;
        let own = |r: u32| total - row.iter().find(|q| q.rank == r).unwrap().sender_progress_ns;
        assert_eq!(own(2), 0, "slot {s}: the taken-away rank made no progress");
        assert!(
            own(0) > 0 && own(1) > 0 && own(3) > 0,
            "slot {s}: the others ran"
        );
        let r2 = row.iter().find(|q| q.rank == 2).unwrap();
        assert_eq!(r2.class, QuantumClass::NonGangNonRunning);
        assert!(
            r2.messages > 0,
            "slot {s}: Enum's non-blocking messages reach rank 2"
        );
    }
}

#[test]
fn same_seed_same_records_other_seed_other_times() {
    let a = run(
        "lee-Water[quanta=60]",
        Kind::Giveaway,
        Choice::RoundRobin,
        8,
        5,
    );
    let b = run(
        "lee-Water[quanta=60]",
        Kind::Giveaway,
        Choice::RoundRobin,
        8,
        5,
    );
    assert_eq!(a, b);
    let c = run(
        "lee-Water[quanta=60]",
        Kind::Giveaway,
        Choice::RoundRobin,
        8,
        6,
    );
    let slots = |o: &PerturbOutput| -> Vec<u64> {
        o.quanta
            .iter()
            .filter(|q| q.class != QuantumClass::Gang)
            .map(|q| q.slot)
            .collect()
    };
    assert_ne!(slots(&a), slots(&c));
    // A giveaway slot has one running rank (the given one) and three non-running.
    let ngr = a
        .quanta
        .iter()
        .filter(|q| q.class == QuantumClass::NonGangRunning)
        .count();
    let ngn = a
        .quanta
        .iter()
        .filter(|q| q.class == QuantumClass::NonGangNonRunning)
        .count();
    assert_eq!(a.applied, 8);
    assert_eq!((ngr, ngn), (8, 24));
}
