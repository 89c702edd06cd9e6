//! Gang scheduling at process level (SCore-D like): the Ousterhout matrix and
//! the slot dispatcher that replaces the native scheduler's choice on each node.
//!
//! The matrix has `rows` time slots (rows) and one column per CPU of every node
//! (node-major: node n's CPUs are columns n·C .. n·C + C - 1). A job of P
//! processes with k ranks per node occupies P cells of one row, k columns on
//! each of its P / k nodes; the number of rows is the multiprogramming level. A
//! new job takes the first row with enough eligible nodes that have k free
//! columns there (PACKING: the first run of consecutive eligible nodes, else
//! the lowest-numbered; NO PACKING: eligible nodes of that row drawn at
//! random), otherwise it waits (FCFS: later jobs wait behind it).
//!
//! Time is cut into slots: the active row runs for `quantum`; then every CPU of
//! the machine is taken from its process and the whole machine stays idle for
//! `switch` (the global synchronization), after which the next non-empty row
//! (cyclically) becomes active. Each node then pays its own context switch when
//! its CPU resumes a different process than it last ran. Inside a slot a node's
//! CPUs run only the active row's processes on that node (up to one per
//! column, so a dual-CPU node runs two); with `alternate` an empty column of
//! the active row lends its CPU to another row's process on the node (first
//! runnable one, rows in cyclic order after the active one).
//! When the active row empties (its jobs finished) the switch happens at once;
//! when the matrix is empty the cycle stops and restarts, without a switch
//! cost, at the next admission. Waiting processes spin inside their slot
//! (the node policy decides the wait mode; NLS spins).
//!
//! Policies decide, the engine acts: the matrix here only decides (placement,
//! next row, which process a node's CPU runs); the engine preempts, idles and
//! dispatches. [`Dispatcher`] is the per-node [`NativeScheduler`] of gang mode:
//! it keeps the runnable set and runs exactly the process the engine names.

use super::flexgang::FlexState;
use super::gangedness::Estimator;
use crate::os::{NativeScheduler, Pick, Pid, Stop, Wake};
pub use cosched_contract::gang::Ousterhout;
pub use cosched_contract::process::GangParams;
use cosched_des::SimTime;

/// The Ousterhout matrix and the slot state.
#[derive(Clone, Debug)]
pub struct Matrix {
    pub params: GangParams,
    /// The matrix's cells (`cosched_contract::gang`): the job and pid placed
    /// in each.
    pub(super) grid: Ousterhout<(usize, Pid)>,
    /// Row of each job (by job index), once placed.
    row_of: Vec<Option<usize>>,
    /// The active row, `None` while the cycle is stopped.
    pub active: Option<usize>,
    /// A global switch is in progress (every node idle).
    pub switching: bool,
    /// Generation of the pending slot event (stale events are ignored).
    pub gen: u64,
    /// Slot switches performed (each costing `switch` on every node).
    pub switches: u64,
    /// State of the flexible options.
    pub flex: FlexState,
    /// The online gangedness estimator ([`super::gangedness`]).
    pub est: Estimator,
}

impl Matrix {
    /// A matrix for `nodes` nodes of `cpus` CPUs each and `jobs` jobs.
    pub fn new(params: GangParams, nodes: u32, cpus: u32, jobs: usize) -> Self {
        let rows = params.rows as usize;
        let est = Estimator::new(params.flex.est_quantum);
        Self {
            params,
            grid: Ousterhout::new(rows, nodes, cpus),
            row_of: vec![None; jobs],
            active: None,
            switching: false,
            gen: 0,
            switches: 0,
            flex: FlexState::default(),
            est,
        }
    }

    /// The cells of `node` in `row` (one per CPU).
    pub(super) fn node_cells(&self, row: usize, node: u32) -> &[Option<(usize, Pid)>] {
        self.grid.node_cells(row, node)
    }

    /// The first row with at least `size` nodes accepted by `ok` that have
    /// `per_node` free columns there, and those eligible nodes (in node order).
    pub fn find_row(
        &self,
        size: usize,
        per_node: usize,
        ok: impl Fn(u32) -> bool,
    ) -> Option<(usize, Vec<u32>)> {
        self.grid.find_row(size, per_node, ok)
    }

    /// Places job `job`'s processes (`pids[k]` on `nodes[k]`, one node per rank)
    /// in `row`, each rank in the first free column of its node.
    pub fn place(&mut self, job: usize, row: usize, nodes: &[u32], first_pid: Pid) {
        self.grid.place(row, nodes, |k| (job, first_pid + k as Pid));
        self.row_of[job] = Some(row);
    }

