//! Memory and paging of the process-level engine (the model: the module doc of
//! [`super`], "Memory"): the node's free job memory in KB, swap-out of the pages
//! taken from other processes, the page-in queue and its disk reads, and the
//! debug check of a node's memory accounting.

use super::{kb, Ev, PState, Pid, SegmentKind, Sim, Stop};
use cosched_contract::node::{DequeueReason, EnqueueReason};
use cosched_des::SimTime;

impl Sim<'_> {
    /// Frees at least `need` KB on `node` by taking pages from its other processes,
    /// least recently run first, running ones last; never from `except`, from a
    /// process whose page-in read is under way, or from one paged in that has not
    /// run since. Returns whether enough was freed.
    ///
    /// Swap-out: the pages taken are written to swap on the node's disk (at
    /// `disk_mb_s`, first come first served with page-ins and I/O bursts; a page-in
    /// queued after the writes starts when they are done). Every page taken is
    /// written: a process that has run since its pages were read has written its
    /// arrays (the NAS codes update their whole data every iteration), and one that
    /// has not is not a victim, so no page taken is still clean in the swap cache
    /// (the case Linux 2.4's `try_to_swap_out` drops without I/O).
    ///
    /// A process waiting in the page-in queue, its read not started, is a victim
    /// like any other: Linux 2.4's reclaim (`mm/vmscan.c`, 2.4.17: `swap_out` walks
    /// every address space on `mmlist` whatever its task's state, and
    /// `try_to_swap_out` spares only a page whose pte is young, of a `VM_LOCKED`
    /// area, active, or locked for I/O by `TryLockPage`) takes pages from a task
    /// asleep in a page fault and spares only the pages being read. Sparing the
    /// queued processes instead would let the queue's head wait forever for pages
    /// that only a process queued behind it holds.
    pub(super) fn make_room(&mut self, node: u32, need: i64, except: Pid, now: SimTime) -> bool {
        while self.nodes[node as usize].free_kb < need {
            let victim = self.nodes[node as usize]
                .procs
                .iter()
                .copied()
                .filter(|&q| {
                    let p = &self.procs[q as usize];
                    q != except && !p.reading && !p.pinned && p.resident_kb > 0
                })
                .min_by_key(|&q| {
                    let p = &self.procs[q as usize];
                    (matches!(p.state, PState::Running(_)), p.last_ran, q)
                });
            let Some(v) = victim else { break };
            let short = need - self.nodes[node as usize].free_kb;
            let take = short.min(self.procs[v as usize].resident_kb);
            self.procs[v as usize].resident_kb -= take;
            let disk = self.disk_time(take);
            let n = &mut self.nodes[node as usize];
            n.free_kb += take;
            let start = n.disk_free_at.max(now);
            let done = start + disk;
            n.disk_free_at = done;
            self.debug_check_memory(node);
            self.record_disk(node, v, start, done, SegmentKind::SwapOut);
            self.counters.paged_out_kb += take;
        }
        self.nodes[node as usize].free_kb >= need
    }

    /// `pid` was picked with pages missing: it blocks until they are read back.
    pub(super) fn page_in(&mut self, node: u32, pid: Pid, now: SimTime) {
        self.nodes[node as usize]
            .sched
            .stop(pid, SimTime::ZERO, Stop::Blocked, now);
        self.set_state(pid, PState::Blocked, now);
        let p = &mut self.procs[pid as usize];
        p.paging = true;
        p.blocked_at = now;
        self.hook_dequeue(pid, DequeueReason::PageIn, now);
        self.nodes[node as usize].page_queue.push_back(pid);
        self.pump_paging(node, now);
    }

    /// How long the node's disk takes to read or write `kb` KB.
    pub(super) fn disk_time(&self, kb: i64) -> SimTime {
        SimTime::from_secs_f64(kb as f64 / 1000.0 / self.plat.disk_mb_s)
    }

    /// Starts the disk reads of waiting page-ins, in order, while memory can be made
    /// (the pages taken for one are written out before its read). The fresh part of
    /// a footprint is not read: a page-in of fresh pages only ends when the frames
    /// it takes are written out.
    pub(super) fn pump_paging(&mut self, node: u32, now: SimTime) {
        while let Some(&pid) = self.nodes[node as usize].page_queue.front() {
            let p = &self.procs[pid as usize];
            let (missing, read) = (
                p.mem_kb - p.resident_kb,
                p.mem_kb - p.resident_kb - p.fresh_kb,
            );
            if !self.make_room(node, missing, pid, now) {
                return;
            }
            let disk = self.disk_time(read);
            let n = &mut self.nodes[node as usize];
            n.page_queue.pop_front();
            n.free_kb -= missing;
            let start = n.disk_free_at.max(now);
            let done = start + disk;
            n.disk_free_at = done;
            let p = &mut self.procs[pid as usize];
            p.resident_kb = p.mem_kb;
            p.fresh_kb = 0;
            p.reading = true;
            self.debug_check_memory(node);
            if read > 0 {
                self.record_disk(node, pid, start, done, SegmentKind::PageIn);
            }
            self.counters.page_ins += 1;
            self.counters.paged_in_kb += read;
            self.q
                .schedule(done, Ev::PageDone { to: pid })
                .expect("future");
        }
    }

    /// Debug builds: the node's memory accounting is consistent after a change (no
    /// negative free, resident or committed memory; free plus resident memory is the
    /// node's job memory; resident memory never exceeds a footprint).
    pub(super) fn debug_check_memory(&self, node: u32) {
        if !cfg!(debug_assertions) {
            return;
        }
        let n = &self.nodes[node as usize];
        assert!(n.free_kb >= 0, "node {node}: {} KB free", n.free_kb);
        assert!(
            n.committed_kb >= 0,
            "node {node}: {} KB committed",
            n.committed_kb
        );
        let mut resident = 0;
        for &q in &n.procs {
            let p = &self.procs[q as usize];
            assert!(
                (0..=p.mem_kb - p.fresh_kb).contains(&p.resident_kb) && p.fresh_kb >= 0,
                "pid {q}: {} KB resident and {} KB fresh of {} KB",
                p.resident_kb,
                p.fresh_kb,
                p.mem_kb
            );
            resident += p.resident_kb;
        }
        assert_eq!(
            n.free_kb + resident,
            kb(self.plat.job_memory_mb),
            "node {node}: free + resident memory is the node's job memory"
        );
    }

    /// The page-in read of `to` completed: it is resident and pinned until it
    /// runs, and wakes.
    pub(super) fn page_done(&mut self, to: Pid, now: SimTime) {
        let p = &mut self.procs[to as usize];
        (p.paging, p.reading, p.pinned) = (false, false, true);
        self.wake(to, EnqueueReason::PagedIn, now);
    }
}
