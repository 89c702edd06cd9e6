//! Flexible gang scheduling (seed 003 §2, §3, §6): the options of the gang
//! policy ([`super::gang::Gang`]) that tailor the quantum, the priority and the
//! extent of ganging to each job. The defaults ([`FlexParams::default`]) give
//! plain gang scheduling.
//!
//! Algorithm:
//! - **Per-job quanta** (S003 §3.2: "the quantum lengths for the two jobs are
//!   not required to be the same"): a job of application `app` gets the
//!   quantum listed for `app` in `quanta`, other jobs the matrix's `quantum`;
//!   a row's slot lasts the longest quantum of its jobs.
//! - **I/O interrupts** (S003 §3.1, §3.2: "higher priority jobs can interrupt
//!   lower priority jobs in order to keep disk utilization high"): with
//!   `io_preempt`, a process woken by its disk completion takes its node's CPU
//!   at once from a process of its node and keeps priority on its node until
//!   it blocks again (a global slot switch still idles it). The victim is a
//!   process running outside its own slot (a fragment) if there is one, else a
//!   process of the active row; when a gangedness source is configured
//!   (`low`), only one of a low-gangedness job (S003 §3.2: interrupting a job
//!   "will only be beneficial ... if that job is amenable to scheduling skew";
//!   §7: perturbation-friendly jobs are scheduled with loose coordination).
//! - **Gang bit** (S003 §2: "each job is marked with a gang bit that indicates
//!   to the scheduler whether constituent processes may independently yield
//!   their time-slices when they have no work to do"; §3.2: "its remaining
//!   time quantum is donated to the process of the cpu-bound job"): per job, by
//!   application ([`GangBit`]); a column of the active row whose process, of a
//!   job with the gang bit, is blocked lends its CPU to another row's runnable
//!   process; the owner takes it back when it becomes runnable.
//! - **Filling fragments** (S003 §3.2, §6: "schedule fragmented cpu resources
//!   intelligently, by selecting jobs with low gangedness"): with `fill`, a
//!   free CPU fragment (an empty cell with `alternate`, or a yielded slot)
//!   goes only to processes of low-gangedness jobs, the one that received the
//!   least fragment time first, and never to a process already `fair` ahead of
//!   the least-served process of its own job (interprocess fairness, S003 §4).
//! - **Gangedness** ([`LowGang`]): the low-gangedness jobs are declared by
//!   application (`low = app/app`) or decided at run time by the mechanism's
//!   online estimator (`low = auto`, whose class reaches the policy through
//!   the measurement op `SlotPolicy::on_gangedness`): a job is low when its
//!   class is `low`, and also
//!   while it is `unknown` (warm-up: the job is probed with fragments and
//!   interrupts, which give it the non-gang quanta its estimate needs;
//!   assumption G-S003-5).
//! - **Two-level hierarchy** (S003 §2: the global component "pre-comput[es] a
//!   round of several time-slices"): every `round_slots` switches the switch
//!   that starts a new round also costs `round`, every node idle. A slot that
//!   follows its own row without a switch (one occupied row) costs nothing and
//!   does not count towards a round: a round of one row has nothing to
//!   precompute or distribute.
//!
//! Parameters: [`FlexParams`], parsed with the gang scheme's policy string
//! (`super::gang::build`, which documents each one's source).

use cosched_contract::node::Pid;
use cosched_contract::process::GangClass;
pub use cosched_contract::process::{FlexParams, GangBit, LowGang};
use cosched_contract::slots::SlotView;
use cosched_des::SimTime;
use cosched_rules::gang::Ousterhout;

/// The matrix's cells: the job and process placed in each.
pub type Grid = Ousterhout<(usize, Pid)>;

/// The flexible options and their per-run state.
#[derive(Clone, Debug, Default)]
pub struct Flex {
    pub params: FlexParams,
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
    /// The estimator's class of each job (by job index; `Unknown` until told).
    class: Vec<GangClass>,
}

impl Flex {
    pub fn new(params: FlexParams) -> Self {
        Self {
            params,
            ..Default::default()
        }
    }

    /// Records the quantum, gangedness and gang bit of job `job` of
    /// application `app`.
    pub fn place(&mut self, job: usize, app: &str) {
        let f = &self.params;
        let q = f.quanta.iter().find(|(a, _)| a == app).map(|&(_, q)| q);
        let low = matches!(&f.low, LowGang::Declared(l) if l.iter().any(|a| a == app));
        let bit = f.gang_bit.of(app);
        if self.job_quantum.len() <= job {
            self.job_quantum.resize(job + 1, None);
            self.job_low.resize(job + 1, false);
            self.job_gang_bit.resize(job + 1, false);
        }
        self.job_quantum[job] = q;
        self.job_low[job] = low;
        self.job_gang_bit[job] = bit;
    }

    /// The slot quantum of job `job` (`default`: the matrix's).
    pub fn quantum(&self, job: usize, default: SimTime) -> SimTime {
        self.job_quantum
            .get(job)
            .copied()
            .flatten()
            .unwrap_or(default)
    }

