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
//!   at once from a process of the active row and keeps priority on its node
//!   until it blocks again (a global slot switch still idles it).
//! - **Gang bit** (S003 §2: processes "may independently yield their
//!   time-slices when they have no work to do"; §3.2: "its remaining time
//!   quantum is donated to the process of the cpu-bound job"): with `gang_bit`,
//!   a node whose active-row process is blocked runs another row's runnable
//!   process; the owner takes its slot back when it becomes runnable.
//! - **Filling fragments** (S003 §3.2, §6: "schedule fragmented cpu resources
//!   intelligently, by selecting jobs with low gangedness"): with `fill`, a
//!   free CPU fragment (an empty cell with `alternate`, or a yielded slot) goes
//!   only to processes of low-gangedness jobs (the applications listed in
//!   `low`), the one that received the least fragment time first, and never to
//!   a process already `fair` ahead of the least-served process of its own job
//!   (interprocess fairness, S003 §4: round-robin perturbations keep a job's
//!   processes balanced).
//! - **Two-level hierarchy** (S003 §2: the global component "pre-comput[es] a
//!   round of several time-slices"): every `round_slots` slots the switch that
//!   starts a new round also costs `round`, every node idle.
//!
//! The matrix decides (which process a node's CPU runs, whether a woken process
//! takes a CPU); the engine ([`Sim`]) acts: it preempts, idles and counts.

use super::gang::Matrix;
use super::{PState, Sim};
use crate::os::{Pid, Stop, Wake};
use cosched_des::SimTime;

/// The flexible options of gang scheduling; the default is plain gang.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlexParams {
    /// Per-application quanta: a job whose program is `app` (its name before any
    /// `[`) gets this slot length.
    pub quanta: Vec<(String, SimTime)>,
    /// A process woken by its disk completion preempts the active row on its node.
    pub io_preempt: bool,
    /// A blocked process gives its slot to another row's runnable process.
    pub gang_bit: bool,
    /// Fragments go only to low-gangedness jobs, least-served process first.
    pub fill: bool,
    /// Applications of low gangedness (used by `fill`).
    pub low: Vec<String>,
    /// Interprocess fairness bound of `fill` (zero: no bound).
    pub fair: SimTime,
    /// Slots per precomputed round (0 or 1: a round per slot).
    pub round_slots: u32,
    /// Cost of the global round precomputation, added to the switch that
    /// starts each round.
    pub round: SimTime,
}

/// The application of a program name: the text before any `[`.
pub fn app_of(program: &str) -> &str {
    program.split('[').next().unwrap_or(program)
}

/// Per-run state of the flexible options.
#[derive(Clone, Debug, Default)]
pub struct FlexState {
    /// Slot quantum of each job (by job index), set at placement.
    job_quantum: Vec<Option<SimTime>>,
    /// Low gangedness of each job.
    job_low: Vec<bool>,
    /// Processes woken by their disk completion, with priority until they block.
    prio: Vec<Pid>,
    /// Fragment CPU time received by each process (by pid), ns.
    frag_ns: Vec<i64>,
    /// Total time the machine idled in global switches (round costs included).
    pub switch_ns: i64,
}

impl Matrix {
    /// Records the quantum and gangedness of a placed job.
    pub fn flex_place(&mut self, job: usize, program: &str) {
        let app = app_of(program);
        let f = &self.params.flex;
        let q = f.quanta.iter().find(|(a, _)| a == app).map(|&(_, q)| q);
        let low = f.low.iter().any(|a| a == app);
        let s = &mut self.flex;
        if s.job_quantum.len() <= job {
            s.job_quantum.resize(job + 1, None);
            s.job_low.resize(job + 1, false);
        }
        s.job_quantum[job] = q;
        s.job_low[job] = low;
    }

    /// The length of the active row's slot: the longest quantum of its jobs.
    pub fn slot_quantum(&self) -> SimTime {
        let Some(r) = self.active else {
            return self.params.quantum;
        };
        self.cells[r]
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

    /// `pid` of `job` ran `ran`: time outside its row's slot is fragment time
    /// (returns whether it was).
    pub fn flex_ran(&mut self, pid: Pid, job: usize, ran: SimTime) -> bool {
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
        self.cells.iter().find_map(|row| {
            row.iter()
                .position(|c| matches!(c, Some((_, p)) if *p == pid))
                .map(|n| n as u32)
        })
    }

    /// The processes of job `j`.
    fn job_pids(&self, j: usize) -> impl Iterator<Item = Pid> + '_ {
        let row = self.row_of(j).map(|r| &self.cells[r]);
        row.into_iter()
            .flatten()
            .filter_map(move |c| c.filter(|&(k, _)| k == j).map(|(_, p)| p))
    }

    fn frag(&self, pid: Pid) -> i64 {
        self.flex.frag_ns.get(pid as usize).copied().unwrap_or(0)
    }

    /// Whether the runnable `woken` should take the CPU from `cur` on `node` at once.
    pub fn takes_cpu(&self, node: u32, woken: Pid, cur: Pid) -> bool {
        if self.switching || self.active.is_none() || self.has_prio(cur) {
            return false;
        }
        if self.has_prio(woken) {
            return true;
        }
        let own = self.cells[self.active.expect("active")][node as usize].map(|(_, p)| p);
        self.params.flex.gang_bit && own == Some(woken) && cur != woken
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
            .filter(|&&(j, _)| self.flex.job_low.get(j).copied().unwrap_or(false))
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
    /// Gang mode: a woken `pid` takes its node's CPU when the matrix says so
    /// (I/O priority or the owner of a yielded slot). Returns whether it did.
    pub(super) fn flex_preempt(&mut self, pid: Pid, now: SimTime) -> bool {
        let node = self.procs[pid as usize].node;
        let Some(g) = &self.gang else {
            return false;
        };
        let n = &self.nodes[node as usize];
        if n.cpus.iter().any(|c| c.cur.is_none()) {
            return false;
        }
        let victim = n.cpus.iter().enumerate().find_map(|(k, c)| {
            let r = c.cur.expect("all busy");
            g.takes_cpu(node, pid, r).then_some((k as u32, r))
        });
        let Some((cpu, r)) = victim else {
            return false;
        };
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
