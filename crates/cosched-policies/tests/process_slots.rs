//! The process-level slot contract (`cosched_contract::slots`) and the gang
//! policy behind it, on tiny scenarios worked out by hand: first each op of
//! the policy against a hand-made view, then the engine carrying out the
//! decisions, and decisions the engine cannot carry out.

mod common;

use common::{compute, proc_platform, Spin};
use cosched_contract::admission::AdmissionError;
use cosched_contract::node::Pid;
use cosched_contract::process::{Choice, Kind, PerturbParams};
use cosched_contract::process::{FlexParams, GangClass, GangParams, LowGang};
use cosched_contract::slots::{
    Interrupt, MatrixView, PerturbView, SlotDecision, SlotError, SlotFactory, SlotPolicy,
    SlotSetup, SlotView,
};
use cosched_des::SimTime;
use cosched_engine::process::gangedness;
use cosched_engine::process::{simulate_processes, ProcError, ProcJob, ProcOptions, ProcOutput};
use cosched_policies::process::gang::{factory, Gang};
use cosched_policies::process::perturb::{draw, GangPerturb};
use std::cell::RefCell;
use std::sync::{Arc, Mutex};

const MS: fn(i64) -> SimTime = SimTime::from_ms;

/// A machine as a hand-made view: jobs of `(nodes, ranks per node, app)`,
/// the runnable processes and what each node's CPUs run.
struct Machine {
    now: SimTime,
    nodes: u32,
    cpus: u32,
    jobs: Vec<(u32, u32, &'static str)>,
    runnable: Vec<Pid>,
    running: RefCell<Vec<Vec<Option<Pid>>>>,
}

impl Machine {
    fn new(nodes: u32, cpus: u32, jobs: Vec<(u32, u32, &'static str)>) -> Self {
        Self {
            now: SimTime::ZERO,
            nodes,
            cpus,
            jobs,
            runnable: Vec::new(),
            running: RefCell::new(vec![vec![None; cpus as usize]; nodes as usize]),
        }
    }
}

impl SlotView for Machine {
    fn now(&self) -> SimTime {
        self.now
    }
    fn nodes(&self) -> u32 {
        self.nodes
    }
    fn cpus(&self) -> u32 {
        self.cpus
    }
    fn nodes_needed(&self, job: usize) -> u32 {
        self.jobs[job].0
    }
    fn ranks_per_node(&self, job: usize) -> u32 {
        self.jobs[job].1
    }
    fn app(&self, job: usize) -> String {
        self.jobs[job].2.into()
    }
    fn fits_memory(&self, _job: usize, _node: u32) -> bool {
        true
    }
    fn runnable(&self, pid: Pid) -> bool {
        self.runnable.contains(&pid)
    }
    fn running(&self, node: u32) -> Vec<Option<Pid>> {
        self.running.borrow()[node as usize].clone()
    }
}

fn params(quantum_ms: i64, rows: u32, alternate: bool, flex: FlexParams) -> GangParams {
    GangParams {
        quantum: MS(quantum_ms),
        rows,
        switch: SimTime::from_us(500),
        alternate,
        flex,
    }
}

fn gang(p: GangParams, m: &Machine) -> Gang {
    Gang::new(
        p,
        SlotSetup {
            nodes: m.nodes,
            cpus: m.cpus,
            jobs: m.jobs.len(),
        },
    )
}

/// Admits job `job` through `next`, expecting the nodes `among`, and starts
/// it at pid `first` on `nodes` (one per rank); returns `on_started`'s answer.
fn admit(
    g: &mut dyn SlotPolicy,
    m: &Machine,
    job: usize,
    among: &[u32],
    first: Pid,
    nodes: &[u32],
) -> Vec<SlotDecision> {
    g.on_arrival(job, m);
    assert_eq!(
        g.next(m),
        Some(SlotDecision::Admit {
            job,
            among: among.to_vec()
        })
    );
    g.on_started(job, first, nodes, m)
}

#[test]
fn a_job_goes_into_the_first_row_with_room_and_starts_the_stopped_cycle() {
    let m = Machine::new(2, 1, vec![(2, 1, "a"), (2, 1, "b"), (1, 1, "c")]);
    let mut g = gang(params(10, 2, false, FlexParams::default()), &m);
    assert_eq!(g.next(&m), None, "nothing waits");
    // Job 0 on both nodes, row 0: the cycle was stopped, row 0 runs until 10 ms.
    let d = admit(&mut g, &m, 0, &[0, 1], 0, &[0, 1]);
    assert_eq!(
        d,
        vec![SlotDecision::Run {
            row: 0,
            until: MS(10)
        }]
    );
    // Job 1 needs both nodes again: row 1; the cycle already runs.
    assert_eq!(admit(&mut g, &m, 1, &[0, 1], 2, &[0, 1]), vec![]);
    // Job 2 finds no row with room: it waits, FCFS.
    g.on_arrival(2, &m);
    assert_eq!(g.next(&m), None);
    assert_eq!(g.dump(), "active row Some(0), switching false, queued [2]");
}

#[test]
fn the_slot_timer_switches_every_node_to_the_next_row() {
    // 2 jobs of 2 ranks, 2 rows, quantum 10 ms, switch 0.5 ms.
    let mut m = Machine::new(2, 1, vec![(2, 1, "a"), (2, 1, "b")]);
    let mut g = gang(params(10, 2, false, FlexParams::default()), &m);
    admit(&mut g, &m, 0, &[0, 1], 0, &[0, 1]);
    admit(&mut g, &m, 1, &[0, 1], 2, &[0, 1]);
    m.runnable = vec![0, 1, 2, 3];
    assert_eq!(
        (g.pick(0, &m), g.pick(1, &m)),
        (Some(0), Some(1)),
        "row 0 runs"
    );
    m.now = MS(10);
    assert_eq!(
        g.on_slot_timer(&m),
        vec![SlotDecision::Switch {
            idle: SimTime::from_us(500)
        }]
    );
    assert_eq!(g.pick(0, &m), None, "nothing runs during the switch");
    m.now = MS(10) + SimTime::from_us(500);
    assert_eq!(
        g.on_switch_done(&m),
        vec![SlotDecision::Run {
            row: 1,
            until: m.now + MS(10)
        }]
    );
    assert_eq!(
        (g.pick(0, &m), g.pick(1, &m)),
        (Some(2), Some(3)),
        "both nodes switched"
    );
}

#[test]
fn an_emptied_active_row_ends_its_slot_at_once_and_an_empty_matrix_stops() {
    let mut m = Machine::new(2, 1, vec![(2, 1, "a"), (2, 1, "b")]);
    let mut g = gang(params(10, 2, false, FlexParams::default()), &m);
    admit(&mut g, &m, 0, &[0, 1], 0, &[0, 1]);
    admit(&mut g, &m, 1, &[0, 1], 2, &[0, 1]);
    m.now = MS(4);
    g.on_process_end(0);
    g.on_process_end(1);
    g.on_job_end(0, &m);
    assert_eq!(
        g.next(&m),
        Some(SlotDecision::WakeAt(MS(4))),
        "row 0 emptied"
    );
    assert_eq!(g.next(&m), None, "asked once");
    g.on_slot_timer(&m);
    assert_eq!(
        g.on_switch_done(&m),
        vec![SlotDecision::Run {
            row: 1,
            until: MS(14)
        }]
    );
    g.on_job_end(1, &m);
    assert_eq!(g.next(&m), Some(SlotDecision::WakeAt(MS(4))));
    assert_eq!(
        g.on_slot_timer(&m),
        vec![SlotDecision::Stop],
        "empty matrix"
    );
}

#[test]
fn alternate_lends_an_empty_cell_to_another_rows_process() {
    // Row 0: job 0 on node 0; row 1: job 1 on nodes 0 and 1.
    let mut m = Machine::new(2, 1, vec![(1, 1, "a"), (2, 1, "b")]);
    for alternate in [false, true] {
        let mut g = gang(params(100, 3, alternate, FlexParams::default()), &m);
        admit(&mut g, &m, 0, &[0, 1], 0, &[0]);
        // Job 1 needs both nodes: row 0 has only node 1 free, so row 1.
        admit(&mut g, &m, 1, &[0, 1], 1, &[0, 1]);
        m.runnable = vec![0, 1, 2];
        assert_eq!(g.pick(0, &m), Some(0), "the active row first");
        let lent = if alternate { Some(2) } else { None };
        assert_eq!(g.pick(1, &m), lent, "node 1 has no row-0 process");
        m.runnable = vec![0];
        assert_eq!(g.pick(1, &m), None, "only a runnable process");
    }
}

#[test]
fn dual_cpu_nodes_run_two_processes_of_the_active_row() {
    let mut m = Machine::new(2, 2, vec![(2, 2, "a"), (1, 1, "b"), (1, 1, "c")]);
    let mut g = gang(params(100, 3, false, FlexParams::default()), &m);
    admit(&mut g, &m, 0, &[0, 1], 0, &[0, 0, 1, 1]);
    admit(&mut g, &m, 1, &[0, 1], 4, &[0]);
    admit(&mut g, &m, 2, &[0, 1], 5, &[0]);
    m.runnable = vec![0, 1, 2, 3, 4, 5];
    assert_eq!(g.pick(0, &m), Some(0));
    m.running.borrow_mut()[0][0] = Some(0);
    m.runnable.retain(|&p| p != 0);
    assert_eq!(g.pick(0, &m), Some(1), "node 0's second CPU runs rank 1");
    // Without the gang bit or alternate, a blocked rank's CPU idles.
    m.runnable = vec![2, 3, 4, 5];
    assert_eq!(g.pick(0, &m), None);
}

#[test]
fn an_io_woken_process_interrupts_the_active_row_and_keeps_priority_until_it_blocks() {
    let flex = FlexParams {
        io_preempt: true,
        ..Default::default()
    };
    let mut m = Machine::new(1, 1, vec![(1, 1, "io"), (1, 1, "cpu")]);
    let mut g = gang(params(50, 2, false, flex), &m);
    admit(&mut g, &m, 0, &[0], 0, &[0]);
    admit(&mut g, &m, 1, &[0], 1, &[0]);
    g.on_slot_timer(&m);
    g.on_switch_done(&m); // row 1 (the compute job) runs
    m.runnable = vec![0];
    m.running.borrow_mut()[0][0] = Some(1);
    assert_eq!(g.on_wake(0, 0, &m), None, "no I/O priority yet");
    g.on_io_wake(0);
    assert_eq!(g.on_wake(0, 0, &m), Some(Interrupt { cpu: 0, io: true }));
    m.running.borrow_mut()[0][0] = None;
    m.runnable = vec![0, 1];
    assert_eq!(g.pick(0, &m), Some(0), "priority over the active row");
    g.on_block(0);
    assert_eq!(g.pick(0, &m), Some(1), "the priority ends when it blocks");
}

#[test]
fn fill_keeps_a_jobs_processes_within_the_fairness_bound() {
    // Row 1 holds job 0 (low gangedness) on nodes 0 and 1; row 0 is empty
    // after job 1 ends, so with `alternate` every CPU is a fragment.
    let flex = FlexParams {
        fill: true,
        low: LowGang::Declared(vec!["lo".into()]),
        fair: MS(5),
        ..Default::default()
    };
    let mut m = Machine::new(2, 1, vec![(2, 1, "hi"), (2, 1, "lo")]);
    let mut g = gang(params(10, 2, true, flex), &m);
    admit(&mut g, &m, 0, &[0, 1], 0, &[0, 1]);
    admit(&mut g, &m, 1, &[0, 1], 2, &[0, 1]);
    g.on_job_end(0, &m);
    m.runnable = vec![2, 3];
    assert_eq!(g.pick(0, &m), Some(2));
    // Pid 2 got 6 ms of fragments, pid 3 none: pid 2 is past the bound.
    g.on_ran(2, 1, MS(6));
    assert_eq!(g.pick(0, &m), None);
    assert_eq!(g.pick(1, &m), Some(3));
    g.on_ran(3, 1, MS(2));
    assert_eq!(g.pick(0, &m), Some(2), "back within 5 ms of pid 3");
}

#[test]
fn the_estimators_class_reaches_the_policy_through_on_gangedness() {
    // As above, with `low = auto`: job 1's processes get the fragments while
    // its class is unknown or low, none once the estimator reports it high.
    let flex = FlexParams {
        fill: true,
        low: LowGang::Auto(Default::default()),
        fair: SimTime::ZERO,
        ..Default::default()
    };
    let mut m = Machine::new(2, 1, vec![(2, 1, "a"), (2, 1, "b")]);
    let mut g = gang(params(10, 2, true, flex), &m);
    admit(&mut g, &m, 0, &[0, 1], 0, &[0, 1]);
    admit(&mut g, &m, 1, &[0, 1], 2, &[0, 1]);
    g.on_job_end(0, &m);
    m.runnable = vec![2, 3];
    assert_eq!(g.pick(0, &m), Some(2), "unknown: probed with fragments");
    g.on_gangedness(1, GangClass::High);
    assert_eq!((g.pick(0, &m), g.pick(1, &m)), (None, None));
    g.on_gangedness(1, GangClass::Low);
    assert_eq!((g.pick(0, &m), g.pick(1, &m)), (Some(2), Some(3)));
}

/// Ends the current slot and starts the next (a slot timer, then the end of
/// the switch).
fn next_slot(p: &mut dyn SlotPolicy, m: &mut Machine) {
    m.now += MS(10);
    assert!(matches!(
        p.on_slot_timer(m)[..],
        [SlotDecision::Switch { .. }]
    ));
    assert!(matches!(
        p.on_switch_done(m)[..],
        [SlotDecision::Run { .. }]
    ));
}

fn perturbed(kind: Kind, m: &Machine) -> GangPerturb {
    // Two perturbations of rank 1 in one batch: with a span of 10 slots the
    // batch can only start at job 0's slot 0, so they hit its slots 0 and 3.
    let pp = PerturbParams {
        kind,
        choice: Choice::Fixed(1),
        count: 2,
        span: 10,
        seed: 7,
    };
    assert_eq!(draw(&pp, 2), vec![(0, 1), (3, 1)]);
    let inner = gang(params(10, 2, false, FlexParams::default()), m);
    GangPerturb::new(Box::new(inner), pp)
}

/// Job 0 (pids 0, 1) and a competitor (pids 2, 3) on nodes 0 and 1, quantum
/// 10 ms, under the perturbations of [`perturbed`]; every process runnable.
fn target_and_competitor(kind: Kind) -> (Machine, GangPerturb) {
    let mut m = Machine::new(2, 1, vec![(2, 1, "a"), (2, 1, "b")]);
    let mut p = perturbed(kind, &m);
    admit(&mut p, &m, 0, &[0, 1], 0, &[0, 1]);
    admit(&mut p, &m, 1, &[0, 1], 2, &[0, 1]);
    m.runnable = vec![0, 1, 2, 3];
    (m, p)
}

#[test]
fn a_takeaway_gives_the_perturbed_node_to_the_competitor_in_the_targets_slot() {
    // Job 0 runs the even slots. The takeaways hit job 0's slots 0 and
    // 3 (global slots 0 and 6) on rank 1's node 1: there node 1 runs the
    // competitor's pid 3; everywhere else the picks are the inner gang's.
    let (mut m, mut p) = target_and_competitor(Kind::Takeaway);
    let mut picks = Vec::new();
    for slot in 0..8 {
        if slot > 0 {
            next_slot(&mut p, &mut m);
        }
        picks.push((p.pick(0, &m), p.pick(1, &m), p.perturbed().to_vec()));
    }
    let own = (Some(0), Some(1), vec![]);
    let other = (Some(2), Some(3), vec![]);
    let taken = (Some(0), Some(3), vec![1]);
    assert_eq!(
        picks,
        vec![
            taken.clone(),
            other.clone(),
            own.clone(),
            other.clone(),
            own,
            other.clone(),
            taken,
            other
        ]
    );
    assert_eq!((p.applied(), p.planned(), p.target()), (2, 2, 0));
    // A taken-away node whose competitor is not runnable idles.
    m.runnable = vec![0, 1, 2];
    assert_eq!(p.pick(1, &m), None);
}

#[test]
fn a_giveaway_gives_the_perturbed_node_to_the_target_in_the_next_slot() {
    // As above, giveaways: the slots after job 0's slots 0 and 3 (global
    // slots 1 and 7) run job 0's pid 1 on node 1.
    let (mut m, mut p) = target_and_competitor(Kind::Giveaway);
    let mut node1 = Vec::new();
    for slot in 0..8 {
        if slot > 0 {
            next_slot(&mut p, &mut m);
        }
        assert_eq!(p.pick(0, &m), Some(if slot % 2 == 0 { 0 } else { 2 }));
        node1.push(p.pick(1, &m));
    }
    let (t, c) = (Some(1), Some(3));
    assert_eq!(node1, vec![t, t, t, c, t, c, t, t]);
    // After job 0's end nothing is perturbed any more.
    p.on_process_end(0);
    p.on_process_end(1);
    p.on_job_end(0, &m);
    m.runnable = vec![2, 3];
    assert_eq!(p.next(&m), None, "the active row is the competitor's");
    // The competitor's row is the only one left: its next slot starts
    // without a switch.
    m.now += MS(10);
    assert!(matches!(
        p.on_slot_timer(&m)[..],
        [SlotDecision::Run { row: 1, .. }]
    ));
    assert_eq!((p.pick(1, &m), p.perturbed().len()), (Some(3), 0));
}

#[test]
fn a_fixed_perturbed_rank_must_exist_in_job_0() {
    let m = Machine::new(2, 1, vec![(2, 1, "a")]);
    let p = perturbed(Kind::Takeaway, &m);
    assert_eq!(
        p.check_job(0, 1),
        Err("perturbed rank 1 does not exist in job 0 (1 ranks)".into())
    );
    assert_eq!(p.check_job(0, 2), Ok(()));
    assert_eq!(p.check_job(1, 1), Ok(()), "only job 0 is perturbed");
}

// ----- the engine carries the decisions out ---------------------------------

fn run(jobs: &[ProcJob], p: GangParams, slots: SlotFactory) -> Result<ProcOutput, ProcError> {
    let opts = ProcOptions {
        mpl: p.rows,
        slots: Some(slots),
        ..Default::default()
    };
    simulate_processes(&proc_platform(2), jobs, &|| Box::new(Spin), &opts)
}

#[test]
fn the_engine_switches_both_nodes_at_each_slot_timer() {
    // 2 jobs of 2 ranks computing 15 ms, 2 rows, quantum 10 ms, no switch
    // cost: job 0 runs [0, 10) and [20, 25), job 1 [10, 20) and [25, 30)
    // (job 0's end empties row 0: the switch comes at once).
    let p = GangParams {
        switch: SimTime::ZERO,
        ..params(10, 2, false, FlexParams::default())
    };
    let out = run(&[compute(2, 15), compute(2, 15)], p.clone(), factory(p)).unwrap();
    let ends: Vec<SimTime> = out.jobs.iter().map(|j| j.end).collect();
    assert_eq!(ends, [MS(25), MS(30)]);
    // Switches at 10, 20 and 25; at 30 the matrix is empty and the cycle stops.
    assert_eq!(out.counters.gang_switches, 3);
}

/// What the estimator reported to a policy (`on_gangedness`), in order.
type Log = Arc<Mutex<Vec<(usize, GangClass)>>>;

/// A broken policy: the gang policy, but its decisions pass through `bend`
/// and its picks through `pick`; it logs what the estimator reports.
struct Bent {
    inner: Gang,
    bend: fn(&mut Gang, &dyn SlotView) -> Option<SlotDecision>,
    pick: fn(&Gang, u32, &dyn SlotView) -> Option<Pid>,
    log: Log,
}

impl SlotPolicy for Bent {
    fn name(&self) -> String {
        "bent".into()
    }
    fn on_arrival(&mut self, job: usize, v: &dyn SlotView) {
        self.inner.on_arrival(job, v);
    }
    fn next(&mut self, v: &dyn SlotView) -> Option<SlotDecision> {
        (self.bend)(&mut self.inner, v)
    }
    fn on_started(&mut self, j: usize, f: Pid, n: &[u32], v: &dyn SlotView) -> Vec<SlotDecision> {
        self.inner.on_started(j, f, n, v)
    }
    fn on_job_end(&mut self, job: usize, v: &dyn SlotView) {
        self.inner.on_job_end(job, v);
    }
    fn on_slot_timer(&mut self, v: &dyn SlotView) -> Vec<SlotDecision> {
        self.inner.on_slot_timer(v)
    }
    fn on_switch_done(&mut self, v: &dyn SlotView) -> Vec<SlotDecision> {
        self.inner.on_switch_done(v)
    }
    fn on_gangedness(&mut self, job: usize, class: GangClass) {
        self.log.lock().unwrap().push((job, class));
        self.inner.on_gangedness(job, class);
    }
    fn pick(&self, node: u32, v: &dyn SlotView) -> Option<Pid> {
        (self.pick)(&self.inner, node, v)
    }
    fn matrix(&self) -> Option<&dyn MatrixView> {
        self.inner.matrix()
    }
    fn gang(&self) -> Option<&GangParams> {
        self.inner.gang()
    }
}

fn bent(
    p: &GangParams,
    bend: fn(&mut Gang, &dyn SlotView) -> Option<SlotDecision>,
    pick: fn(&Gang, u32, &dyn SlotView) -> Option<Pid>,
) -> SlotFactory {
    logged(p, bend, pick, Log::default())
}

fn logged(
    p: &GangParams,
    bend: fn(&mut Gang, &dyn SlotView) -> Option<SlotDecision>,
    pick: fn(&Gang, u32, &dyn SlotView) -> Option<Pid>,
    log: Log,
) -> SlotFactory {
    let p = p.clone();
    SlotFactory::new(move |setup| {
        Box::new(Bent {
            inner: Gang::new(p.clone(), setup),
            bend,
            pick,
            log: log.clone(),
        })
    })
}

#[test]
fn a_decision_naming_a_finished_job_is_an_error() {
    // Job 0 (5 ms) ends; at job 1's arrival (10 ms) the policy admits job 0 again.
    let p = params(10, 2, false, FlexParams::default());
    let mut late = compute(1, 5);
    late.submit = MS(10);
    let jobs = [compute(1, 5), late];
    let again = |g: &mut Gang, v: &dyn SlotView| match g.next(v) {
        Some(SlotDecision::Admit { job: 1, among }) => Some(SlotDecision::Admit { job: 0, among }),
        d => d,
    };
    let err = run(&jobs, p.clone(), bent(&p, again, |g, n, v| g.pick(n, v))).unwrap_err();
    assert!(
        matches!(
            err,
            ProcError::Slot(SlotError::Start(AdmissionError::NotQueued(0)))
        ),
        "{err}"
    );
}

#[test]
fn a_start_on_a_node_that_does_not_exist_or_too_few_nodes_is_an_error() {
    let p = params(10, 2, false, FlexParams::default());
    let jobs = [compute(2, 5)];
    let far = |g: &mut Gang, v: &dyn SlotView| match g.next(v) {
        Some(SlotDecision::Admit { job, .. }) => Some(SlotDecision::Admit {
            job,
            among: vec![0, 7],
        }),
        d => d,
    };
    let err = run(&jobs, p.clone(), bent(&p, far, |g, n, v| g.pick(n, v))).unwrap_err();
    assert!(
        matches!(
            err,
            ProcError::Slot(SlotError::Start(AdmissionError::NoRoom { job: 0, node: 7 }))
        ),
        "{err}"
    );
    let one = |g: &mut Gang, v: &dyn SlotView| match g.next(v) {
        Some(SlotDecision::Admit { job, .. }) => Some(SlotDecision::Admit {
            job,
            among: vec![1],
        }),
        d => d,
    };
    let err = run(&jobs, p.clone(), bent(&p, one, |g, n, v| g.pick(n, v))).unwrap_err();
    assert!(
        matches!(
            err,
            ProcError::Slot(SlotError::Start(AdmissionError::TooFew {
                job: 0,
                need: 2,
                offered: 1
            }))
        ),
        "{err}"
    );
}

#[test]
fn a_slot_of_a_row_the_matrix_does_not_have_is_an_error() {
    // Instead of admitting job 0, the policy runs row 5 of its 2-row matrix.
    let p = params(10, 2, false, FlexParams::default());
    let row5 = |g: &mut Gang, v: &dyn SlotView| match g.next(v) {
        Some(SlotDecision::Admit { .. }) => Some(SlotDecision::Run {
            row: 5,
            until: v.now(),
        }),
        d => d,
    };
    let err = run(
        &[compute(1, 5)],
        p.clone(),
        bent(&p, row5, |g, n, v| g.pick(n, v)),
    )
    .unwrap_err();
    assert!(
        matches!(err, ProcError::Slot(SlotError::NoRow { row: 5, rows: 2 })),
        "{err}"
    );
}

#[test]
fn running_a_process_of_another_node_is_an_error() {
    // Node 1's CPU is told to run node 0's process.
    let p = params(10, 2, false, FlexParams::default());
    let jobs = [compute(2, 5)];
    let other = |g: &Gang, node: u32, v: &dyn SlotView| g.pick(1 - node, v);
    let err = run(&jobs, p.clone(), bent(&p, |g, v| g.next(v), other)).unwrap_err();
    assert!(
        matches!(
            err,
            ProcError::Slot(SlotError::NotRunnable { pid: 1, node: 0 })
        ),
        "{err}"
    );
}

#[test]
fn the_setup_checks_read_the_geometry_the_slot_policy_carries() {
    // The engine takes rows, quantum and switch cost from the policy
    // (`SlotPolicy::gang`): a policy built with 0 rows is refused before the
    // run starts.
    let p = GangParams {
        rows: 0,
        ..params(10, 2, false, FlexParams::default())
    };
    let opts = ProcOptions {
        mpl: 2,
        slots: Some(factory(p)),
        ..Default::default()
    };
    let err = simulate_processes(
        &proc_platform(2),
        &[compute(1, 1)],
        &|| Box::new(Spin),
        &opts,
    )
    .unwrap_err();
    assert!(err.to_string().contains("gang needs rows >= 1"), "{err}");
}

#[test]
fn the_engine_reports_each_class_change_at_the_slot_end() {
    // 2 jobs of 2 ranks computing 15 ms (no messages), 2 rows, quantum and
    // estimator quantum 10 ms, no switch cost, window 1. Slot [0, 10) runs
    // job 0: two gang records without messages, class low, reported at the
    // switch at 10 ms; job 1 did not run, no record, still unknown (not
    // reported). Slot [10, 20) gives job 1 its records: low, reported at 20.
    // Nothing changes at the switch of 25 ms (job 0 has ended, job 1 did not
    // run).
    let p = GangParams {
        switch: SimTime::ZERO,
        ..params(
            10,
            2,
            false,
            FlexParams {
                low: LowGang::Auto(cosched_contract::process::GangednessParams {
                    ratio_threshold: 0.15,
                    window: 1,
                }),
                ..Default::default()
            },
        )
    };
    let log = Log::default();
    let told = logged(
        &p,
        |g, v| g.next(v),
        |g, node, v| g.pick(node, v),
        log.clone(),
    );
    let out = run(&[compute(2, 15), compute(2, 15)], p, told).unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        vec![(0, GangClass::Low), (1, GangClass::Low)]
    );
    let est = &out
        .measures
        .get::<gangedness::Estimates>(gangedness::NAME)
        .unwrap()
        .jobs;
    let decided: Vec<Option<SimTime>> = est.iter().map(|e| e.decided).collect();
    assert_eq!(decided, [Some(MS(10)), Some(MS(20))]);
}
