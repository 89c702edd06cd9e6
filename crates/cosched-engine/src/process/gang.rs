//! Gang scheduling at process level (SCore-D like): the Ousterhout matrix and
//! the slot dispatcher that replaces the native scheduler's choice on each node.
//!
//! The matrix has `rows` time slots (rows) and one column per node. A job of P
//! processes occupies P cells of one row, on P distinct nodes; the number of
//! rows is the multiprogramming level. A new job takes the first row with P
//! eligible free cells (PACKING: the first run of consecutive eligible nodes,
//! else the lowest-numbered; NO PACKING: eligible nodes of that row drawn at
//! random), otherwise it waits (FCFS: later jobs wait behind it).
//!
//! Time is cut into slots: the active row runs for `quantum`; then every CPU of
//! the machine is taken from its process and the whole machine stays idle for
//! `switch` (the global synchronization), after which the next non-empty row
//! (cyclically) becomes active. Each node then pays its own context switch when
//! its CPU resumes a different process than it last ran. Inside a slot a node's
//! CPU runs only the process of the active row on that node; with `alternate`
//! a node that has no process in the active row may run one of another row's
//! processes (first runnable one, rows in cyclic order after the active one).
//! When the active row empties (its jobs finished) the switch happens at once;
//! when the matrix is empty the cycle stops and restarts, without a switch
//! cost, at the next admission. Waiting processes spin inside their slot
//! (the node policy decides the wait mode; NLS spins).
//!
//! Policies decide, the engine acts: the matrix here only decides (placement,
//! next row, which process a node's CPU runs); the engine preempts, idles and
//! dispatches. [`Dispatcher`] is the per-node [`NativeScheduler`] of gang mode:
//! it keeps the runnable set and runs exactly the process the engine names.

use super::flexgang::{FlexParams, FlexState};
use crate::os::{NativeScheduler, Pick, Pid, Stop, Wake};
use cosched_des::SimTime;

/// Parameters of gang scheduling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GangParams {
    /// Length of a time slot.
    pub quantum: SimTime,
    /// Rows of the matrix (the multiprogramming level).
    pub rows: u32,
    /// Global synchronization cost of a slot switch: every node idle this long.
    pub switch: SimTime,
    /// A node with no process in the active row may run another row's process.
    pub alternate: bool,
    /// Flexible gang scheduling options (seed 003; [`super::flexgang`]).
    pub flex: FlexParams,
}

/// The Ousterhout matrix and the slot state.
#[derive(Clone, Debug)]
pub struct Matrix {
    pub params: GangParams,
    /// `cells[row][node]`: the job and pid placed there.
    pub(super) cells: Vec<Vec<Option<(usize, Pid)>>>,
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
}

impl Matrix {
    pub fn new(params: GangParams, nodes: u32, jobs: usize) -> Self {
        let rows = params.rows as usize;
        Self {
            params,
            cells: vec![vec![None; nodes as usize]; rows],
            row_of: vec![None; jobs],
            active: None,
            switching: false,
            gen: 0,
            switches: 0,
            flex: FlexState::default(),
        }
    }

    /// The first row with at least `size` free cells among nodes accepted by
    /// `ok`, and those eligible nodes (in node order).
    pub fn find_row(&self, size: usize, ok: impl Fn(u32) -> bool) -> Option<(usize, Vec<u32>)> {
        self.cells.iter().enumerate().find_map(|(r, row)| {
            let free: Vec<u32> = (0..row.len() as u32)
                .filter(|&n| row[n as usize].is_none() && ok(n))
                .collect();
            (free.len() >= size).then_some((r, free))
        })
    }

    /// Places job `job`'s processes (`pids[k]` on `nodes[k]`) in `row`.
    pub fn place(&mut self, job: usize, row: usize, nodes: &[u32], first_pid: Pid) {
        for (k, &n) in nodes.iter().enumerate() {
            debug_assert!(self.cells[row][n as usize].is_none());
            self.cells[row][n as usize] = Some((job, first_pid + k as Pid));
        }
        self.row_of[job] = Some(row);
    }

