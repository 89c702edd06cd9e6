//! Memory and paging of the process-level engine (the model: the module doc of
//! [`super`], "Memory", and [`super::paging`] for the touch and fault rules): the
//! node's free job memory in KB, taking pages from other processes and writing the
//! dirty ones out, the page-fault queue and its disk reads, and the debug check of
//! a node's memory accounting.
//!
//! The disk serves requests one at a time in arrival order (page-fault reads,
//! write-outs and I/O bursts); a paging request costs the platform's
//! `swap.access_ms` (seek and rotation) plus its bytes at `disk_mb_s`.

use super::{kb, Ev, PState, Pid, SegmentKind, Sim, Stop};
use cosched_contract::node::{DequeueReason, EnqueueReason};
use cosched_des::SimTime;

impl Sim<'_> {
    /// Frees at least `need` KB on `node` by taking pages from its other processes,
    /// least recently run first, running ones last ([`Sim::takeable`]: never from
    /// `except`, never the pages ahead of a running process, of one whose fault
    /// read is under way, or of one paged in that has not run since). Within a
    /// process the oldest pages go first ([`Sim::take_pages`]). Returns whether
    /// enough was freed and when the last write-out it started ends.
    ///
    /// Write-out: the dirty pages taken from one process are written to swap in one
    /// disk request (access cost plus transfer), queued behind the disk's earlier
    /// requests; the fault read that needs the frames is queued after it. Clean
    /// pages (read by a fault and not touched since) are dropped without I/O, as
    /// Linux 2.4's `try_to_swap_out` drops a clean swap-cache page.
    ///
    /// A process waiting in the fault queue is a victim like any other: Linux 2.4's
    /// reclaim (`mm/vmscan.c`, 2.4.17: `swap_out` walks every address space on
    /// `mmlist` whatever its task's state, and `try_to_swap_out` spares only a page
    /// whose pte is young, of a `VM_LOCKED` area, active, or locked for I/O by
    /// `TryLockPage`) takes pages from a task asleep in a page fault and spares only
    /// the pages being read.
    pub(super) fn make_room(
        &mut self,
        node: u32,
        need: i64,
        except: Pid,
        now: SimTime,
    ) -> (bool, Option<SimTime>) {
        let mut written_until = None;
        while self.nodes[node as usize].free_kb < need {
            let victim = self.nodes[node as usize]
                .procs
                .iter()
                .copied()
                .filter(|&q| q != except && self.takeable(q) > 0)
                .min_by_key(|&q| {
                    let p = &self.procs[q as usize];
                    (matches!(p.state, PState::Running(_)), p.last_ran, q)
                });
            let Some(v) = victim else { break };
            let short = need - self.nodes[node as usize].free_kb;
            let take = short.min(self.takeable(v));
            let dirty = self.take_pages(v, take);
            self.nodes[node as usize].free_kb += take;
            self.debug_check_memory(node);
            if dirty > 0 {
                let (start, done) = self.disk_request(node, dirty, now);
                self.record_disk(node, v, start, done, SegmentKind::SwapOut);
                self.counters.paged_out_kb += dirty;
                written_until = Some(done);
            }
        }
        (self.nodes[node as usize].free_kb >= need, written_until)
    }

    /// Queues a paging request of `kb` KB on the node's disk: (start, end).
    pub(super) fn disk_request(&mut self, node: u32, kb: i64, now: SimTime) -> (SimTime, SimTime) {
        let cost = self.disk_access + self.disk_time(kb);
        let n = &mut self.nodes[node as usize];
        let start = n.disk_free_at.max(now);
        n.disk_free_at = start + cost;
        (start, n.disk_free_at)
    }

    /// The running `pid` touched a missing page ([`Sim::at_fault`]). Fresh pages
    /// with free frames for them are zero-filled at once and it goes on (no I/O);
    /// otherwise it blocks in the node's fault queue until its cluster is read.
    pub(super) fn fault(&mut self, node: u32, cpu: u32, pid: Pid, now: SimTime) {
        let n = &self.nodes[node as usize];
        let p = &self.procs[pid as usize];
        let zero = p.fresh_kb.min(n.free_kb);
        if zero > 0 && n.page_queue.is_empty() {
            self.nodes[node as usize].free_kb -= zero;
            let p = &mut self.procs[pid as usize];
            p.resident_kb += zero;
            p.fresh_kb -= zero;
            p.pages.ahead_kb += zero;
            self.debug_check_memory(node);
            self.plan(node, cpu, now);
            return;
        }
        self.release_cpu(node, cpu, pid, Stop::Blocked, now);
        self.slot_block(pid);
        let p = &mut self.procs[pid as usize];
        p.paging = true;
        p.blocked_at = now;
        self.hook_dequeue(pid, DequeueReason::PageIn, now);
        self.nodes[node as usize].page_queue.push_back(pid);
        self.pump_paging(node, now);
        self.schedule(node, now);
    }

    /// How long the node's disk takes to transfer `kb` KB.
    pub(super) fn disk_time(&self, kb: i64) -> SimTime {
        SimTime::from_secs_f64(kb as f64 / 1000.0 / self.plat.disk_mb_s)
    }

    /// Serves the fault queue in order while memory can be made: each fault gets
    /// the next cluster of its missing run (`swap.readahead_kb`, or what is
    /// missing if less). Its fresh part is zero-filled; the rest is read after the
    /// write-out of the frames it takes. The process wakes when both are done.
    pub(super) fn pump_paging(&mut self, node: u32, now: SimTime) {
        while let Some(&pid) = self.nodes[node as usize].page_queue.front() {
            let p = &self.procs[pid as usize];
            let need = (p.mem_kb - p.resident_kb).min(self.readahead_kb);
            let fresh = p.fresh_kb.min(need);
            let (enough, written) = self.make_room(node, need, pid, now);
            if !enough {
                return;
            }
            let read = need - fresh;
            let n = &mut self.nodes[node as usize];
            n.page_queue.pop_front();
            n.free_kb -= need;
            let p = &mut self.procs[pid as usize];
            p.resident_kb += need;
            p.fresh_kb -= fresh;
            p.pages.ahead_kb += need;
            p.pages.clean_kb = read;
            p.reading = true;
            self.debug_check_memory(node);
            let mut done = written.unwrap_or(now).max(now);
            self.counters.page_ins += 1;
            if read > 0 {
                let (start, end) = self.disk_request(node, read, now);
                self.record_disk(node, pid, start, end, SegmentKind::PageIn);
                self.counters.paged_in_kb += read;
                done = done.max(end);
            }
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
            assert!(
                (0..=p.resident_kb).contains(&p.pages.ahead_kb)
                    && (0..=p.pages.ahead_kb).contains(&p.pages.clean_kb),
                "pid {q}: {} KB ahead, {} KB clean of {} KB resident",
                p.pages.ahead_kb,
                p.pages.clean_kb,
                p.resident_kb
            );
            resident += p.resident_kb;
        }
        assert_eq!(
            n.free_kb + resident,
            kb(self.plat.job_memory_mb),
            "node {node}: free + resident memory is the node's job memory"
        );
    }

    /// The fault read of `to` completed: its new cluster is kept until it has
    /// computed on it ([`super::paging`]), and it wakes.
    pub(super) fn page_done(&mut self, to: Pid, now: SimTime) {
        let p = &mut self.procs[to as usize];
        (p.paging, p.reading, p.pinned) = (false, false, true);
        self.wake(to, EnqueueReason::PagedIn, now);
    }
}
