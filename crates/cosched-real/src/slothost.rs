//! The real-time host of a process-level slot policy
//! ([`cosched_contract::slots::SlotPolicy`]): the same gang policy object the
//! simulator's engine hosts (`cosched_policies::process::gang::Gang`), fed
//! with events of real execution and carried out by a real mechanism (the
//! freezer of `cosched run`'s agent, or the schedules the Slurm coordinator
//! sends its agents).
//!
//! Events in, at integer-nanosecond instants of the caller's clock (the
//! controller's monotonic clock since the run started, the coordinator's
//! CLOCK_REALTIME plus its lead time): a job arrives ([`SlotHost::arrive`]:
//! submitted to `cosched run`, or declared by the agents of all its nodes), a
//! job ends ([`SlotHost::end`]), and the host's own timers
//! ([`SlotHost::advance`]: the policy's slot timer and the end of a global
//! switch). The ops are called in the order the engine calls them
//! (`on_arrival` then `next` until `None`; `on_process_end` of each process,
//! `on_job_end`, then `next`; `on_slot_timer`; `on_switch_done`).
//!
//! Decisions out: an [`SlotDecision::Admit`] becomes a start on nodes the
//! [`SlotMechanism`] chooses among the policy's; [`SlotDecision::Run`],
//! [`SlotDecision::WakeAt`], [`SlotDecision::Switch`] and
//! [`SlotDecision::Stop`] set the host's timers. Each node's CPU is held as
//! the engine holds it: a global switch (or a stop) takes every CPU back (a
//! slot timer's `Run` of the running row, the next slot of a lone row, takes
//! none: no switch; of another row, it is refused), a
//! process that ends gives its CPU up, and an idle CPU (outside a switch,
//! while a row is active) runs the policy's [`SlotPolicy::pick`] for its
//! node, asked right after each start and after the decisions of an instant;
//! a CPU that runs a live process keeps it. Whenever a CPU is given up the
//! policy is told how long its process held it ([`SlotPolicy::on_ran`]:
//! wall time thawed, the fragment time of `fill`'s fairness bound). After
//! the decisions of an instant the mechanism gets one [`Slot`]: from this
//! instant, the job each node's CPU runs (the other ranks frozen; nothing runs
//! during a switch's idle time).
//!
//! What real mode cannot do is refused, never dropped: a decision the host
//! cannot carry out (a job that is not waiting, a node the job may not use, a
//! row the matrix does not have, a timer in the past, a pick of a process
//! that is not live on that node, or, on a mechanism that freezes and thaws
//! whole jobs ([`SlotMechanism::per_node`] false: the Slurm coordinator's
//! agents), a pick that runs one rank of a job but not another) is an error
//! naming the job and node; the policy options that need measurements real
//! execution does not take are refused when the policy is parsed
//! ([`gang_policy_with`]).
//!
//! The view the policy reads is built from the registered jobs: one CPU per
//! node (one rank of a job per node), every process of a started job
//! runnable (real mode does not see a process block), `fits_memory` answered
//! by the mechanism (memory per node for `cosched run`; under Slurm, the nodes
//! the resource manager allocated to the job), no gangedness measurement.

use cosched_contract::node::Pid;
use cosched_contract::process::GangParams;
use cosched_contract::slots::{
    SlotDecision, SlotError, SlotFactory, SlotPolicy, SlotSetup, SlotView,
};
use cosched_des::SimTime;
use cosched_policies::process::ProcAdmission;
use cosched_policies::registry::PolicySpec;
use std::collections::BTreeMap;

/// A job as the caller names it (`cosched run`'s job index, a Slurm job id).
pub type Key = i64;

/// From `at` on, the jobs `run` run and the other placed jobs, `frozen`, are
/// frozen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    /// The instant (the host's clock, ns).
    pub at: u64,
    /// When the active row's slot (or the switch, or the stop) began: `at`,
    /// or earlier when the slot goes on with other jobs.
    pub since: u64,
    /// The active row; `None` during a global switch or while the cycle is
    /// stopped.
    pub row: Option<usize>,
    /// The host's next timer (the end of the slot or of the switch), if any.
    pub until: Option<u64>,
    /// The jobs whose ranks run on at least one node.
    pub run: Vec<Key>,
    /// The started jobs none of whose ranks runs.
    pub frozen: Vec<Key>,
    /// Per node, the job whose rank the node's CPU runs (every other rank on
    /// the node is frozen).
    pub nodes: Vec<Option<Key>>,
    /// Every started job with its row in the policy's matrix.
    pub rows: Vec<(Key, usize)>,
}

