//! NAS Parallel Benchmarks kernels as programs: the per-iteration communication
//! structure of the NPB 3.3 MPI source (public copy
//! `mbdevpl/nas-parallel-benchmarks`, files named per kernel below; see
//! docs/models/seed-parameters.md §2.8), sizes and iteration counts of
//! `sys/setparams.c`. Seed 000 used NPB 2.3; the class sizes and iteration
//! counts are the same.
//!
//! Conventions of every generator:
//! - `c` is the CPU time of one process for one main-loop iteration at this
//!   process count, ns (the calibrated value at 16 processes scaled by 16 / P,
//!   see [`super`]). How `c` splits over the phases of an iteration is stated
//!   per kernel; the splits are documented modelling choices (assumptions, not
//!   fitted), the total per iteration is the fitted constant.
//! - Message sizes: 8-byte doubles (4-byte keys for IS), derived from the class
//!   problem size and the process grid.
//! - One untimed warm-up iteration is included where the benchmark runs one
//!   (CG, IS, MG, LU, SP, BT, FT): seed 000 Table 1 is taken as whole-job time
//!   (gap G-APP-5), so the warm-up is part of the run being matched.
//! - MPI self-messages (a process exchanging with itself on a grid axis of one
//!   process, CG's diagonal transpose) are local copies and are left out.
//! - `MPI_Send` is a blocking [`Op::Send`], `MPI_Isend` an [`Op::Isend`],
//!   `MPI_Irecv` + wait an [`Op::Irecv`] + [`Op::Wait`], `MPI_Recv` an [`Op::Recv`].
//! - Collectives use the [`Builder`] algorithms (recursive doubling allreduce,
//!   MPICH 1.2.5's alltoall and alltoallv, binomial reduce to the root).

use super::compute;
use crate::program::{Builder, Op, Rank};

const DOUBLE: u64 = 8;

/// Main-loop iterations including the untimed warm-up, per (app, class).
pub fn iterations(app: &str, class: char) -> u32 {
    let k = class_index(class);
    match app {
        // cg.f: niter 15 / 75 / 75, plus one untimed conj_grad ("do one iteration untimed").
        "CG" => [15, 75, 75][k] + 1,
        // is.c: MAX_ITERATIONS = 10, plus rank(1) untimed.
        "IS" => 11,
        // mg.f: nit 4 / 20 / 20, plus "One iteration for startup".
        "MG" => [4, 20, 20][k] + 1,
        // lu.f: itmax 250, plus ssor(1) untimed.
        "LU" => 251,
        // sp.f: niter 400, plus one adi "to touch all code".
        "SP" => 401,
        // bt.f: niter 200, plus one adi.
        "BT" => 201,
        // ep.f: one pass.
        "EP" => 1,
        // ft.f: niter 6 / 20 / 20 (the untimed setup is a prologue, see ft()).
        "FT" => [6, 20, 20][k],
        _ => unreachable!("checked by the caller"),
    }
}

fn class_index(class: char) -> usize {
    match class {
        'A' => 0,
        'B' => 1,
        _ => 2,
    }
}

/// Grid points of FT per class (setparams.c: A 256x256x128, B 512x256x256, C 512^3).
pub fn ft_points(class: char) -> u64 {
    [256 * 256 * 128, 512 * 256 * 256, 512 * 512 * 512][class_index(class)]
}

/// NPB FT operation count (ft.f, the Mop/s formula): (setup, per iteration), in
/// floating-point operations, for `n` grid points.
pub fn ft_ops(class: char) -> (f64, f64) {
    let n = ft_points(class) as f64;
    (
        n * (14.8157 + 7.19641 * n.ln()),
        n * (5.23518 + 7.21113 * n.ln()),
    )
}

/// NPB MG operation count per iteration (mg.f: `mflops = 58 * nit * nn / t`).
pub fn mg_ops_per_iter(class: char) -> f64 {
    let n = mg_size(class) as f64;
    58.0 * n * n * n
}

