//! Detection of a job whose program deadlocks (an unsafe MPI program).
//!
//! Under the rendezvous protocol ([`super::net`]) two ranks that each make a
//! blocking rendezvous-size send to the other before posting a receive wait for
//! each other for ever, as in MPI; so do ranks that each wait to receive from the
//! other, or a rank that waits for a rank that has finished. A blocked waiter lets
//! the run end with the engine's global deadlock check, but a spinning one keeps its
//! CPU, the OS keeps switching, and the run would only end at its time limit.
//!
//! The rule, per job: the job is deadlocked when none of its unfinished ranks can
//! ever progress, i.e. every unfinished rank is inside a message wait (a receive, a
//! blocking send's completion or a `Wait`) that
//! - is not satisfied by what it has (it would resume when it next runs),
//! - has nothing on its way to it but rendezvous requests that have reached it (no
//!   eager message, request or rendezvous data on the wire),
//! - can answer none of the requests that reached it (no receive slot matches), and
//! - has no acknowledgement or send completion to come: each of its pending
//!   rendezvous sends is a request still unanswered at a rank of the job.
//!
//! Messages never cross jobs, and nothing but a message, a request's answer, an
//! acknowledgement or a send completion ends such a wait, so none of the job's ranks
//! will ever act again. The check runs when a wait begins, when a message or request
//! reaches a rank and leaves its wait unsatisfied, and when a rank finishes; it ends
//! the run with [`ProcError::ProgramDeadlock`] naming the job, each rank's
//! operation and what it waits for.
//!
//! The run's global deadlock (no event left while processes have not finished,
//! [`ProcError::Deadlock`]) is described here too, with every node's state.

use super::{Cond, PState, Pid, Proc, ProcError, Sim};
use cosched_des::SimTime;

/// At most this many ranks are described in the error.
const SHOWN: usize = 8;

