//! Multi-level feedback queue with the Solaris time-sharing (TS) dispatch table.
//!
//! Algorithm (Solaris `ts_dptbl` defaults, docs/models/seed-parameters.md §1.3.3):
//! 60 levels, 0 lowest and 59 highest. A free CPU runs the first queued process of
//! the highest level, for that level's quantum. A process that uses its whole
//! quantum drops to `tqexp(level)`; one that wakes from sleep rises to
//! `slpret(level)`; one that waited in the queue longer than `maxwait(level)`
//! seconds (checked at one-second granularity, as `ts_update` does) rises to
//! `lwait(level)`. A preempted process returns to the head of its level. A woken
//! process preempts the running one if its level is higher. New processes start
//! at level 29.
//!
//! Coscheduling hooks: this model has no fairness check (seed 000 §5.2: a process
//! kept in the highest queue cannot be held to its share), so a runnable
//! recommendation is always followed and a boost lifts the process to level 59.
//!
//! Nice: as Solaris's `ts_donice`, a process's user priority is
//! `upri = -(nice * 60) / 20` (`ts_maxupri = 60`, `NZERO = 20`) and it is dispatched at
//! `umdpri = clamp(level + upri, 0, 59)` (`TS_NEWUMDPRI`): the queue order, the
//! quantum and the preemption test use `umdpri`, while the table's `tqexp`,
//! `slpret` and `lwait` move `level` (`ts_cpupri`). With nice 0, `umdpri = level`.
//!
//! Parameter: `quantum_scale` (1) multiplies every quantum of the table.

use super::{slot, NativeScheduler, Pick, Pid, Stop, Wake};
use cosched_des::SimTime;

/// One row of the dispatch table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level {
    pub quantum_ms: u32,
    pub tqexp: u8,
    pub slpret: u8,
    pub maxwait_s: u32,
    pub lwait: u8,
}

/// The Solaris TS default dispatch table (`dispadmin -c TS -g`).
pub fn solaris_ts_table() -> Vec<Level> {
    (0u8..60)
        .map(|l| {
            let (quantum_ms, slpret, lwait) = match l {
                0..=9 => (200, 50, 50),
                10..=19 => (160, 51, 51),
                20..=29 => (120, 52, 52),
                30..=34 => (80, 53, 53),
                35..=39 => (80, 54, 54),
                40..=44 => (40, 55, 55),
                45 => (40, 56, 56),
                46 => (40, 57, 57),
                47..=48 => (40, 58, 58),
                49..=58 => (40, 58, 59),
                _ => (20, 59, 59),
            };
            let tqexp = match l {
                0..=9 => 0,
                45 => 35,
                46 => 36,
                59 => 49,
                _ => l - 10,
            };
            let maxwait_s = if l == 59 { 32000 } else { 0 };
            Level {
                quantum_ms,
                tqexp,
                slpret,
                maxwait_s,
                lwait,
            }
        })
        .collect()
}

#[derive(Clone, Default, Debug)]
struct Proc {
    /// The table level (`ts_cpupri`).
    level: u8,
    /// When it last entered the queue (for the starvation rule).
    queued_at: i64,
    /// User priority from the nice value (`ts_upri`).
    upri: i32,
}

pub struct Mlfq {
    table: Vec<Level>,
    scale: f64,
    procs: Vec<Proc>,
    /// Runnable processes in queue order (per level order is by position).
    queue: Vec<Pid>,
}

const START_LEVEL: u8 = 29;
const TOP: u8 = 59;
const SECOND: i64 = 1_000_000_000;

impl Mlfq {
    pub fn solaris_ts(quantum_scale: f64) -> Self {
        Self {
            table: solaris_ts_table(),
            scale: quantum_scale,
            procs: Vec::new(),
            queue: Vec::new(),
        }
    }

    pub fn level(&self, p: Pid) -> u8 {
        self.procs[p as usize].level
    }

    /// The dispatch priority (`ts_umdpri`): the level plus the user priority.
    pub fn priority(&self, p: Pid) -> u8 {
        let s = &self.procs[p as usize];
        (i32::from(s.level) + s.upri).clamp(0, i32::from(TOP)) as u8
    }

    /// Applies the starvation rule to every queued process.
    fn age(&mut self, now: SimTime) {
        for &q in &self.queue {
            let s = &mut self.procs[q as usize];
            let row = self.table[s.level as usize];
            let waited_s = (now.as_ns() - s.queued_at) / SECOND;
            if waited_s > row.maxwait_s as i64 {
                s.level = row.lwait;
                s.queued_at = now.as_ns();
            }
        }
    }

    fn quantum(&self, level: u8) -> SimTime {
        SimTime::from_secs_f64(self.table[level as usize].quantum_ms as f64 * self.scale / 1000.0)
    }
}

impl NativeScheduler for Mlfq {
    fn name(&self) -> String {
        format!("mlfq[quantum_scale={}]", self.scale)
    }

