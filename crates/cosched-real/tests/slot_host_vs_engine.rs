//! One slot policy object, two mechanisms: the simulator's process engine and
//! the real-time host of `cosched run` and the coordinator
//! (`cosched_real::slothost`) take the same gang policy
//! (`cosched_policies::process::gang::Gang`) and, given the same arrivals and
//! job ends, see it decide the same slot sequence; with the flexible options
//! that decide per node (`alternate`, `fill`), also the same processes on the
//! idle CPUs at each slot's start.

use cosched_contract::node::Pid;
use cosched_contract::slots::{MatrixView, SlotDecision, SlotFactory, SlotPolicy, SlotView};
use cosched_des::SimTime;
use cosched_engine::process::{simulate_processes, ProcJob, ProcOptions};
use cosched_policies::process::gang::factory;
use cosched_real::slothost::{gang_policy_with, Key, Slot, SlotHost, SlotMechanism};
use std::sync::{Arc, Mutex};

/// Every decision the policy returned, with the instant of its view.
type Log = Arc<Mutex<Vec<(i64, SlotDecision)>>>;

/// A process a pick gave an idle CPU: (instant, node, pid).
type Pick = (i64, u32, Pid);

/// Every process a pick gave an idle CPU.
type Picks = Arc<Mutex<Vec<Pick>>>;

/// The gang policy, its decisions and picks recorded.
struct Rec {
    inner: Box<dyn SlotPolicy>,
    log: Log,
    picks: Picks,
}

impl Rec {
    fn note(&self, v: &dyn SlotView, ds: &[SlotDecision]) {
        let mut l = self.log.lock().unwrap();
        l.extend(ds.iter().map(|d| (v.now().as_ns(), d.clone())));
    }
}

impl SlotPolicy for Rec {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn on_arrival(&mut self, job: usize, v: &dyn SlotView) {
        self.inner.on_arrival(job, v);
    }
    fn next(&mut self, v: &dyn SlotView) -> Option<SlotDecision> {
        let d = self.inner.next(v);
        self.note(v, d.as_slice());
        d
    }
    fn on_started(
        &mut self,
        job: usize,
        first: Pid,
        nodes: &[u32],
        v: &dyn SlotView,
    ) -> Vec<SlotDecision> {
        let ds = self.inner.on_started(job, first, nodes, v);
        self.note(v, &ds);
        ds
    }
    fn on_process_end(&mut self, pid: Pid) {
        self.inner.on_process_end(pid);
    }
    fn on_job_end(&mut self, job: usize, v: &dyn SlotView) {
        self.inner.on_job_end(job, v);
    }
    fn on_slot_timer(&mut self, v: &dyn SlotView) -> Vec<SlotDecision> {
        let ds = self.inner.on_slot_timer(v);
        self.note(v, &ds);
        ds
    }
    fn on_switch_done(&mut self, v: &dyn SlotView) -> Vec<SlotDecision> {
        let ds = self.inner.on_switch_done(v);
        self.note(v, &ds);
        ds
    }
    fn pick(&self, node: u32, v: &dyn SlotView) -> Option<Pid> {
        let p = self.inner.pick(node, v);
        if let Some(p) = p {
            self.picks.lock().unwrap().push((v.now().as_ns(), node, p));
        }
        p
    }
    fn on_ran(&mut self, pid: Pid, job: usize, ran: SimTime) {
        self.inner.on_ran(pid, job, ran);
    }
    fn matrix(&self) -> Option<&dyn MatrixView> {
        self.inner.matrix()
    }
}

fn recorded(f: SlotFactory, log: &Log, picks: &Picks) -> SlotFactory {
    let (log, picks) = (log.clone(), picks.clone());
    SlotFactory::new(move |setup| {
        Box::new(Rec {
            inner: f.build(setup),
            log: log.clone(),
            picks: picks.clone(),
        })
    })
}

/// A node policy that only spins.
struct Spin;
impl cosched_engine::process::policy::NodePolicy for Spin {
    fn name(&self) -> String {
        "spin".into()
    }
}

