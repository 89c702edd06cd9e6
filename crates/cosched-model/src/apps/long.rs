//! sPPM and BlockSolve95: the long-running applications of seed 000 Table 1(b)
//! (sPPM "Low" communication, 2726 s; BlockSolve95 "Medium", 941 s, both at 16
//! processes). The seeds give nothing else about them (gap G-APP-2), so their
//! structure is an assumption, docs/models/seed-parameters.md §5 G-APP-2:
//!
//! - sPPM ("a program to solve 3D gas dynamics models on a uniform Cartesian
//!   mesh", S000 §5.1): a 3D block decomposition (near-cubic grid of processes,
//!   periodic); per time step a halo exchange with the 6 face neighbours
//!   (`Irecv`/`Isend` all, wait), the step's compute, and an allreduce of the
//!   time step (1 double, the CFL condition). Compute is 95% of the dedicated
//!   16-process run (G-APP-2).
//! - BlockSolve95 ("a parallel program to solve sparse linear problems for
//!   physical models"): CG-like iterations on the same decomposition: a
//!   neighbour exchange for the sparse mat-vec, then two dot products as
//!   allreduces (1 double each), compute in between. Compute is 80% of the
//!   dedicated 16-process run (G-APP-2).
//!
//! The iteration counts (sPPM 1000 steps, BlockSolve95 10000 iterations) are
//! assumptions: they set the granularity (about 2.6 s of compute per sPPM step
//! and 75 ms per BlockSolve95 iteration at 16 processes) and nothing else.
//!
//! Two constants per app are fitted to the dedicated 16-process run on
//! `choi2004` (`cosched::calibrate`): the compute per iteration is the G-APP-2
//! share of the Table 1 time divided by the iterations, and the halo size
//! (bytes per unit of face area, [`crate::apps::AppParams::halo_bytes`]) is
//! solved so that the run takes the Table 1 time. At 16 processes (grid
//! 4 x 2 x 2) a face normal to axis a of a process's block has area
//! 1/(p_b p_c) of the domain's cross-section (the two other axes); its message
//! is `halo_bytes` x that area.
//!
//! Problem size (seed 000 §5.2: "We conducted another set of experiments using
//! BlockSolve95, sPPM and LU from the NAS benchmark by varying the problem size
//! and the number of processors"): the size scales with the process count,
//! weak scaling at a fixed per-process block. The rule: every process keeps the
//! block it has at 16 processes (Table 1's size), so at P processes the problem
//! is P/16 of Table 1's; per iteration a process computes what it computes at 16
//! (no 16/P factor), holds the same memory, and sends on each axis of its grid
//! the face message that axis has at 16 processes. The dedicated time at 4 and 8
//! processes is then close to Table 1's (fewer exchanging axes), not 4 or 2
//! times it.

use super::compute;
use crate::program::{Builder, Op, Rank};

/// Main-loop iterations (assumption, see the module doc).
pub fn iterations(app: &str) -> u32 {
    match app {
        "sPPM" => 1000,
        _ => 10_000,
    }
}

/// Share of the dedicated 16-process run time spent computing (G-APP-2).
pub fn compute_share(app: &str) -> f64 {
    match app {
        "sPPM" => 0.95,
        _ => 0.80,
    }
}

/// Near-cubic process grid: the factors of P as powers of two, the larger first
/// (4 -> 2x2x1, 8 -> 2x2x2, 16 -> 4x2x2).
pub fn grid(p: u32) -> [u32; 3] {
    let mut g = [1u32; 3];
    let mut left = p;
    let mut k = 0;
    while left > 1 {
        g[k % 3] *= 2;
        left /= 2;
        k += 1;
    }
    g.sort_unstable_by(|a, b| b.cmp(a));
    g
}

const T_HALO: u32 = 100;

/// Halo exchange with the face neighbours of a periodic 3D grid; an axis with one
/// process has no messages (local copy); with two, both neighbours are the same
/// process and the two directions use different tags.
fn halo(me: Rank, g: [u32; 3], halo_bytes: u64) -> Vec<Op> {
    let idi = [me % g[0], (me / g[0]) % g[1], me / (g[0] * g[1])];
    let mut ops = Vec::new();
    let mut sends = Vec::new();
    for a in 0..3 {
        if g[a] == 1 {
            continue;
        }
        let nbr = |d: i64| -> Rank {
            let mut v = idi;
            v[a] = (idi[a] as i64 + d).rem_euclid(g[a] as i64) as u32;
            v[0] + g[0] * (v[1] + g[1] * v[2])
        };
        // The face on axis a of the 16-process block (weak scaling, module doc).
        let g16 = grid(16);
        let area: u32 = (0..3).filter(|&x| x != a).map(|x| g16[x]).product();
        let bytes = (halo_bytes as f64 / area as f64).round() as u64;
        let (t_up, t_down) = (T_HALO + 2 * a as u32, T_HALO + 2 * a as u32 + 1);
        ops.push(Op::Irecv {
            from: Some(nbr(-1)),
            tag: t_up,
        });
        ops.push(Op::Irecv {
            from: Some(nbr(1)),
            tag: t_down,
        });
        sends.push(Op::Isend {
            to: nbr(1),
            bytes,
            tag: t_up,
        });
        sends.push(Op::Isend {
            to: nbr(-1),
            bytes,
            tag: t_down,
        });
    }
    ops.extend(sends);
    ops.push(Op::Wait);
    ops
}

pub(super) fn build(app: &str, p: u32, c: f64, halo_bytes: u64) -> Builder {
    let g = grid(p);
    let mut b = Builder::new(p);
    match app {
        "sPPM" => {
            b.repeat(iterations(app), |b| {
                b.each(|me| halo(me, g, halo_bytes));
                b.each(|_| compute(c));
                b.allreduce(8);
            });
        }
        _ => {
            // Compute split (assumption): half for the mat-vec after the exchange,
            // a quarter after each dot product.
            b.repeat(iterations(app), |b| {
                b.each(|me| halo(me, g, halo_bytes));
                b.each(|_| compute(c / 2.0));
                b.allreduce(8);
                b.each(|_| compute(c / 4.0));
                b.allreduce(8);
                b.each(|_| compute(c / 4.0));
            });
        }
    }
    b
}
