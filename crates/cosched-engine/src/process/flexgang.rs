//! Flexible gang scheduling (seed 003 §3, §6): options of the process-level
//! gang scheduler ([`super::gang`]) that tailor the quantum, the priority and
//! the extent of ganging to each job.
//!
//! - **Per-job quanta** (S003 §3.2: "the quantum lengths for the two jobs are
//!   not required to be the same"): a job of application `app` gets the
//!   quantum listed for `app` in [`FlexParams::quanta`], other jobs the
//!   matrix's `quantum`; a row's slot lasts the longest quantum of its jobs.
//! - **I/O interrupts** (S003 §3.1, §3.2: "higher priority jobs can interrupt
//!   lower priority jobs in order to keep disk utilization high"): with
//!   `io_preempt`, a process woken by its disk completion takes its node's CPU
//!   at once from a process of its node and keeps priority on its node until it
//!   blocks again (a global slot switch still idles it). The victim is a
//!   process running outside its own slot (a fragment) if there is one, else a
//!   process of the active row; when a gangedness source is configured (`low`),
//!   only one of a low-gangedness job (S003 §3.2: interrupting a job "will only
//!   be beneficial ... if that job is amenable to scheduling skew"; §7:
//!   perturbation-friendly jobs are scheduled with loose coordination,
//!   perturbation-sensitive ones with strict coordination).
//! - **Gang bit** (S003 §2: "each job is marked with a gang bit that indicates
//!   to the scheduler whether constituent processes may independently yield
//!   their time-slices when they have no work to do"; §3.2: "its remaining time
//!   quantum is donated to the process of the cpu-bound job"): per job, by
//!   application ([`GangBit`]); a column of the active row whose process, of a
//!   job with the gang bit, is blocked lends its CPU to another row's runnable
//!   process; the owner takes it back when it becomes runnable.
//! - **Filling fragments** (S003 §3.2, §6: "schedule fragmented cpu resources
//!   intelligently, by selecting jobs with low gangedness"): with `fill`, a
//!   free CPU fragment (an empty cell with `alternate`, or a yielded slot) goes
//!   only to processes of low-gangedness jobs, the one that received the least
//!   fragment time first, and never to a process already `fair` ahead of the
//!   least-served process of its own job (interprocess fairness, S003 §4:
//!   round-robin perturbations keep a job's processes balanced).
//! - **Gangedness** ([`LowGang`]): the low-gangedness jobs are either declared
//!   by application (`low = app/app`) or decided at run time by the online
//!   estimator ([`super::gangedness`], `low = auto`): a job is low when its
//!   class is `low`, and also while it is `unknown` (warm-up: the job is probed
//!   with fragments and interrupts, which give it the non-gang quanta its
//!   estimate needs; assumption G-S003-5).
//! - **Two-level hierarchy** (S003 §2: the global component "pre-comput[es] a
//!   round of several time-slices"): every `round_slots` slots the switch that
//!   starts a new round also costs `round`, every node idle.
//!
//! The matrix decides (which process a node's CPU runs, whether a woken process
//! takes a CPU); the engine ([`Sim`]) acts: it preempts, idles and counts.

use super::gang::Matrix;
use super::gangedness::{GangClass, GangednessParams};
use super::{PState, Sim};
use crate::os::{Pid, Stop, Wake};
pub use cosched_contract::process::{FlexParams, GangBit, LowGang, DEFAULT_EST_QUANTUM};
use cosched_des::SimTime;

/// Per-run state of the flexible options.
#[derive(Clone, Debug, Default)]
pub struct FlexState {
    /// Slot quantum of each job (by job index), set at placement.
    job_quantum: Vec<Option<SimTime>>,
    /// Declared low gangedness of each job.
    job_low: Vec<bool>,
    /// Gang bit of each job.
    job_gang_bit: Vec<bool>,
    /// Processes woken by their disk completion, with priority until they block.
    prio: Vec<Pid>,
    /// Fragment CPU time received by each process (by pid), ns.
    frag_ns: Vec<i64>,
    /// Total time the machine idled in global switches (round costs included).
    pub switch_ns: i64,
}

impl Matrix {
    /// Records the quantum and gangedness of a placed job of application `app`
    /// ([`cosched_model::program::Program::app`]).
    pub fn flex_place(&mut self, job: usize, app: &str) {
        let f = &self.params.flex;
        let q = f.quanta.iter().find(|(a, _)| a == app).map(|&(_, q)| q);
        let low = matches!(&f.low, LowGang::Declared(l) if l.iter().any(|a| a == app));
        let bit = f.gang_bit.of(app);
        let s = &mut self.flex;
        if s.job_quantum.len() <= job {
            s.job_quantum.resize(job + 1, None);
            s.job_low.resize(job + 1, false);
            s.job_gang_bit.resize(job + 1, false);
        }
        s.job_quantum[job] = q;
        s.job_low[job] = low;
        s.job_gang_bit[job] = bit;
    }