/// What carries the policy's decisions out.
pub trait SlotMechanism {
    /// Whether job `key` may have its process on node `node` (memory left; the
    /// nodes the resource manager allocated).
    fn eligible(&self, key: Key, node: u32) -> bool;
    /// The `size` nodes of `among` (the policy's row's eligible nodes,
    /// ascending) job `key` starts on.
    fn choose(&mut self, key: Key, among: &[u32], size: usize) -> Result<Vec<u32>, String>;
    /// Starts job `key` on `nodes` (row `row` of the policy's matrix),
    /// running or frozen from the start.
    fn start(
        &mut self,
        key: Key,
        nodes: &[u32],
        row: Option<usize>,
        run: bool,
    ) -> Result<(), String>;
    /// From `slot.at` on, exactly `slot.run` of the placed jobs run; on a
    /// per-node mechanism, on each node exactly the rank of `slot.nodes`.
    fn slot(&mut self, slot: &Slot) -> Result<(), String>;
    /// Whether the mechanism runs and freezes a job's ranks node by node
    /// (else whole jobs: every pick must run all ranks of a job or none).
    fn per_node(&self) -> bool {
        false
    }
}

/// Parameters of the gang policy that need events or measurements real
/// execution does not have, with what is missing.
const REFUSED: &[(&str, &str)] = &[
    ("io_preempt", "real mode does not see a process's disk completions (the shim reports MPI calls, not the end of a read or write)"),
    ("gang_bit", "real mode does not see when a process blocks, so a slot cannot be yielded"),
    ("ratio_threshold", "real mode has no gangedness measurement (no online estimator of messages and CPU holds)"),
    ("window", "real mode has no gangedness measurement (no online estimator of messages and CPU holds)"),
    ("est_quantum_ms", "real mode has no gangedness measurement (no online estimator of messages and CPU holds)"),
];

/// Parameters that make per-node decisions (an idle node runs another row's
/// rank), refused on a mechanism that freezes and thaws whole jobs.
const PER_NODE: &[&str] = &["alternate", "fill", "fair_ms", "low"];

/// Whether gang policy `params` can run one rank of a job while another is
/// frozen (alternate scheduling, fragment filling).
pub fn needs_per_node(params: &GangParams) -> bool {
    params.alternate || params.flex.fill
}

/// [`gang_policy_with`] for a mechanism that freezes and thaws whole jobs
/// (`per_node` false).
pub fn gang_policy(spec: &str, apps: bool) -> Result<GangParams, String> {
    gang_policy_with(spec, apps, false)
}

/// The gang policy of `spec` (`gang[quantum_ms=..,rows=..,...]`, the
/// simulator's string) for real execution. `apps`: whether the mechanism
/// knows each job's application (per-job `quanta`, `low=app/app` need it);
/// `per_node`: whether it runs and freezes ranks node by node (`alternate`,
/// `fill` need it). Options whose events or measurements real mode lacks are
/// refused with what is missing.
pub fn gang_policy_with(spec: &str, apps: bool, per_node: bool) -> Result<GangParams, String> {
    let parsed = PolicySpec::parse(spec).map_err(|e| e.to_string())?;
    if parsed.name != "gang" {
        return Err(format!(
            "{spec:?}: real execution hosts the slot policy gang[...] only, not {:?}",
            parsed.name
        ));
    }
    let auto = parsed.params.get("low").is_some_and(|v| v.trim() == "auto");
    let low_auto = auto.then_some((
        "low",
        "real mode has no gangedness measurement (low=auto needs the online estimator, fed with per-slot records of messages and CPU holds)",
    ));
    for (key, why) in REFUSED.iter().copied().chain(low_auto) {
        if parsed.params.contains_key(key) {
            return Err(format!(
                "{spec:?}: parameter {key} is simulator-only: {why}"
            ));
        }
    }
    if !per_node {
        if let Some(key) = PER_NODE.iter().find(|k| parsed.params.contains_key(**k)) {
            return Err(format!(
                "{spec:?}: parameter {key} needs a mechanism that runs and freezes ranks node by node; \
                 this one freezes and thaws whole jobs"
            ));
        }
    }
    if !apps && parsed.params.contains_key("low") {
        return Err(format!(
            "{spec:?}: parameter low needs each job's application, which the coordinator is not told"
        ));
    }
    if !apps && parsed.params.contains_key("quanta") {
        return Err(format!(
            "{spec:?}: parameter quanta needs each job's application, which the coordinator is not told"
        ));
    }
    match cosched_policies::process::build_process(spec).map_err(|e| e.to_string())? {
        ProcAdmission::Gang(p) => Ok(p),
        other => Err(format!("{spec:?}: not a gang policy ({other:?})")),
    }
}

