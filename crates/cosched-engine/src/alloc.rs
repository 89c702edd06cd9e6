//! Processor allocators.
//!
//! Processors are numbered `0..total`; processor `p` lives on node `p / procs_per_node`.
//! An allocation is a sorted list of disjoint half-open ranges `[start, end)`.
//!
//! - [`Placement::Packing`]: the first free run of at least `k` consecutive
//!   processors (first fit, so the job occupies contiguous nodes); when no run is
//!   long enough, the lowest-numbered free processors. This is the shared PACKING
//!   rule (`cosched_rules::place::packing`) with a single layer (a free
//!   processor holds nothing, so every candidate has load 0), kept here on free
//!   ranges so that an allocation costs O(free ranges), not O(processors); a test
//!   checks both give the same processors.
//! - [`Placement::Random`]: `k` processors drawn uniformly without replacement
//!   among the free ones, from the seeded stream named `"placement"`.

use cosched_des::{RngStream, RngStreams};
use cosched_model::Placement;
use rand::Rng;
use std::collections::BTreeMap;

/// Half-open processor range.
pub type Range = (u32, u32);

pub struct Allocator {
    total: u32,
    free_count: u32,
    /// Free processors as disjoint ranges keyed by start (both placements).
    free: BTreeMap<u32, u32>,
    placement: Placement,
    rng: RngStream,
}

impl Allocator {
    pub fn new(total: u32, placement: Placement, streams: &RngStreams) -> Self {
        let mut free = BTreeMap::new();
        if total > 0 {
            free.insert(0, total);
        }
        Self {
            total,
            free_count: total,
            free,
            placement,
            rng: streams.stream("placement"),
        }
    }

    pub fn total(&self) -> u32 {
        self.total
    }
    pub fn free_count(&self) -> u32 {
        self.free_count
    }

    /// Whether processor `p` is free.
    pub fn is_free(&self, p: u32) -> bool {
        matches!(self.free.range(..=p).next_back(), Some((&s, &e)) if p >= s && p < e)
    }

    fn take(&mut self, s: u32, e: u32) {
        // [s, e) lies inside one free range.
        let (&fs, &fe) = self.free.range(..=s).next_back().expect("range is free");
        debug_assert!(fs <= s && e <= fe);
        self.free.remove(&fs);
        if fs < s {
            self.free.insert(fs, s);
        }
        if e < fe {
            self.free.insert(e, fe);
        }
        self.free_count -= e - s;
    }

    /// Allocates `k <= free_count` processors with the placement rule.
    pub fn allocate(&mut self, k: u32) -> Vec<Range> {
        assert!(k <= self.free_count, "caller checks the free count");
        if k == 0 {
            return Vec::new();
        }
        match self.placement {
            Placement::Packing => {
                if let Some((&s, _)) = self.free.iter().find(|(&s, &e)| e - s >= k) {
                    self.take(s, s + k);
                    return vec![(s, s + k)];
                }
                let mut out = Vec::new();
                let mut need = k;
                while need > 0 {
                    let (&s, &e) = self.free.iter().next().expect("free_count >= k");
                    let n = (e - s).min(need);
                    self.take(s, s + n);
                    out.push((s, s + n));
                    need -= n;
                }
                out
            }
            Placement::Random => {
                // Floyd's algorithm over free-processor ranks, then map ranks to ids.
                let n = self.free_count;
                let mut ranks = std::collections::BTreeSet::new();
                for j in (n - k)..n {
                    let t = self.rng.gen_range(0..=j);
                    if !ranks.insert(t) {
                        ranks.insert(j);
                    }
                }
                let mut procs = Vec::with_capacity(k as usize);
                let mut it = ranks.into_iter().peekable();
                let mut base = 0u32;
                for (&s, &e) in self.free.iter() {
                    while let Some(&r) = it.peek() {
                        if r < base + (e - s) {
                            procs.push(s + (r - base));
                            it.next();
                        } else {
                            break;
                        }
                    }
                    base += e - s;
                    if it.peek().is_none() {
                        break;
                    }
                }
                let ranges = to_ranges(&procs);
                for &(s, e) in &ranges {
                    self.take(s, e);
                }
                ranges
            }
        }
    }

    /// Allocates exactly the given processors. The caller has checked they are free and distinct.
    pub fn allocate_exact(&mut self, procs: &[u32]) -> Vec<Range> {
        let mut sorted = procs.to_vec();
        sorted.sort_unstable();
        let ranges = to_ranges(&sorted);
        for &(s, e) in &ranges {
            self.take(s, e);
        }
        ranges
    }

