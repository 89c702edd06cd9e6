//! The perturbation bookkeeping of seed 003 §4-5 (Fig. 4, §5.2, Table 3): an
//! observer ([`super::observe`]) of a gang run whose slot policy perturbs the schedule of one job
//! (the policy `cosched_policies::process::perturb::GangPerturb`, which
//! decides the perturbations and shows them through the contract's
//! `PerturbView`). It measures and never decides.
//!
//! **Run time in own quanta.** The measured run time is the target's time inside
//! its own row's slots (from each slot's start to its end or to the job's end):
//! the time the perfect gang schedule allots it. A taken-away quantum is part of
//! it (the job was owed that slot); a given-away quantum is not (it is extra).
//!
//! **Gangedness statistics.** For every processor and every slot in which the
//! target runs on at least one node, the recorder keeps the messages the
//! target's process on that node received and the progress (useful CPU time) of
//! the target's processes on all *other* nodes (S003 §5.2: "we associate the
//! number of messages received by a processor to the amount of progress made by
//! all other processors"), classified as *gang* (every rank scheduled),
//! *non-gang-running* (a perturbed slot, the node runs the target) or
//! *non-gang-non-running* (a perturbed slot, the node does not), by the ranks
//! the policy perturbed in that slot. The slot in which the target ends is left
//! out (a partial quantum), and so are messages that arrive during a global
//! switch. The online gangedness measure is the ratio of the mean message count
//! of non-gang-non-running to gang quanta (S003 Fig. 10; a high ratio means low
//! gangedness).

use super::observe::{Measure, Measures, Observer, Probe, Signal, Signals};
use crate::os::Pid;
use cosched_contract::slots::MatrixView;
use cosched_des::SimTime;
use serde::Serialize;

/// Class of a processor-quantum record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantumClass {
    Gang,
    NonGangRunning,
    NonGangNonRunning,
}

impl QuantumClass {
    pub fn name(self) -> &'static str {
        match self {
            QuantumClass::Gang => "gang",
            QuantumClass::NonGangRunning => "non-gang-running",
            QuantumClass::NonGangNonRunning => "non-gang-non-running",
        }
    }
}

/// One processor-quantum record of the estimator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantumStat {
    /// Index of the slot (all rows), from 0.
    pub slot: u64,
    /// Rank of the target whose node this is.
    pub rank: u32,
    pub class: QuantumClass,
    /// Messages the rank received during the slot.
    pub messages: u64,
    /// Useful CPU time of the target's other ranks during the slot, ns.
    pub sender_progress_ns: i64,
}

/// The report's entry name in [`Measures`] (summary `process.measures`).
pub const NAME: &str = "perturb";

/// What the harness measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PerturbOutput {
    /// The target's run time inside its own row's slots, ns.
    pub own_ns: i64,
    /// Perturbations that took effect (before the target ended).
    pub applied: u32,
    /// The estimator's records.
    pub quanta: Vec<QuantumStat>,
}

/// Mean and standard deviation (population) of a class's records.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClassStats {
    pub n: u64,
    pub msg_mean: f64,
    pub msg_sd: f64,
    pub progress_mean_ns: f64,
    pub progress_sd_ns: f64,
}

fn mean_sd(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / n;
    let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n;
    (m, v.sqrt())
}

impl PerturbOutput {
    /// Statistics of one class of records.
    pub fn stats(&self, class: QuantumClass) -> ClassStats {
        let rows: Vec<&QuantumStat> = self.quanta.iter().filter(|q| q.class == class).collect();
        let msgs: Vec<f64> = rows.iter().map(|q| q.messages as f64).collect();
        let prog: Vec<f64> = rows.iter().map(|q| q.sender_progress_ns as f64).collect();
        let (msg_mean, msg_sd) = mean_sd(&msgs);
        let (progress_mean_ns, progress_sd_ns) = mean_sd(&prog);
        ClassStats {
            n: rows.len() as u64,
            msg_mean,
            msg_sd,
            progress_mean_ns,
            progress_sd_ns,
        }
    }

    /// The online gangedness measure: mean messages per non-gang-non-running
    /// quantum over mean messages per gang quantum (NaN when either is missing
    /// or the gang mean is 0). High ratio, low gangedness.
    pub fn message_ratio(&self) -> f64 {
        let g = self.stats(QuantumClass::Gang).msg_mean;
        let ng = self.stats(QuantumClass::NonGangNonRunning).msg_mean;
        if g > 0.0 && ng.is_finite() {
            ng / g
        } else {
            f64::NAN
        }
    }
}

