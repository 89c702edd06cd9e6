//! The boost re-check of platforms with `boost_recheck = "agent"` ([`super::hooks`]),
//! worked by hand.

use super::tests::{job, platform};
use super::*;
use cosched_model::node::{BoostRecheck, OsConfig};
use cosched_model::program::Builder;
use policy::{NodeView, Pid};

/// Boosts, at its one timer (`at`), the process of its node that is not running
/// (with `running`, the one that is running: a boost the process has, as the agent
/// sees it, already used), until it runs.
struct BoostOnce {
    at: SimTime,
    done: bool,
    running: bool,
}

impl NodePolicy for BoostOnce {
    fn name(&self) -> String {
        "boost-once".into()
    }
    fn period(&self) -> Option<SimTime> {
        Some(self.at)
    }
    fn on_timer(&mut self, v: &dyn NodeView, out: &mut Vec<NodeAction>) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let running = self.running;
        if let Some(&p) = v.processes().iter().find(|&&p| v.is_running(p) == running) {
            out.push(NodeAction::BoostUntilRun(p));
        }
    }
}

/// From its one timer (`at`) on, recommends the process of its node that is not
/// running, until that process runs (as `pb` does with a standing recommendation).
struct RecommendOnce {
    at: SimTime,
    fired: bool,
    pick: Option<Pid>,
}

impl NodePolicy for RecommendOnce {
    fn name(&self) -> String {
        "recommend-once".into()
    }
    fn ops(&self) -> policy::Ops {
        policy::Ops::RUNNING
    }
    fn period(&self) -> Option<SimTime> {
        Some(self.at)
    }
    fn on_timer(&mut self, v: &dyn NodeView, _out: &mut Vec<NodeAction>) {
        if !std::mem::replace(&mut self.fired, true) {
            self.pick = v.processes().iter().copied().find(|&p| !v.is_running(p));
        }
    }
    fn recommend(&mut self, _v: &dyn NodeView) -> Option<Pid> {
        self.pick
    }
    fn running(&mut self, _v: &dyn NodeView, p: Pid, _out: &mut Vec<NodeAction>) {
        if self.pick == Some(p) {
            self.pick = None;
        }
    }
}

/// The first time at or after `after` at which `pid` is given the CPU.
fn next_run(out: &ProcOutput, pid: Pid, after: SimTime) -> SimTime {
    out.timeline
        .iter()
        .filter(|s| s.pid == pid && s.cpu.is_some() && s.start >= after)
        .map(|s| s.start)
        .min()
        .expect("it runs again")
}

/// `jobs` on one CPU under EEVDF (0.75 ms base slice, 4 ms tick), run seed 9, the
/// node policy boosting once at 3.406982 ms ([`BoostOnce`]) or, with `recommend`,
/// recommending from then on ([`RecommendOnce`]), with the boost re-check `recheck`.
fn run_boosted_once(jobs: &[ProcJob], recheck: BoostRecheck) -> ProcOutput {
    run_once(jobs, recheck, false)
}

fn run_once(jobs: &[ProcJob], recheck: BoostRecheck, recommend: bool) -> ProcOutput {
    run_with(jobs, recheck, &|| -> Box<dyn NodePolicy> {
        if recommend {
            Box::new(RecommendOnce {
                at: BOOST_AT,
                fired: false,
                pick: None,
            })
        } else {
            Box::new(BoostOnce {
                at: BOOST_AT,
                done: false,
                running: false,
            })
        }
    })
}

/// `jobs` on one CPU under EEVDF (0.75 ms base slice, 4 ms tick), run seed 9, the
/// node policy `make`'s, with the boost re-check `recheck`.
fn run_with(
    jobs: &[ProcJob],
    recheck: BoostRecheck,
    make: &dyn Fn() -> Box<dyn NodePolicy>,
) -> ProcOutput {
    let mut plat = platform(
        1,
        OsConfig::Eevdf {
            slice_ms: 0.75,
            tick_ms: 4.0,
        },
    );
    plat.boost_recheck = recheck;
    let opts = ProcOptions {
        seed: 9,
        mpl: 2,
        record_timeline: true,
        ..Default::default()
    };
    simulate_processes(&plat, jobs, make, &opts).expect("run")
}

/// When the test policy boosts.
const BOOST_AT: SimTime = SimTime(3_406_982);

