//! The Linux mechanisms of one (virtual) node: what a node policy's decisions
//! become on this machine.
//!
//! * Each rank gets its own cgroup `cosched.<run>.n<node>/j<job>r<rank>p<pid>` in the
//!   cpu hierarchy (all ranks of the node are siblings, so a weight orders a rank
//!   against the ranks of the other jobs; the pid keeps two concurrent steps of
//!   one Slurm job, which share the job id, apart). A boost sets its weight to
//!   `boost_factor` times the default; unboost restores the default.
//! * Busy CPU time per rank comes from the same cgroup in the cpuacct hierarchy.
//! * Gang slots freeze and thaw a job: the v1 freezer cgroup
//!   `cosched.<run>.n<node>/j<job>` (or, in v2, each rank cgroup of the job);
//!   without a freezer, SIGSTOP / SIGCONT to each rank. The v1 freezer cgroup
//!   is per job and virtual node, so the gang slot host of `cosched run` can
//!   also run a job's rank on one node while its rank on another is frozen
//!   ([`JobNodeFreezer`]: alternate scheduling, fragment filling).
//! * The virtual node is the cpuset `cosched.<run>.n<node>`.
//!
//! Every change is recorded in the [`State`] file before it is made, and
//! [`NodeMech::restore`] (also run from `Drop`) undoes all of it.