fn mg_size(class: char) -> u32 {
    [256, 256, 512][class_index(class)]
}

pub(super) fn build(app: &str, class: char, p: u32, c: f64) -> Builder {
    let mut b = Builder::new(p);
    match app {
        "CG" => cg(&mut b, class, c),
        "IS" => is(&mut b, class, c),
        "MG" => mg(&mut b, class, c),
        "LU" => lu(&mut b, class, c),
        "SP" => adi(&mut b, class, c, Adi::Sp),
        "BT" => adi(&mut b, class, c, Adi::Bt),
        "EP" => ep(&mut b, c),
        "FT" => ft(&mut b, class, c),
        _ => unreachable!("checked by the caller"),
    }
    b
}

/// `MPI_Irecv` from `peer`, blocking `MPI_Send` to it, wait: NPB's pairwise exchange.
fn exchange(ops: &mut Vec<Op>, peer: Rank, bytes: u64, tag: u32) {
    ops.push(Op::Irecv {
        from: Some(peer),
        tag,
    });
    ops.push(Op::Send {
        to: peer,
        bytes,
        tag,
    });
    ops.push(Op::Wait);
}

// ---------------------------------------------------------------------------
// CG

/// CG (cg.f). 2D process grid: npcols = 2^ceil(log2(P)/2), nprows = P / npcols
/// (4 -> 2x2, 8 -> 2x4, 16 -> 4x4). Per outer iteration (conj_grad + the norms of
/// the main loop):
/// - rho = r.r: log2(npcols) scalar exchanges along the row;
/// - 25 inner iterations: mat-vec; log2(npcols) exchange-and-sum steps with
///   `reduce_exch_proc` (row segments of na/nprows doubles; with npcols = 2
///   nprows the segments are halves); one exchange with the transpose process
///   `exch_proc` (na/nprows doubles, halved likewise); two dot products as
///   log2(npcols) scalar exchanges each;
/// - residual: mat-vec, row reduction, transpose exchange, one norm reduction;
/// - main loop: one reduction of 2 doubles (x.z, z.z).
///
/// Compute split: c / 26 per sparse mat-vec (25 inner + 1 residual), the vector
/// updates folded into their mat-vec (the mat-vec dominates: 2 flops per nonzero,
/// about (nonzer+1)^2 nonzeros per row against a few flops per row for the axpys).
fn cg(b: &mut Builder, class: char, c: f64) {
    let na: u64 = [14_000, 75_000, 150_000][class_index(class)];
    let p = b.size();
    let log2p = p.trailing_zeros();
    let npcols = 1u32 << log2p.div_ceil(2);
    let nprows = p / npcols;
    let l2npcols = npcols.trailing_zeros();
    let row = na / nprows as u64;
    let square = nprows == npcols;
    let mv = c / 26.0;
    const T_RHO0: u32 = 100;
    const T_RED: u32 = 200;
    const T_TRANS: u32 = 300;
    const T_DOT: u32 = 400;
    const T_RHO: u32 = 500;
    const T_RES: u32 = 600;
    const T_NORM: u32 = 700;

    // Per-rank schedule (setup_submatrix_info).
    struct Sched {
        partner: Vec<Rank>, // reduce_exch_proc(i), i = 1..l2npcols
        len: Vec<u64>,      // reduce_send_lengths(i)
        exch: Rank,
        send_len: u64,
    }
    let sched = |me: Rank| -> Sched {
        let (prow, pcol) = (me / npcols, me % npcols);
        let send_len = if square {
            row
        } else if me & 1 == 0 {
            row.div_ceil(2)
        } else {
            row / 2
        };
        let mut partner = Vec::new();
        let mut len = Vec::new();
        let mut div = npcols;
        for i in 1..=l2npcols {
            let j = (pcol + div / 2) % div + pcol / div * div;
            partner.push(prow * npcols + j);
            div /= 2;
            len.push(if !square && i == l2npcols {
                row - send_len
            } else {
                send_len
            });
        }
        let exch = if square {
            (me % nprows) * nprows + me / nprows
        } else {
            2 * ((me / 2 % nprows) * nprows + me / 2 / nprows) + me % 2
        };
        Sched {
            partner,
            len,
            exch,
            send_len,
        }
    };
    let scalar = |ops: &mut Vec<Op>, s: &Sched, bytes: u64, tag: u32| {
        for (i, &q) in s.partner.iter().enumerate() {
            exchange(ops, q, bytes, tag + i as u32 + 1);
        }
    };
    let matvec_and_sum = |ops: &mut Vec<Op>, me: Rank, s: &Sched| {
        ops.extend(compute(mv));
        for i in (0..s.partner.len()).rev() {
            exchange(ops, s.partner[i], s.len[i] * DOUBLE, T_RED + i as u32 + 1);
        }
        if l2npcols != 0 && s.exch != me {
            exchange(ops, s.exch, s.send_len * DOUBLE, T_TRANS);
        }
    };
    b.repeat(iterations("CG", class), |b| {
        b.each(|me| {
            let mut ops = Vec::new();
            scalar(&mut ops, &sched(me), DOUBLE, T_RHO0);
            ops
        });
        b.repeat(25, |b| {
            b.each(|me| {
                let s = sched(me);
                let mut ops = Vec::new();
                matvec_and_sum(&mut ops, me, &s);
                scalar(&mut ops, &s, DOUBLE, T_DOT);
                scalar(&mut ops, &s, DOUBLE, T_RHO);
                ops
            });
        });
        b.each(|me| {
            let s = sched(me);
            let mut ops = Vec::new();
            matvec_and_sum(&mut ops, me, &s);
            scalar(&mut ops, &s, DOUBLE, T_RES);
            scalar(&mut ops, &s, 2 * DOUBLE, T_NORM);
            ops
        });
    });
}