    /// Whether job `job` carries the gang bit.
    pub fn yields(&self, job: usize) -> bool {
        self.job_gang_bit.get(job).copied().unwrap_or(false)
    }

    /// The estimator classified job `job` as `class`.
    pub fn set_class(&mut self, job: usize, class: GangClass) {
        if self.class.len() <= job {
            self.class.resize(job + 1, GangClass::Unknown);
        }
        self.class[job] = class;
    }

    /// Whether job `job` counts as of low gangedness for `fill` and the
    /// interrupts: declared, or (with `auto`) of estimated class `low` or still
    /// `unknown`.
    pub fn is_low(&self, job: usize) -> bool {
        match &self.params.low {
            LowGang::Declared(_) => self.job_low.get(job).copied().unwrap_or(false),
            LowGang::Auto(_) => self.class.get(job) != Some(&GangClass::High),
        }
    }

    /// Whether the I/O interrupts may take a CPU from a process of job `job`
    /// running in its own slot: any job without a gangedness source, else a
    /// low-gangedness one.
    fn interruptible(&self, job: usize) -> bool {
        match &self.params.low {
            LowGang::Declared(l) if l.is_empty() => true,
            _ => self.is_low(job),
        }
    }

    /// The round precomputation cost added to switch number `switches` (from
    /// 1): `round` when that switch starts a round.
    pub fn round_cost(&self, switches: u64) -> SimTime {
        let f = &self.params;
        let round_start = f.round_slots <= 1 || (switches - 1).is_multiple_of(f.round_slots as u64);
        if round_start {
            f.round
        } else {
            SimTime::ZERO
        }
    }

    /// A disk completion woke `pid`: with `io_preempt` it gets priority on its node.
    pub fn io_done(&mut self, pid: Pid) {
        if self.params.io_preempt && !self.prio.contains(&pid) {
            self.prio.push(pid);
        }
    }

    /// `pid` blocked or finished: it loses its I/O priority.
    pub fn blocked(&mut self, pid: Pid) {
        self.prio.retain(|&p| p != pid);
    }

    /// Whether `pid` has I/O priority.
    pub fn has_prio(&self, pid: Pid) -> bool {
        self.prio.contains(&pid)
    }

    /// `pid` ran `ran` outside its row's slot (fragment time).
    pub fn add_fragment(&mut self, pid: Pid, ran: SimTime) {
        let k = pid as usize;
        if self.frag_ns.len() <= k {
            self.frag_ns.resize(k + 1, 0);
        }
        self.frag_ns[k] += ran.as_ns();
    }

    fn frag(&self, pid: Pid) -> i64 {
        self.frag_ns.get(pid as usize).copied().unwrap_or(0)
    }

    /// A runnable I/O-priority process on `node`, if any.
    pub fn choose_prio(&self, grid: &Grid, node: u32, v: &dyn SlotView) -> Option<Pid> {
        self.prio
            .iter()
            .copied()
            .find(|&p| v.runnable(p) && node_of(grid, p) == Some(node))
    }

    /// Picks the process to run in a free fragment among `cands` (other rows'
    /// runnable processes in cyclic row order): the first one, or with `fill`
    /// the least-served low-gangedness one within the fairness bound. `pids(j)`
    /// lists job `j`'s processes.
    pub fn choose_fragment<I: Iterator<Item = Pid>>(
        &self,
        cands: &[(usize, Pid)],
        pids: impl Fn(usize) -> I,
    ) -> Option<Pid> {
        let f = &self.params;
        if !f.fill {
            return cands.first().map(|&(_, p)| p);
        }
        cands
            .iter()
            .filter(|&&(j, _)| self.is_low(j))
            .filter(|&&(j, p)| {
                f.fair == SimTime::ZERO || {
                    let least = pids(j).map(|q| self.frag(q)).min().unwrap_or(0);
                    self.frag(p) - least < f.fair.as_ns()
                }
            })
            .min_by_key(|&&(_, p)| self.frag(p))
            .map(|&(_, p)| p)
    }

    /// The CPU of `node` (index into `curs`, what its CPUs run) that the
    /// runnable `woken` takes at once, if any, given the active row's cells of
    /// the node (`own`): with I/O priority, a CPU running a fragment (a process
    /// outside `own`), else one running an interruptible active-row process;
    /// as the owner of a lent column (gang bit), a CPU running a fragment.
    /// Never a process with I/O priority, never while a CPU of the node is idle.
    pub fn victim(
        &self,
        own: &[Option<(usize, Pid)>],
        woken: Pid,
        curs: &[Option<Pid>],
    ) -> Option<usize> {
        if curs.iter().any(Option::is_none) {
            return None;
        }
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
}

/// The node whose column holds `pid`.
fn node_of(grid: &Grid, pid: Pid) -> Option<u32> {
    grid.cells.iter().find_map(|row| {
        row.iter()
            .position(|c| matches!(c, Some((_, p)) if *p == pid))
            .map(|n| (n / grid.cpus) as u32)
    })
}
