//! One slot policy object, two mechanisms: the simulator's process engine and
//! the real-time host of `cosched run` and the coordinator
//! (`cosched_real::slothost`) take the same gang policy
//! (`cosched_policies::process::gang::Gang`) and, given the same arrivals and
//! job ends, see it decide the same slot sequence.

use cosched_contract::node::Pid;
use cosched_contract::slots::{MatrixView, SlotDecision, SlotFactory, SlotPolicy, SlotView};
use cosched_des::SimTime;
use cosched_engine::process::{simulate_processes, ProcJob, ProcOptions};
use cosched_policies::process::gang::factory;
use cosched_real::slothost::{gang_policy, Key, Slot, SlotHost, SlotMechanism};
use std::sync::{Arc, Mutex};

/// Every decision the policy returned, with the instant of its view.
type Log = Arc<Mutex<Vec<(i64, SlotDecision)>>>;

/// The gang policy, its decisions recorded.
struct Rec {
    inner: Box<dyn SlotPolicy>,
    log: Log,
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
        self.inner.pick(node, v)
    }
    fn matrix(&self) -> Option<&dyn MatrixView> {
        self.inner.matrix()
    }
}

fn recorded(f: SlotFactory, log: &Log) -> SlotFactory {
    let log = log.clone();
    SlotFactory::new(move |setup| {
        Box::new(Rec {
            inner: f.build(setup),
            log: log.clone(),
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
    use cosched_model::program::{Builder, Op};
    let mut b = Builder::new(p);
    b.all(Op::Compute { ns: ms * 1_000_000 });
    ProcJob::new(b.build("compute", 10.0), SimTime::from_ms(at_ms))
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
}

#[test]
fn the_simulators_gang_policy_and_the_real_host_decide_the_same_slots() {
    let spec = "gang[rows=2,quantum_ms=100,switch_us=1000]";
    let params = gang_policy(spec, true).unwrap();
    // 3 single-CPU nodes. A and B need 2 nodes from 0; C 1 node from 130 ms
    // (room in row 0 beside A... or later); D 3 nodes from 260 ms.
    let jobs = vec![
        compute(2, 230, 0),
        compute(2, 150, 0),
        compute(1, 120, 130),
        compute(3, 90, 260),
    ];
    let mut platform = cosched_model::node::NodePlatform::preset("lee4").expect("preset");
    platform.nodes = 3;
    platform.cpus_per_node = 1;
    platform.context_switch_us = 0.0;
    platform.os_noise_tick_us = 0.0;
    platform.cpu_speed = 1.0;
    let sim_log = Log::default();
    let opts = ProcOptions {
        mpl: params.rows,
        slots: Some(recorded(factory(params.clone()), &sim_log)),
        ..Default::default()
    };
    let out = simulate_processes(&platform, &jobs, &|| Box::new(Spin), &opts)
        .expect("the simulation runs");
    // The real host, fed the same arrivals and the simulated job ends.
    let real_log = Log::default();
    let mut host = SlotHost::new(&recorded(factory(params), &real_log), 3, 8, Fake::default());
    let mut events: Vec<(i64, u8, usize)> = Vec::new();
    for (j, (job, o)) in jobs.iter().zip(&out.jobs).enumerate() {
        events.push((job.submit.as_ns(), 1, j));
        events.push((o.end.as_ns(), 0, j));
    }
    events.sort_unstable();
    for (t, kind, j) in events {
        let r = if kind == 1 {
            host.arrive(j as Key, jobs[j].program.size(), "compute", t as u64)
        } else {
            host.end(j as Key, t as u64)
        };
        r.unwrap();
    }
    let end = out.jobs.iter().map(|o| o.end.as_ns()).max().unwrap() as u64;
    host.advance(end + 1_000_000_000).unwrap();
    let sim = sim_log.lock().unwrap().clone();
    let real = real_log.lock().unwrap().clone();
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
    let last = end as i64;
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