// ---------------------------------------------------------------------------
// IS

/// IS (is.c `rank`). Per iteration: bucket counting; `MPI_Allreduce` of the
/// NUM_BUCKETS + TEST_ARRAY_SIZE = 1024 + 5 bucket counts (4-byte ints);
/// `MPI_Alltoall` of one send count per pair; `MPI_Alltoallv` of the keys (keys
/// are spread over all processes: total_keys / P^2 keys of 4 bytes per pair);
/// local ranking. End (`full_verify`): one key to the next rank, an
/// `MPI_Reduce` of the verification count.
///
/// Compute split: c / 2 before the exchange (count keys into buckets, pack
/// them: two passes over the local keys) and c / 2 after (counting sort of the
/// received keys: two passes).
fn is(b: &mut Builder, class: char, c: f64) {
    let total_keys: u64 = 1 << [23, 25, 27][class_index(class)];
    let p = b.size() as u64;
    let per_pair = total_keys / (p * p) * 4;
    b.repeat(iterations("IS", class), |b| {
        b.each(|_| compute(c / 2.0));
        b.allreduce((1024 + 5) * 4);
        b.alltoall(4);
        b.alltoallv(per_pair);
        b.each(|_| compute(c / 2.0));
    });
    let n = b.size();
    const T_VERIFY: u32 = 100;
    b.each(|r| {
        let mut ops = Vec::new();
        if r > 0 {
            ops.push(Op::Irecv {
                from: Some(r - 1),
                tag: T_VERIFY,
            });
        }
        if r + 1 < n {
            ops.push(Op::Send {
                to: r + 1,
                bytes: 4,
                tag: T_VERIFY,
            });
        }
        ops.push(Op::Wait);
        ops
    });
    b.reduce(0, 4);
}

// ---------------------------------------------------------------------------
// EP