/// A registered job.
#[derive(Clone, Debug)]
struct Entry {
    key: Key,
    size: u32,
    app: String,
    /// First pid and nodes, once started.
    started: Option<(Pid, Vec<u32>)>,
    /// Ended before the policy admitted it.
    ended: bool,
}

/// What the view reads: everything but the policy and the mechanism.
struct State {
    now: u64,
    nodes: u32,
    /// Jobs by the policy's job index (indices are reused after a job ends).
    jobs: Vec<Option<Entry>>,
    index: BTreeMap<Key, usize>,
    next_idx: usize,
    next_pid: Pid,
    /// Pending slot timer and end of a global switch.
    timer: Option<u64>,
    switch_end: Option<u64>,
    switching: bool,
    active: Option<usize>,
    /// When the current slot, switch or stop began.
    since: u64,
    /// The process each node's CPU runs, and since when.
    running: Vec<Option<Pid>>,
    held_since: Vec<u64>,
    /// The last slot handed to the mechanism.
    last: Option<Slot>,
    /// Decisions of the policy carried out, by kind (for the logs).
    switches: u64,
}

struct View<'a, M> {
    st: &'a State,
    mech: &'a M,
}

impl State {
    fn entry(&self, job: usize) -> Option<&Entry> {
        self.jobs.get(job).and_then(Option::as_ref)
    }
    /// The live job and node of process `pid`.
    fn owner(&self, pid: Pid) -> Option<(usize, u32)> {
        self.jobs.iter().enumerate().find_map(|(j, e)| {
            let (first, nodes) = e.as_ref()?.started.as_ref()?;
            let k = pid.checked_sub(*first)? as usize;
            nodes.get(k).map(|&n| (j, n))
        })
    }
}

impl<M: SlotMechanism> SlotView for View<'_, M> {
    fn now(&self) -> SimTime {
        SimTime(self.st.now as i64)
    }
    fn nodes(&self) -> u32 {
        self.st.nodes
    }
    fn cpus(&self) -> u32 {
        1
    }
    fn nodes_needed(&self, job: usize) -> u32 {
        self.st.entry(job).map_or(0, |e| e.size)
    }
    fn ranks_per_node(&self, _job: usize) -> u32 {
        1
    }
    fn app(&self, job: usize) -> String {
        self.st
            .entry(job)
            .map(|e| e.app.clone())
            .unwrap_or_default()
    }
    fn fits_memory(&self, job: usize, node: u32) -> bool {
        self.st
            .entry(job)
            .is_some_and(|e| self.mech.eligible(e.key, node))
    }
    fn runnable(&self, pid: Pid) -> bool {
        self.st.owner(pid).is_some()
    }
    fn running(&self, node: u32) -> Vec<Option<Pid>> {
        vec![self.st.running.get(node as usize).copied().flatten()]
    }
}

/// Hosts one slot policy over a real mechanism (see the module doc).
pub struct SlotHost<M> {
    policy: Box<dyn SlotPolicy>,
    pub mech: M,
    st: State,
}

impl<M: SlotMechanism> SlotHost<M> {
    /// Hosts the policy `factory` builds for `nodes` nodes of one CPU and at
    /// most `jobs` jobs registered at once.
    pub fn new(factory: &SlotFactory, nodes: u32, jobs: usize, mech: M) -> Self {
        let policy = factory.build(SlotSetup {
            nodes,
            cpus: 1,
            jobs,
        });
        Self {
            policy,
            mech,
            st: State {
                now: 0,
                nodes,
                jobs: vec![None; jobs],
                index: BTreeMap::new(),
                next_idx: 0,
                next_pid: 0,
                timer: None,
                switch_end: None,
                switching: false,
                active: None,
                since: 0,
                running: vec![None; nodes as usize],
                held_since: vec![0; nodes as usize],
                last: None,
                switches: 0,
            },
        }
    }

    /// The policy's name.
    pub fn name(&self) -> String {
        self.policy.name()
    }