#[cfg(test)]
thread_local! {
    /// Tests of the global check alone turn the per-job check off (this thread's runs).
    pub(super) static NO_PROGRAM_CHECK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl Sim<'_> {
    /// Whether `pid` sits in a wait it cannot leave by itself (module doc), all but
    /// the condition on its pending sends.
    fn cannot_progress(&self, pid: Pid) -> bool {
        let p = &self.procs[pid as usize];
        let Some(w) = p.wait else { return false };
        w.cond != Cond::Io
            && p.in_flight as usize == p.rts.len()
            && !self.satisfied(pid, w.cond)
            && self.matching_rts(pid, w.cond).is_empty()
    }

    /// Checks `pid`'s job (module doc); on a deadlock, records the error that ends
    /// the run.
    pub(super) fn check_program_deadlock(&mut self, pid: Pid, now: SimTime) {
        #[cfg(test)]
        if NO_PROGRAM_CHECK.get() {
            return;
        }
        // With no foreground job left the run is over (background processes stop).
        if self.fatal.is_some()
            || self.fg_left == 0
            || (self.procs[pid as usize].state != PState::Done && !self.cannot_progress(pid))
        {
            return;
        }
        let job = self.procs[pid as usize].job;
        let Some(first) = self.job_pids[job] else {
            return;
        };
        let pids = first..first + self.jobs[job].program.size();
        let mut waiting = Vec::new();
        for q in pids.clone() {
            if self.procs[q as usize].state == PState::Done {
                continue;
            }
            if !self.cannot_progress(q) {
                return;
            }
            waiting.push(q);
        }
        if waiting.is_empty() {
            return;
        }
        // Requests unanswered at the job's ranks, by sender.
        let mut unanswered = vec![0u32; waiting.len()];
        let mut asked = Vec::new();
        for q in pids {
            for &id in &self.procs[q as usize].rts {
                let r = self.rndv.get(id);
                if let Some(k) = waiting.iter().position(|&w| w == r.sender) {
                    unanswered[k] += 1;
                    asked.push((r.sender, q));
                }
            }
        }
        let all_unanswered = waiting.iter().zip(&unanswered).all(|(&q, &n)| {
            let p = &self.procs[q as usize];
            p.acks_pending + p.sends_pending == n
        });
        if !all_unanswered {
            return;
        }
        let ranks: Vec<String> = waiting
            .iter()
            .take(SHOWN)
            .map(|&q| self.describe_wait(q, &asked))
            .collect();
        let more = waiting.len().saturating_sub(SHOWN);
        let finished = self.jobs[job].program.size() as usize - waiting.len();
        self.fatal = Some(ProcError::ProgramDeadlock {
            job,
            time: now,
            detail: format!(
                "{}{}{}",
                ranks.join("; "),
                if more > 0 {
                    format!("; and {more} more rank(s)")
                } else {
                    String::new()
                },
                if finished > 0 {
                    format!("; {finished} rank(s) finished")
                } else {
                    String::new()
                }
            ),
            dump: self.dump_nodes(),
        });
    }

    /// "rank R at op K (OP) waits for WHAT", with the ranks its unanswered
    /// rendezvous requests wait at (`asked`: (sender, receiver) pairs).
    fn describe_wait(&self, pid: Pid, asked: &[(Pid, Pid)]) -> String {
        let p = &self.procs[pid as usize];
        let first = self.job_pids[p.job].expect("admitted");
        let op = p.pc.checked_sub(1).and_then(|k| p.ops.get(k));
        let what = match p.wait.map(|w| w.cond) {
            Some(Cond::Msg { from, tag } | Cond::MsgOr { from, tag, .. }) => format!(
                "a message tagged {tag} from {}",
                from.map_or("any rank".into(), |f| format!("rank {f}"))
            ),
            Some(Cond::Ack) => "its rendezvous send's completion".into(),
            Some(Cond::Completion) => "its non-blocking operations' completion".into(),
            Some(Cond::Io) | None => "nothing".into(),
        };
        let at: Vec<String> = asked
            .iter()
            .filter(|&&(s, _)| s == pid)
            .map(|&(_, r)| format!("rank {}", r - first))
            .collect();
        let requests = if at.is_empty() {
            String::new()
        } else {
            format!(
                " (its rendezvous request waits at {}, which has no matching receive posted)",
                at.join(", ")
            )
        };
        format!(
            "rank {} at op {} ({}) waits for {what}{requests}",
            p.rank,
            p.pc.saturating_sub(1),
            op.map_or("-".into(), |o| format!("{o:?}"))
        )
    }
}

impl Sim<'_> {
    /// The run's global deadlock: no event is left although processes have not
    /// finished (or the time limit's report: the same description).
    pub(super) fn deadlock(&self) -> ProcError {
        let waiting: Vec<&Proc> = self
            .procs
            .iter()
            .filter(|p| p.state != PState::Done)
            .collect();
        let first = waiting
            .first()
            .map(|p| {
                format!(
                    "job {} rank {} at op {} waiting {:?}",
                    p.job,
                    p.rank,
                    p.pc,
                    p.wait.map(|w| w.cond)
                )
            })
            .unwrap_or_default();
        ProcError::Deadlock {
            time: self.q.now(),
            waiting: waiting.len(),
            first,
            dump: self.dump_nodes(),
        }
    }

    /// The state of every node that still holds processes: its native scheduler's
    /// dump and, when not empty, its policy's (as sched_ext's debug dump), one line
    /// each, for the deadlock and time-limit errors.
    fn dump_nodes(&self) -> String {
        let mut out = String::new();
        for (k, n) in self.nodes.iter().enumerate() {
            let policy = self.policies[k].dump();
            if n.procs.is_empty() && policy.is_empty() {
                continue;
            }
            let running: Vec<String> = n
                .cpus
                .iter()
                .map(|c| c.cur.map_or("-".into(), |p| p.to_string()))
                .collect();
            out.push_str(&format!(
                "\n  node {k}: processes {:?}, running [{}]; native: {}",
                n.procs,
                running.join(" "),
                n.sched.dump()
            ));
            if !policy.is_empty() {
                out.push_str(&format!("; policy {}: {policy}", self.policies[k].name()));
            }
        }
        out
    }
}