/// EP (ep.f): the whole computation (c, one pass), then `MPI_Allreduce` of sx,
/// sy (1 double each), of the 10 annulus counts q, and of the time (max).
fn ep(b: &mut Builder, c: f64) {
    b.each(|_| compute(c));
    b.allreduce(DOUBLE);
    b.allreduce(DOUBLE);
    b.allreduce(10 * DOUBLE);
    b.allreduce(DOUBLE);
}

// ---------------------------------------------------------------------------
// MG

/// MG (mg.f). Process grid from `setup`: log_p = log2 P, pi1 = 2^(log_p / 3),
/// pi2 = 2^((log_p - log_p/3) / 2), pi3 = P / (pi1 pi2) (4 -> 1x2x2, 8 -> 2x2x2,
/// 16 -> 2x2x4); periodic neighbours. Levels k = 1..lt, lt = log2 n, level k has
/// 2^k points per axis. Every operator ends with `comm3` at its level: for each
/// axis with more than one process, `MPI_Irecv` from both neighbours, blocking
/// sends to both (`give3`: faces of (n2-2)(n3-2), n1(n3-2) and n1 n2 doubles for
/// axes 1, 2, 3, with n_i the local size + 2 ghosts), wait.
///
/// Per iteration (`mg3P` then `resid`): down the V-cycle `rprj3` to every level
/// lt-1..1; at level 1 `psinv`; up for k = 2..lt: `interp` (its `comm3_ex`),
/// `resid`, `psinv`; then `resid` at the top. Prologue: `resid` and the two
/// `norm2u3` allreduces (max, sum); epilogue: `norm2u3`, `mpi_reduce` of the time.
///
/// Compute split: proportional to the operation counts mg.f states per result
/// (`resid` and `psinv` 15A + 4M = 19 per point of their level, `rprj3` 20A + 4M
/// = 24 per coarse point, `interp` 16A + 4M = 20 per coarse point). Coarse
/// levels with fewer points per axis than processes are modelled with a local
/// size of 1 (NPB marks such processes dead; an approximation).
fn mg(b: &mut Builder, class: char, c: f64) {
    let n = mg_size(class);
    let lt = n.trailing_zeros();
    let p = b.size();
    let log_p = p.trailing_zeros();
    let dx = log_p / 3;
    let dy = (log_p - dx) / 2;
    let pi = [1u32 << dx, 1u32 << dy, p >> (dx + dy)];
    let pts = |k: u32| -> f64 { 8f64.powi(k as i32) };
    // Operation weights of one iteration, to split c.
    let mut w_total = 0.0;
    for k in 1..lt {
        w_total += 24.0 * pts(k); // rprj3 to level k
    }
    w_total += 19.0 * pts(1); // psinv at the bottom
    for k in 2..=lt {
        w_total += 20.0 * pts(k - 1) + 19.0 * pts(k) + 19.0 * pts(k); // interp, resid, psinv
    }
    w_total += 19.0 * pts(lt); // resid at the top
    let share = |w: f64| c * w / w_total;

    // comm3 at level k for rank me.
    let comm3 = move |ops: &mut Vec<Op>, me: Rank, k: u32| {
        let idi = [me % pi[0], (me / pi[0]) % pi[1], me / (pi[0] * pi[1])];
        let local = |a: usize| ((1u64 << k) / pi[a] as u64).max(1) + 2;
        let (n1, n2, n3) = (local(0), local(1), local(2));
        let face = [(n2 - 2) * (n3 - 2), n1 * (n3 - 2), n1 * n2];
        for a in 0..3 {
            if pi[a] == 1 {
                continue; // comm1p: a local copy
            }
            let nbr = |d: i64| -> Rank {
                let mut v = idi;
                v[a] = ((idi[a] as i64 + d).rem_euclid(pi[a] as i64)) as u32;
                v[0] + pi[0] * (v[1] + pi[1] * v[2])
            };
            let (minus, plus) = (nbr(-1), nbr(1));
            // Tag = 10 * axis + direction of travel (1: towards +, 2: towards -).
            let t_up = 10 * (a as u32 + 1) + 1;
            let t_down = 10 * (a as u32 + 1) + 2;
            ops.push(Op::Irecv {
                from: Some(minus),
                tag: t_up,
            });
            ops.push(Op::Irecv {
                from: Some(plus),
                tag: t_down,
            });
            ops.push(Op::Send {
                to: plus,
                bytes: face[a] * DOUBLE,
                tag: t_up,
            });
            ops.push(Op::Send {
                to: minus,
                bytes: face[a] * DOUBLE,
                tag: t_down,
            });
            ops.push(Op::Wait);
        }
    };
    let op = move |me: Rank, w: f64, k: u32| -> Vec<Op> {
        let mut ops = compute(share(w));
        comm3(&mut ops, me, k);
        ops
    };
    let norms = |b: &mut Builder| {
        b.allreduce(DOUBLE);
        b.allreduce(DOUBLE);
    };
    // Prologue: resid at the top, norm2u3.
    b.each(|me| op(me, 19.0 * pts(lt), lt));
    norms(b);
    b.repeat(iterations("MG", class), |b| {
        b.each(|me| {
            let mut ops = Vec::new();
            for k in (1..lt).rev() {
                ops.extend(op(me, 24.0 * pts(k), k));
            }
            ops.extend(op(me, 19.0 * pts(1), 1));
            for k in 2..=lt {
                ops.extend(op(me, 20.0 * pts(k - 1), k));
                ops.extend(op(me, 19.0 * pts(k), k));
                ops.extend(op(me, 19.0 * pts(k), k));
            }
            ops.extend(op(me, 19.0 * pts(lt), lt));
            ops
        });
    });
    norms(b);
    b.reduce(0, DOUBLE);
}