/// One CPU, EEVDF with the 0.75 ms base slice and the 4 ms tick, no switch cost;
/// two single-rank jobs computing 20 ms each, A (pid 0) and B (pid 1), both new at 0;
/// seed 9, whose node tick phase (stream `tick-phase/0`) is 2,253,491 ns (checked
/// below). By hand (docs/models/eevdf.md): both start at v = 0, d = 0.375 ms; A, placed
/// first, takes the idle CPU, and B placed at the same instant does not preempt it (A
/// is eligible and protected, v_A < vprot = d_A); A's slice ends at the first tick at or
/// after 0.375 ms, T1 = 2.253491 ms, with v_A = 2.253491; B (v_B = 0, d = 0.375) runs
/// to the first tick at or after T1 + 0.375, T1 + 4 = 6.253491 ms. The policy boosts A
/// at 3.406982 ms, when v_B = 1.153491: A is owed CPU once v_B >= v_A, 2.253491 - 1.153491
/// = 1.1 ms later (4.506982 ms). With the agent's re-check (every 250 us) the checks at
/// +0.25, +0.5, +0.75 and +1.0 ms find v_B below v_A and the one at +1.25 ms preempts
/// B: A runs at 3.406982 + 1.25 = 4.656982 ms. Without it the boost is tested at the
/// boost only, and A waits for B's slice to end at the tick, 6.253491 ms.
#[test]
fn a_boosted_process_owed_cpu_mid_slice_runs_at_the_next_agent_check() {
    use rand::Rng;
    let phase: i64 = RngStreams::new(9)
        .stream("tick-phase/0")
        .gen_range(0..4_000_000);
    assert_eq!(phase, 2_253_491, "the node's tick phase for seed 9");
    let compute = |name: &str| {
        let mut b = Builder::new(1);
        b.all(Op::Compute { ns: 20_000_000 });
        job(b.build(name, 1.0))
    };
    let jobs = [compute("a"), compute("b")];
    let boost_at = BOOST_AT;
    let with = run_boosted_once(&jobs, BoostRecheck::Agent);
    assert_eq!(next_run(&with, 1, SimTime::ZERO), SimTime(2_253_491));
    assert_eq!(next_run(&with, 0, boost_at), SimTime(4_656_982));
    assert_eq!(
        (with.counters.boosts, with.counters.boost_preemptions),
        (1, 1)
    );
    let without = run_boosted_once(&jobs, BoostRecheck::None);
    assert_eq!(next_run(&without, 0, boost_at), SimTime(6_253_491));
    assert_eq!(
        (without.counters.boosts, without.counters.boost_preemptions),
        (1, 0)
    );
}

/// The agent's schedule ends: a boosted process that does not run within its 48
/// checks loses the boost. One CPU, EEVDF 0.75 ms / 4 ms tick, seed 9 (tick phase
/// 2.253491 ms); A (pid 0, nice 19, weight 15) and B (pid 1, nice -20, weight 88761),
/// each computing 2 s. By hand: both start at v = 0 with half a slice to their
/// deadline, 0.375 ms x 1024 / w of virtual time (A 25.6 ms, B 4.3 ns); A, placed
/// first, takes the idle CPU and B does not preempt it (A eligible and protected); A's
/// slice ends at the first tick at which it has run 25.6 x 15 / 1024 = 0.375 ms, i.e.
/// 2.253491 ms, and it is charged 2.253491 x 1024 / 15 = 153.8 ms of virtual runtime.
/// A is owed CPU again only once V (weighted by 88761 against 15) reaches that, i.e.
/// after B has run about 153.8 x 88761 / 1024 ms = 13.3 s, longer than B's whole 2 s
/// job. So A, boosted at 3.406982 ms, is never owed CPU while B
/// runs: the checks never preempt, the 48th, 451.5 ms after the boost (the schedule's
/// sum, `cosched_rules::boost`), drops the boost, and the run handles exactly 48 more
/// events than without the re-check (checks 0 to 47), with the same schedule.
#[test]
fn a_boost_not_run_within_the_agents_checks_is_dropped_after_48() {
    let compute = |name: &str, nice: i32| {
        let mut b = Builder::new(1);
        b.all(Op::Compute { ns: 2_000_000_000 });
        job(b.build(name, 1.0)).with_nice(nice)
    };
    let jobs = [compute("a", 19), compute("b", -20)];
    let (with, without) = (
        run_boosted_once(&jobs, BoostRecheck::Agent),
        run_boosted_once(&jobs, BoostRecheck::None),
    );
    assert_eq!(with.counters.boost_preemptions, 0);
    assert_eq!(with.counters.events, without.counters.events + 48);
    assert_eq!(with.proc_end, without.proc_end);
    // A ran first, then not again until B ended.
    assert_eq!(next_run(&with, 0, SimTime(1)), with.proc_end[1]);
}

