//! The engine's side of the process-level slot contract
//! ([`cosched_contract::slots`]): in gang mode the run's [`SlotPolicy`]
//! (e.g. `cosched_policies::process::gang::Gang`) decides which job is
//! admitted on which nodes, which row's slot runs until when, when the machine
//! switches, which process an idle CPU runs and which CPU a woken process
//! takes; the engine answers its questions ([`SlotView`]), validates every
//! decision and carries it out: it starts the jobs, keeps the slot timer,
//! takes every CPU back and idles the machine for a switch, dispatches through
//! the node's [`super::gang::Dispatcher`] and preempts. A decision it cannot
//! carry out stops the run with [`ProcError::Slot`].
//!
//! The observers of the gang schedule ([`super::observe`]: the gangedness
//! estimator, the fragment-time counter, the perturbation bookkeeping) follow
//! the slot starts and ends signalled here; the estimator's class changes
//! reach the policy through its measurement op
//! [`SlotPolicy::on_gangedness`].

use super::observe::Signal;
use super::{kb, Ev, PState, ProcError, Sim};
use crate::os::{NativeScheduler, Pid, Stop, Wake};
use cosched_contract::process::GangParams;
use cosched_contract::slots::{SlotDecision, SlotError, SlotPolicy, SlotSetup, SlotView};
use cosched_des::SimTime;

/// The slot state of a gang-mode run: the policy and what the engine keeps
/// to carry its decisions out.
pub(super) struct Slots {
    /// The policy (taken out while one of its ops runs).
    policy: Option<Box<dyn SlotPolicy>>,
    /// Generation of the pending slot timer or switch end (stale ones are ignored).
    gen: u64,
    /// A global switch is in progress (every node idle).
    pub switching: bool,
    /// The row whose slot runs (`None` during a switch or while stopped).
    row: Option<usize>,
    /// Total idle time of the global switches, ns.
    pub idle_ns: i64,
}

impl Slots {
    /// The slot state of a run of the policy `policy`.
    pub fn new(policy: Box<dyn SlotPolicy>) -> Self {
        Self {
            policy: Some(policy),
            gen: 0,
            switching: false,
            row: None,
            idle_ns: 0,
        }
    }

    /// The slot policy of `opts` (gang mode) for this machine and these jobs.
    pub fn of(opts: &super::ProcOptions, nodes: u32, cpus: u32, jobs: usize) -> Option<Self> {
        let f = opts.slots.as_ref()?;
        Some(Self::new(f.build(SlotSetup { nodes, cpus, jobs })))
    }

    pub fn policy(&self) -> &dyn SlotPolicy {
        self.policy.as_deref().expect("the slot policy is in place")
    }

    /// The policy's gang parameters ([`SlotPolicy::gang`]).
    pub fn params(&self) -> Option<&GangParams> {
        self.policy().gang()
    }
}

/// The per-node scheduler of a node under a slot policy (gang mode): the
/// dispatcher that runs what the policy picks; `None` outside gang mode.
pub(super) fn node_scheduler(opts: &super::ProcOptions) -> Option<Box<dyn NativeScheduler>> {
    opts.slots
        .as_ref()
        .map(|_| Box::new(super::gang::Dispatcher::default()) as Box<dyn NativeScheduler>)
}