// ---------------------------------------------------------------------------
// LU

/// LU (ssor.f, exchange_1.f, exchange_3.f). 2D grid over x-y (proc_grid.f:
/// xdim = 2^ceil(log2(P)/2) rows, ydim = P / xdim columns: 4 -> 2x2, 8 -> 4x2,
/// 16 -> 4x4); row = id mod xdim, col = id / xdim; north/south differ in row,
/// west/east in column (non-periodic). Per SSOR iteration:
/// - lower sweep over the k-planes 2..nz-1: blocking receives from north and
///   west, compute, blocking sends to south and east (`exchange_1`: 5 doubles per
///   point of the local line, 5 ny/ydim to the south, 5 nx/xdim to the east);
/// - upper sweep over the k-planes in reverse: from south and east, to north
///   and west;
/// - `rhs`: `exchange_3` (2-deep ghost faces: 10 ny/ydim nz doubles north/south,
///   then 10 nx/xdim nz east/west; `MPI_Irecv`, blocking send, wait), compute.
///
/// Prologue: `rhs` and the `l2norm` allreduce (5 doubles); epilogue: the final
/// `l2norm`s, `error` and `pintgr` reductions (4 allreduces).
///
/// Compute split (assumption): c / 3 for `rhs`, c / 3 for the lower sweep
/// (`jacld` + `blts`), c / 3 for the upper sweep (`jacu` + `buts`), each sweep
/// spread evenly over its k-planes. The prologue `rhs` adds c / 3 once.
#[expect(
    clippy::too_many_lines,
    reason = "LU's phases in program order, as in the NPB source"
)]
fn lu(b: &mut Builder, class: char, c: f64) {
    let n: u64 = [64, 102, 162][class_index(class)];
    let p = b.size();
    let log2p = p.trailing_zeros();
    let xdim = 1u32 << log2p.div_ceil(2);
    let ydim = p / xdim;
    let nx_local = n / xdim as u64;
    let ny_local = n / ydim as u64;
    let planes = (n - 2) as u32;
    let plane_c = c / 3.0 / planes as f64;
    const T_SWEEP_S: u32 = 100; // travelling south (lower sweep)
    const T_SWEEP_E: u32 = 101; // travelling east (lower sweep)
    const T_SWEEP_N: u32 = 102; // travelling north (upper sweep)
    const T_SWEEP_W: u32 = 103; // travelling west (upper sweep)
    const T_X3_S: u32 = 200;
    const T_X3_N: u32 = 201;
    const T_X3_E: u32 = 202;
    const T_X3_W: u32 = 203;
    struct Nbrs {
        north: Option<Rank>,
        south: Option<Rank>,
        west: Option<Rank>,
        east: Option<Rank>,
    }
    #[derive(Clone, Copy)]
    enum Dir {
        North,
        South,
        West,
        East,
    }
    impl Nbrs {
        fn get(&self, d: Dir) -> Option<Rank> {
            match d {
                Dir::North => self.north,
                Dir::South => self.south,
                Dir::West => self.west,
                Dir::East => self.east,
            }
        }
    }
    let nbrs = move |id: Rank| -> Nbrs {
        let (row, col) = (id % xdim, id / xdim);
        Nbrs {
            north: (row > 0).then(|| id - 1),
            south: (row + 1 < xdim).then(|| id + 1),
            west: (col > 0).then(|| id - xdim),
            east: (col + 1 < ydim).then(|| id + xdim),
        }
    };
    let line_ns = 5 * ny_local * DOUBLE; // north/south line
    let line_ew = 5 * nx_local * DOUBLE; // east/west line
    let face_ns = 10 * ny_local * n * DOUBLE;
    let face_ew = 10 * nx_local * n * DOUBLE;
    let rhs = move |id: Rank| -> Vec<Op> {
        let nb = nbrs(id);
        let mut ops = Vec::new();
        for (a, ta, bb, tb, bytes) in [
            (nb.north, T_X3_S, nb.south, T_X3_N, face_ns),
            (nb.west, T_X3_E, nb.east, T_X3_W, face_ew),
        ] {
            // Receive what travels away from a (from a) and towards a (from bb).
            if let Some(x) = a {
                ops.push(Op::Irecv {
                    from: Some(x),
                    tag: ta,
                });
            }
            if let Some(y) = bb {
                ops.push(Op::Irecv {
                    from: Some(y),
                    tag: tb,
                });
            }
            if let Some(y) = bb {
                ops.push(Op::Send {
                    to: y,
                    bytes,
                    tag: ta,
                });
            }
            if let Some(x) = a {
                ops.push(Op::Send {
                    to: x,
                    bytes,
                    tag: tb,
                });
            }
            ops.push(Op::Wait);
        }
        ops.extend(compute(c / 3.0));
        ops
    };
    let l2norm = |b: &mut Builder| {
        b.allreduce(5 * DOUBLE);
    };
    b.each(rhs);
    l2norm(b);
    b.repeat(iterations("LU", class), |b| {
        // Lower sweep: from north and west to south and east; upper sweep: the reverse.
        for (from_ns, from_ew, to_ns, to_ew, tag_ns, tag_ew) in [
            (
                Dir::North,
                Dir::West,
                Dir::South,
                Dir::East,
                T_SWEEP_S,
                T_SWEEP_E,
            ),
            (
                Dir::South,
                Dir::East,
                Dir::North,
                Dir::West,
                T_SWEEP_N,
                T_SWEEP_W,
            ),
        ] {
            b.repeat(planes, |b| {
                b.each(|id| {
                    let nb = nbrs(id);
                    let mut ops = Vec::new();
                    if let Some(x) = nb.get(from_ns) {
                        ops.push(Op::Recv {
                            from: Some(x),
                            tag: tag_ns,
                        });
                    }
                    if let Some(x) = nb.get(from_ew) {
                        ops.push(Op::Recv {
                            from: Some(x),
                            tag: tag_ew,
                        });
                    }
                    ops.extend(compute(plane_c));
                    if let Some(x) = nb.get(to_ns) {
                        ops.push(Op::Send {
                            to: x,
                            bytes: line_ns,
                            tag: tag_ns,
                        });
                    }
                    if let Some(x) = nb.get(to_ew) {
                        ops.push(Op::Send {
                            to: x,
                            bytes: line_ew,
                            tag: tag_ew,
                        });
                    }
                    ops
                });
            });
        }
        b.each(rhs);
    });
    for _ in 0..4 {
        l2norm(b);
    }
}

