//! The engine's side of the node-policy contract ([`super::policy`]): the
//! calls of a policy's ops with a [`View`] of its node, of the
//! optional ops (`enqueue`, `dequeue`, `on_wait_end`, the policy's timer and the
//! OS tick), and the validation and application of the actions a policy returns
//! ([`NodeAction`]), each at the moment [`Apply`] says. An action that cannot
//! apply is a counted [`ActionError`], never applied.
//!
//! A boost until run is tested for preemption at the boost (when [`Apply::Now`])
//! and at the CPU's next scheduling point; on a platform whose boost is the real
//! agent's (`boost_recheck = "agent"`, [`BoostRecheck`]) it is also tested again on
//! the agent's schedule ([`boost_check_delay`], shared with `cosched-real`) while
//! the process waits for a CPU, and dropped (unboosted) at the first check that
//! finds the process running or run since the boost (as the agent, which sees its
//! CPU time grow), or when that schedule ends; and, as the agent does, a recommended process
//! that is not running is boosted until it runs after each op. Not under a slot
//! policy (the gang dispatcher has no boost).

use super::observe::{Signal, Signals};
use super::{Apply, Cond, Ev, PState, Pid, Sim, View, Waiting};
use cosched_contract::node::{
    ActionError, DequeueReason, EnqueueReason, NodeAction, NodePolicy, NodeView, Ops, WaitEnd,
    WaitEndCause, WaitKind, WaitMode,
};
use cosched_des::SimTime;
use cosched_model::node::BoostRecheck;
use cosched_rules::boost::boost_check_delay;

