//! Node placement of a process-level job (one rank group per node).
//!
//! - PACKING: the least-loaded layer with room, then the contiguous run with
//!   the smallest load ([`cosched_rules::place::packing`], shared with the
//!   real controller of `cosched run`).
//! - NO PACKING: `size` of the eligible nodes drawn uniformly without
//!   replacement from the engine's placement stream.

use cosched_model::Placement;
use cosched_rules::place::packing;
use rand::seq::SliceRandom;
use rand::Rng;

/// `size` nodes of `eligible` (sorted, distinct) for a job, by `placement`;
/// `load(n)` is node `n`'s current number of processes. Returned sorted.
pub fn choose_nodes<R: Rng>(
    placement: Placement,
    eligible: &[u32],
    size: usize,
    load: impl Fn(u32) -> u32,
    rng: &mut R,
) -> Vec<u32> {
    debug_assert!(size <= eligible.len());
    match placement {
        Placement::Packing => packing(eligible, size, load),
        Placement::Random => {
            let mut c: Vec<u32> = eligible.choose_multiple(rng, size).copied().collect();
            c.sort_unstable();
            c
        }
    }
}

#[cfg(test)]
mod unit {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn random_draws_distinct_eligible_nodes() {
        let eligible = [0, 2, 3, 5, 7];
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let c = choose_nodes(Placement::Random, &eligible, 3, |_| 0, &mut rng);
        assert_eq!(c.len(), 3);
        assert!(c.windows(2).all(|w| w[0] < w[1]));
        assert!(c.iter().all(|n| eligible.contains(n)));
    }
}