use crate::cgroup::{CgError, Cgroups, Hierarchy, Version, FREEZE_SETTLE};
use crate::procfs;
use crate::state::{Moved, State};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid as NixPid;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// Errors of the mechanisms, with the cgroup file or process they concern.
#[derive(Debug, thiserror::Error)]
pub enum MechError {
    #[error("{0}")]
    Cgroup(#[from] CgError),
    #[error("{0}")]
    State(#[from] std::io::Error),
    #[error("{0}")]
    Missing(String),
    #[error("process {0} is not known to this agent")]
    Unknown(u32),
}

/// The name of node `node`'s cgroups of run `run`, directly under each
/// hierarchy's root (`cosched.*`: the startup sweep finds leftovers by it).
pub fn node_base(run: &str, node: u32) -> String {
    format!("cosched.{run}.n{node}")
}

/// The per-job, per-virtual-node freezer cgroups of run `run` in the v1
/// freezer hierarchy: `cosched.<run>.n<node>/j<job>`, the cgroup a
/// [`NodeMech`] attaches job `job`'s rank on that node to. Freezing one of
/// them freezes that job on that node only (a rank that registers later is
/// frozen as it joins); the node's cgroup tree, this one included, is thawed
/// and removed by the agent's restore and by the startup sweep after a
/// SIGKILL, like every `cosched.*` cgroup.
#[derive(Clone, Debug)]
pub struct JobNodeFreezer {
    h: Hierarchy,
    run: String,
}

impl JobNodeFreezer {
    /// The freezer of this machine when it is a v1 hierarchy (per-job
    /// cgroups); else what is missing.
    pub fn detect(run: &str, cg: &Cgroups) -> Result<JobNodeFreezer, String> {
        match &cg.freezer {
            Some(h) if h.version == Version::V1 => Ok(JobNodeFreezer {
                h: h.clone(),
                run: run.to_string(),
            }),
            Some(_) => Err(format!(
                "it needs the v1 freezer hierarchy (a freezer cgroup per job and virtual node); \
                 this machine's cgroups: {}",
                cg.describe()
            )),
            None => Err(format!(
                "it needs the v1 freezer hierarchy; this machine has no freezer ({})",
                cg.describe()
            )),
        }
    }

    /// The cgroup of job `job` on node `node`.
    pub fn dir(&self, node: u32, job: i32) -> PathBuf {
        self.h
            .path(&node_base(&self.run, node))
            .join(format!("j{job}"))
    }

    /// Freezes (`true`) or thaws job `job` on node `node` (creating its
    /// cgroup under the node's), returning when the kernel reports it done.
    pub fn set(&self, node: u32, job: i32, frozen: bool) -> Result<(), MechError> {
        let d = self.dir(node, job);
        std::fs::create_dir_all(&d).map_err(|e| CgError {
            path: d.clone(),
            what: "cannot create cgroup".into(),
            err: e,
        })?;
        Ok(self.h.set_frozen(&d, frozen, FREEZE_SETTLE)?)
    }

    /// Whether job `job` is frozen on node `node`.
    pub fn is_frozen(&self, node: u32, job: i32) -> bool {
        let d = self.dir(node, job);
        d.exists() && self.h.is_frozen(&d).unwrap_or(false)
    }
}

/// How a job is stopped for a gang slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreezeBy {
    Freezer,
    Signals,
}

/// The environment variable that chooses how gang slots stop a job:
/// `signals` (SIGSTOP / SIGCONT to each rank, even where a freezer exists, e.g.
/// a freezer the agent may not write), `freezer` (the freezer, an error when
/// there is none); unset or empty: the freezer when there is one, else signals.
pub const FREEZE_ENV: &str = "COSCHED_FREEZE";

impl FreezeBy {
    /// The choice `choice` (the value of [`FREEZE_ENV`]) on a machine that has
    /// a freezer (`has_freezer`) or not; an error names the variable and value.
    pub fn select(choice: Option<&str>, has_freezer: bool) -> Result<FreezeBy, String> {
        match choice.unwrap_or("") {
            "" if has_freezer => Ok(FreezeBy::Freezer),
            "" | "signals" => Ok(FreezeBy::Signals),
            "freezer" if has_freezer => Ok(FreezeBy::Freezer),
            "freezer" => Err(format!(
                "{FREEZE_ENV}=freezer: this machine has no freezer cgroup (v1 freezer or cgroup2)"
            )),
            other => Err(format!(
                "{FREEZE_ENV}={other:?}: expected \"freezer\" or \"signals\" (or unset)"
            )),
        }
    }
}

struct Rank {
    job: i32,
    start: u64,
    boosted: bool,
    /// The main thread's nice value at registration (`None`: unreadable; the
    /// reschedule check is then not made).
    nice: Option<i32>,
    /// Leaf cgroup in each hierarchy that hosts rank leaves.
    leaves: Vec<(Hierarchy, PathBuf)>,
}

/// The mechanisms of one node.
pub struct NodeMech {
    pub cg: Cgroups,
    pub base: String,
    pub boost_factor: f64,
    pub freeze_by: FreezeBy,
    state: Option<State>,
    ranks: HashMap<u32, Rank>,
    frozen: HashMap<i32, bool>,
    created: Vec<(Hierarchy, PathBuf)>,
    /// Per hierarchy root: the original cgroups of the ranks placed on this node.
    homes: BTreeMap<String, BTreeSet<String>>,
}

/// Where a process left in a cgroup goes when the cgroup is removed: the one
/// original cgroup of the ranks placed there, if they all came from one.
pub fn common_home<'a>(mut origs: impl Iterator<Item = &'a String>) -> Option<String> {
    let first = origs.next()?;
    origs.all(|o| o == first).then(|| first.clone())
}

/// The hierarchies of `detected` that gang slots stopping jobs by `by` use,
/// and the freeze method chosen by `choice` (the value of [`FREEZE_ENV`]),
/// checked before anything is changed: the cpu and cpuacct controllers exist,
/// the choice is valid on this machine, and every hierarchy used is writable.
/// With signals the freezer role is dropped: a v1 freezer hierarchy is then
/// neither created in nor written, so it need not be writable (a cgroup2
/// freezer is the cpu hierarchy, which is used and checked anyway).
pub fn check_cgroups(
    detected: &Cgroups,
    choice: Option<&str>,
) -> Result<(Cgroups, FreezeBy), String> {
    detected.require()?;
    let by = FreezeBy::select(choice, detected.freezer.is_some())?;
    let mut used = detected.clone();
    if by == FreezeBy::Signals {
        used.freezer = None;
    }
    used.require_writable()?;
    Ok((used, by))
}