/// `p` ranks computing `ms` each, submitted at `at_ms`.
fn compute(p: u32, ms: i64, at_ms: i64) -> ProcJob {
    named("compute", p, ms, at_ms, false)
}

/// `p` ranks of application `app` computing `ms` each (then a barrier, so
/// that they end together), submitted at `at_ms`.
fn named(app: &str, p: u32, ms: i64, at_ms: i64, barrier: bool) -> ProcJob {
    use cosched_model::program::{Builder, Op};
    let mut b = Builder::new(p);
    b.all(Op::Compute { ns: ms * 1_000_000 });
    if barrier {
        b.barrier();
    }
    ProcJob::new(b.build(app, 10.0), SimTime::from_ms(at_ms))
}

/// A mechanism that carries everything out and keeps the slots.
#[derive(Default)]
struct Fake {
    slots: Vec<Slot>,
}

impl SlotMechanism for Fake {
    fn eligible(&self, _key: Key, _node: u32) -> bool {
        true
    }
    fn choose(&mut self, _key: Key, among: &[u32], size: usize) -> Result<Vec<u32>, String> {
        Ok(among[..size].to_vec())
    }
    fn start(
        &mut self,
        _key: Key,
        _nodes: &[u32],
        _row: Option<usize>,
        _run: bool,
    ) -> Result<(), String> {
        Ok(())
    }
    fn slot(&mut self, slot: &Slot) -> Result<(), String> {
        self.slots.push(slot.clone());
        Ok(())
    }
    fn per_node(&self) -> bool {
        true
    }
}

/// What one policy decided in the engine and in the host, fed the engine's
/// arrivals and job ends.
struct Both {
    sim: Vec<(i64, SlotDecision)>,
    real: Vec<(i64, SlotDecision)>,
    sim_picks: Vec<Pick>,
    real_picks: Vec<Pick>,
    host: SlotHost<Fake>,
    /// The engine's last job end, ns.
    end: i64,
}

fn platform(nodes: u32) -> cosched_model::node::NodePlatform {
    let mut platform = cosched_model::node::NodePlatform::preset("lee4").expect("preset");
    platform.nodes = nodes;
    platform.cpus_per_node = 1;
    platform.context_switch_us = 0.0;
    platform.os_noise_tick_us = 0.0;
    platform.cpu_speed = 1.0;
    platform
}

fn run_both(spec: &str, nodes: u32, jobs: &[ProcJob]) -> Both {
    let params = gang_policy_with(spec, true, true).unwrap();
    let (sim_log, sim_picks) = (Log::default(), Picks::default());
    let opts = ProcOptions {
        mpl: params.rows,
        slots: Some(recorded(factory(params.clone()), &sim_log, &sim_picks)),
        ..Default::default()
    };
    let out = simulate_processes(&platform(nodes), jobs, &|| Box::new(Spin), &opts)
        .expect("the simulation runs");
    let (real_log, real_picks) = (Log::default(), Picks::default());
    let f = recorded(factory(params), &real_log, &real_picks);
    let mut host = SlotHost::new(&f, nodes, 8, Fake::default());
    let mut events: Vec<(i64, u8, usize)> = Vec::new();
    for (j, (job, o)) in jobs.iter().zip(&out.jobs).enumerate() {
        events.push((job.submit.as_ns(), 1, j));
        events.push((o.end.as_ns(), 0, j));
    }
    events.sort_unstable();
    for (t, kind, j) in events {
        let r = if kind == 1 {
            let app = jobs[j].program.app();
            host.arrive(j as Key, jobs[j].program.size(), &app, t as u64)
        } else {
            host.end(j as Key, t as u64)
        };
        r.unwrap();
    }
    let end = out.jobs.iter().map(|o| o.end.as_ns()).max().unwrap() as u64;
    host.advance(end + 1_000_000_000).unwrap();
    let sim = sim_log.lock().unwrap().clone();
    let real = real_log.lock().unwrap().clone();
    let sim_picks = sim_picks.lock().unwrap().clone();
    let real_picks = real_picks.lock().unwrap().clone();
    Both {
        sim,
        real,
        sim_picks,
        real_picks,
        host,
        end: end as i64,
    }
}