    /// Whether job `job` carries the gang bit.
    pub fn yields(&self, job: usize) -> bool {
        self.flex.job_gang_bit.get(job).copied().unwrap_or(false)
    }

    /// The estimator's class of job `job` under the `auto` parameters (the
    /// default parameters when the gangedness is declared).
    pub fn gang_class(&self, job: usize) -> GangClass {
        self.est.job(job).class(&self.est_params())
    }

    fn est_params(&self) -> GangednessParams {
        match &self.params.flex.low {
            LowGang::Auto(p) => *p,
            LowGang::Declared(_) => GangednessParams::default(),
        }
    }

    /// The slot ends at `now`: the estimator records it and notes the jobs
    /// classified for the first time.
    pub fn est_slot_end(&mut self, now: SimTime) {
        let placed = self.jobs_placed();
        self.est.slot_end(now, &placed);
        let p = self.est_params();
        for (j, _) in &placed {
            self.est.note_decided(*j, now, &p);
        }
    }

    /// The final estimate of every job (`jobs` of them).
    pub fn gangedness(&self, jobs: usize) -> Vec<super::gangedness::JobEstimate> {
        self.est.estimates(jobs, &self.est_params())
    }

    /// Whether job `job` counts as of low gangedness for `fill` and the
    /// interrupts: declared, or (with `auto`) of estimated class `low` or still
    /// `unknown`.
    pub fn is_low(&self, job: usize) -> bool {
        match &self.params.flex.low {
            LowGang::Declared(_) => self.flex.job_low.get(job).copied().unwrap_or(false),
            LowGang::Auto(_) => self.gang_class(job) != GangClass::High,
        }
    }

    /// Whether the I/O interrupts may take a CPU from a process of job `job`
    /// running in its own slot: any job without a gangedness source, else a
    /// low-gangedness one.
    fn interruptible(&self, job: usize) -> bool {
        match &self.params.flex.low {
            LowGang::Declared(l) if l.is_empty() => true,
            _ => self.is_low(job),
        }
    }

    /// The length of the active row's slot: the longest quantum of its jobs.
    pub fn slot_quantum(&self) -> SimTime {
        let Some(r) = self.active else {
            return self.params.quantum;
        };
        self.grid.cells[r]
            .iter()
            .flatten()
            .map(|&(j, _)| {
                self.flex
                    .job_quantum
                    .get(j)
                    .copied()
                    .flatten()
                    .unwrap_or(self.params.quantum)
            })
            .max()
            .unwrap_or(self.params.quantum)
    }

    /// The idle time of the switch now starting (counted in `switches`): the
    /// synchronization cost, plus the round precomputation when a round starts.
    pub fn switch_cost(&mut self) -> SimTime {
        let f = &self.params.flex;
        let round_start =
            f.round_slots <= 1 || (self.switches - 1).is_multiple_of(f.round_slots as u64);
        let cost = self.params.switch + if round_start { f.round } else { SimTime::ZERO };
        self.flex.switch_ns += cost.as_ns();
        cost
    }

    /// A disk completion woke `pid`: with `io_preempt` it gets priority on its node.
    pub fn flex_io_done(&mut self, pid: Pid) {
        if self.params.flex.io_preempt && !self.flex.prio.contains(&pid) {
            self.flex.prio.push(pid);
        }
    }

    /// `pid` blocked or finished: it loses its I/O priority.
    pub fn flex_blocked(&mut self, pid: Pid) {
        self.flex.prio.retain(|&p| p != pid);
    }

    /// Whether `pid` has I/O priority.
    pub fn has_prio(&self, pid: Pid) -> bool {
        self.flex.prio.contains(&pid)
    }

    /// `pid` of `job` held a CPU for `ran` until `now`: the estimator records it;
    /// time outside its row's slot is fragment time (returns whether it was).
    pub fn flex_ran(&mut self, pid: Pid, job: usize, ran: SimTime, now: SimTime) -> bool {
        self.est.on_held(pid, now - ran, now);
        let outside = self.active.is_some() && self.row_of(job) != self.active;
        if outside {
            let k = pid as usize;
            if self.flex.frag_ns.len() <= k {
                self.flex.frag_ns.resize(k + 1, 0);
            }
            self.flex.frag_ns[k] += ran.as_ns();
        }
        outside
    }