/// Ranks' leaves live in hierarchies that weigh or account; v1 freezer-only and
/// cpuset-only hierarchies hold jobs or the node.
fn leaf_roles(cg: &Cgroups) -> Vec<Hierarchy> {
    let mut v: Vec<Hierarchy> = vec![];
    for h in [&cg.cpu, &cg.cpuacct].into_iter().flatten() {
        if !v.contains(h) {
            v.push(h.clone());
        }
    }
    v
}

impl NodeMech {
    /// Sets up node `node` of run `run` on `cpus` (a cpuset list; `None`: all
    /// CPUs), after restoring what dead agents left behind. Errors name what is
    /// missing (a cgroup controller, permission to write it).
    pub fn new(
        run: &str,
        node: u32,
        cpus: Option<&str>,
        state_dir: &Path,
        boost_factor: f64,
    ) -> Result<NodeMech, MechError> {
        if run.is_empty()
            || run.len() > 32
            || !run
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(MechError::Missing(format!(
                "run id {run:?} must match [A-Za-z0-9_-]{{1,32}}"
            )));
        }
        let detected = Cgroups::detect();
        let choice = std::env::var(FREEZE_ENV).ok();
        let (cg, freeze_by) =
            check_cgroups(&detected, choice.as_deref()).map_err(MechError::Missing)?;
        crate::state::require_writable(state_dir).map_err(MechError::Missing)?;
        // A leftover that cannot be restored keeps its record for a later
        // cleanup; it does not prevent this agent from starting. Every
        // hierarchy is scanned, the unused freezer's included.
        if let Err(e) = crate::state::cleanup(state_dir, &detected) {
            eprintln!("cosched: cleanup of {}: {e}", state_dir.display());
        }
        let base = node_base(run, node);
        let state = State::acquire(state_dir, &base, &cg)?;
        let mut m = NodeMech {
            cg,
            base,
            boost_factor,
            freeze_by,
            state: Some(state),
            ranks: HashMap::new(),
            frozen: HashMap::new(),
            created: vec![],
            homes: BTreeMap::new(),
        };
        if let Err(e) = m.setup(cpus) {
            m.restore();
            return Err(e);
        }
        Ok(m)
    }

    fn setup(&mut self, cpus: Option<&str>) -> Result<(), MechError> {
        for h in self.cg.roots() {
            let d = h.create(&self.base)?;
            self.created.push((h.clone(), d.clone()));
            if self.cg.cpuset.as_ref() == Some(&h) {
                let list = match cpus {
                    Some(c) => c.to_string(),
                    None if h.version == Version::V1 => {
                        crate::cgroup::read(&h.root.join("cpuset.cpus"))?
                    }
                    None => continue,
                };
                h.set_cpus(&d, &list)?;
            }
            if h.version == Version::V2 {
                // Leaves need the cpu (and cpuset) controllers of their parent.
                let _ = crate::cgroup::write(&d.join("cgroup.subtree_control"), "+cpu");
            }
        }
        Ok(())
    }

    fn base_dir(&self, h: &Hierarchy) -> PathBuf {
        h.path(&self.base)
    }

    fn job_dir(&self, h: &Hierarchy, job: i32) -> PathBuf {
        self.base_dir(h).join(format!("j{job}"))
    }

    /// Takes `pid` (rank `rank` of job `job`) under this node's mechanisms: its
    /// own cpu/cpuacct cgroup, its job's freezer cgroup, the node's cpuset.
    pub fn add_rank(&mut self, pid: u32, job: i32, rank: i32) -> Result<(), MechError> {
        let st = procfs::stat(pid)
            .ok_or_else(|| MechError::Missing(format!("process {pid} does not exist")))?;
        let leaf_hs = leaf_roles(&self.cg);
        let mut targets: Vec<(Hierarchy, PathBuf, bool)> = vec![];
        for h in self.cg.roots() {
            let d = if leaf_hs.contains(&h) {
                (self.base_dir(&h).join(format!("j{job}r{rank}p{pid}")), true)
            } else if self.cg.freezer.as_ref() == Some(&h) {
                (self.job_dir(&h, job), false)
            } else {
                (self.base_dir(&h), false)
            };
            targets.push((h, d.0, d.1));
        }
        // Record the original cgroups before moving anything.
        let mut original = BTreeMap::new();
        for (h, _, _) in &targets {
            let ctrl = match h.version {
                Version::V2 => None,
                Version::V1 => Some(self.controller_name(h)),
            };
            if let Some(path) = procfs::cgroup_of(pid, ctrl) {
                original.insert(h.root.to_string_lossy().to_string(), path);
            }
        }
        for (root, o) in &original {
            self.homes
                .entry(root.clone())
                .or_default()
                .insert(o.clone());
        }
        let nice = crate::nudge::nice_of(pid).ok();
        if let Some(s) = &mut self.state {
            s.record.moved.retain(|m| m.pid != pid);
            s.record.moved.push(Moved {
                pid,
                start: st.start,
                original: original.clone(),
            });
            s.record.nices.retain(|n| n.0 != pid);
            if let Some(n) = nice {
                s.record.nices.push((pid, st.start, n));
            }
            s.save()?;
        }
        let mut leaves = vec![];
        let mut done: Vec<(Hierarchy, PathBuf, bool)> = vec![];
        for (h, d, leaf) in targets {
            let fresh = !d.exists();
            if let Err(e) = self.attach_to(&h, &d, pid) {
                self.undo_add(pid, &original, &done, fresh.then_some((&h, &d)));
                return Err(e);
            }
            done.push((h.clone(), d.clone(), fresh));
            if leaf {
                leaves.push((h, d));
            }
        }
        self.ranks.insert(
            pid,
            Rank {
                job,
                start: st.start,
                boosted: false,
                nice,
                leaves,
            },
        );
        // A rank joining a frozen job is frozen with it: by signal, or, where the
        // freezer is a rank leaf (cgroup v2), by freezing its new leaf (a v1 job
        // freezer cgroup already is frozen).
        if self.frozen.get(&job).copied().unwrap_or(false) {
            if self.freeze_by == FreezeBy::Signals {
                self.signal_rank(pid, true)?;
            } else if let Some(h) = self.freezer_leaf_role() {
                let leaf = self.ranks[&pid]
                    .leaves
                    .iter()
                    .find(|(x, _)| *x == h)
                    .cloned();
                if let Some((_, d)) = leaf {
                    h.set_frozen(&d, true, FREEZE_SETTLE)?;
                }
            }
        }
        Ok(())
    }

    /// The freezer hierarchy when it holds rank leaves (cgroup v2), else `None`.
    fn freezer_leaf_role(&self) -> Option<Hierarchy> {
        let h = self.cg.freezer.clone()?;
        leaf_roles(&self.cg).contains(&h).then_some(h)
    }

    fn attach_to(&self, h: &Hierarchy, d: &Path, pid: u32) -> Result<(), MechError> {
        std::fs::create_dir_all(d).map_err(|e| CgError {
            path: d.to_path_buf(),
            what: "cannot create cgroup".into(),
            err: e,
        })?;
        if h.version == Version::V1 && self.cg.cpuset.as_ref() == Some(h) && d != self.base_dir(h) {
            let cpus = crate::cgroup::read(&self.base_dir(h).join("cpuset.cpus"))?;
            h.set_cpus(d, &cpus)?;
        }
        Ok(h.attach(d, pid)?)
    }

    /// Undoes a partial [`NodeMech::add_rank`]: `pid` back to its original cgroup
    /// in every hierarchy already done, the cgroups it created there (and
    /// `failed`, created by the step that failed) removed, its record dropped.
    fn undo_add(
        &mut self,
        pid: u32,
        original: &BTreeMap<String, String>,
        done: &[(Hierarchy, PathBuf, bool)],
        failed: Option<(&Hierarchy, &PathBuf)>,
    ) {
        for (h, d, fresh) in done.iter().rev() {
            if let Some(orig) = original.get(&h.root.to_string_lossy().to_string()) {
                let _ = h.attach(&h.root.join(orig.trim_start_matches('/')), pid);
            }
            if *fresh {
                let _ = std::fs::remove_dir(d);
            }
        }
        if let Some((_, d)) = failed {
            let _ = std::fs::remove_dir(d);
        }
        if let Some(s) = &mut self.state {
            s.record.moved.retain(|m| m.pid != pid);
            let _ = s.save();
        }
    }

    fn controller_name(&self, h: &Hierarchy) -> &'static str {
        if self.cg.cpu.as_ref() == Some(h) {
            "cpu"
        } else if self.cg.cpuacct.as_ref() == Some(h) {
            "cpuacct"
        } else if self.cg.freezer.as_ref() == Some(h) {
            "freezer"
        } else {
            "cpuset"
        }
    }

    /// The ranks' pids.
    pub fn pids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.ranks.keys().copied().collect();
        v.sort();
        v
    }

    fn cpu_leaf(&self, pid: u32) -> Result<(Hierarchy, PathBuf), MechError> {
        let r = self.ranks.get(&pid).ok_or(MechError::Unknown(pid))?;
        let cpu = self.cg.cpu.as_ref().unwrap();
        r.leaves
            .iter()
            .find(|(h, _)| h == cpu)
            .cloned()
            .ok_or(MechError::Unknown(pid))
    }

    /// Boosts (`true`) or unboosts `pid`: its cgroup's weight. The weight alone
    /// does not preempt the task running on `pid`'s CPU: the agent follows a
    /// boost with [`NodeMech::nudge`].
    pub fn set_boost(&mut self, pid: u32, on: bool) -> Result<(), MechError> {
        let (h, d) = self.cpu_leaf(pid)?;
        let r = self.ranks.get_mut(&pid).unwrap();
        if r.boosted == on {
            return Ok(());
        }
        h.set_weight(&d, if on { self.boost_factor } else { 1.0 })?;
        r.boosted = on;
        Ok(())
    }

    /// Asks the kernel whether `pid` (boosted, runnable) should preempt the
    /// task on its CPU now ([`crate::nudge`]): its main thread's nice value
    /// goes one step and back to its value at registration. Returns whether
    /// both calls succeeded; a rank that ended (`getpriority` fails) or whose
    /// nice value changed since registration is left alone. The rank's start
    /// time is not read back (a /proc read, 20-25 us here, several per boost):
    /// a rank leaves this table when its socket closes at its end, and its pid
    /// is given to another process only after the pid space wraps.
    pub fn nudge(&self, pid: u32) -> bool {
        let Some(r) = self.ranks.get(&pid) else {
            return false;
        };
        let Some(nice) = r.nice else {
            return false;
        };
        if crate::nudge::nice_of(pid).ok() != Some(nice) {
            return false;
        }
        crate::nudge::set_nice(pid, crate::nudge::step_of(nice)).is_ok()
            && crate::nudge::set_nice(pid, nice).is_ok()
    }

    /// Sets `pid`'s weight to `factor` times the default (tests, benchmarks).
    pub fn set_weight(&mut self, pid: u32, factor: f64) -> Result<(), MechError> {
        let (h, d) = self.cpu_leaf(pid)?;
        Ok(h.set_weight(&d, factor)?)
    }

    pub fn is_boosted(&self, pid: u32) -> bool {
        self.ranks.get(&pid).is_some_and(|r| r.boosted)
    }

    /// Busy CPU time of `pid`'s cgroup, ns.
    pub fn usage_ns(&self, pid: u32) -> Result<u64, MechError> {
        let r = self.ranks.get(&pid).ok_or(MechError::Unknown(pid))?;
        let acct = self.cg.cpuacct.as_ref().unwrap();
        let (h, d) = r
            .leaves
            .iter()
            .find(|(h, _)| h == acct)
            .ok_or(MechError::Unknown(pid))?;
        Ok(h.usage_ns(d)?)
    }

    fn job_pids(&self, job: i32) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .ranks
            .iter()
            .filter(|(_, r)| r.job == job)
            .map(|(&p, _)| p)
            .collect();
        v.sort();
        v
    }

    fn signal_rank(&mut self, pid: u32, stop: bool) -> Result<(), MechError> {
        let start = self.ranks.get(&pid).ok_or(MechError::Unknown(pid))?.start;
        if let Some(s) = &mut self.state {
            if stop {
                s.record.stopped.push((pid, start));
            }
            s.save()?;
        }
        if procfs::alive(pid, start) {
            let _ = kill(
                NixPid::from_raw(pid as i32),
                if stop {
                    Signal::SIGSTOP
                } else {
                    Signal::SIGCONT
                },
            );
        }
        if !stop {
            if let Some(s) = &mut self.state {
                s.record.stopped.retain(|&(p, _)| p != pid);
                s.save()?;
            }
        }
        Ok(())
    }

    /// Freezes (`true`) or thaws every rank of `job` on this node, and returns
    /// when the kernel reports it done.
    pub fn set_job_frozen(&mut self, job: i32, frozen: bool) -> Result<(), MechError> {
        self.frozen.insert(job, frozen);
        match self.freeze_by {
            FreezeBy::Signals => {
                for pid in self.job_pids(job) {
                    self.signal_rank(pid, frozen)?;
                }
            }
            FreezeBy::Freezer => {
                let h = self.cg.freezer.clone().unwrap();
                let timeout = FREEZE_SETTLE;
                if leaf_roles(&self.cg).contains(&h) {
                    for pid in self.job_pids(job) {
                        let r = &self.ranks[&pid];
                        if let Some((_, d)) = r.leaves.iter().find(|(x, _)| *x == h) {
                            h.set_frozen(d, frozen, timeout)?;
                        }
                    }
                } else {
                    let d = self.job_dir(&h, job);
                    std::fs::create_dir_all(&d).map_err(|e| CgError {
                        path: d.clone(),
                        what: "cannot create cgroup".into(),
                        err: e,
                    })?;
                    h.set_frozen(&d, frozen, timeout)?;
                }
            }
        }
        Ok(())
    }

    pub fn is_job_frozen(&self, job: i32) -> bool {
        self.frozen.get(&job).copied().unwrap_or(false)
    }

    /// Releases `pid`: thaws/continues it, restores its weight and moves it back
    /// to its original cgroups (a rank that ended or unregistered).
    pub fn remove_rank(&mut self, pid: u32) -> Result<(), MechError> {
        let Some(r) = self.ranks.remove(&pid) else {
            return Ok(());
        };
        let alive = procfs::alive(pid, r.start);
        let mut original = BTreeMap::new();
        if let Some(s) = &mut self.state {
            if s.record.stopped.iter().any(|&(p, _)| p == pid) {
                if alive {
                    let _ = kill(NixPid::from_raw(pid as i32), Signal::SIGCONT);
                }
                s.record.stopped.retain(|&(p, _)| p != pid);
            }
            s.record.nices.retain(|n| n.0 != pid);
            let moved = s
                .record
                .moved
                .iter()
                .position(|m| m.pid == pid)
                .map(|i| s.record.moved.remove(i));
            if let Some(m) = moved {
                if alive {
                    for h in self.cg.roots() {
                        if let Some(orig) = m.original.get(&h.root.to_string_lossy().to_string()) {
                            let _ = h.attach(&h.root.join(orig.trim_start_matches('/')), pid);
                        }
                    }
                }
                original = m.original;
            }
            s.save()?;
        }
        // What is left in the rank's own cgroups descends from it: it goes where the rank came from.
        for (h, d) in r.leaves {
            let home = original.get(&h.root.to_string_lossy().to_string());
            h.remove_tree(&d, home.map(String::as_str))?;
        }
        Ok(())
    }

    /// Restores everything: every rank released, every job thawed, the node's
    /// cgroups removed, the state file deleted. Idempotent.
    pub fn restore(&mut self) {
        let jobs: Vec<i32> = self
            .frozen
            .iter()
            .filter(|(_, &f)| f)
            .map(|(&j, _)| j)
            .collect();
        for j in jobs {
            if let Err(e) = self.set_job_frozen(j, false) {
                eprintln!("cosched-agent: thaw job {j}: {e}");
            }
        }
        for pid in self.pids() {
            if let Err(e) = self.remove_rank(pid) {
                eprintln!("cosched-agent: release {pid}: {e}");
            }
        }
        for (h, d) in std::mem::take(&mut self.created).into_iter().rev() {
            let home = self
                .homes
                .get(&h.root.to_string_lossy().to_string())
                .and_then(|o| common_home(o.iter()));
            if let Err(e) = h.remove_tree(&d, home.as_deref()) {
                eprintln!("cosched-agent: {e}");
            }
        }
        if let Some(s) = self.state.take() {
            s.finish();
        }
    }

    /// The node's cgroup in the cpu hierarchy (tests).
    pub fn cpu_base(&self) -> PathBuf {
        self.base_dir(self.cg.cpu.as_ref().unwrap())
    }
}