impl Both {
    /// The same decisions at the same instants; the host, going on after the
    /// engine's run, ends the emptied cycle.
    fn same_decisions(&self) {
        let n = self.sim.len();
        assert_eq!(self.sim[..], self.real[..n]);
        assert!(
            self.real[n..]
                .iter()
                .all(|(_, d)| matches!(d, SlotDecision::WakeAt(_) | SlotDecision::Stop)),
            "{:?}",
            &self.real[n..]
        );
    }

    /// The instants a slot starts ([`SlotDecision::Run`]).
    fn run_instants(&self) -> Vec<i64> {
        self.sim
            .iter()
            .filter(|(_, d)| matches!(d, SlotDecision::Run { .. }))
            .map(|(t, _)| *t)
            .collect()
    }

    /// The picks made at the slots' starts, in the engine and in the host.
    fn picks_at_runs(&self) -> (Vec<Pick>, Vec<Pick>) {
        let runs = self.run_instants();
        let at = |v: &[Pick]| {
            let mut v: Vec<_> = v.iter().copied().filter(|p| runs.contains(&p.0)).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        (at(&self.sim_picks), at(&self.real_picks))
    }

    /// Slots handed to the mechanism in which a job ran on some of its
    /// nodes and was frozen on others: (instant, node running it, job).
    fn split_slots(&self) -> Vec<(u64, u32, Key)> {
        let mut out = Vec::new();
        for s in &self.host.mech.slots {
            for (n, k) in s.nodes.iter().enumerate() {
                let Some(k) = k else { continue };
                if s.nodes.iter().filter(|x| **x == Some(*k)).count() == 1 && *k == 1 {
                    out.push((s.at, n as u32, *k));
                }
            }
        }
        out
    }
}

/// 2 single-CPU nodes, 2 rows of 100 ms. `lone` (job 0, 1 rank, 250 ms) takes
/// row 0 on node 0; `pair` (job 1, 2 ranks, 200 ms then a barrier) has no
/// room beside it and takes row 1. In row 0's slots node 1 has no process.
fn lone_and_pair() -> Vec<ProcJob> {
    vec![
        named("lone", 1, 250, 0, false),
        named("pair", 2, 200, 0, true),
    ]
}

/// What [`lone_and_pair`] shows under one gang policy.
struct FragmentCase {
    policy: &'static str,
    /// In row 0's slots, node 1 (idle in that row) runs pair's rank 1 (pid 2).
    fragment_to_pair: bool,
    /// Checks of the case's own (the engine's picks and the run).
    more: fn(&[Pick], &Both),
}

/// alternate gives node 1's fragment to pair; fill gives it only to a job
/// declared of low gangedness: to pair when pair is, to nobody when only lone is.
const FRAGMENT_CASES: [FragmentCase; 3] = [
    FragmentCase {
        policy: "gang[rows=2,quantum_ms=100,switch_us=1000,alternate=true]",
        fragment_to_pair: true,
        more: |sim, b| {
            // Row 0's first slot (at 0): node 0 runs lone (pid 0), node 1 pair's
            // rank 1 (pid 2). Row 1 (after 100 ms + 1 ms of switch): pair on both.
            assert!(sim.contains(&(0, 0, 0)), "{sim:?}");
            assert!(
                sim.contains(&(101_000_000, 0, 1)) && sim.contains(&(101_000_000, 1, 2)),
                "{sim:?}"
            );
            // The slots in which pair ran on one node only ran it on node 1.
            let split = b.split_slots();
            assert!(split.iter().all(|&(_, n, _)| n == 1), "{split:?}");
        },
    },
    FragmentCase {
        policy: "gang[rows=2,quantum_ms=100,switch_us=1000,alternate=true,fill=true,low=pair]",
        fragment_to_pair: true,
        more: |_, _| {},
    },
    FragmentCase {
        policy: "gang[rows=2,quantum_ms=100,switch_us=1000,alternate=true,fill=true,low=lone]",
        fragment_to_pair: false,
        more: |sim, _| {
            // Node 1 idles in every slot in which lone runs.
            let lone_slots: Vec<i64> = sim
                .iter()
                .filter(|p| p.1 == 0 && p.2 == 0)
                .map(|p| p.0)
                .collect();
            assert!(lone_slots.len() >= 2, "{sim:?}");
            assert!(
                !sim.iter()
                    .any(|&(t, n, _)| n == 1 && lone_slots.contains(&t)),
                "{sim:?}"
            );
        },
    },
];

#[test]
fn alternate_and_fill_give_the_idle_nodes_fragment_to_the_same_rank_in_the_engine_and_the_host() {
    for case in &FRAGMENT_CASES {
        let b = run_both(case.policy, 2, &lone_and_pair());
        b.same_decisions();
        let (sim, real) = b.picks_at_runs();
        assert_eq!(sim, real, "{}", case.policy);
        assert_eq!(
            sim.contains(&(0, 1, 2)),
            case.fragment_to_pair,
            "{}: {sim:?}",
            case.policy
        );
        // The host handed the mechanism slots in which pair ran on node 1
        // only (the first at 0) exactly when it got the fragment.
        let split = b.split_slots();
        assert_eq!(
            split.iter().any(|&(t, n, _)| t == 0 && n == 1),
            case.fragment_to_pair,
            "{}: {split:?}",
            case.policy
        );
        assert_eq!(
            !split.is_empty(),
            case.fragment_to_pair,
            "{}: {split:?}",
            case.policy
        );
        (case.more)(&sim, &b);
    }
}

#[test]
fn the_simulators_gang_policy_and_the_real_host_decide_the_same_slots() {
    // 3 single-CPU nodes. A and B need 2 nodes from 0; C 1 node from 130 ms
    // (room in row 0 beside A... or later); D 3 nodes from 260 ms.
    let jobs = vec![
        compute(2, 230, 0),
        compute(2, 150, 0),
        compute(1, 120, 130),
        compute(3, 90, 260),
    ];
    let both = run_both("gang[rows=2,quantum_ms=100,switch_us=1000]", 3, &jobs);
    let (sim, real, host) = (&both.sim, &both.real, &both.host);
    assert!(
        sim.iter()
            .filter(|(_, d)| matches!(d, SlotDecision::Switch { .. }))
            .count()
            >= 4,
        "{sim:?}"
    );
    assert!(
        sim.iter()
            .any(|(_, d)| matches!(d, SlotDecision::WakeAt(_))),
        "an emptied slot ends early: {sim:?}"
    );
    // The same decisions at the same instants. The engine's run is over at
    // the last job's end; the host goes on and stops the emptied cycle.
    let last = both.end;
    assert_eq!(
        real[sim.len()..],
        [
            (last, SlotDecision::WakeAt(SimTime(last))),
            (last, SlotDecision::Stop)
        ]
    );
    assert_eq!(sim[..], real[..sim.len()]);
    // The mechanism got one slot per change: the runs, in order, and the
    // switch idle times (every job frozen for 1 ms).
    let runs: Vec<(i64, usize)> = real
        .iter()
        .filter_map(|(t, d)| match d {
            SlotDecision::Run { row, .. } => Some((*t, *row)),
            _ => None,
        })
        .collect();
    let host_runs: Vec<(i64, usize)> = host
        .mech
        .slots
        .iter()
        .filter_map(|s| s.row.map(|r| (s.at as i64, r)))
        .collect();
    assert!(
        runs.iter().all(|r| host_runs.contains(r)),
        "{runs:?} {host_runs:?}"
    );
    let idle = host
        .mech
        .slots
        .iter()
        .filter(|s| s.row.is_none() && !s.frozen.is_empty())
        .count();
    assert_eq!(idle as u64, host.switches());
}