/// The harness's figures in the summary (docs/formats/summary.md,
/// `measures.perturb`): the target's run time in its own slots, the
/// perturbations applied, and per class of processor-quantum (gang,
/// non-gang-running `ngr`, non-gang-non-running `ngn`) the record count, mean
/// and SD of messages received and of the other ranks' progress (useful CPU
/// seconds), and the message ratio ngn / gang.
#[derive(Serialize)]
struct Summary {
    own_s: f64,
    perturbations: u32,
    gang_n: u64,
    gang_msg_mean: f64,
    gang_msg_sd: f64,
    gang_prog_mean_s: f64,
    gang_prog_sd_s: f64,
    ngr_n: u64,
    ngr_msg_mean: f64,
    ngr_msg_sd: f64,
    ngr_prog_mean_s: f64,
    ngr_prog_sd_s: f64,
    ngn_n: u64,
    ngn_msg_mean: f64,
    ngn_msg_sd: f64,
    ngn_prog_mean_s: f64,
    ngn_prog_sd_s: f64,
    msg_ratio: f64,
}

impl Measure for PerturbOutput {
    fn summary(&self) -> serde_json::Value {
        let (g, r, n) = (
            self.stats(QuantumClass::Gang),
            self.stats(QuantumClass::NonGangRunning),
            self.stats(QuantumClass::NonGangNonRunning),
        );
        let s = Summary {
            own_s: self.own_ns as f64 / 1e9,
            perturbations: self.applied,
            gang_n: g.n,
            gang_msg_mean: g.msg_mean,
            gang_msg_sd: g.msg_sd,
            gang_prog_mean_s: g.progress_mean_ns / 1e9,
            gang_prog_sd_s: g.progress_sd_ns / 1e9,
            ngr_n: r.n,
            ngr_msg_mean: r.msg_mean,
            ngr_msg_sd: r.msg_sd,
            ngr_prog_mean_s: r.progress_mean_ns / 1e9,
            ngr_prog_sd_s: r.progress_sd_ns / 1e9,
            ngn_n: n.n,
            ngn_msg_mean: n.msg_mean,
            ngn_msg_sd: n.msg_sd,
            ngn_prog_mean_s: n.progress_mean_ns / 1e9,
            ngn_prog_sd_s: n.progress_sd_ns / 1e9,
            msg_ratio: self.message_ratio(),
        };
        serde_json::to_value(s).expect("numbers and counts serialize")
    }
}

/// The bookkeeping's state inside a run.
#[derive(Clone, Debug)]
pub struct Recorder {
    /// The target job (index) and its first pid and ranks once started.
    target: usize,
    first_pid: Option<Pid>,
    ranks: usize,
    /// Slots started (all rows).
    slot: u64,
    /// The current slot: whether it is the target's, and its start.
    in_slot: bool,
    own_now: bool,
    slot_start: SimTime,
    /// Per rank, in the current slot: messages received and useful CPU time.
    msgs: Vec<u64>,
    progress: Vec<i64>,
    done: bool,
    own_ns: i64,
    quanta: Vec<QuantumStat>,
}

impl Recorder {
    /// The bookkeeping of target job `target`.
    pub fn new(target: usize) -> Self {
        Self {
            target,
            first_pid: None,
            ranks: 0,
            slot: 0,
            in_slot: false,
            own_now: false,
            slot_start: SimTime::ZERO,
            msgs: Vec::new(),
            progress: Vec::new(),
            done: false,
            own_ns: 0,
            quanta: Vec::new(),
        }
    }

    /// Job `job` started with `ranks` processes, pids from `first`.
    pub fn job_started(&mut self, job: usize, first: Pid, ranks: usize) {
        if job != self.target {
            return;
        }
        self.first_pid = Some(first);
        self.ranks = ranks;
        self.msgs = vec![0; ranks];
        self.progress = vec![0; ranks];
    }

    fn rank_of(&self, pid: Pid) -> Option<usize> {
        let f = self.first_pid?;
        (pid >= f && ((pid - f) as usize) < self.ranks).then(|| (pid - f) as usize)
    }

    /// A slot starts with the policy's matrix `m` (after a switch or at the
    /// first admission): whether it is the target's own.
    pub fn slot_start(&mut self, m: &dyn MatrixView, now: SimTime) {
        self.in_slot = true;
        self.slot += 1;
        self.slot_start = now;
        self.msgs.iter_mut().for_each(|x| *x = 0);
        self.progress.iter_mut().for_each(|x| *x = 0);
        let own_row = m.row_of(self.target);
        self.own_now = !self.done && own_row.is_some() && m.active() == own_row;
    }

    /// A message reached process `to`.
    pub fn on_message(&mut self, to: Pid) {
        if self.in_slot {
            if let Some(r) = self.rank_of(to) {
                self.msgs[r] += 1;
            }
        }
    }

    /// Process `pid` made `ns` of progress (useful CPU time).
    pub fn on_progress(&mut self, pid: Pid, ns: i64) {
        if self.in_slot {
            if let Some(r) = self.rank_of(pid) {
                self.progress[r] += ns;
            }
        }
    }