impl SlotView for Sim<'_> {
    fn now(&self) -> SimTime {
        self.q.now()
    }
    fn nodes(&self) -> u32 {
        self.plat.nodes
    }
    fn cpus(&self) -> u32 {
        self.plat.cpus_per_node
    }
    fn nodes_needed(&self, job: usize) -> u32 {
        self.jobs[job].nodes_needed()
    }
    fn ranks_per_node(&self, job: usize) -> u32 {
        self.jobs[job].ranks_per_node
    }
    fn app(&self, job: usize) -> String {
        self.jobs[job].program.app()
    }
    fn fits_memory(&self, job: usize, node: u32) -> bool {
        let need = kb(self.jobs[job].program.memory_mb) * i64::from(self.jobs[job].ranks_per_node);
        !self.opts.memory_aware
            || self.nodes[node as usize].committed_kb + need <= kb(self.plat.job_memory_mb)
    }
    fn runnable(&self, pid: Pid) -> bool {
        let p = &self.procs[pid as usize];
        p.state == PState::Ready && !p.paging
    }
    fn running(&self, node: u32) -> Vec<Option<Pid>> {
        self.nodes[node as usize]
            .cpus
            .iter()
            .map(|c| c.cur)
            .collect()
    }
}

impl Sim<'_> {
    /// Runs one op of the slot policy with the engine as its view.
    pub(super) fn slot_op<R>(&mut self, f: impl FnOnce(&mut dyn SlotPolicy, &Sim) -> R) -> R {
        let s = self.slots.as_mut().expect("gang mode");
        let mut policy = s.policy.take().expect("the slot policy is in place");
        let r = f(policy.as_mut(), self);
        self.slots.as_mut().expect("gang mode").policy = Some(policy);
        r
    }

    fn slot_fail(&mut self, e: SlotError) {
        self.failure.get_or_insert(ProcError::Slot(e));
    }

    /// Job `j` arrived: the policy queues it and admits what it can.
    pub(super) fn slot_arrival(&mut self, j: usize, now: SimTime) {
        self.slot_op(|p, v| p.on_arrival(j, v));
        self.slot_next(now);
    }

    /// Asks the policy for its decisions of this instant and carries them out.
    pub(super) fn slot_next(&mut self, now: SimTime) {
        while self.failure.is_none() {
            let Some(d) = self.slot_op(|p, v| p.next(v)) else {
                return;
            };
            if let Err(e) = self.slot_apply(d, now, false) {
                return self.slot_fail(e);
            }
        }
    }

    /// Carries out decision `d` (`resume`: at the end of a switch).
    fn slot_apply(&mut self, d: SlotDecision, now: SimTime, resume: bool) -> Result<(), SlotError> {
        match d {
            SlotDecision::Admit { job, among } => self.slot_admit(job, &among, now),
            SlotDecision::Run { row, until } => {
                let rows = self
                    .slots
                    .as_ref()
                    .expect("gang mode")
                    .policy()
                    .matrix()
                    .map(|m| m.rows());
                if rows.is_some_and(|rows| row >= rows) {
                    return Err(SlotError::NoRow {
                        row,
                        rows: rows.unwrap_or(0),
                    });
                }
                self.slot_timer_at(until, now)?;
                let s = self.slots.as_mut().expect("gang mode");
                s.switching = false;
                s.row = Some(row);
                self.signal(Signal::SlotStarted);
                if resume {
                    for node in 0..self.plat.nodes {
                        self.schedule(node, now);
                    }
                }
                Ok(())
            }
            SlotDecision::WakeAt(at) => self.slot_timer_at(at, now),
            SlotDecision::Switch { idle } => self.slot_switch(idle, now),
            SlotDecision::Stop => {
                let s = self.slots.as_mut().expect("gang mode");
                s.gen += 1;
                s.switching = false;
                s.row = None;
                Ok(())
            }
        }
    }

    /// The slot timer fires at `at`, the pending one cancelled.
    fn slot_timer_at(&mut self, at: SimTime, now: SimTime) -> Result<(), SlotError> {
        if at < now {
            return Err(SlotError::Past { at, now });
        }
        let s = self.slots.as_mut().expect("gang mode");
        s.gen += 1;
        let gen = s.gen;
        self.q
            .schedule(at, Ev::GangSwitch { gen })
            .expect("not in the past");
        Ok(())
    }

    /// Validates and carries out an admission: `size` of `among` by the run's
    /// placement rule (within the policy's row: first fit by node order,
    /// whatever other rows hold), then the policy records the start.
    fn slot_admit(&mut self, job: usize, among: &[u32], now: SimTime) -> Result<(), SlotError> {
        self.check_start(job, among, |n| self.fits_memory(job, n))?;
        let (size, rpn) = (self.jobs[job].nodes_needed(), self.jobs[job].ranks_per_node);
        let picked = self.choose_nodes(among, size as usize, false);
        let ranks = self.jobs[job].program.size() as usize;
        let chosen: Vec<u32> = (0..ranks).map(|r| picked[r / rpn as usize]).collect();
        let first = self.procs.len() as Pid;
        let then = self.slot_op(|p, v| p.on_started(job, first, &chosen, v));
        for d in then {
            if matches!(d, SlotDecision::Admit { .. } | SlotDecision::Switch { .. }) {
                return Err(SlotError::Misplaced(format!("{d:?} in on_started")));
            }
            self.slot_apply(d, now, false)?;
        }
        self.start_job(job, chosen, now);
        Ok(())
    }

    /// The slot timer fired (generation `gen`). A `Run` of the running row
    /// is a new slot of that row without a switch ([`Self::slot_renew`]); a
    /// `Run` of another row is refused (a new row needs a `Switch`).
    pub(super) fn slot_timer(&mut self, gen: u64, now: SimTime) {
        if self.slots.as_ref().expect("gang mode").gen != gen {
            return;
        }
        for d in self.slot_op(|p, v| p.on_slot_timer(v)) {
            let running = self.slots.as_ref().expect("gang mode").row;
            let r = match d {
                SlotDecision::Run { row, until } if running == Some(row) => {
                    self.slot_renew(row, until, now)
                }
                SlotDecision::Run { row, .. } if running.is_some() => {
                    Err(SlotError::Misplaced(format!(
                        "Run of row {row} in on_slot_timer while row {} runs: another row starts after a Switch",
                        running.unwrap_or(row)
                    )))
                }
                d => self.slot_apply(d, now, false),
            };
            if let Err(e) = r {
                return self.slot_fail(e);
            }
        }
    }

    /// A new slot of the running row `row` until `until`, without a switch:
    /// no idle time and no switch counted. The slot's end and the new slot's
    /// start are signalled as at a switch (every CPU taken back and accounted,
    /// so the observers' per-slot records stay whole), and every node
    /// dispatches again at once: each CPU resumes the process it held, which
    /// costs no context switch.
    fn slot_renew(&mut self, row: usize, until: SimTime, now: SimTime) -> Result<(), SlotError> {
        self.take_cpus_back(now);
        self.signal_slot_end();
        self.slot_apply(SlotDecision::Run { row, until }, now, true)
    }

    /// Every CPU of the machine is taken back: its process, accounted, waits
    /// on its node's dispatcher.
    fn take_cpus_back(&mut self, now: SimTime) {
        for node in 0..self.plat.nodes {
            for cpu in 0..self.plat.cpus_per_node {
                if let Some(pid) = self.nodes[node as usize].cpus[cpu as usize].cur {
                    self.account(node, cpu, now);
                    self.release_cpu(node, cpu, pid, Stop::Preempted, now);
                    self.nodes[node as usize]
                        .sched
                        .enqueue(pid, Wake::Preempted, now);
                }
            }
        }
    }

    /// The global switch: every CPU of the machine is taken back and the
    /// machine idles for `idle`.
    fn slot_switch(&mut self, idle: SimTime, now: SimTime) -> Result<(), SlotError> {
        if idle < SimTime::ZERO {
            return Err(SlotError::Policy(format!(
                "a switch of negative length {idle}"
            )));
        }
        let s = self.slots.as_mut().expect("gang mode");
        s.switching = true;
        s.row = None;
        s.idle_ns += idle.as_ns();
        s.gen += 1;
        let gen = s.gen;
        self.counters.gang_switches += 1;
        self.take_cpus_back(now);
        self.signal_slot_end();
        self.q
            .schedule(now + idle, Ev::GangResume { gen })
            .expect("future");
        Ok(())
    }

    /// The global switch (generation `gen`) is over.
    pub(super) fn slot_switch_done(&mut self, gen: u64, now: SimTime) {
        if self.slots.as_ref().expect("gang mode").gen != gen {
            return;
        }
        self.slots.as_mut().expect("gang mode").switching = false;
        for d in self.slot_op(|p, v| p.on_switch_done(v)) {
            if matches!(d, SlotDecision::Admit { .. }) {
                return self.slot_fail(SlotError::Misplaced(format!("{d:?} in on_switch_done")));
            }
            if let Err(e) = self.slot_apply(d, now, true) {
                return self.slot_fail(e);
            }
        }
    }

    /// The process an idle CPU of `node` runs in gang mode: the policy's pick
    /// (validated); none during a switch.
    pub(super) fn slot_pick(&mut self, node: u32) -> Option<Pid> {
        let s = self.slots.as_ref().expect("gang mode");
        if s.switching {
            return None;
        }
        let pick = s.policy().pick(node, self);
        if let Some(p) = pick {
            if self.procs.get(p as usize).is_none_or(|q| q.node != node) || !self.runnable(p) {
                self.slot_fail(SlotError::NotRunnable { pid: p, node });
                return None;
            }
        }
        pick
    }

    /// Gang mode: a woken `pid` takes a CPU of its node when the policy says
    /// so (I/O priority, or the owner of a lent column). Returns whether it did.
    pub(super) fn slot_preempt(&mut self, pid: Pid, now: SimTime) -> bool {
        let node = self.procs[pid as usize].node;
        let Some(s) = &self.slots else {
            return false;
        };
        if s.switching {
            return false;
        }
        let Some(i) = s.policy().on_wake(pid, node, self) else {
            return false;
        };
        let running = self.nodes[node as usize]
            .cpus
            .get(i.cpu as usize)
            .and_then(|c| c.cur);
        let Some(r) = running else {
            self.slot_fail(SlotError::NoVictim { node, cpu: i.cpu });
            return false;
        };
        if i.io {
            self.counters.gang_io_preemptions += 1;
            self.signal(Signal::IoInterrupt {
                node,
                cpu: i.cpu,
                pid,
                victim: r,
            });
        }
        self.account(node, i.cpu, now);
        self.release_cpu(node, i.cpu, r, Stop::Preempted, now);
        self.procs[r as usize].state = PState::Ready;
        self.nodes[node as usize]
            .sched
            .enqueue(r, Wake::Preempted, now);
        true
    }

    /// `pid` of job `job` gave a CPU up after holding it for `ran`: the
    /// policy measures it.
    pub(super) fn slot_ran(&mut self, pid: Pid, job: usize, ran: SimTime) {
        if self.slots.is_some() {
            self.slot_op(|p, _| p.on_ran(pid, job, ran));
        }
    }

    /// A disk completion woke `pid`.
    pub(super) fn slot_io_wake(&mut self, pid: Pid) {
        if self.slots.is_some() {
            self.slot_op(|p, _| p.on_io_wake(pid));
        }
    }

    /// `pid` gave its CPU up to sleep.
    pub(super) fn slot_block(&mut self, pid: Pid) {
        if self.slots.is_some() {
            self.slot_op(|p, _| p.on_block(pid));
        }
    }

    /// `pid` finished its program.
    pub(super) fn slot_process_end(&mut self, pid: Pid) {
        if self.slots.is_some() {
            self.slot_op(|p, _| p.on_process_end(pid));
        }
    }

    /// Every process of job `j` has ended (now).
    pub(super) fn slot_job_end(&mut self, j: usize) {
        if self.slots.is_some() {
            self.slot_op(|p, v| p.on_job_end(j, v));
        }
    }
}