impl Drop for NodeMech {
    fn drop(&mut self) {
        self.restore();
    }
}

#[cfg(test)]
mod tests {
    use super::{check_cgroups, FreezeBy};
    use crate::cgroup::{Cgroups, Hierarchy, Version};

    /// cpu, cpuacct and cpuset in the writable folder `ok`; the freezer a
    /// separate v1 hierarchy at `denied` (absent, so `access(W_OK)` fails for
    /// any user, root included).
    fn with_unwritable_freezer(ok: &std::path::Path, denied: &std::path::Path) -> Cgroups {
        let h = |p: &std::path::Path| {
            Some(Hierarchy {
                root: p.to_path_buf(),
                version: Version::V1,
            })
        };
        Cgroups {
            cpu: h(ok),
            cpuacct: h(ok),
            cpuset: h(ok),
            freezer: h(denied),
        }
    }

    #[test]
    fn signals_need_no_writable_freezer_and_the_freezer_does() {
        let tmp = tempfile::tempdir().unwrap();
        let denied = tmp.path().join("freezer-not-writable");
        let cg = with_unwritable_freezer(tmp.path(), &denied);
        // Signals: the freezer hierarchy is left out, so only `tmp` is checked.
        let (used, by) = check_cgroups(&cg, Some("signals")).unwrap();
        assert_eq!(by, FreezeBy::Signals);
        assert_eq!(used.freezer, None);
        assert_eq!(used.roots().len(), 1);
        // The freezer, forced or by default (there is one): its root is named.
        for choice in [Some("freezer"), None] {
            let e = check_cgroups(&cg, choice).unwrap_err();
            assert!(
                e.contains("no permission to create cgroups in")
                    && e.contains("freezer-not-writable")
                    && !e.contains(&format!("{}, ", tmp.path().display())),
                "{choice:?}: {e}"
            );
        }
        // A bad choice is refused before any permission is checked.
        let e = check_cgroups(&cg, Some("sigstop")).unwrap_err();
        assert!(e.contains("COSCHED_FREEZE=\"sigstop\""), "{e}");
    }

    #[test]
    fn the_freeze_choice_defaults_to_the_freezer_and_signals_can_be_forced() {
        // Unset or empty: the freezer where there is one, else signals.
        assert_eq!(FreezeBy::select(None, true), Ok(FreezeBy::Freezer));
        assert_eq!(FreezeBy::select(Some(""), true), Ok(FreezeBy::Freezer));
        assert_eq!(FreezeBy::select(None, false), Ok(FreezeBy::Signals));
        // Forced signals even with a freezer; a forced freezer needs one.
        assert_eq!(
            FreezeBy::select(Some("signals"), true),
            Ok(FreezeBy::Signals)
        );
        assert_eq!(
            FreezeBy::select(Some("freezer"), true),
            Ok(FreezeBy::Freezer)
        );
        let e = FreezeBy::select(Some("freezer"), false).unwrap_err();
        assert!(
            e.contains("COSCHED_FREEZE=freezer") && e.contains("no freezer"),
            "{e}"
        );
        let e = FreezeBy::select(Some("sigstop"), true).unwrap_err();
        assert!(e.contains("COSCHED_FREEZE=\"sigstop\""), "{e}");
    }
}