    /// Frees the cells of a finished job.
    pub fn free(&mut self, job: usize) {
        if let Some(r) = self.row_of[job] {
            for c in &mut self.cells[r] {
                if matches!(c, Some((j, _)) if *j == job) {
                    *c = None;
                }
            }
        }
    }

    /// The job and pid in `row` on `node` (used by the perturbation harness).
    pub fn cell(&self, row: usize, node: u32) -> Option<(usize, Pid)> {
        self.cells.get(row)?.get(node as usize).copied().flatten()
    }

    pub fn row_of(&self, job: usize) -> Option<usize> {
        self.row_of[job]
    }

    fn row_empty(&self, r: usize) -> bool {
        self.cells[r].iter().all(Option::is_none)
    }

    /// Whether the active row has no process left.
    pub fn active_empty(&self) -> bool {
        self.active.is_none_or(|r| self.row_empty(r))
    }

    /// The next non-empty row after the active one, cyclically (the active row
    /// itself last); `None` when the matrix is empty.
    pub fn next_row(&self) -> Option<usize> {
        let rows = self.cells.len();
        let start = self.active.map_or(0, |r| r + 1);
        (0..rows)
            .map(|k| (start + k) % rows)
            .find(|&r| !self.row_empty(r))
    }

    /// The process `node`'s CPU should run now, among those `runnable` says may
    /// run: the active row's process on that node; with alternate scheduling and
    /// no process of the active row there, the first runnable process of the
    /// other rows in cyclic order. `None` during a switch or when the cycle stops.
    pub fn choose(&self, node: u32, runnable: impl Fn(Pid) -> bool) -> Option<Pid> {
        if self.switching {
            return None;
        }
        let r = self.active?;
        // Flexible gang: a process with I/O priority first.
        if let Some(p) = self.choose_prio(node, &runnable) {
            return Some(p);
        }
        match self.cells[r][node as usize] {
            // With the gang bit, a blocked owner gives its slot away.
            Some((_, pid)) if !self.params.flex.gang_bit || runnable(pid) => {
                return Some(pid);
            }
            Some(_) => {}
            None if !self.params.alternate => return None,
            None => {}
        }
        let rows = self.cells.len();
        let cands: Vec<(usize, Pid)> = (1..rows)
            .map(|k| (r + k) % rows)
            .filter_map(|q| self.cells[q][node as usize])
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
            flex: FlexParams::default(),
        }
    }

    #[test]
    fn first_row_with_room_and_cyclic_next_row() {
        let mut m = Matrix::new(params(false), 4, 4);
        let (r, free) = m.find_row(3, |_| true).unwrap();
        assert_eq!((r, free.len()), (0, 4));
        m.place(0, 0, &[0, 1, 2], 0);
        // Two more processes do not fit in row 0 (one free cell): row 1.
        assert_eq!(m.find_row(2, |_| true).unwrap().0, 1);
        // One fits in row 0 on node 3.
        assert_eq!(m.find_row(1, |_| true).unwrap(), (0, vec![3]));
        m.place(1, 2, &[0, 1], 3);
        assert_eq!(m.next_row(), Some(0));
        m.active = Some(0);
        assert_eq!(m.next_row(), Some(2), "empty row 1 is skipped");
        m.active = Some(2);
        assert_eq!(m.next_row(), Some(0));
        m.free(0);
        assert_eq!(m.next_row(), Some(2), "only row 2 is left");
        assert_eq!(m.choose(0, |_| true), Some(3));
        assert_eq!(m.choose(3, |_| true), None);
        m.switching = true;
        assert_eq!(m.choose(0, |_| true), None);
    }

    #[test]
    fn alternate_runs_another_rows_process_only_on_empty_cells() {
        let mut m = Matrix::new(params(true), 2, 2);
        m.place(0, 0, &[0], 0);
        m.place(1, 1, &[0, 1], 1);
        m.active = Some(0);
        assert_eq!(m.choose(0, |_| true), Some(0), "the active row first");
        assert_eq!(
            m.choose(1, |_| true),
            Some(2),
            "node 1 has no row-0 process"
        );
        assert_eq!(m.choose(1, |_| false), None, "only if runnable");
    }
}
