//! The Ousterhout matrix of gang scheduling (seed 000 §2.2; seed 001 §5.2), as
//! one geometry shared by every mechanism that gang-schedules: the simulator
//! engine (`cosched_engine::process::gang`), the single-machine controller of
//! `cosched run` and the gang coordinator of real execution under Slurm.
//!
//! Rows are time slots, columns are CPUs, node-major (node n's CPUs are columns
//! n·C .. n·C + C - 1). Each cell holds what the mechanism places there (a
//! job, a job and a process id, ...). The rules:
//! - **placement**: a job of `size` nodes with `per_node` processes on each takes
//!   the first row with at least `size` eligible nodes that have `per_node` free
//!   columns there ([`Ousterhout::find_row`]; which of those nodes is the
//!   caller's choice: packing, random, or the nodes a resource manager already
//!   allocated);
//! - **cycle**: after the active row, the next non-empty row runs, cyclically,
//!   the active row itself last ([`Ousterhout::next_row`]); empty rows are
//!   skipped.

/// An Ousterhout matrix of `rows` time slots over nodes of `cpus` columns each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ousterhout<C> {
    /// `cells[row][node * cpus + k]`.
    pub cells: Vec<Vec<Option<C>>>,
    /// Columns (CPUs) per node.
    pub cpus: usize,
}

impl<C: Copy> Ousterhout<C> {
    /// An empty matrix of `rows` rows over `nodes` nodes of `cpus` columns.
    pub fn new(rows: usize, nodes: u32, cpus: u32) -> Self {
        Self {
            cells: vec![vec![None; (nodes * cpus) as usize]; rows],
            cpus: cpus.max(1) as usize,
        }
    }

    pub fn rows(&self) -> usize {
        self.cells.len()
    }

    pub fn nodes(&self) -> u32 {
        (self.cells.first().map_or(0, Vec::len) / self.cpus) as u32
    }

    /// Adds empty columns until the matrix has `nodes` nodes.
    pub fn grow(&mut self, nodes: u32) {
        let want = nodes as usize * self.cpus;
        for row in &mut self.cells {
            if row.len() < want {
                row.resize(want, None);
            }
        }
    }

    /// The cells of `node` in `row` (one per CPU).
    pub fn node_cells(&self, row: usize, node: u32) -> &[Option<C>] {
        let c = self.cpus;
        &self.cells[row][node as usize * c..(node as usize + 1) * c]
    }

    /// The first row with at least `size` nodes accepted by `ok` that have
    /// `per_node` free columns there, and those eligible nodes (in node order).
    pub fn find_row(
        &self,
        size: usize,
        per_node: usize,
        ok: impl Fn(u32) -> bool,
    ) -> Option<(usize, Vec<u32>)> {
        let nodes = self.nodes();
        (0..self.cells.len()).find_map(|r| {
            let free: Vec<u32> = (0..nodes)
                .filter(|&n| {
                    self.node_cells(r, n).iter().filter(|c| c.is_none()).count() >= per_node
                        && ok(n)
                })
                .collect();
            (free.len() >= size).then_some((r, free))
        })
    }

    /// Puts `cell(k)` in the first free column of `nodes[k]` in `row`.
    ///
    /// # Panics
    /// When a node has no free column in `row` (callers place where
    /// [`Self::find_row`] found room).
    pub fn place(&mut self, row: usize, nodes: &[u32], mut cell: impl FnMut(usize) -> C) {
        let c = self.cpus;
        for (k, &n) in nodes.iter().enumerate() {
            let cols = &mut self.cells[row][n as usize * c..(n as usize + 1) * c];
            let free = cols
                .iter_mut()
                .find(|x| x.is_none())
                .expect("find_row found a free column");
            *free = Some(cell(k));
        }
    }

    /// Empties the cells of `row` whose content `is` accepts.
    pub fn clear(&mut self, row: usize, is: impl Fn(&C) -> bool) {
        for c in &mut self.cells[row] {
            if c.as_ref().is_some_and(&is) {
                *c = None;
            }
        }
    }

    pub fn row_empty(&self, r: usize) -> bool {
        self.cells[r].iter().all(Option::is_none)
    }

    /// The next non-empty row after `active`, cyclically (`active` itself
    /// last; from row 0 when `None`); `None` when the matrix is empty.
    pub fn next_row(&self, active: Option<usize>) -> Option<usize> {
        let rows = self.cells.len();
        let start = active.map_or(0, |r| r + 1);
        (0..rows)
            .map(|k| (start + k) % rows)
            .find(|&r| !self.row_empty(r))
    }

    /// The non-empty rows in the order they run after `active` (the cycle of
    /// slots), `active` itself last when it is not empty.
    pub fn cycle_after(&self, active: Option<usize>) -> Vec<usize> {
        let rows = self.cells.len();
        let start = active.map_or(0, |r| r + 1);
        (0..rows)
            .map(|k| (start + k) % rows)
            .filter(|&r| !self.row_empty(r))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_takes_the_first_row_with_room_on_its_nodes() {
        // 2 rows, 3 single-CPU nodes. Job 1 on nodes {0,1} takes row 0; job 2
        // on {1,2} finds node 1 busy in row 0 and takes row 1; job 3 on {2}
        // fits in row 0.
        let mut m: Ousterhout<i32> = Ousterhout::new(2, 3, 1);
        let (r, _) = m.find_row(2, 1, |n| n <= 1).unwrap();
        assert_eq!(r, 0);
        m.place(0, &[0, 1], |_| 1);
        let (r, free) = m.find_row(2, 1, |n| n >= 1).unwrap();
        assert_eq!((r, free), (1, vec![1, 2]));
        m.place(1, &[1, 2], |_| 2);
        assert_eq!(m.find_row(1, 1, |n| n == 2).unwrap().0, 0);
        // Nodes {0,1} again: row 0 has node 0 and 1 taken, row 1 node 1: no room.
        assert_eq!(m.find_row(2, 1, |n| n <= 1), None);
    }

    #[test]
    fn the_cycle_skips_empty_rows_and_ends_with_the_active_row() {
        let mut m: Ousterhout<i32> = Ousterhout::new(4, 2, 1);
        assert_eq!(m.next_row(None), None);
        m.place(0, &[0], |_| 7);
        m.place(2, &[1], |_| 8);
        assert_eq!(m.next_row(Some(0)), Some(2));
        assert_eq!(m.next_row(Some(2)), Some(0));
        assert_eq!(m.cycle_after(Some(0)), vec![2, 0]);
        assert_eq!(m.cycle_after(Some(1)), vec![2, 0]);
        m.clear(2, |&j| j == 8);
        assert!(m.row_empty(2));
        assert_eq!(m.next_row(Some(0)), Some(0));
    }

    #[test]
    fn dual_cpu_nodes_hold_two_cells_per_row_and_the_matrix_grows() {
        let mut m: Ousterhout<(usize, u32)> = Ousterhout::new(1, 1, 2);
        m.place(0, &[0, 0], |k| (5, k as u32));
        assert_eq!(m.node_cells(0, 0), &[Some((5, 0)), Some((5, 1))]);
        assert_eq!(m.find_row(1, 1, |_| true), None);
        m.grow(2);
        assert_eq!(m.nodes(), 2);
        assert_eq!(m.find_row(1, 2, |_| true), Some((0, vec![1])));
    }
}
