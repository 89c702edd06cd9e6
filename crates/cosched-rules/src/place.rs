//! PACKING node placement, shared by the simulator engine
//! (`cosched_engine::process::place`) and the single-machine real controller
//! (`cosched run`, `cosched_real::controller`).
//!
//! Algorithm (seed 000 §5.1: "contiguous nodes are assigned to a job to reduce
//! the system fragmentation and increase the system utilization"): the nodes are
//! seen as layers of MPL slots, like the rows of the gang matrix, and a job goes
//! into the *least-loaded layer with room*, the rule the gang matrix uses for its
//! rows (first row with room). Layer `l` has room on a node whose load is at
//! most `l`; the lowest `l` with at least `size` such nodes is taken. Among those
//! nodes the job gets the contiguous run of `size` nodes with the smallest total
//! load (the emptiest; the lowest-numbered on ties); when no run is contiguous,
//! the `size` least-loaded nodes (lowest-numbered on ties). With every load
//! equal (batch at MPL 1, a gang row) this is first fit: the first contiguous
//! run, else the lowest-numbered nodes.
//!
//! Parameters: the eligible nodes (sorted, distinct; the caller decides
//! eligibility: room under the MPL, memory), the job's node count and each
//! node's current load (processes, or jobs, placed on it).

/// `size` nodes of `eligible` (sorted, distinct) by PACKING; `load(n)` is node
/// `n`'s current load. Returned sorted.
///
/// # Panics
/// When `size` exceeds `eligible.len()` (callers check that enough nodes are
/// eligible).
pub fn packing(eligible: &[u32], size: usize, load: impl Fn(u32) -> u32) -> Vec<u32> {
    if size == 0 {
        return Vec::new();
    }
    assert!(
        size <= eligible.len(),
        "{size} nodes wanted, {} eligible",
        eligible.len()
    );
    let loads: Vec<u32> = eligible.iter().map(|&n| load(n)).collect();
    // The least-loaded layer with room: the size-th smallest load.
    let layer = nth_smallest(&loads, size - 1);
    let mut room: Vec<(u32, u32)> = Vec::with_capacity(eligible.len());
    room.extend(
        eligible
            .iter()
            .zip(&loads)
            .filter(|&(_, &l)| l <= layer)
            .map(|(&n, &l)| (n, l)),
    );
    // Window sums from prefix sums: O(eligible) whatever the job's size.
    let mut prefix: Vec<u64> = Vec::with_capacity(room.len() + 1);
    let mut acc = 0u64;
    prefix.push(acc);
    for &(_, l) in &room {
        acc += u64::from(l);
        prefix.push(acc);
    }
    let best = (0..=room.len() - size)
        .filter(|&i| room[i + size - 1].0 - room[i].0 == size as u32 - 1)
        .min_by_key(|&i| (prefix[i + size] - prefix[i], room[i].0));
    if let Some(i) = best {
        return room[i..i + size].iter().map(|&(n, _)| n).collect();
    }
    let mut by_load = room;
    by_load.sort_by_key(|&(n, l)| (l, n));
    let mut out: Vec<u32> = by_load[..size].iter().map(|&(n, _)| n).collect();
    out.sort_unstable();
    out
}

/// The `k`-th smallest (0-based) of `loads`, `k < loads.len()`: counted when
/// the loads are below the number of units (the usual case, loads bounded by the
/// MPL), else selected.
fn nth_smallest(loads: &[u32], k: usize) -> u32 {
    let max = loads.iter().copied().max().unwrap_or(0) as usize;
    if max < loads.len() {
        let mut count = vec![0usize; max + 1];
        for &l in loads {
            count[l as usize] += 1;
        }
        let mut seen = 0;
        for (l, &c) in count.iter().enumerate() {
            seen += c;
            if seen > k {
                return l as u32;
            }
        }
    }
    let mut v = loads.to_vec();
    *v.select_nth_unstable(k).1
}

#[cfg(test)]
mod unit {
    use super::*;

    fn pack(loads: &[u32], mpl: u32, size: usize) -> Vec<u32> {
        let eligible: Vec<u32> = (0..loads.len() as u32)
            .filter(|&n| loads[n as usize] < mpl)
            .collect();
        packing(&eligible, size, |n| loads[n as usize])
    }

    #[test]
    fn nth_smallest_counts_or_selects() {
        // Sorted [0, 0, 2, 3]: 0th and 1st are 0, 2nd is 2, 3rd is 3 (counted: max 3 < 4 loads).
        let l = [3, 0, 2, 0];
        let got: Vec<u32> = (0..4).map(|k| nth_smallest(&l, k)).collect();
        assert_eq!(got, vec![0, 0, 2, 3]);
        // Sorted [5, 100]: max 100 >= 2 loads, selected: 1st is 100.
        assert_eq!(nth_smallest(&[100, 5], 1), 100);
        assert_eq!(nth_smallest(&[100, 5], 0), 5);
        // Every load vector of 4 values in 0..7 (both paths): the k-th of the sorted vector.
        for code in 0..7u32.pow(4) {
            let l: Vec<u32> = (0..4).map(|i| code / 7u32.pow(i) % 7).collect();
            let mut sorted = l.clone();
            sorted.sort_unstable();
            for (k, &want) in sorted.iter().enumerate() {
                assert_eq!(nth_smallest(&l, k), want, "{l:?} k={k}");
            }
        }
    }

    #[test]
    fn packing_takes_the_emptiest_contiguous_nodes() {
        // 8 nodes, MPL 3; nodes 0-3 hold one job each, 4-7 are empty. A 4-node job
        // goes to 4-7 (layer 0), not onto the loaded low-numbered nodes 0-3 (the old
        // first fit below the MPL).
        assert_eq!(pack(&[1, 1, 1, 1, 0, 0, 0, 0], 3, 4), vec![4, 5, 6, 7]);
        // Only 3 empty nodes (5-7): layer 0 has no room for 4, layer 1 (load <= 1)
        // does. Contiguous runs of load <= 1: 2-5 (1+1+1+0 = 3), 3-6 (2), 4-7 (1):
        // the emptiest is 4-7.
        assert_eq!(pack(&[2, 2, 1, 1, 1, 0, 0, 0], 3, 4), vec![4, 5, 6, 7]);
        // Equal totals: the lowest-numbered run (0-1 and 2-3 both load 0).
        assert_eq!(pack(&[0, 0, 0, 0], 3, 2), vec![0, 1]);
        // Layer 0 has 2 nodes (1, 3) but they are not contiguous: non-contiguous
        // in the least-loaded layer, not a contiguous run one layer up.
        assert_eq!(pack(&[1, 0, 1, 0, 1, 1], 3, 2), vec![1, 3]);
        // Layer 1 needed (3 nodes), no contiguous run of load <= 1 (node 2 is at 2):
        // the three least-loaded, lowest-numbered on ties.
        assert_eq!(pack(&[1, 0, 2, 1, 2, 1], 3, 3), vec![0, 1, 3]);
        // Full nodes are not eligible: 0 and 1 at MPL, run 2-3.
        assert_eq!(pack(&[3, 3, 1, 1], 3, 2), vec![2, 3]);
        // Equal loads (a gang row): the first contiguous run, not the lowest nodes
        // (0 and 2 are the lowest; 2-3 is the first run).
        assert_eq!(packing(&[0, 1, 3, 4], 2, |_| 0), vec![0, 1]);
        assert_eq!(packing(&[0, 2, 3, 5], 2, |_| 0), vec![2, 3]);
    }
}
