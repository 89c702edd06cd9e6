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
//! [`SlotDecision::Stop`] set the host's timers; after the decisions of an
//! instant the host asks the policy's [`SlotPolicy::pick`] for every node and
//! hands the mechanism one [`Slot`]: from this instant, these jobs run and
//! these are frozen (nothing runs during a switch's idle time).
//!
//! What real mode cannot do is refused, never dropped: a decision the host
//! cannot carry out (a job that is not waiting, a node the job may not use, a
//! row the matrix does not have, a timer in the past, a pick of a process
//! that is not live on that node, or that runs one rank of a job but not
//! another: the mechanisms freeze and thaw whole jobs) is an error naming the
//! job and node; the policy options that need measurements real execution
//! does not take are refused when the policy is parsed ([`gang_policy`]).
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
    pub run: Vec<Key>,
    pub frozen: Vec<Key>,
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
    /// From `slot.at` on, exactly `slot.run` of the placed jobs run.
    fn slot(&mut self, slot: &Slot) -> Result<(), String>;
}

/// Parameters of the gang policy that need measurements or a per-process
/// mechanism real execution does not have, with what is missing.
const REFUSED: &[(&str, &str)] = &[
    ("alternate", "real mode freezes and thaws whole jobs; it cannot run another row's process on one node"),
    ("io_preempt", "real mode does not see a process's disk completions"),
    ("gang_bit", "real mode does not see when a process blocks, so a slot cannot be yielded"),
    ("fill", "real mode does not give CPU fragments to single processes (whole jobs are frozen or thawed)"),
    ("fair_ms", "real mode does not give CPU fragments to single processes (whole jobs are frozen or thawed)"),
    ("low", "real mode has no gangedness measurement (no online estimator of messages and CPU holds)"),
    ("ratio_threshold", "real mode has no gangedness measurement (no online estimator of messages and CPU holds)"),
    ("window", "real mode has no gangedness measurement (no online estimator of messages and CPU holds)"),
    ("est_quantum_ms", "real mode has no gangedness measurement (no online estimator of messages and CPU holds)"),
];

/// The gang policy of `spec` (`gang[quantum_ms=..,rows=..,...]`, the
/// simulator's string) for real execution. `apps`: whether the mechanism
/// knows each job's application (per-job `quanta` need it). Options whose
/// measurements real mode lacks are refused with what is missing.
pub fn gang_policy(spec: &str, apps: bool) -> Result<GangParams, String> {
    let parsed = PolicySpec::parse(spec).map_err(|e| e.to_string())?;
    if parsed.name != "gang" {
        return Err(format!(
            "{spec:?}: real execution hosts the slot policy gang[...] only, not {:?}",
            parsed.name
        ));
    }
    for (key, why) in REFUSED {
        if parsed.params.contains_key(*key) {
            return Err(format!(
                "{spec:?}: parameter {key} is simulator-only: {why}"
            ));
        }
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
    /// The process each node's CPU runs, as last carried out.
    running: Vec<Option<Pid>>,
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

    /// The policy sees every process of started job `j` end, then the job.
    fn finish(&mut self, j: usize) {
        let e = self.st.jobs[j].as_ref().expect("registered");
        let (first, nodes) = e.started.clone().expect("started");
        for k in 0..nodes.len() {
            self.policy.on_process_end(first + k as Pid);
        }
        let key = e.key;
        for r in &mut self.st.running {
            if r.is_some_and(|p| p >= first && p < first + nodes.len() as Pid) {
                *r = None;
            }
        }
        self.view_op(|p, v| p.on_job_end(j, v));
        self.st.jobs[j] = None;
        self.st.index.remove(&key);
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
                Ok(())
            }
            SlotDecision::Stop => {
                self.st.timer = None;
                self.st.switch_end = None;
                self.st.switching = false;
                self.st.active = None;
                self.st.since = now;
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
        let picks = self.picks()?;
        let run = picks
            .iter()
            .any(|p| p.is_some_and(|p| p >= first && p < first + size as Pid));
        let row = self.policy.matrix().and_then(|m| m.row_of(j));
        self.mech
            .start(e.key, &nodes, row, run)
            .map_err(|m| format!("job {}: cannot start on nodes {nodes:?}: {m}", e.key))
    }

    /// The policy's pick for every node, validated: a live process of that
    /// node, and every process of a job that runs somewhere runs everywhere.
    fn picks(&mut self) -> Result<Vec<Option<Pid>>, String> {
        let mut out = vec![None; self.st.nodes as usize];
        if self.st.switching || self.st.active.is_none() {
            return Ok(out);
        }
        for n in 0..self.st.nodes {
            let v = View {
                st: &self.st,
                mech: &self.mech,
            };
            let Some(p) = self.policy.pick(n, &v) else {
                continue;
            };
            match self.st.owner(p) {
                Some((_, node)) if node == n => out[n as usize] = Some(p),
                _ => return Err(SlotError::NotRunnable { pid: p, node: n }.to_string()),
            }
        }
        for p in out.iter().flatten() {
            let (j, _) = self.st.owner(*p).expect("validated");
            let e = self.st.entry(j).expect("live");
            let (first, nodes) = e.started.as_ref().expect("started");
            for (k, &n) in nodes.iter().enumerate() {
                if out[n as usize] != Some(first + k as Pid) {
                    return Err(format!(
                        "job {}: the policy runs it on some of its nodes but not on node {n}; \
                         real mode freezes and thaws whole jobs",
                        e.key
                    ));
                }
            }
        }
        Ok(out)
    }

    /// Hands the mechanism the slot of this instant when it changed.
    fn commit(&mut self) -> Result<(), String> {
        let picks = self.picks()?;
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
        self.st.running = picks;
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
    }

    fn host(spec: &str, nodes: u32) -> SlotHost<Fake> {
        let p = gang_policy(spec, true).unwrap();
        SlotHost::new(
            &cosched_policies::process::gang::factory(p),
            nodes,
            8,
            Fake::default(),
        )
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
