//! Page-granular paging of the process-level engine: how a process touches its
//! pages as it computes, when it faults, and which of its pages a fault of another
//! process takes (the disk and the victim loop are in [`super::memory`]).
//!
//! **Touch model.** A process sweeps its footprint once per iteration of its main
//! loop, at a constant rate while it does useful CPU work: `kb_per_ns` = footprint /
//! compute of one iteration ([`sweep_ns`]), kept as an exact ratio. The NAS codes update their whole data in
//! every iteration of their main loop (seed 000 Table 2: "these values do not change
//! during execution"), so one sweep per iteration is the least they touch; a program
//! without a loop sweeps its footprint once over its whole compute. Spinning and
//! blocking touch nothing.
//!
//! **Where the missing pages are.** In sweep order, from the process's position:
//! first `ahead_kb` resident pages, then its non-resident pages as one run, then the
//! rest of its resident pages (touched behind it). With a cyclic sweep and
//! least-recently-used replacement this shape is kept: the pages a process touched
//! longest ago are those just after its missing run, and those are the ones taken
//! from it first (the run grows at its end). A fault reads the next cluster at the
//! run's head, which becomes `ahead_kb`. The fresh part of a footprint (never
//! touched: zero-filled, no read) is a count inside the run, used by the first
//! faults.
//!
//! **What touches pages.** Only the program's computation ([`Op::Compute`] and
//! bursts, `Pages::compute_ns`). The rest of a process's CPU work is the kernel's
//! or the MPI library's on its behalf: the wake-up interrupt (also the one that ends
//! a fault), the policy's interrupts, send and receive overheads. It touches none of
//! the program's pages, runs before the rest of the computation, and never faults.
//! Were the wake-up interrupt of a fault counted as computation, it would touch the
//! cluster just read faster than the cluster lasts and fault again inside the same
//! interrupt, owing a new interrupt each time: the interrupt work would grow without
//! end and the process would never get back to its program.
//!
//! **Fault.** A computing process faults when it has touched all `ahead_kb` and
//! pages are missing: the engine plans the segment end there (the time is `ahead_kb`
//! / `kb_per_ns`, rounded up, after the kernel work owed), so there is no event per
//! page. The fault reads `swap.readahead_kb` (Linux 2.4's `1 << page_cluster` pages)
//! or what is missing if less; the process blocks until the read is done. The
//! cluster read is kept (not taken by another fault) until the process has computed
//! on it: a process woken from its fault and preempted before it ran (a run of no
//! time, or only its interrupt) still finds its cluster when it runs again.
//!
//! **Dirty pages.** Every page a process touched is dirty (the NAS codes write the
//! arrays they sweep). Pages read by a fault and not touched yet are clean: taken,
//! they need no write (Linux 2.4's `try_to_swap_out` drops a clean swap-cache page).
//! Dirty pages are written before their frames are reused.

use super::{Pid, Sim};
use cosched_model::program::{compute_ns, Op};

/// The paging state of one process.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Pages {
    /// Resident pages ahead of the process's position before its missing run, KB.
    pub(super) ahead_kb: i64,
    /// Of `ahead_kb`, pages read by a fault and not touched since (at the run's
    /// side), KB.
    pub(super) clean_kb: i64,
    /// CPU time of one sweep of the footprint, ns (the touch rate is the
    /// footprint over this; 0: it touches nothing).
    pub(super) sweep_ns: i64,
    /// Touched and not counted yet, in KB x `sweep_ns` (below `sweep_ns`: less
    /// than a KB), so that the touch arithmetic is exact.
    pub(super) carry: i64,
    /// Of the process's CPU work left (`cpu_left`), the program's computation, ns:
    /// the only part that touches pages. The rest is kernel and library work, done
    /// first.
    pub(super) compute_ns: i64,
}

/// The compute of one sweep of a rank's footprint, ns: one iteration of the
/// top-level loop ([`Op::Loop`] or [`Op::LoopUntil`]) that holds the most compute,
/// or the rank's whole compute when it has no loop with compute.
pub(super) fn sweep_ns(ops: &[Op]) -> i64 {
    let mut best: Option<(i64, i64)> = None; // (total, one iteration)
    let mut i = 0;
    while i < ops.len() {
        let (count, len) = match ops[i] {
            Op::Loop { count, len } => (i64::from(count), len as usize),
            Op::LoopUntil { len, .. } => (1, len as usize),
            _ => {
                i += 1;
                continue;
            }
        };
        let body = &ops[i + 1..(i + 1 + len).min(ops.len())];
        let one = compute_ns(body);
        let total = one.saturating_mul(count);
        if one > 0 && best.is_none_or(|(t, _)| total > t) {
            best = Some((total, one));
        }
        i += 1 + len;
    }
    best.map_or_else(|| compute_ns(ops), |(_, one)| one)
}

