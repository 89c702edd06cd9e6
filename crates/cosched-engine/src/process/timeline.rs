//! The timeline of a process-level run ([`super::ProcOptions::record_timeline`],
//! [`Segment`]): what each CPU did (switching, useful work, spinning), what each
//! disk did (page-ins, swap-outs, I/O bursts) and each process's ready and
//! blocked intervals. Recording changes nothing in the run.

use super::{PState, Pid, Segment, SegmentKind, Sim};
use cosched_des::SimTime;

impl Sim<'_> {
    /// Records what `cpu` of `node`, running `pid`, did from `from` (its last
    /// accounting) to `now`: switching until `progress_from`, then `used` ns of
    /// useful work, then spinning. Empty segments are not recorded.
    pub(super) fn record_cpu(
        &mut self,
        node: u32,
        cpu: u32,
        pid: Pid,
        (from, progress_from): (SimTime, SimTime),
        used: i64,
        now: SimTime,
    ) {
        let p = &self.procs[pid as usize];
        let Some(t) = &mut self.timeline else { return };
        let (job, rank) = (p.job, p.rank);
        let mut seg = |start: SimTime, end: SimTime, kind| {
            if end > start {
                t.push(Segment {
                    node,
                    cpu: Some(cpu),
                    pid,
                    job,
                    rank,
                    start,
                    end,
                    kind,
                });
            }
        };
        seg(from, progress_from, SegmentKind::Switch);
        let u = progress_from.max(from) + SimTime(used);
        seg(progress_from.max(from), u, SegmentKind::Useful);
        seg(u, now, SegmentKind::Spin);
    }

    /// Records that the node's disk served `pid` from `start` to `end`.
    pub(super) fn record_disk(
        &mut self,
        node: u32,
        pid: Pid,
        start: SimTime,
        end: SimTime,
        kind: SegmentKind,
    ) {
        if let Some(t) = &mut self.timeline {
            let p = &self.procs[pid as usize];
            t.push(Segment {
                node,
                cpu: None,
                pid,
                job: p.job,
                rank: p.rank,
                start,
                end,
                kind,
            });
        }
    }

    /// Moves `pid` to `state`, recording on the timeline the ready or blocked
    /// interval it leaves.
    #[inline]
    pub(super) fn set_state(&mut self, pid: Pid, state: PState, now: SimTime) {
        let p = &mut self.procs[pid as usize];
        if let Some(t) = &mut self.timeline {
            let kind = match p.state {
                PState::Ready => Some(SegmentKind::Ready),
                PState::Blocked => Some(SegmentKind::Blocked),
                PState::Running(_) | PState::Done => None,
            };
            if let Some(kind) = kind.filter(|_| now > p.state_since) {
                t.push(Segment {
                    node: p.node,
                    cpu: None,
                    pid,
                    job: p.job,
                    rank: p.rank,
                    start: p.state_since,
                    end: now,
                    kind,
                });
            }
        }
        if p.state == PState::Blocked {
            p.slept_ns += (now - p.state_since).as_ns();
        }
        p.state = state;
        p.state_since = now;
    }
}