impl Sim<'_> {
    /// The process an idle CPU of `node` is told to run: under a slot policy
    /// its pick ([`super::slots`]; the node's dispatcher obeys), else the node
    /// policy's recommendation (the native scheduler may follow it).
    ///
    /// The check chooses which contract is asked (the run's mode: under a slot
    /// policy the node runs the gang dispatcher, which has no choice of its own),
    /// not which process runs: that is the asked policy's answer in both modes.
    pub(super) fn recommend(&mut self, node: u32, now: SimTime) -> Option<Pid> {
        if self.slots.is_some() {
            return self.slot_pick(node);
        }
        let view = View {
            now,
            node: &self.nodes[node as usize],
            procs: &self.procs,
        };
        self.policies[node as usize].recommend(&view)
    }

    /// Starts the node's chain of policy timers if it holds processes, the policy
    /// has a period and no timer of the node is pending.
    pub(super) fn arm_timer(&mut self, node: u32, now: SimTime) {
        let n = &self.nodes[node as usize];
        if n.timer_armed || n.load == 0 {
            return;
        }
        if let Some(period) = self.policies[node as usize].period() {
            self.nodes[node as usize].timer_armed = true;
            self.q
                .schedule(now + period, Ev::Timer { node })
                .expect("future");
        }
    }

    /// Schedules the node's next OS timer tick (after `now`) for a policy with the
    /// `tick` op, if the node holds processes and no tick is pending.
    pub(super) fn arm_tick(&mut self, node: u32, now: SimTime) {
        let n = &self.nodes[node as usize];
        if n.tick_armed || n.load == 0 || !n.ops.contains(Ops::TICK) {
            return;
        }
        let (tick, phase) = (self.tick.as_ns(), n.tick_phase.as_ns());
        let next = phase + ((now.as_ns() - phase).div_euclid(tick) + 1) * tick;
        self.nodes[node as usize].tick_armed = true;
        self.q
            .schedule(SimTime(next), Ev::Tick { node })
            .expect("future");
    }

    /// Calls a policy op with a view of its node, then applies its actions as
    /// `apply` says (the timing of each op's actions: [`super::policy`] module doc).
    pub(super) fn with_policy(
        &mut self,
        node: u32,
        now: SimTime,
        apply: Apply,
        f: impl FnOnce(&mut dyn NodePolicy, &dyn NodeView, &mut Vec<NodeAction>),
    ) {
        let mut out = std::mem::take(&mut self.actions);
        out.clear();
        {
            let view = View {
                now,
                node: &self.nodes[node as usize],
                procs: &self.procs,
            };
            f(self.policies[node as usize].as_mut(), &view, &mut out);
        }
        self.agent_recommendation(node, now, &mut out);
        let mut resched = false;
        for a in out.drain(..) {
            let p = a.pid();
            let refused = match self.procs.get(p as usize) {
                Some(pr) if pr.node != node => Some(ActionError::NotOnNode(p)),
                None => Some(ActionError::NotOnNode(p)),
                Some(pr) if pr.state == PState::Done => Some(ActionError::Finished(p)),
                Some(_) => None,
            };
            if let Some(e) = refused {
                self.counters.action_errors.add(e);
                continue;
            }
            match a {
                NodeAction::Boost(_) | NodeAction::BoostUntilRun(_) => {
                    self.counters.boosts += 1;
                    self.nodes[node as usize].sched.boost(p, now);
                    if matches!(a, NodeAction::BoostUntilRun(_)) {
                        let pr = &mut self.procs[p as usize];
                        pr.boost_until_run = true;
                        pr.boosts_until_run = pr.boosts_until_run.wrapping_add(1);
                        self.arm_boost_check(p, 0, now, now);
                    }
                    if apply == Apply::Now
                        && self.procs[p as usize].state == PState::Ready
                        && self.preempt_for(node, p, now)
                    {
                        self.counters.boost_preemptions += 1;
                    }
                    resched = apply != Apply::Deferred;
                }
                NodeAction::Unboost(_) => {
                    self.procs[p as usize].boost_until_run = false;
                    self.nodes[node as usize].sched.unboost(p);
                }
                NodeAction::Interrupt(_) => self.policy_interrupt(p),
                NodeAction::SpinFor(_, d) => {
                    if let Err(e) = self.spin_for(p, d, apply, now) {
                        self.counters.action_errors.add(e);
                    }
                }
            }
        }
        self.actions = out;
        if resched {
            self.schedule(node, now);
        }
    }

    /// On a platform whose boosts are the real agent's, the agent's treatment of
    /// the policy's recommendation after each op (`cosched-real` `agent.rs`,
    /// `apply`): Linux gives user space no dispatch hook, so a recommended process
    /// that is not running and has no boost until run pending is boosted until it
    /// runs, appended to the op's actions. Elsewhere a recommendation is only the
    /// hint of the node's next pick ([`Sim::recommend`]).
    fn agent_recommendation(&mut self, node: u32, now: SimTime, out: &mut Vec<NodeAction>) {
        if self.plat.boost_recheck != BoostRecheck::Agent || self.slots.is_some() {
            return;
        }
        let Some(p) = self.recommend(node, now) else {
            return;
        };
        let pr = &self.procs[p as usize];
        let waiting = matches!(pr.state, PState::Ready | PState::Blocked);
        if pr.node == node && waiting && !pr.boost_until_run {
            out.push(NodeAction::BoostUntilRun(p));
        }
    }

    /// Schedules the re-check of `p`'s latest boost until run, given at `since`,
    /// that was checked `checks` times, on a platform with the agent's re-check;
    /// none once the schedule is over.
    fn arm_boost_check(&mut self, p: Pid, checks: u32, since: SimTime, now: SimTime) {
        if self.plat.boost_recheck != BoostRecheck::Agent || self.slots.is_some() {
            return;
        }
        let Some(d) = boost_check_delay(checks) else {
            return;
        };
        let ev = Ev::BoostCheck {
            pid: p,
            boost: self.procs[p as usize].boosts_until_run,
            checks,
            since,
        };
        self.q
            .schedule(now + SimTime(d.as_nanos() as i64), ev)
            .expect("future");
    }

    /// A re-check of `pid`'s boost until run number `boost`, given at `since` and
    /// checked `checks` times already (as the agent's timer, `cosched-real` `agent.rs`): nothing if
    /// the process was given a CPU since (dispatch drops the boost), unboosted, or
    /// boosted again (a newer chain runs); the boost is dropped if the process runs
    /// at the check or has run since the boost (it was running when boosted and
    /// left its CPU after: the agent sees its CPU time grow), or if no check is to
    /// come; else a preemption test if it waits for a CPU, and the next check.
    pub(super) fn boost_check(
        &mut self,
        pid: Pid,
        boost: u32,
        checks: u32,
        since: SimTime,
        now: SimTime,
    ) {
        let pr = &self.procs[pid as usize];
        if !pr.boost_until_run || pr.boosts_until_run != boost || pr.state == PState::Done {
            return;
        }
        let node = pr.node;
        let ran = matches!(pr.state, PState::Running(_)) || pr.last_ran > since;
        if ran || boost_check_delay(checks + 1).is_none() {
            self.procs[pid as usize].boost_until_run = false;
            self.nodes[node as usize].sched.unboost(pid);
            return;
        }
        if pr.state == PState::Ready && self.preempt_for(node, pid, now) {
            self.counters.boost_preemptions += 1;
            self.schedule(node, now);
        }
        self.arm_boost_check(pid, checks + 1, since, now);
    }

    /// [`NodeAction::SpinFor`]: `p`, spinning in a wait, spins until `now + d`.
    /// A running process's CPU is re-planned at once, except in a deferred op
    /// (its CPU is being handed over and is planned right after).
    pub(super) fn spin_for(
        &mut self,
        p: Pid,
        d: SimTime,
        apply: Apply,
        now: SimTime,
    ) -> Result<(), ActionError> {
        let pr = &mut self.procs[p as usize];
        let blocked = pr.state == PState::Blocked;
        let Some(w) = pr.wait.as_mut().filter(|w| w.kind.is_some() && !blocked) else {
            return Err(ActionError::NotSpinning(p));
        };
        w.mode = WaitMode::SpinBlock((now + d.max(SimTime::ZERO)) - w.since);
        if let (PState::Running(cpu), true) = (pr.state, apply != Apply::Deferred) {
            let node = pr.node;
            self.account(node, cpu, now);
            self.plan(node, cpu, now);
        }
        Ok(())
    }

    /// Tells the policy of `pid`'s node that the wait `w` ended (only with
    /// [`Ops::WAIT_END`]; not for a disk burst), after the observers that take
    /// [`Signal::WaitEnded`]. Inlined up to the test whether anyone listens.
    #[inline]
    pub(super) fn hook_wait_end(&mut self, pid: Pid, w: Waiting, by: WaitEndCause, now: SimTime) {
        let node = self.procs[pid as usize].node;
        let Some(kind) = w.kind else { return };
        let told = self.nodes[node as usize].ops.contains(Ops::WAIT_END);
        let observed = self.obs.wants(Signals::WAIT_ENDED);
        if told || observed {
            self.wait_ended(pid, (w, kind), by, (told, observed), now);
        }
    }

    /// [`Sim::hook_wait_end`] for a wait of `kind` that the policy (`told`)
    /// or an observer (`observed`) listens to.
    #[inline(never)]
    fn wait_ended(
        &mut self,
        pid: Pid,
        (w, kind): (Waiting, WaitKind),
        by: WaitEndCause,
        (told, observed): (bool, bool),
        now: SimTime,
    ) {
        let node = self.procs[pid as usize].node;
        let p = &self.procs[pid as usize];
        let end = WaitEnd {
            kind,
            waited: now - w.since,
            spun: SimTime(p.spin_ns - w.spin_at),
            blocked: w.blocked,
            by,
        };
        if observed {
            self.signal(Signal::WaitEnded { pid, end });
        }
        if !told {
            return;
        }
        let apply = if by == WaitEndCause::Dispatched {
            Apply::Deferred
        } else {
            Apply::NextPoint
        };
        self.with_policy(node, now, apply, |pol, v, out| {
            pol.on_wait_end(v, pid, &end, out)
        });
    }

    /// A policy's NIC interrupt for `p` (see [`NodeAction::Interrupt`]).
    pub(super) fn policy_interrupt(&mut self, p: Pid) {
        let pr = &self.procs[p as usize];
        let woken_by_it = pr.state == PState::Blocked
            && !pr.paging
            && pr
                .wait
                .is_some_and(|w| w.cond != Cond::Io && self.satisfied(p, w.cond));
        if matches!(pr.state, PState::Running(_)) || woken_by_it {
            return;
        }
        self.counters.policy_interrupts += 1;
        self.procs[p as usize].cpu_left += self.interrupt_ns;
    }

    /// The policy's `enqueue` op, if it has it: `pid` becomes runnable.
    pub(super) fn hook_enqueue(&mut self, pid: Pid, why: EnqueueReason, now: SimTime) {
        let node = self.procs[pid as usize].node;
        if self.nodes[node as usize].ops.contains(Ops::ENQUEUE) {
            self.with_policy(node, now, Apply::Deferred, |p, v, out| {
                p.enqueue(v, pid, why, out)
            });
        }
    }

    /// The policy's `dequeue` op, if it has it: `pid` leaves the runnable set.
    pub(super) fn hook_dequeue(&mut self, pid: Pid, why: DequeueReason, now: SimTime) {
        let node = self.procs[pid as usize].node;
        if self.nodes[node as usize].ops.contains(Ops::DEQUEUE) {
            self.with_policy(node, now, Apply::Deferred, |p, v, out| {
                p.dequeue(v, pid, why, out)
            });
        }
    }

    /// The node's policy timer fired: its `on_timer` op, then the next timer.
    pub(super) fn policy_timer(&mut self, node: u32, now: SimTime) {
        self.nodes[node as usize].timer_armed = false;
        self.with_policy(node, now, Apply::Now, |p, v, out| p.on_timer(v, out));
        self.arm_timer(node, now);
    }

    /// The node's OS timer ticked: the policy's `tick` op and the next tick, if
    /// the node still holds processes (a tick pending when it emptied is dropped).
    pub(super) fn os_tick(&mut self, node: u32, now: SimTime) {
        self.nodes[node as usize].tick_armed = false;
        if self.nodes[node as usize].load > 0 {
            self.with_policy(node, now, Apply::Now, |p, v, out| p.tick(v, out));
            self.arm_tick(node, now);
        }
    }
}