/// The agent's treatment of a recommendation: the first test's two jobs and times,
/// the policy recommending A from 3.406982 ms on instead of boosting it. With the
/// agent (`boost_recheck = "agent"`) the recommendation is turned into a boost until
/// run after the timer op, so A runs at the fifth re-check, 4.656982 ms, as boosted
/// (one boost, one boost preemption). Without it the recommendation is only the
/// hint of the node's next pick, B's slice end at the tick, 6.253491 ms (no boost).
#[test]
fn on_the_agents_platform_a_recommendation_is_boosted_until_it_runs() {
    let compute = |name: &str| {
        let mut b = Builder::new(1);
        b.all(Op::Compute { ns: 20_000_000 });
        job(b.build(name, 1.0))
    };
    let jobs = [compute("a"), compute("b")];
    let with = run_once(&jobs, BoostRecheck::Agent, true);
    assert_eq!(next_run(&with, 0, BOOST_AT), SimTime(4_656_982));
    assert_eq!(
        (with.counters.boosts, with.counters.boost_preemptions),
        (1, 1)
    );
    let without = run_once(&jobs, BoostRecheck::None, true);
    assert_eq!(next_run(&without, 0, BOOST_AT), SimTime(6_253_491));
    assert_eq!(
        (without.counters.boosts, without.counters.boost_preemptions),
        (0, 0)
    );
}

/// The first test's two jobs (A pid 0, B pid 1, 20 ms each, one CPU, EEVDF 0.75 ms /
/// 4 ms tick, seed 9), with the agent's re-check, B boosted while it runs, at `at`.
fn run_running_boosted(at: SimTime) -> ProcOutput {
    let compute = |name: &str| {
        let mut b = Builder::new(1);
        b.all(Op::Compute { ns: 20_000_000 });
        job(b.build(name, 1.0))
    };
    let jobs = [compute("a"), compute("b")];
    run_with(&jobs, BoostRecheck::Agent, &|| -> Box<dyn NodePolicy> {
        Box::new(BoostOnce {
            at,
            done: false,
            running: true,
        })
    })
}

/// A boost until run given to a running process is dropped at the agent's first
/// check, which finds that the process runs (case 1) or has run since the boost
/// (case 2), as the agent drops it when the process's CPU time has grown.
///
/// By hand (the first test's schedule): A runs 0 to 2.253491 ms (v_A = 2.253491),
/// B from then to its slice end at the tick 6.253491 ms (v_B = 4.0); A then runs
/// to its slice end at the next tick, 10.253491 ms (v_A = 6.253491 > v_B: B runs).
/// Case 1: B boosted while it runs, at 3.406982 ms; the first check, 250 us later,
/// finds it running and drops the boost: the schedule is unchanged, B runs again at
/// 10.253491 ms, no boost preemption. Were the boost kept, B (ready from 6.253491 ms)
/// would preempt A at the first check with v_A >= v_B = 4.0, i.e. at or after
/// 8.003491 ms: checks fall at 3.406982 + 0.25 x 16 = 7.406982, + 0.5 = 7.906982
/// (v_A = 3.906982, not yet) and + 1 = 8.906982 ms (v_A = 4.906982): B at 8.906982.
/// Case 2: B boosted at 6.1 ms, 0.153491 ms before its slice ends; the first check,
/// at 6.35 ms, finds it ready but taken off its CPU at 6.253491 ms, after the boost:
/// it has run, the boost is dropped, B runs at 10.253491 ms. Kept, the check at
/// 6.1 + 0.25 x 8 = 8.1 ms (v_A = 4.1; the one before, 7.85 ms, has v_A = 3.85) would
/// preempt A: B at 8.1 ms.
#[test]
fn a_boost_given_to_a_running_process_is_dropped_at_the_first_check() {
    for at in [BOOST_AT, SimTime(6_100_000)] {
        let out = run_running_boosted(at);
        assert_eq!(next_run(&out, 1, SimTime::ZERO), SimTime(2_253_491));
        assert_eq!(next_run(&out, 0, SimTime(1)), SimTime(6_253_491), "{at:?}");
        assert_eq!(
            next_run(&out, 1, SimTime(2_253_492)),
            SimTime(10_253_491),
            "{at:?}"
        );
        assert_eq!(
            (out.counters.boosts, out.counters.boost_preemptions),
            (1, 0),
            "{at:?}"
        );
    }
}