// ---------------------------------------------------------------------------
// SP and BT

#[derive(Clone, Copy, PartialEq, Eq)]
enum Adi {
    Sp,
    Bt,
}

/// SP and BT (copy_faces.f, x_solve.f / y_solve.f / z_solve.f, make_set.f).
/// Multi-partition: P = q^2 processes, each with q cells of (N/q)^3 points; node
/// me sits at (i, j) = (me mod q, me / q) and its predecessor/successor per
/// direction are make_set.f's: pred1 = (i-1, j), pred2 = (i, j-1), pred3 =
/// (i+1, j-1), succ1 = (i+1, j), succ2 = (i, j+1), succ3 = (i-1, j+1) (mod q,
/// rank = i + q j). Per iteration (`adi`):
/// - `copy_faces`: `MPI_Irecv` from and `MPI_Isend` to the 6 neighbours, wait
///   all; each face message holds the 2-deep faces of the q - 1 cells not on
///   that global boundary: (q-1) x 2 x 5 x (N/q)^2 doubles; then `compute_rhs`;
/// - x, y, z solves: forward over the q stages (stage > 1 receives from the
///   predecessor; stage < q sends to the successor), then back substitution in
///   reverse (stage < q receives from the successor; stage > 1 sends to the
///   predecessor), `MPI_Isend`/`MPI_Irecv` + wait. Message per face point: SP
///   22 doubles forward, 10 back (x_solve.f `22*buffer_size`, `10*buffer_size`);
///   BT 30 forward (a 5x5 block + 5, `x_send_solve_info`) and 5 back
///   (`x_send_backsub_info`).
///
/// SP overlaps the receive of a stage with half of that stage's work (x_solve.f
/// computes `lhsx` / `ninvr` between posting the receive and waiting); BT does
/// not (its `lhsx` call at that point is commented out).
///
/// Compute split (assumption): c / 4 for `compute_rhs` (and `txinvr`, `add`),
/// c / 4 for each of the three solves, half forward and half back, evenly over
/// the q stages. Epilogue: `verify`'s two error-norm allreduces (5 doubles).
fn adi(b: &mut Builder, class: char, c: f64, kind: Adi) {
    let n = [64.0, 102.0, 162.0][class_index(class)];
    let p = b.size();
    let q = (p as f64).sqrt().round() as u32;
    debug_assert_eq!(q * q, p, "checked by the caller");
    let face = (n / q as f64) * (n / q as f64);
    let face_bytes = ((q - 1) as f64 * 10.0 * face) as u64 * DOUBLE;
    let (fwd_per_point, back_per_point) = match kind {
        Adi::Sp => (22.0, 10.0),
        Adi::Bt => (30.0, 5.0),
    };
    let fwd_bytes = (fwd_per_point * face) as u64 * DOUBLE;
    let back_bytes = (back_per_point * face) as u64 * DOUBLE;
    let stage_c = c / 4.0 / 2.0 / q as f64;
    let overlap = kind == Adi::Sp;
    let nbrs = move |me: Rank| -> ([Rank; 3], [Rank; 3]) {
        let (i, j) = (me % q, me / q);
        let at = |x: u32, y: u32| (x % q) + q * (y % q);
        let pred = [at(i + q - 1, j), at(i, j + q - 1), at(i + 1, j + q - 1)];
        let succ = [at(i + 1, j), at(i, j + 1), at(i + q - 1, j + 1)];
        (pred, succ)
    };
    // Tags: copy_faces 100 + direction of travel (0..6); solves 200 + 10 d + (0 fwd, 1 back).
    let copy_faces = move |me: Rank| -> Vec<Op> {
        let (pred, succ) = nbrs(me);
        let mut ops = Vec::new();
        for d in 0..3u32 {
            // Faces travelling towards the successor are received from the predecessor.
            ops.push(Op::Irecv {
                from: Some(pred[d as usize]),
                tag: 100 + 2 * d,
            });
            ops.push(Op::Irecv {
                from: Some(succ[d as usize]),
                tag: 101 + 2 * d,
            });
        }
        for d in 0..3u32 {
            ops.push(Op::Isend {
                to: succ[d as usize],
                bytes: face_bytes,
                tag: 100 + 2 * d,
            });
            ops.push(Op::Isend {
                to: pred[d as usize],
                bytes: face_bytes,
                tag: 101 + 2 * d,
            });
        }
        ops.push(Op::Wait);
        ops.extend(compute(c / 4.0));
        ops
    };
    let stage = move |ops: &mut Vec<Op>, from: Option<Rank>, tag: u32| match from {
        None => ops.extend(compute(stage_c)),
        Some(f) => {
            ops.push(Op::Irecv { from: Some(f), tag });
            if overlap {
                ops.extend(compute(stage_c / 2.0));
                ops.push(Op::Wait);
                ops.extend(compute(stage_c / 2.0));
            } else {
                ops.push(Op::Wait);
                ops.extend(compute(stage_c));
            }
        }
    };
    let solve = move |me: Rank, d: usize| -> Vec<Op> {
        let (pred, succ) = nbrs(me);
        let (tf, tb) = (200 + 10 * d as u32, 201 + 10 * d as u32);
        let mut ops = Vec::new();
        for s in 1..=q {
            stage(&mut ops, (s > 1).then_some(pred[d]), tf);
            if s < q {
                ops.push(Op::Isend {
                    to: succ[d],
                    bytes: fwd_bytes,
                    tag: tf,
                });
            }
        }
        for s in (1..=q).rev() {
            stage(&mut ops, (s < q).then_some(succ[d]), tb);
            if s > 1 {
                ops.push(Op::Isend {
                    to: pred[d],
                    bytes: back_bytes,
                    tag: tb,
                });
            }
        }
        ops
    };
    let app = if kind == Adi::Sp { "SP" } else { "BT" };
    b.repeat(iterations(app, class), |b| {
        b.each(copy_faces);
        for d in 0..3 {
            b.each(|me| solve(me, d));
        }
    });
    b.allreduce(5 * DOUBLE);
    b.allreduce(5 * DOUBLE);
}