    /// The node whose column holds `pid`.
    fn node_of(&self, pid: Pid) -> Option<u32> {
        self.grid.cells.iter().find_map(|row| {
            row.iter()
                .position(|c| matches!(c, Some((_, p)) if *p == pid))
                .map(|n| (n / self.grid.cpus) as u32)
        })
    }

    /// The processes of job `j`.
    fn job_pids(&self, j: usize) -> impl Iterator<Item = Pid> + '_ {
        let row = self.row_of(j).map(|r| &self.grid.cells[r]);
        row.into_iter()
            .flatten()
            .filter_map(move |c| c.filter(|&(k, _)| k == j).map(|(_, p)| p))
    }

    fn frag(&self, pid: Pid) -> i64 {
        self.flex.frag_ns.get(pid as usize).copied().unwrap_or(0)
    }

    /// The CPU of `node` (index into `curs`, what its CPUs run) that the
    /// runnable `woken` should take at once, if any: with I/O priority, a CPU
    /// running a fragment (a process outside the active row's cells of the
    /// node), else one running an interruptible active-row process; as the owner
    /// of a lent column (gang bit), a CPU running a fragment. Never a process
    /// with I/O priority, never while a CPU of the node is idle.
    pub fn victim(&self, node: u32, woken: Pid, curs: &[Option<Pid>]) -> Option<usize> {
        if self.switching || curs.iter().any(Option::is_none) {
            return None;
        }
        let r = self.active?;
        let own = self.node_cells(r, node);
        let owner_job = |p: Pid| {
            own.iter()
                .flatten()
                .find(|&&(_, q)| q == p)
                .map(|&(j, _)| j)
        };
        let running: Vec<(usize, Pid)> = curs
            .iter()
            .enumerate()
            .filter_map(|(k, c)| c.map(|p| (k, p)))
            .filter(|&(_, p)| !self.has_prio(p) && p != woken)
            .collect();
        let fragment = running
            .iter()
            .find(|&&(_, p)| owner_job(p).is_none())
            .map(|&(k, _)| k);
        if self.has_prio(woken) {
            return fragment.or_else(|| {
                running
                    .iter()
                    .find(|&&(_, p)| owner_job(p).is_some_and(|j| self.interruptible(j)))
                    .map(|&(k, _)| k)
            });
        }
        match owner_job(woken) {
            Some(j) if self.yields(j) => fragment,
            _ => None,
        }
    }

    /// The flexible part of [`Matrix::choose`]: a runnable I/O-priority process
    /// on `node`, if any.
    pub fn choose_prio(&self, node: u32, runnable: &impl Fn(Pid) -> bool) -> Option<Pid> {
        self.flex
            .prio
            .iter()
            .copied()
            .find(|&p| runnable(p) && self.node_of(p) == Some(node))
    }

    /// Picks the process to run in a free fragment of `node` among `cands`
    /// (other rows' runnable processes in cyclic row order): the first one, or
    /// with `fill` the least-served low-gangedness one within the fairness bound.
    pub fn choose_fragment(&self, cands: &[(usize, Pid)]) -> Option<Pid> {
        let f = &self.params.flex;
        if !f.fill {
            return cands.first().map(|&(_, p)| p);
        }
        cands
            .iter()
            .filter(|&&(j, _)| self.is_low(j))
            .filter(|&&(j, p)| {
                f.fair == SimTime::ZERO || {
                    let least = self.job_pids(j).map(|q| self.frag(q)).min().unwrap_or(0);
                    self.frag(p) - least < f.fair.as_ns()
                }
            })
            .min_by_key(|&&(_, p)| self.frag(p))
            .map(|&(_, p)| p)
    }
}

impl Sim<'_> {
    /// Gang mode: a woken `pid` takes a CPU of its node when the matrix says so
    /// (I/O priority or the owner of a lent column). Returns whether it did.
    pub(super) fn flex_preempt(&mut self, pid: Pid, now: SimTime) -> bool {
        let node = self.procs[pid as usize].node;
        let Some(g) = &self.gang else {
            return false;
        };
        let curs: Vec<Option<Pid>> = self.nodes[node as usize]
            .cpus
            .iter()
            .map(|c| c.cur)
            .collect();
        let Some(k) = g.victim(node, pid, &curs) else {
            return false;
        };
        let (cpu, r) = (k as u32, curs[k].expect("a running victim"));
        if g.has_prio(pid) {
            self.counters.gang_io_preemptions += 1;
        }
        self.account(node, cpu, now);
        self.release_cpu(node, cpu, r, Stop::Preempted, now);
        self.procs[r as usize].state = PState::Ready;
        self.nodes[node as usize]
            .sched
            .enqueue(r, Wake::Preempted, now);
        true
    }
}