impl Pages {
    /// A process of `mem_kb` KB with `resident_kb` of it resident at start and
    /// `ops` to run: a fully resident process has no resident page ahead of a
    /// missing run; one that is not touches its resident part first.
    pub(super) fn new(ops: &[Op], mem_kb: i64, resident_kb: i64) -> Self {
        Pages {
            ahead_kb: if resident_kb < mem_kb { resident_kb } else { 0 },
            clean_kb: 0,
            sweep_ns: sweep_ns(ops).max(0),
            carry: 0,
            compute_ns: 0,
        }
    }
}

impl Sim<'_> {
    /// `pid` is to do `used_ns` of its CPU work left (`cpu_left`, not yet
    /// charged): the kernel work owed goes first, the rest is computation, which
    /// touches its pages ahead (never past its missing run; a fully resident process
    /// keeps cycling). Having computed, it no longer keeps the cluster its last fault
    /// read.
    pub(super) fn touch(&mut self, pid: Pid, used_ns: i64) {
        let p = &mut self.procs[pid as usize];
        let kernel = (p.cpu_left - p.pages.compute_ns).max(0);
        let computed = (used_ns - kernel).clamp(0, p.pages.compute_ns);
        if computed == 0 {
            return;
        }
        p.pages.compute_ns -= computed;
        p.pinned = false;
        let used_ns = computed;
        let sweep = i128::from(p.pages.sweep_ns);
        if sweep == 0 || p.pages.ahead_kb == 0 {
            return;
        }
        let units = i128::from(used_ns) * i128::from(p.mem_kb) + i128::from(p.pages.carry);
        let whole = units / sweep;
        if whole >= i128::from(p.pages.ahead_kb) {
            (p.pages.ahead_kb, p.pages.carry) = (0, 0);
        } else {
            p.pages.ahead_kb -= whole as i64;
            p.pages.carry = (units % sweep) as i64;
        }
        p.pages.clean_kb = p.pages.clean_kb.min(p.pages.ahead_kb);
    }

    /// CPU time until `pid` touches a missing page (its kernel work owed, then
    /// computation up to the page), ns; `None` if it does not (nothing missing,
    /// no computation left, or it touches nothing).
    pub(super) fn ns_to_fault(&self, pid: Pid) -> Option<i64> {
        let p = &self.procs[pid as usize];
        if p.resident_kb == p.mem_kb
            || p.pages.sweep_ns == 0
            || p.mem_kb == 0
            || p.pages.compute_ns == 0
        {
            return None;
        }
        let kernel = (p.cpu_left - p.pages.compute_ns).max(0);
        let units = (i128::from(p.pages.ahead_kb) * i128::from(p.pages.sweep_ns)
            - i128::from(p.pages.carry))
        .max(0);
        let mem = i128::from(p.mem_kb);
        Some(kernel + ((units + mem - 1) / mem).min(i128::from(i64::MAX / 4)) as i64)
    }

    /// Whether the running `pid` has reached a missing page with computation left
    /// (its kernel work owed done).
    pub(super) fn at_fault(&self, pid: Pid) -> bool {
        let p = &self.procs[pid as usize];
        p.pages.compute_ns > 0
            && p.cpu_left <= p.pages.compute_ns
            && p.resident_kb < p.mem_kb
            && p.pages.ahead_kb == 0
            && p.pages.sweep_ns > 0
    }

    /// How many KB the pages of `q` can give now: those behind it (touched),
    /// and, unless it runs, is being read or was paged in and has not run since,
    /// those ahead of it too.
    pub(super) fn takeable(&self, q: Pid) -> i64 {
        let p = &self.procs[q as usize];
        let behind = p.resident_kb - p.pages.ahead_kb;
        let spare_ahead = p.reading || p.pinned || matches!(p.state, super::PState::Running(_));
        behind + if spare_ahead { 0 } else { p.pages.ahead_kb }
    }

    /// Takes `kb` (at most [`Sim::takeable`]) from `q`, oldest first: the pages
    /// behind it from the end of its missing run (dirty), then those ahead of it
    /// from the run's side (clean ones first). Returns the KB to write out.
    pub(super) fn take_pages(&mut self, q: Pid, kb: i64) -> i64 {
        let p = &mut self.procs[q as usize];
        let behind = p.resident_kb - p.pages.ahead_kb;
        let from_behind = kb.min(behind);
        let from_ahead = kb - from_behind;
        let clean = from_ahead.min(p.pages.clean_kb);
        p.pages.ahead_kb -= from_ahead;
        p.pages.clean_kb -= clean;
        p.resident_kb -= kb;
        debug_assert!(p.pages.ahead_kb >= 0 && p.resident_kb >= 0);
        kb - clean
    }
}