    /// Frees the cells of a finished job.
    pub fn free(&mut self, job: usize) {
        if let Some(r) = self.row_of[job] {
            self.grid.clear(r, |&(j, _)| j == job);
        }
    }

    /// The first job and pid in `row` on `node` (used by the perturbation
    /// harness, whose targets run one rank per node).
    pub fn cell(&self, row: usize, node: u32) -> Option<(usize, Pid)> {
        self.grid.cells.get(row)?;
        self.node_cells(row, node).iter().copied().flatten().next()
    }

    /// The jobs in the matrix with their pids (in column order).
    pub fn jobs_placed(&self) -> Vec<(usize, Vec<Pid>)> {
        let mut out: Vec<(usize, Vec<Pid>)> = Vec::new();
        for row in &self.grid.cells {
            for &(j, p) in row.iter().flatten() {
                match out.iter_mut().find(|(k, _)| *k == j) {
                    Some((_, v)) => v.push(p),
                    None => out.push((j, vec![p])),
                }
            }
        }
        for (_, v) in &mut out {
            v.sort_unstable();
        }
        out
    }

    pub fn row_of(&self, job: usize) -> Option<usize> {
        self.row_of[job]
    }

    /// Whether the active row has no process left.
    pub fn active_empty(&self) -> bool {
        self.active.is_none_or(|r| self.grid.row_empty(r))
    }

    /// The next non-empty row after the active one, cyclically (the active row
    /// itself last); `None` when the matrix is empty.
    pub fn next_row(&self) -> Option<usize> {
        self.grid.next_row(self.active)
    }

    /// The process an idle CPU of `node` should run now, among those `runnable`
    /// says may run, given what the node's CPUs run (`curs`): a process with I/O
    /// priority; else a runnable process of the active row on the node; else, if
    /// a column of the active row lends its CPU and fewer CPUs than such columns
    /// already run lent time, a fragment for another row's process (with the
    /// flexible options' choice). A column lends its CPU when it is empty (with
    /// `alternate`) or its process, of a job with the gang bit, is neither
    /// runnable nor running. `None` during a switch or when the cycle stops.
    pub fn choose(
        &self,
        node: u32,
        curs: &[Option<Pid>],
        runnable: impl Fn(Pid) -> bool,
    ) -> Option<Pid> {
        if self.switching {
            return None;
        }
        let r = self.active?;
        // Flexible gang: a process with I/O priority first.
        if let Some(p) = self.choose_prio(node, &runnable) {
            return Some(p);
        }
        let own = self.node_cells(r, node);
        if let Some(&(_, p)) = own.iter().flatten().find(|&&(_, p)| runnable(p)) {
            return Some(p);
        }
        let lending = own
            .iter()
            .filter(|c| match c {
                None => self.params.alternate,
                Some((j, p)) => self.yields(*j) && !curs.contains(&Some(*p)),
            })
            .count();
        let lent = curs
            .iter()
            .flatten()
            .filter(|&&p| !self.has_prio(p) && !own.iter().flatten().any(|&(_, q)| q == p))
            .count();
        if lent >= lending {
            return None;
        }
        let rows = self.grid.rows();
        let cands: Vec<(usize, Pid)> = (1..rows)
            .map(|k| (r + k) % rows)
            .flat_map(|q| self.node_cells(q, node).iter().flatten().copied())
            .filter(|&(_, p)| runnable(p))
            .collect();
        self.choose_fragment(&cands)
    }
}

/// The per-node scheduler of gang mode: it keeps the runnable set and runs the
/// process it is told to (the `hint` of [`NativeScheduler::pick`], which in gang
/// mode is the slot dispatcher's decision, not a recommendation). A process runs
/// until the engine's slot switch takes the CPU back (the slice is unbounded);
/// a wake-up never preempts.
#[derive(Default)]
pub struct Dispatcher {
    runnable: Vec<Pid>,
}

/// A slice longer than any run: the slot switch ends a process's turn.
const UNBOUNDED: SimTime = SimTime(1 << 60);

