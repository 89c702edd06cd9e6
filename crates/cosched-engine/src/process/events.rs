//! The clock of a process-level run: the next event in (time, sequence) order,
//! either a CPU's planned segment end (its timer slot) or the queue's next
//! event, the run's watchdogs (event limit, time limit, interruption), and
//! whether the run is stuck.

use super::{Cond, Ev, PState, ProcError, Sim};
use cosched_des::SimTime;

impl Sim<'_> {
    /// Takes the next event: a CPU's segment end (its timer slot) or the queue's
    /// next event, whichever comes first in (time, sequence) order. No event left
    /// while jobs are unfinished is a deadlock.
    pub(super) fn next_event(&mut self) -> Result<(SimTime, Ev), ProcError> {
        let cpus = self.plat.cpus_per_node;
        let seg = self.segs.peek().filter(|&(t, seq, _)| {
            self.q
                .peek_key()
                .is_none_or(|(qt, id)| (t, seq) < (qt, id.0))
        });
        if let Some((t, _, slot)) = seg {
            self.segs.clear(slot);
            self.q.advance_to(t).expect("the earliest event");
            let (node, cpu) = (slot as u32 / cpus, slot as u32 % cpus);
            Ok((t, Ev::SegEnd { node, cpu }))
        } else if let Some(ev) = self.q.pop() {
            Ok((ev.time, ev.event))
        } else {
            Err(self.deadlock())
        }
    }

    /// Counts the event taken at `now` and stops the run past the event limit,
    /// on an interruption request or past the time limit.
    pub(super) fn check_limits(&mut self, now: SimTime) -> Result<(), ProcError> {
        self.counters.events += 1;
        if self.counters.events > self.opts.event_limit {
            return Err(ProcError::EventLimit {
                limit: self.opts.event_limit,
                time: now,
                unfinished: self.fg_left,
            });
        }
        if cosched_des::interrupt::requested() {
            return Err(ProcError::Interrupted { time: now });
        }
        if now > self.opts.time_limit {
            let ProcError::Deadlock { first, dump, .. } = self.deadlock() else {
                unreachable!()
            };
            return Err(ProcError::TimeLimit {
                limit: self.opts.time_limit,
                unfinished: self.fg_left,
                first,
                dump,
            });
        }
        Ok(())
    }

    /// Whether no process can ever progress although timers are still pending:
    /// no job is still to arrive, no CPU runs anything, nothing is runnable,
    /// and every unfinished process sleeps in a wait with no message,
    /// acknowledgement or send completion on the way and no disk burst or page-in
    /// under way. Policy timers and ticks cannot change that (their actions
    /// change priorities and charge interrupts; they never satisfy a wait).
    ///
    /// Under a slot policy (gang mode) the same holds for the jobs admitted: a
    /// process of a job whose row is not the active one is not stuck, it waits
    /// for its slot in its node's dispatcher, which counts it as runnable; a slot
    /// timer or switch only takes CPUs back and picks among runnable processes,
    /// and the slot policy's decisions never wake a sleeping one. What the slot
    /// policy may still do is admit a job it holds in its queue, at a later slot
    /// timer (its decision, unknown to the engine); such a job cannot wake the
    /// sleeping ones (messages never cross jobs), so the run still cannot end
    /// once an admitted foreground job can never progress. The check therefore
    /// also asks, in gang mode, that such a job exists: with only background
    /// jobs asleep, a foreground job the policy admits later may still end the
    /// run.
    pub(super) fn stuck(&self) -> bool {
        if self.arrivals_left > 0 {
            return false;
        }
        if self.slots.is_some() && !self.foreground_admitted() {
            return false;
        }
        if self
            .nodes
            .iter()
            .any(|n| n.sched.runnable() > 0 || n.cpus.iter().any(|c| c.cur.is_some()))
        {
            return false;
        }
        self.procs.iter().all(|p| {
            p.state == PState::Done
                || (p.state == PState::Blocked
                    && !p.paging
                    && p.in_flight == 0
                    && p.acks_pending == 0
                    && p.sends_pending == 0
                    && p.wait.is_some_and(|w| w.cond != Cond::Io))
        })
    }

    /// Whether a foreground job has been admitted and has not ended.
    fn foreground_admitted(&self) -> bool {
        (0..self.jobs.len())
            .any(|j| !self.jobs[j].background && self.job_pids[j].is_some() && !self.ended[j])
    }
}
