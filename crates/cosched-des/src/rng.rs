use rand::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// A reproducible random stream (PCG 64 MCG). Implements [`rand::RngCore`].
pub type RngStream = Pcg64Mcg;

/// Factory of independent random streams: one master seed, one stream per
/// component name. The stream for a name depends only on `(seed, name)`, never
/// on the order in which streams are created.
#[derive(Clone, Debug)]
pub struct RngStreams {
    seed: u64,
}

/// FNV-1a, stable across platforms and Rust versions (unlike `DefaultHasher`).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// SplitMix64 finalizer: spreads nearby seeds over the whole state space.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl RngStreams {
    pub fn new(seed: u64) -> Self {
        Self { seed }
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
    /// The stream named `name` (e.g. `"placement"`, `"node/3/noise"`).
    pub fn stream(&self, name: &str) -> RngStream {
        let hi = splitmix(self.seed ^ fnv1a(name.as_bytes()));
        let lo = splitmix(hi ^ 0x5851_f42d_4c95_7f2d);
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&hi.to_le_bytes());
        bytes[8..].copy_from_slice(&lo.to_le_bytes());
        let mut r = Pcg64Mcg::from_seed(bytes);
        // Discard one output so that the first draw is mixed.
        r.next_u64();
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn streams_are_reproducible_and_independent() {
        let s = RngStreams::new(42);
        let a1: Vec<u64> = (0..4)
            .map(|_| 0)
            .scan(s.stream("a"), |r, _| Some(r.gen()))
            .collect();
        let a2: Vec<u64> = (0..4)
            .map(|_| 0)
            .scan(s.stream("a"), |r, _| Some(r.gen()))
            .collect();
        let b: Vec<u64> = (0..4)
            .map(|_| 0)
            .scan(s.stream("b"), |r, _| Some(r.gen()))
            .collect();
        assert_eq!(a1, a2);
        assert_ne!(a1, b);
        let other: Vec<u64> = (0..4)
            .map(|_| 0)
            .scan(RngStreams::new(43).stream("a"), |r, _| Some(r.gen()))
            .collect();
        assert_ne!(a1, other);
    }

    const GOLDEN_FIRST_DRAW: u64 = 12_604_988_904_694_130_935;

    #[test]
    fn stream_values_are_stable_across_versions() {
        // Golden value: a change here changes every seeded experiment's output.
        let mut r = RngStreams::new(1).stream("placement");
        assert_eq!(r.next_u64(), GOLDEN_FIRST_DRAW);
    }
}