impl NativeScheduler for Dispatcher {
    fn name(&self) -> String {
        "gang-dispatcher".into()
    }
    fn add(&mut self, _p: Pid, _now: SimTime) {}
    fn exit(&mut self, p: Pid) {
        self.runnable.retain(|&q| q != p);
    }
    fn enqueue(&mut self, p: Pid, _how: Wake, _now: SimTime) {
        self.runnable.push(p);
    }
    fn remove(&mut self, p: Pid, _now: SimTime) {
        self.runnable.retain(|&q| q != p);
    }
    fn pick(&mut self, _now: SimTime, hint: Option<Pid>) -> Option<Pick> {
        let p = hint?;
        let k = self.runnable.iter().position(|&q| q == p)?;
        self.runnable.remove(k);
        Some(Pick {
            pid: p,
            slice: UNBOUNDED,
            followed_hint: false,
        })
    }
    fn stop(&mut self, _p: Pid, _ran: SimTime, _why: Stop, _now: SimTime) {}
    fn should_preempt(&self, _w: Pid, _r: Pid, _ran: SimTime) -> bool {
        false
    }
    fn boost(&mut self, _p: Pid, _now: SimTime) {}
    fn unboost(&mut self, _p: Pid) {}
    fn runnable(&self) -> usize {
        self.runnable.len()
    }
    fn dump(&self) -> String {
        format!("gang-dispatcher runnable={:?}", self.runnable)
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    fn params(alternate: bool) -> GangParams {
        GangParams {
            quantum: SimTime::from_ms(100),
            rows: 3,
            switch: SimTime::from_ms(1),
            alternate,
            flex: super::super::flexgang::FlexParams::default(),
        }
    }

    fn choose(m: &Matrix, node: u32, ok: impl Fn(Pid) -> bool) -> Option<Pid> {
        m.choose(node, &[None], ok)
    }

    #[test]
    fn first_row_with_room_and_cyclic_next_row() {
        let mut m = Matrix::new(params(false), 4, 1, 4);
        let (r, free) = m.find_row(3, 1, |_| true).unwrap();
        assert_eq!((r, free.len()), (0, 4));
        m.place(0, 0, &[0, 1, 2], 0);
        // Two more processes do not fit in row 0 (one free cell): row 1.
        assert_eq!(m.find_row(2, 1, |_| true).unwrap().0, 1);
        // One fits in row 0 on node 3.
        assert_eq!(m.find_row(1, 1, |_| true).unwrap(), (0, vec![3]));
        m.place(1, 2, &[0, 1], 3);
        assert_eq!(m.next_row(), Some(0));
        m.active = Some(0);
        assert_eq!(m.next_row(), Some(2), "empty row 1 is skipped");
        m.active = Some(2);
        assert_eq!(m.next_row(), Some(0));
        m.free(0);
        assert_eq!(m.next_row(), Some(2), "only row 2 is left");
        assert_eq!(choose(&m, 0, |_| true), Some(3));
        assert_eq!(choose(&m, 3, |_| true), None);
        m.switching = true;
        assert_eq!(choose(&m, 0, |_| true), None);
    }

    #[test]
    fn alternate_runs_another_rows_process_only_on_empty_cells() {
        let mut m = Matrix::new(params(true), 2, 1, 2);
        m.place(0, 0, &[0], 0);
        m.place(1, 1, &[0, 1], 1);
        m.active = Some(0);
        assert_eq!(choose(&m, 0, |_| true), Some(0), "the active row first");
        assert_eq!(
            choose(&m, 1, |_| true),
            Some(2),
            "node 1 has no row-0 process"
        );
        assert_eq!(choose(&m, 1, |_| false), None, "only if runnable");
    }

    #[test]
    fn dual_cpu_nodes_have_two_columns_and_run_two_processes_of_a_row() {
        let mut m = Matrix::new(params(false), 2, 2, 3);
        // A 4-rank job at 2 ranks per node fills row 0 of both nodes.
        let (r, nodes) = m.find_row(2, 2, |_| true).unwrap();
        assert_eq!((r, nodes.clone()), (0, vec![0, 1]));
        m.place(0, 0, &[0, 0, 1, 1], 0);
        // Two single-rank jobs: no room in row 0; both fit row 1 on node 0.
        assert_eq!(m.find_row(1, 1, |_| true).unwrap(), (1, vec![0, 1]));
        m.place(1, 1, &[0], 4);
        assert_eq!(m.find_row(1, 1, |_| true).unwrap(), (1, vec![0, 1]));
        m.place(2, 1, &[0], 5);
        assert_eq!(m.node_cells(1, 0), &[Some((1, 4)), Some((2, 5))]);
        assert_eq!(m.find_row(1, 2, |_| true).unwrap(), (1, vec![1]));
        m.active = Some(0);
        // Node 0's two CPUs run ranks 0 and 1 of job 0.
        assert_eq!(m.choose(0, &[None, None], |_| true), Some(0));
        assert_eq!(m.choose(0, &[Some(0), None], |p| p != 0), Some(1));
        // Without the gang bit or alternate, a blocked rank's CPU idles.
        assert_eq!(m.choose(0, &[Some(0), None], |p| p > 1), None);
        m.active = Some(1);
        assert_eq!(m.choose(0, &[Some(4), None], |p| p != 4), Some(5));
        assert_eq!(
            m.jobs_placed(),
            vec![(0, vec![0, 1, 2, 3]), (1, vec![4]), (2, vec![5])]
        );
    }
}