    fn add(&mut self, p: Pid, now: SimTime) {
        *slot(&mut self.procs, p) = Proc {
            level: START_LEVEL,
            queued_at: now.as_ns(),
            upri: 0,
        };
    }

    fn set_nice(&mut self, p: Pid, nice: i32) {
        self.procs[p as usize].upri = -(nice.clamp(-20, 19) * 60) / 20;
    }

    fn exit(&mut self, p: Pid) {
        self.queue.retain(|&q| q != p);
    }

    fn enqueue(&mut self, p: Pid, how: Wake, now: SimTime) {
        let s = &mut self.procs[p as usize];
        s.queued_at = now.as_ns();
        match how {
            Wake::Woken { .. } => s.level = self.table[s.level as usize].slpret,
            Wake::Expired => s.level = self.table[s.level as usize].tqexp,
            Wake::New | Wake::Preempted => {}
        }
        if how == Wake::Preempted {
            self.queue.insert(0, p);
        } else {
            self.queue.push(p);
        }
    }

    fn remove(&mut self, p: Pid, _now: SimTime) {
        self.queue.retain(|&q| q != p);
    }

    fn pick(&mut self, now: SimTime, hint: Option<Pid>) -> Option<Pick> {
        self.age(now);
        let (k, followed) = match hint.and_then(|h| self.queue.iter().position(|&q| q == h)) {
            Some(k) => (k, true),
            None => {
                let mut best: Option<(u8, usize)> = None;
                for (k, &q) in self.queue.iter().enumerate() {
                    let l = self.priority(q);
                    if best.is_none_or(|(bl, _)| l > bl) {
                        best = Some((l, k));
                    }
                }
                (best?.1, false)
            }
        };
        let pid = self.queue.remove(k);
        Some(Pick {
            pid,
            slice: self.quantum(self.priority(pid)),
            followed_hint: followed,
        })
    }

    fn stop(&mut self, _p: Pid, _ran: SimTime, _why: Stop, _now: SimTime) {}

    fn should_preempt(&self, woken: Pid, running: Pid, _ran: SimTime) -> bool {
        self.priority(woken) > self.priority(running)
    }

    fn boost(&mut self, p: Pid, _now: SimTime) {
        self.procs[p as usize].level = TOP;
    }

    fn unboost(&mut self, _p: Pid) {}

    fn runnable(&self) -> usize {
        self.queue.len()
    }

    fn dump(&self) -> String {
        let q: Vec<String> = self
            .queue
            .iter()
            .map(|&p| {
                format!(
                    "{p}(L{},P{})",
                    self.procs[p as usize].level,
                    self.priority(p)
                )
            })
            .collect();
        format!("{} runnable=[{}]", self.name(), q.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_solaris_defaults() {
        let t = solaris_ts_table();
        assert_eq!(t.len(), 60);
        assert_eq!(
            t[0],
            Level {
                quantum_ms: 200,
                tqexp: 0,
                slpret: 50,
                maxwait_s: 0,
                lwait: 50
            }
        );
        assert_eq!(t[45].tqexp, 35);
        assert_eq!(
            t[52],
            Level {
                quantum_ms: 40,
                tqexp: 42,
                slpret: 58,
                maxwait_s: 0,
                lwait: 59
            }
        );
        assert_eq!(
            t[59],
            Level {
                quantum_ms: 20,
                tqexp: 49,
                slpret: 59,
                maxwait_s: 32000,
                lwait: 59
            }
        );
    }

    #[test]
    fn expiry_lowers_and_sleep_raises() {
        let mut s = Mlfq::solaris_ts(1.0);
        s.add(0, SimTime::ZERO);
        s.enqueue(0, Wake::New, SimTime::ZERO);
        let pk = s.pick(SimTime::ZERO, None).unwrap();
        assert_eq!(pk.slice, SimTime::from_ms(120)); // level 29
        s.stop(0, pk.slice, Stop::Expired, SimTime::from_ms(120));
        s.enqueue(0, Wake::Expired, SimTime::from_ms(120));
        assert_eq!(s.level(0), 19);
        s.pick(SimTime::from_ms(120), None).unwrap();
        s.stop(0, SimTime::from_ms(1), Stop::Blocked, SimTime::from_ms(121));
        s.enqueue(
            0,
            Wake::Woken {
                slept: SimTime::from_ms(20),
            },
            SimTime::from_ms(141),
        );
        assert_eq!(s.level(0), 51);
    }

    #[test]
    fn starving_processes_are_lifted() {
        let mut s = Mlfq::solaris_ts(1.0);
        s.add(0, SimTime::ZERO);
        s.add(1, SimTime::ZERO);
        s.boost(0, SimTime::ZERO);
        s.enqueue(1, Wake::New, SimTime::ZERO);
        // 1 (level 29) waits more than one second: lifted to lwait(29) = 52.
        s.enqueue(0, Wake::New, SimTime::ZERO);
        let pk = s.pick(SimTime::from_ms(1500), None).unwrap();
        assert_eq!(pk.pid, 0); // 59 still beats 52
        assert_eq!(s.level(1), 52);
    }
}