    /// Returns an allocation's processors to the free pool, merging neighbours.
    pub fn release(&mut self, ranges: &[Range]) {
        for &(mut s, mut e) in ranges {
            self.free_count += e - s;
            if let Some((&ps, &pe)) = self.free.range(..s).next_back() {
                debug_assert!(pe <= s, "double free");
                if pe == s {
                    self.free.remove(&ps);
                    s = ps;
                }
            }
            if let Some(&ne) = self.free.get(&e) {
                self.free.remove(&e);
                e = ne;
            }
            self.free.insert(s, e);
        }
    }
}

/// Sorted distinct processor ids -> maximal ranges.
pub fn to_ranges(sorted: &[u32]) -> Vec<Range> {
    let mut out: Vec<Range> = Vec::new();
    for &p in sorted {
        match out.last_mut() {
            Some((_, e)) if *e == p => *e += 1,
            _ => out.push((p, p + 1)),
        }
    }
    out
}

/// Number of distinct nodes an allocation touches.
pub fn node_count(ranges: &[Range], procs_per_node: u32) -> u32 {
    let mut count = 0;
    let mut last: Option<u32> = None;
    for &(s, e) in ranges {
        let (a, b) = (s / procs_per_node, (e - 1) / procs_per_node);
        let a = match last {
            Some(l) if l >= a => l + 1,
            _ => a,
        };
        if b >= a {
            count += b - a + 1;
        }
        last = Some(last.map_or(b, |l| l.max(b)));
    }
    count
}

/// Node ranges of an allocation as text, e.g. `"0-3,8"` (inclusive node ids).
pub fn node_list(ranges: &[Range], procs_per_node: u32) -> String {
    let mut nodes: Vec<(u32, u32)> = Vec::new();
    for &(s, e) in ranges {
        let (a, b) = (s / procs_per_node, (e - 1) / procs_per_node);
        match nodes.last_mut() {
            Some((_, lb)) if a <= *lb + 1 => *lb = (*lb).max(b),
            _ => nodes.push((a, b)),
        }
    }
    let parts: Vec<String> = nodes
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alloc(total: u32, p: Placement) -> Allocator {
        Allocator::new(total, p, &RngStreams::new(3))
    }

    #[test]
    fn packing_prefers_contiguous_first_fit() {
        let mut a = alloc(10, Placement::Packing);
        let x = a.allocate(3); // 0-2
        let y = a.allocate(2); // 3-4
        assert_eq!((x.clone(), y), (vec![(0, 3)], vec![(3, 5)]));
        a.release(&x); // free: 0-2, 5-9
        assert_eq!(a.allocate(4), vec![(5, 9)]); // contiguous run exists later
        assert_eq!(a.allocate(4), vec![(0, 3), (9, 10)]); // fragmented fallback
        assert_eq!(a.free_count(), 0);
    }

    proptest::proptest! {
        /// PACKING over free processors is the shared rule
        /// (`cosched_rules::place::packing`) with one layer: every free
        /// processor has load 0, so the least-loaded layer is the free set and the
        /// emptiest contiguous run is the first one. Random allocate/release
        /// sequences give the same processors both ways.
        #[test]
        fn packing_is_the_shared_rule_with_one_layer(
            ops in proptest::collection::vec((1u32..12, proptest::bool::ANY), 1..40)
        ) {
            let mut a = alloc(24, Placement::Packing);
            let mut held: Vec<Vec<Range>> = Vec::new();
            for (k, free_one) in ops {
                if free_one && !held.is_empty() {
                    a.release(&held.remove(0));
                }
                if k > a.free_count() {
                    continue;
                }
                let free: Vec<u32> = (0..24).filter(|&p| a.is_free(p)).collect();
                let want = to_ranges(&cosched_rules::place::packing(&free, k as usize, |_| 0));
                let got = a.allocate(k);
                proptest::prop_assert_eq!(&got, &want);
                held.push(got);
            }
        }
    }

    #[test]
    fn random_is_seeded_and_valid() {
        let mut a = alloc(100, Placement::Random);
        let r = a.allocate(30);
        let n: u32 = r.iter().map(|(s, e)| e - s).sum();
        assert_eq!(n, 30);
        assert_eq!(a.free_count(), 70);
        for &(s, e) in &r {
            for p in s..e {
                assert!(!a.is_free(p));
            }
        }
        let mut b = alloc(100, Placement::Random);
        assert_eq!(b.allocate(30), r);
        a.release(&r);
        assert_eq!(a.free_count(), 100);
        assert_eq!(a.free.len(), 1);
    }

    #[test]
    fn nodes_of_ranges() {
        assert_eq!(node_count(&[(0, 8), (8, 9)], 8), 2);
        assert_eq!(node_count(&[(3, 5), (6, 7), (17, 18)], 8), 2);
        assert_eq!(node_list(&[(3, 5), (6, 7), (17, 18), (24, 40)], 8), "0,2-4");
        assert_eq!(node_list(&[(0, 1), (2, 3)], 1), "0,2");
    }
}