// ---------------------------------------------------------------------------
// FT

/// FT (ft.f), 1D layout (P <= nz for every modelled class and count): per
/// iteration `evolve` and an inverse 3D FFT whose global transpose is one
/// `MPI_Alltoall` of the whole local array (16-byte complex points: n / P^2
/// points per pair), then `checksum` with an `MPI_Reduce` of one complex to the
/// root. Prologue, run twice (once untimed as in ft.f, once timed): the setup and
/// forward FFT, with one transpose.
///
/// Compute: `c` per iteration; the prologue computes c x setup_ops / iter_ops
/// (the NPB operation-count formula, [`ft_ops`]). Split: half before the
/// transpose, half after.
fn ft(b: &mut Builder, class: char, c: f64) {
    let n = ft_points(class);
    let p = b.size() as u64;
    let per_pair = n / (p * p) * 16;
    let (setup_ops, iter_ops) = ft_ops(class);
    let setup_c = c * setup_ops / iter_ops;
    for _ in 0..2 {
        b.each(|_| compute(setup_c / 2.0));
        b.alltoall(per_pair);
        b.each(|_| compute(setup_c / 2.0));
    }
    b.repeat(iterations("FT", class), |b| {
        b.each(|_| compute(c / 2.0));
        b.alltoall(per_pair);
        b.each(|_| compute(c / 2.0));
        b.reduce(0, 16);
    });
}