    /// The current slot ends (every CPU has been taken back and accounted);
    /// the policy perturbed the target's ranks `perturbed` in it.
    pub fn slot_end(&mut self, now: SimTime, perturbed: &[u32]) {
        if !self.in_slot {
            return;
        }
        self.in_slot = false;
        if self.done || self.first_pid.is_none() {
            return;
        }
        if self.own_now {
            self.own_ns += (now - self.slot_start).as_ns();
        } else if perturbed.is_empty() {
            return; // the target did not run in this slot
        }
        let total: i64 = self.progress.iter().sum();
        for r in 0..self.ranks {
            let hit = perturbed.contains(&(r as u32));
            let class = match (self.own_now, perturbed.is_empty(), hit) {
                (true, true, _) => QuantumClass::Gang,
                (true, false, false) | (false, _, true) => QuantumClass::NonGangRunning,
                _ => QuantumClass::NonGangNonRunning,
            };
            self.quanta.push(QuantumStat {
                slot: self.slot - 1,
                rank: r as u32,
                class,
                messages: self.msgs[r],
                sender_progress_ns: total - self.progress[r],
            });
        }
    }

    /// Job `job` ended at `now`.
    pub fn job_done(&mut self, job: usize, now: SimTime) {
        if job != self.target || self.done {
            return;
        }
        self.done = true;
        if self.in_slot && self.own_now {
            self.own_ns += (now - self.slot_start).as_ns();
        }
    }

    /// End-of-run checks: the own-slot time fits in the target's span
    /// (`span_ns`); no more perturbations took effect (`applied`, the policy's
    /// count) than were planned (`planned`); the records' progress (each
    /// slot's total, counted once per other rank) does not exceed the target's
    /// useful CPU time (`useful_ns`).
    pub fn check_figures(
        &self,
        span_ns: i64,
        useful_ns: i64,
        applied: u32,
        planned: u32,
    ) -> Result<(), String> {
        if self.own_ns > span_ns {
            return Err(format!(
                "own-slot time {} ns > span {span_ns} ns",
                self.own_ns
            ));
        }
        if applied > planned {
            return Err(format!(
                "{applied} perturbations applied, {planned} planned"
            ));
        }
        // With n ranks, each slot's records sum the total progress n - 1 times.
        let n = self.ranks.max(2) as i64;
        let recorded: i64 = self.quanta.iter().map(|q| q.sender_progress_ns).sum();
        if recorded > (n - 1) * useful_ns {
            return Err(format!(
                "recorded progress {recorded} ns > {} x useful {useful_ns} ns",
                n - 1
            ));
        }
        Ok(())
    }

    /// What was measured, with the policy's count of perturbations `applied`.
    pub fn finish(self, applied: u32) -> PerturbOutput {
        PerturbOutput {
            own_ns: self.own_ns,
            applied,
            quanta: self.quanta,
        }
    }
}

/// The bookkeeping's signals: the target's start and end, slot starts and
/// ends, messages and progress. Its end-of-run checks are [`Recorder::check`]
/// (with the target's span and useful CPU time, the policy's counts); its
/// report, the records with the policy's count of applied perturbations.
impl Observer for Recorder {
    fn signals(&self) -> Signals {
        Signals::QUANTUM_RECORDS | Signals::JOB_STARTED | Signals::JOB_ENDED
    }

    fn on(&mut self, s: &Signal<'_>, probe: &Probe<'_, '_>) {
        let now = probe.now();
        match *s {
            Signal::JobStarted { job, first, nodes } => self.job_started(job, first, nodes.len()),
            Signal::JobEnded { job } => self.job_done(job, now),
            Signal::SlotStarted => {
                self.slot_start(probe.matrix().expect("perturbations need a matrix"), now);
            }
            Signal::SlotEnded => {
                let p = probe.perturbation();
                self.slot_end(now, p.map_or(&[], |p| p.perturbed()));
            }
            Signal::Message { to } => self.on_message(to),
            Signal::Progress { pid, used } => self.on_progress(pid, used),
            _ => {}
        }
    }

    fn check(&self, probe: &Probe<'_, '_>) -> Result<(), String> {
        let (Some((span, useful)), Some(p)) =
            (probe.job_span_and_useful(self.target), probe.perturbation())
        else {
            return Ok(());
        };
        self.check_figures(span, useful, p.applied(), p.planned())
            .map_err(|m| format!("perturbation harness: {m}"))
    }

    fn report(self: Box<Self>, probe: &Probe<'_, '_>, into: &mut Measures) {
        let applied = probe.perturbation().map_or(0, |p| p.applied());
        into.put(NAME, self.finish(applied));
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn check_rejects_impossible_figures() {
        let mut p = Recorder::new(0);
        p.job_started(0, 0, 4);
        assert!(p.check_figures(100, 0, 4, 4).is_ok());
        p.own_ns = 101;
        assert!(p
            .check_figures(100, 0, 4, 4)
            .unwrap_err()
            .contains("own-slot time"));
        p.own_ns = 0;
        assert!(p
            .check_figures(100, 0, 5, 4)
            .unwrap_err()
            .contains("5 perturbations applied"));
        p.quanta.push(QuantumStat {
            slot: 0,
            rank: 0,
            class: QuantumClass::Gang,
            messages: 0,
            sender_progress_ns: 31,
        });
        assert!(p
            .check_figures(100, 10, 4, 4)
            .unwrap_err()
            .contains("recorded progress"));
        assert!(p.check_figures(100, 11, 4, 4).is_ok());
    }
}