    /// The next instant a timer of the host is due.
    pub fn next_wake(&self) -> Option<u64> {
        match (self.st.timer, self.st.switch_end) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The row of job `key` in the policy's matrix, once placed.
    pub fn row_of(&self, key: Key) -> Option<usize> {
        let j = *self.st.index.get(&key)?;
        self.policy.matrix()?.row_of(j)
    }

    /// Whether job `key` is registered and not yet admitted.
    pub fn waiting(&self, key: Key) -> bool {
        self.st
            .index
            .get(&key)
            .and_then(|&j| self.st.entry(j))
            .is_some_and(|e| e.started.is_none())
    }

    /// The jobs registered and not yet admitted.
    pub fn waiting_keys(&self) -> Vec<Key> {
        self.st
            .jobs
            .iter()
            .flatten()
            .filter(|e| e.started.is_none() && !e.ended)
            .map(|e| e.key)
            .collect()
    }

    /// Whether job `key` arrived and has not ended.
    pub fn has(&self, key: Key) -> bool {
        self.st.index.contains_key(&key)
    }

    /// The last slot handed to the mechanism.
    pub fn last_slot(&self) -> Option<&Slot> {
        self.st.last.as_ref()
    }

    /// Rows of the policy's matrix (0 without a matrix).
    pub fn rows(&self) -> usize {
        self.policy.matrix().map_or(0, |m| m.rows())
    }

    /// Global switches carried out.
    pub fn switches(&self) -> u64 {
        self.st.switches
    }

    fn view_op<R>(&mut self, f: impl FnOnce(&mut dyn SlotPolicy, &View<'_, M>) -> R) -> R {
        let v = View {
            st: &self.st,
            mech: &self.mech,
        };
        f(self.policy.as_mut(), &v)
    }

    /// Job `key` of `size` nodes (application `app`) arrives at `now`.
    pub fn arrive(&mut self, key: Key, size: u32, app: &str, now: u64) -> Result<(), String> {
        self.advance(now)?;
        if self.st.index.contains_key(&key) {
            return Err(format!("job {key} arrived twice"));
        }
        if size == 0 || size > self.st.nodes {
            return Err(format!(
                "job {key} needs {size} nodes; the policy has {} nodes",
                self.st.nodes
            ));
        }
        // The next index in arrival order, reusing an ended job's only after
        // a full round (so that the indices are the arrival order as long as
        // fewer jobs than the capacity came).
        let cap = self.st.jobs.len();
        let free = (0..cap)
            .map(|k| (self.st.next_idx + k) % cap.max(1))
            .find(|&k| self.st.jobs[k].is_none());
        let Some(j) = free else {
            return Err(format!(
                "job {key}: more than {} jobs at once; it is not scheduled by the policy",
                self.st.jobs.len()
            ));
        };
        self.st.next_idx = j + 1;
        self.st.jobs[j] = Some(Entry {
            key,
            size,
            app: app.to_string(),
            started: None,
            ended: false,
        });
        self.st.index.insert(key, j);
        self.view_op(|p, v| p.on_arrival(j, v));
        self.decide()
    }

    /// Job `key` ended at `now` (a key never registered is ignored: the job
    /// was not the policy's).
    pub fn end(&mut self, key: Key, now: u64) -> Result<(), String> {
        self.advance(now)?;
        let Some(&j) = self.st.index.get(&key) else {
            return Ok(());
        };
        let e = self.st.jobs[j].as_mut().expect("indexed");
        if e.started.is_none() {
            // Still queued in the policy: it is started and ended at once when
            // the policy admits it.
            e.ended = true;
            return Ok(());
        }
        self.finish(j);
        self.decide()
    }

    /// The policy sees every process of started job `j` give its CPU up and
    /// end, then the job.
    fn finish(&mut self, j: usize) {
        let e = self.st.jobs[j].as_ref().expect("registered");
        let (first, nodes) = e.started.clone().expect("started");
        let key = e.key;
        for n in 0..self.st.nodes {
            let mine = self.st.running[n as usize]
                .is_some_and(|p| p >= first && p < first + nodes.len() as Pid);
            if mine {
                self.give_up(n);
            }
        }
        for k in 0..nodes.len() {
            self.policy.on_process_end(first + k as Pid);
        }
        self.view_op(|p, v| p.on_job_end(j, v));
        self.st.jobs[j] = None;
        self.st.index.remove(&key);
    }

    /// Node `n`'s CPU is given up: the policy measures how long its process
    /// held it.
    fn give_up(&mut self, n: u32) {
        let Some(pid) = self.st.running[n as usize].take() else {
            return;
        };
        let Some((j, _)) = self.st.owner(pid) else {
            return;
        };
        let ran = self.st.now.saturating_sub(self.st.held_since[n as usize]);
        self.policy.on_ran(pid, j, SimTime(ran as i64));
    }

    /// Every CPU is taken back (a global switch, a stop).
    fn take_back(&mut self) {
        for n in 0..self.st.nodes {
            self.give_up(n);
        }
    }

    /// Fires every timer due by `now`, each at its own instant.
    pub fn advance(&mut self, now: u64) -> Result<(), String> {
        while let Some(due) = self.next_wake().filter(|&t| t <= now) {
            self.st.now = self.st.now.max(due);
            let (ds, op) = if self.st.switch_end == Some(due) {
                self.st.switch_end = None;
                self.st.switching = false;
                (self.view_op(|p, v| p.on_switch_done(v)), "on_switch_done")
            } else {
                self.st.timer = None;
                (self.view_op(|p, v| p.on_slot_timer(v)), "on_slot_timer")
            };
            for d in ds {
                if matches!(d, SlotDecision::Admit { .. }) {
                    return Err(SlotError::Misplaced(format!("{d:?} in {op}")).to_string());
                }
                // A slot timer's Run of the running row is its next slot
                // without a switch (the CPUs keep their processes); another
                // row needs a Switch first.
                if let (SlotDecision::Run { row, .. }, Some(a)) = (&d, self.st.active) {
                    if op == "on_slot_timer" && *row != a {
                        return Err(SlotError::Misplaced(format!(
                            "Run of row {row} in on_slot_timer while row {a} runs: another row starts after a Switch"
                        ))
                        .to_string());
                    }
                }
                self.apply(d)?;
            }
            // Events of one instant are carried out together (a switch
            // without idle time is one change of the running jobs).
            if self.next_wake() != Some(due) {
                self.commit()?;
            }
        }
        self.st.now = self.st.now.max(now);
        Ok(())
    }

    /// `next` until `None`, then the mechanism gets the new slot.
    fn decide(&mut self) -> Result<(), String> {
        while let Some(d) = self.view_op(|p, v| p.next(v)) {
            self.apply(d)?;
        }
        if self.next_wake().is_some_and(|t| t <= self.st.now) {
            // A re-plan at this instant (an emptied slot ends now).
            return self.advance(self.st.now);
        }
        self.commit()
    }

    fn apply(&mut self, d: SlotDecision) -> Result<(), String> {
        let now = self.st.now;
        let at_ns = |t: SimTime| -> Result<u64, String> {
            if t.as_ns() < now as i64 {
                return Err(SlotError::Past {
                    at: t,
                    now: SimTime(now as i64),
                }
                .to_string());
            }
            Ok(t.as_ns() as u64)
        };
        match d {
            SlotDecision::Admit { job, among } => self.admit(job, &among),
            SlotDecision::Run { row, until } => {
                let rows = self.policy.matrix().map(|m| m.rows());
                if let Some(rows) = rows.filter(|&rows| row >= rows) {
                    return Err(SlotError::NoRow { row, rows }.to_string());
                }
                self.st.timer = Some(at_ns(until)?);
                self.st.switch_end = None;
                self.st.switching = false;
                self.st.active = Some(row);
                self.st.since = now;
                Ok(())
            }
            SlotDecision::WakeAt(t) => {
                self.st.timer = Some(at_ns(t)?);
                Ok(())
            }
            SlotDecision::Switch { idle } => {
                if idle < SimTime::ZERO {
                    return Err(
                        SlotError::Policy(format!("a switch of negative length {idle}"))
                            .to_string(),
                    );
                }
                self.st.timer = None;
                self.st.switch_end = Some(now + idle.as_ns() as u64);
                self.st.switching = true;
                self.st.active = None;
                self.st.since = now;
                self.st.switches += 1;
                self.take_back();
                Ok(())
            }
            SlotDecision::Stop => {
                self.st.timer = None;
                self.st.switch_end = None;
                self.st.switching = false;
                self.st.active = None;
                self.st.since = now;
                self.take_back();
                Ok(())
            }
        }
    }

    /// Carries out an admission of job index `j` among `among`.
    fn admit(&mut self, j: usize, among: &[u32]) -> Result<(), String> {
        let Some(e) = self.st.entry(j).cloned() else {
            return Err(
                SlotError::from(cosched_contract::admission::AdmissionError::NotQueued(j))
                    .to_string(),
            );
        };
        if e.started.is_some() {
            return Err(format!("job {}: admitted twice", e.key));
        }
        let size = e.size as usize;
        if among.len() < size {
            return Err(format!(
                "job {}: needs {size} nodes, the policy offered {among:?}",
                e.key
            ));
        }
        if let Some(&n) = among
            .iter()
            .find(|&&n| n >= self.st.nodes || !(e.ended || self.mech.eligible(e.key, n)))
        {
            return Err(format!(
                "job {}: the policy offered node {n}, which it may not use",
                e.key
            ));
        }
        let nodes = if e.ended {
            among[..size].to_vec()
        } else {
            let nodes = self.mech.choose(e.key, among, size)?;
            let mut seen = nodes.clone();
            seen.sort_unstable();
            seen.dedup();
            if seen.len() != size || nodes.iter().any(|n| !among.contains(n)) {
                return Err(format!(
                    "job {}: the mechanism chose {nodes:?}, not {size} distinct nodes of {among:?}",
                    e.key
                ));
            }
            nodes
        };
        let first = self.st.next_pid;
        self.st.next_pid += size as Pid;
        self.st.jobs[j].as_mut().expect("registered").started = Some((first, nodes.clone()));
        let then = self.view_op(|p, v| p.on_started(j, first, &nodes, v));
        for d in then {
            if matches!(d, SlotDecision::Admit { .. } | SlotDecision::Switch { .. }) {
                return Err(SlotError::Misplaced(format!("{d:?} in on_started")).to_string());
            }
            self.apply(d)?;
        }
        if e.ended {
            // It ended while it waited: it starts and ends at once.
            self.finish(j);
            return Ok(());
        }
        // Its processes are runnable: the idle CPUs are dispatched now, as
        // the engine does at a start.
        self.dispatch()?;
        let run = self
            .st
            .running
            .iter()
            .any(|p| p.is_some_and(|p| p >= first && p < first + size as Pid));
        let row = self.policy.matrix().and_then(|m| m.row_of(j));
        self.mech
            .start(e.key, &nodes, row, run)
            .map_err(|m| format!("job {}: cannot start on nodes {nodes:?}: {m}", e.key))
    }

    /// Every idle CPU (outside a switch, while a row is active) runs the
    /// policy's pick for its node, validated: a live process of that node.
    fn dispatch(&mut self) -> Result<(), String> {
        if self.st.switching || self.st.active.is_none() {
            return Ok(());
        }
        for n in 0..self.st.nodes {
            if self.st.running[n as usize].is_some() {
                continue;
            }
            let v = View {
                st: &self.st,
                mech: &self.mech,
            };
            let Some(p) = self.policy.pick(n, &v) else {
                continue;
            };
            match self.st.owner(p) {
                Some((_, node)) if node == n => {
                    self.st.running[n as usize] = Some(p);
                    self.st.held_since[n as usize] = self.st.now;
                }
                _ => return Err(SlotError::NotRunnable { pid: p, node: n }.to_string()),
            }
        }
        Ok(())
    }

    /// On a mechanism that freezes whole jobs: every process of a job that
    /// runs somewhere runs everywhere.
    fn check_whole_jobs(&self) -> Result<(), String> {
        if self.mech.per_node() {
            return Ok(());
        }
        for p in self.st.running.iter().flatten() {
            let (j, _) = self.st.owner(*p).expect("validated");
            let e = self.st.entry(j).expect("live");
            let (first, nodes) = e.started.as_ref().expect("started");
            for (k, &n) in nodes.iter().enumerate() {
                if self.st.running[n as usize] != Some(first + k as Pid) {
                    return Err(format!(
                        "job {}: the policy runs it on some of its nodes but not on node {n}; \
                         this mechanism freezes and thaws whole jobs",
                        e.key
                    ));
                }
            }
        }
        Ok(())
    }

    /// Hands the mechanism the slot of this instant when it changed.
    fn commit(&mut self) -> Result<(), String> {
        self.dispatch()?;
        self.check_whole_jobs()?;
        let picks = self.st.running.clone();
        let (mut run, mut frozen) = (Vec::new(), Vec::new());
        for e in self.st.jobs.iter().flatten() {
            let Some((first, nodes)) = &e.started else {
                continue;
            };
            let on = picks
                .iter()
                .any(|p| p.is_some_and(|p| p >= *first && p < first + nodes.len() as Pid));
            if on {
                run.push(e.key);
            } else {
                frozen.push(e.key);
            }
        }
        run.sort_unstable();
        frozen.sort_unstable();
        let nodes: Vec<Option<Key>> = picks
            .iter()
            .map(|p| {
                p.and_then(|p| self.st.owner(p))
                    .and_then(|(j, _)| self.st.entry(j))
                    .map(|e| e.key)
            })
            .collect();
        let m = self.policy.matrix();
        let mut rows: Vec<(Key, usize)> = self
            .st
            .jobs
            .iter()
            .enumerate()
            .filter_map(|(j, e)| {
                let e = e.as_ref()?;
                e.started.as_ref()?;
                Some((e.key, m?.row_of(j)?))
            })
            .collect();
        rows.sort_unstable();
        let slot = Slot {
            at: self.st.now,
            since: self.st.since,
            row: self.st.active,
            until: self.next_wake(),
            run,
            frozen,
            nodes,
            rows,
        };
        let same = self.st.last.as_ref().is_some_and(|l| {
            Slot {
                at: slot.at,
                ..l.clone()
            } == slot
        });
        if same {
            return Ok(());
        }
        self.mech.slot(&slot)?;
        self.st.last = Some(slot);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A fake mechanism: every node allowed, first fit, and a log of what it
    /// was told.
    #[derive(Default)]
    struct Fake {
        started: Vec<(Key, Vec<u32>, bool)>,
        slots: Vec<Slot>,
        banned: Vec<(Key, u32)>,
        per_node: bool,
    }

    impl SlotMechanism for Fake {
        fn eligible(&self, key: Key, node: u32) -> bool {
            !self.banned.contains(&(key, node))
        }
        fn choose(&mut self, _key: Key, among: &[u32], size: usize) -> Result<Vec<u32>, String> {
            Ok(among[..size].to_vec())
        }
        fn start(
            &mut self,
            key: Key,
            nodes: &[u32],
            _row: Option<usize>,
            run: bool,
        ) -> Result<(), String> {
            self.started.push((key, nodes.to_vec(), run));
            Ok(())
        }
        fn slot(&mut self, slot: &Slot) -> Result<(), String> {
            self.slots.push(slot.clone());
            Ok(())
        }
        fn per_node(&self) -> bool {
            self.per_node
        }
    }

    fn host(spec: &str, nodes: u32) -> SlotHost<Fake> {
        host_on(spec, nodes, false)
    }

    fn host_on(spec: &str, nodes: u32, per_node: bool) -> SlotHost<Fake> {
        let p = gang_policy_with(spec, true, per_node).unwrap();
        SlotHost::new(
            &cosched_policies::process::gang::factory(p),
            nodes,
            8,
            Fake {
                per_node,
                ..Fake::default()
            },
        )
    }

    /// (at ms, the job each node runs) of every slot handed over.
    fn per_node_runs(h: &SlotHost<Fake>) -> Vec<(u64, Vec<Option<Key>>)> {
        h.mech
            .slots
            .iter()
            .map(|s| (s.at / MS, s.nodes.clone()))
            .collect()
    }

    #[test]
    fn with_alternate_the_idle_node_runs_the_other_rows_rank_and_only_on_a_per_node_mechanism() {
        // 2 nodes, 2 rows, 100 ms, no switch idle. A (10) needs 1 node and
        // takes row 0 on node 0; B (11) needs 2 and takes row 1.
        let spec = "gang[rows=2,quantum_ms=100,switch_us=0,alternate=true]";
        let mut h = host_on(spec, 2, true);
        h.arrive(10, 1, "a", 0).unwrap();
        h.arrive(11, 2, "b", 0).unwrap();
        // B starts running: its rank 1 fills node 1, which row 0 leaves idle.
        assert_eq!(
            h.mech.started,
            vec![(10, vec![0], true), (11, vec![0, 1], true)]
        );
        h.advance(250 * MS).unwrap();
        let runs = per_node_runs(&h);
        assert_eq!(runs[0], (0, vec![Some(10), None]));
        assert_eq!(
            runs[1..],
            [
                (0, vec![Some(10), Some(11)]),
                (100, vec![Some(11), Some(11)]),
                (200, vec![Some(10), Some(11)]),
            ]
        );
        // Both jobs run (on at least one node) in row 0's slot.
        let s = h.last_slot().unwrap();
        assert_eq!((s.run.clone(), s.frozen.clone()), (vec![10, 11], vec![]));
        // A ends at 250: row 0 emptied, B's slot at once, on both nodes.
        h.end(10, 250 * MS).unwrap();
        assert_eq!(
            per_node_runs(&h).last(),
            Some(&(250, vec![Some(11), Some(11)]))
        );
        // Without alternate node 1 idles in row 0's slots.
        let mut plain = host_on("gang[rows=2,quantum_ms=100,switch_us=0]", 2, true);
        plain.arrive(10, 1, "a", 0).unwrap();
        plain.arrive(11, 2, "b", 0).unwrap();
        plain.advance(250 * MS).unwrap();
        assert_eq!(
            per_node_runs(&plain).last(),
            Some(&(200, vec![Some(10), None]))
        );
        // A mechanism that freezes whole jobs refuses alternate when parsed,
        // and a per-node pick when it gets one.
        assert!(gang_policy(spec, true)
            .unwrap_err()
            .contains("node by node"));
        let p = gang_policy_with(spec, true, true).unwrap();
        let mut whole = SlotHost::new(
            &cosched_policies::process::gang::factory(p),
            2,
            8,
            Fake::default(),
        );
        whole.arrive(10, 1, "a", 0).unwrap();
        let e = whole.arrive(11, 2, "b", 0).unwrap_err();
        assert!(e.contains("job 11") && e.contains("whole jobs"), "{e}");
    }

    #[test]
    fn options_without_their_events_are_refused_with_what_is_missing() {
        for (spec, missing) in [
            ("gang[io_preempt=true]", "disk completions"),
            ("gang[gang_bit=true]", "when a process blocks"),
            ("gang[fill=true,low=auto]", "gangedness measurement"),
            ("gang[window=4]", "gangedness measurement"),
        ] {
            let e = gang_policy_with(spec, true, true).unwrap_err();
            assert!(e.contains(missing), "{spec}: {e}");
        }
        assert!(gang_policy_with("gang[fill=true,low=a/b]", true, true).is_ok());
        let e = gang_policy_with("gang[fill=true,low=a/b]", false, true).unwrap_err();
        assert!(e.contains("application"), "{e}");
        for key in ["alternate=true", "fill=true", "fair_ms=5", "low=a"] {
            let e = gang_policy(&format!("gang[{key}]"), true).unwrap_err();
            assert!(e.contains("node by node"), "{key}: {e}");
        }
    }

    #[test]
    fn a_lone_row_runs_its_next_slots_without_a_switch() {
        // 2 nodes, 3 rows, 100 ms slots, 1 ms switches; A (10) alone in row 0.
        // By hand: at 100, 200 and 300 ms the slot timer starts row 0's next
        // slot without a switch: 0 switches, each slot handed over runs A
        // until the next quantum (no idle gap of 1 ms).
        let mut h = host("gang[rows=3,quantum_ms=100,switch_us=1000]", 2);
        h.arrive(10, 2, "a", 0).unwrap();
        h.advance(350 * MS).unwrap();
        let slots: Vec<(u64, Vec<Key>, Option<u64>)> = h
            .mech
            .slots
            .iter()
            .filter(|s| s.at > 0)
            .map(|s| (s.at / MS, s.run.clone(), s.until.map(|u| u / MS)))
            .collect();
        assert_eq!(
            slots,
            vec![
                (100, vec![10], Some(200)),
                (200, vec![10], Some(300)),
                (300, vec![10], Some(400))
            ]
        );
        assert_eq!(h.st.switches, 0);
    }

    /// (at ms, running jobs) of every slot handed over.
    fn runs(h: &SlotHost<Fake>) -> Vec<(u64, Vec<Key>)> {
        h.mech
            .slots
            .iter()
            .map(|s| (s.at / MS, s.run.clone()))
            .collect()
    }

    #[test]
    fn two_jobs_alternate_an_end_mid_slot_switches_at_once_and_a_third_fills_the_free_row() {
        // 2 nodes, 2 rows, 100 ms, no switch idle. A (10) and B (11) need both nodes.
        let mut h = host("gang[rows=2,quantum_ms=100,switch_us=0]", 2);
        h.arrive(10, 2, "a", 0).unwrap();
        h.arrive(11, 2, "b", 0).unwrap();
        // A starts running in row 0, B frozen in row 1.
        assert_eq!(
            h.mech.started,
            vec![(10, vec![0, 1], true), (11, vec![0, 1], false)]
        );
        assert_eq!((h.row_of(10), h.row_of(11)), (Some(0), Some(1)));
        assert_eq!(h.next_wake(), Some(100 * MS));
        // Nothing is due before 100 ms: one slot at A's start, the same again
        // with B frozen.
        h.advance(99 * MS).unwrap();
        assert_eq!(runs(&h), vec![(0, vec![10]), (0, vec![10])]);
        assert_eq!(h.last_slot().unwrap().frozen, vec![11]);
        h.advance(250 * MS).unwrap();
        // At 100 B, at 200 A: each switch is one change (no idle time).
        assert_eq!(
            runs(&h)
                .into_iter()
                .filter(|(t, _)| *t > 0)
                .collect::<Vec<_>>(),
            vec![(100, vec![11]), (200, vec![10])]
        );
        // A ends at 250, mid-slot: its emptied row ends the slot at once, B runs.
        h.end(10, 250 * MS).unwrap();
        let last = h.last_slot().unwrap().clone();
        assert_eq!(
            (last.at, last.run.clone(), last.until),
            (250 * MS, vec![11], Some(350 * MS))
        );
        // C (12) arrives at 300: row 0 is free, it takes it and starts frozen.
        h.arrive(12, 2, "c", 300 * MS).unwrap();
        assert_eq!(h.row_of(12), Some(0));
        assert_eq!(h.mech.started.last(), Some(&(12, vec![0, 1], false)));
        h.advance(460 * MS).unwrap();
        let tail: Vec<(u64, Vec<Key>)> = runs(&h).into_iter().filter(|(t, _)| *t > 300).collect();
        assert_eq!(tail, vec![(350, vec![12]), (450, vec![11])]);
    }
}
