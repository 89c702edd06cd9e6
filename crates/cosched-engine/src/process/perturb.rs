//! Perturbed gang scheduling of one job (seed 003 §4, Fig. 4) and the online
//! gangedness estimator (seed 003 §5.2, Table 3, Fig. 10).
//!
//! **Environment.** The gang matrix holds the measured *target* job (job 0) and,
//! in the other rows, competing jobs; without perturbations the target runs
//! perfectly ganged in its own row's slots. A perturbation changes one slot on
//! one processor (the node of one of the target's ranks):
//! - *takeaway* (S003 §4 "each perturbation removes a quantum of processing time
//!   from a single processor"): in one of the target's slots, that node runs the
//!   process of another row instead (the competitor; idle if it has none);
//! - *giveaway* ("each perturbation gives an extra time quantum of processing time
//!   to a single processor"): in the slot that follows one of the target's slots,
//!   that node runs the target's process instead of the active row's.
//!
//! The processor is fixed (rank `proc`, Sub_FX / Add_FX) or chosen round-robin
//! (the k-th perturbation on rank k mod P, Sub_RR / Add_RR). Perturbations come in
//! batches of four, three of the target's slots apart (S003 §4: "randomly
//! distributed across the run time of the application in batches of four ... A
//! fixed interval of three time quanta separate perturbations within a batch");
//! the batch starts are drawn uniformly over the target's first `span` slots from
//! the seeded stream `"perturb"`, batches never overlapping.
//!
//! **Run time in own quanta.** The measured run time is the target's time inside
//! its own row's slots (from each slot's start to its end or to the job's end):
//! the time the perfect gang schedule allots it. A taken-away quantum is part of
//! it (the job was owed that slot); a given-away quantum is not (it is extra).
//!
//! **Gangedness statistics.** For every processor and every slot in which the
//! target runs on at least one node, the estimator records the messages the
//! target's process on that node received and the progress (useful CPU time) of
//! the target's processes on all *other* nodes (S003 §5.2: "we associate the
//! number of messages received by a processor to the amount of progress made by
//! all other processors"), classified as *gang* (every rank scheduled),
//! *non-gang-running* (a perturbed slot, the node runs the target) or
//! *non-gang-non-running* (a perturbed slot, the node does not). The slot in
//! which the target ends is left out (a partial quantum), and so are messages
//! that arrive during a global switch. The online gangedness measure is the ratio
//! of the mean message count of non-gang-non-running to gang quanta (S003 Fig. 10;
//! a high ratio means low gangedness).

use crate::os::Pid;
pub use cosched_contract::process::{Choice, Kind, PerturbParams};
use cosched_contract::slots::MatrixView;
use cosched_des::{RngStreams, SimTime};

/// Perturbations per batch and their spacing in the target's slots (S003 §4).
pub const BATCH: u32 = 4;
pub const SPACING: u32 = 3;

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

/// The perturbations as (target slot index, rank), sorted by slot.
pub fn draw(params: &PerturbParams, ranks: u32) -> Vec<(u32, u32)> {
    use rand::Rng;
    let batches = params.count.div_ceil(BATCH);
    let width = (BATCH - 1) * SPACING + 1; // slots one batch covers
    let mut rng = RngStreams::new(params.seed).stream("perturb");
    let mut starts: Vec<u32> = Vec::new();
    let room = params.span.saturating_sub(width).max(1);
    // Rejection sampling of non-overlapping batches; if the span is too short for
    // them all, later batches are placed after the last one.
    let mut tries = 0;
    while (starts.len() as u32) < batches {
        let s = rng.gen_range(0..room);
        tries += 1;
        if tries > 10_000 {
            let next = starts.iter().max().map_or(0, |m| m + width);
            starts.push(next);
            continue;
        }
        if starts.iter().all(|&t| s.abs_diff(t) >= width) {
            starts.push(s);
        }
    }
    starts.sort_unstable();
    let mut out = Vec::new();
    let mut k = 0u32;
    for s in starts {
        for i in 0..BATCH {
            if k == params.count {
                break;
            }
            let rank = match params.choice {
                Choice::Fixed(r) => r,
                Choice::RoundRobin => k % ranks.max(1),
            };
            out.push((s + i * SPACING, rank));
            k += 1;
        }
    }
    out
}

/// The harness's state inside a run.
#[derive(Clone, Debug)]
pub struct Perturber {
    pub params: PerturbParams,
    /// The target job (index) and its first pid and nodes once started.
    target: usize,
    first_pid: Option<Pid>,
    nodes: Vec<u32>,
    plan: Vec<(u32, u32)>,
    /// The target slot the next slot of another row follows, if any.
    after_own: Option<u32>,
    /// Slots started (all rows) and target slots started.
    slot: u64,
    own_slots: u32,
    /// The current slot: whether it is the target's, its start, its perturbed ranks.
    in_slot: bool,
    own_now: bool,
    slot_start: SimTime,
    perturbed: Vec<u32>,
    /// Per rank, in the current slot: messages received and useful CPU time.
    msgs: Vec<u64>,
    progress: Vec<i64>,
    done: bool,
    out: PerturbOutput,
}

impl Perturber {
    pub fn new(params: PerturbParams) -> Self {
        Self {
            params,
            target: 0,
            first_pid: None,
            nodes: Vec::new(),
            plan: Vec::new(),
            after_own: None,
            slot: 0,
            own_slots: 0,
            in_slot: false,
            own_now: false,
            slot_start: SimTime::ZERO,
            perturbed: Vec::new(),
            msgs: Vec::new(),
            progress: Vec::new(),
            done: false,
            out: PerturbOutput::default(),
        }
    }

    /// The target job started on `nodes` (rank order) with pids from `first`.
    pub fn job_started(&mut self, job: usize, first: Pid, nodes: &[u32]) {
        if job != self.target {
            return;
        }
        self.first_pid = Some(first);
        self.nodes = nodes.to_vec();
        self.plan = draw(&self.params, nodes.len() as u32);
        self.msgs = vec![0; nodes.len()];
        self.progress = vec![0; nodes.len()];
    }

    fn rank_of(&self, pid: Pid) -> Option<usize> {
        let f = self.first_pid?;
        (pid >= f && ((pid - f) as usize) < self.nodes.len()).then(|| (pid - f) as usize)
    }

    /// A slot starts with row `active` (after a switch or at the first admission).
    pub fn slot_start(&mut self, m: &dyn MatrixView, now: SimTime) {
        self.in_slot = true;
        self.slot += 1;
        self.slot_start = now;
        self.msgs.iter_mut().for_each(|x| *x = 0);
        self.progress.iter_mut().for_each(|x| *x = 0);
        self.perturbed.clear();
        let own_row = m.row_of(self.target);
        self.own_now = !self.done && own_row.is_some() && m.active() == own_row;
        if self.first_pid.is_none() || self.done {
            return;
        }
        // Takeaways hit the target's own slot k; giveaways the slot right after it.
        let k = if self.own_now {
            self.after_own = Some(self.own_slots);
            self.own_slots += 1;
            (self.params.kind == Kind::Takeaway).then_some(self.own_slots - 1)
        } else {
            self.after_own
                .take()
                .filter(|_| self.params.kind == Kind::Giveaway)
        };
        if let Some(k) = k {
            self.perturbed = self
                .plan
                .iter()
                .filter(|&&(s, _)| s == k)
                .map(|&(_, r)| r)
                .collect();
            self.out.applied += self.perturbed.len() as u32;
        }
    }

    /// The process `node`'s CPU runs in the current slot, given the gang
    /// dispatcher's choice `hint`: a taken-away node runs another row's runnable
    /// process (or idles), a given-away node runs the target's process (or idles
    /// while it is not runnable: the quantum is the target's).
    pub fn choose(
        &self,
        m: &dyn MatrixView,
        node: u32,
        hint: Option<Pid>,
        runnable: impl Fn(Pid) -> bool,
    ) -> Option<Pid> {
        if !self.in_slot || self.perturbed.is_empty() {
            return hint;
        }
        let hit = self
            .perturbed
            .iter()
            .any(|&r| self.nodes.get(r as usize) == Some(&node));
        if !hit {
            return hint;
        }
        let active = m.active()?;
        match self.params.kind {
            Kind::Takeaway => {
                let rows = m.rows();
                (1..rows)
                    .map(|k| (active + k) % rows)
                    .filter_map(|r| m.cell(r, node).map(|(_, p)| p))
                    .find(|&p| runnable(p))
            }
            Kind::Giveaway => {
                let own = m.row_of(self.target)?;
                m.cell(own, node).map(|(_, p)| p).filter(|&p| runnable(p))
            }
        }
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

    /// The current slot ends (every CPU has been taken back and accounted).
    pub fn slot_end(&mut self, now: SimTime) {
        if !self.in_slot {
            return;
        }
        self.in_slot = false;
        if self.done || self.first_pid.is_none() {
            return;
        }
        if self.own_now {
            self.out.own_ns += (now - self.slot_start).as_ns();
        } else if self.perturbed.is_empty() {
            return; // the target did not run in this slot
        }
        let total: i64 = self.progress.iter().sum();
        for r in 0..self.nodes.len() {
            let hit = self.perturbed.contains(&(r as u32));
            let class = match (self.own_now, self.perturbed.is_empty(), hit) {
                (true, true, _) => QuantumClass::Gang,
                (true, false, false) | (false, _, true) => QuantumClass::NonGangRunning,
                _ => QuantumClass::NonGangNonRunning,
            };
            self.out.quanta.push(QuantumStat {
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
            self.out.own_ns += (now - self.slot_start).as_ns();
        }
    }

    /// End-of-run checks: the own-slot time fits in the target's span (`span_ns`);
    /// no more perturbations took effect than were planned; the records' progress
    /// (each slot's total, counted once) does not exceed the target's useful CPU
    /// time (`useful_ns`).
    pub fn check(&self, span_ns: i64, useful_ns: i64) -> Result<(), String> {
        if self.out.own_ns > span_ns {
            return Err(format!(
                "own-slot time {} ns > span {span_ns} ns",
                self.out.own_ns
            ));
        }
        if self.out.applied > self.params.count {
            return Err(format!(
                "{} perturbations applied, {} planned",
                self.out.applied, self.params.count
            ));
        }
        // With n ranks, each slot's records sum the total progress n - 1 times.
        let n = self.nodes.len().max(2) as i64;
        let recorded: i64 = self.out.quanta.iter().map(|q| q.sender_progress_ns).sum();
        if recorded > (n - 1) * useful_ns {
            return Err(format!(
                "recorded progress {recorded} ns > {} x useful {useful_ns} ns",
                n - 1
            ));
        }
        Ok(())
    }

    pub fn finish(self) -> PerturbOutput {
        self.out
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn check_rejects_impossible_figures() {
        let mut p = Perturber::new(PerturbParams {
            kind: Kind::Takeaway,
            choice: Choice::Fixed(0),
            count: 4,
            span: 20,
            seed: 0,
        });
        p.job_started(0, 0, &[0, 1, 2, 3]);
        assert!(p.check(100, 0).is_ok());
        p.out.own_ns = 101;
        assert!(p.check(100, 0).unwrap_err().contains("own-slot time"));
        p.out.own_ns = 0;
        p.out.applied = 5;
        assert!(p
            .check(100, 0)
            .unwrap_err()
            .contains("5 perturbations applied"));
        p.out.applied = 4;
        p.out.quanta.push(QuantumStat {
            slot: 0,
            rank: 0,
            class: QuantumClass::Gang,
            messages: 0,
            sender_progress_ns: 31,
        });
        assert!(p.check(100, 10).unwrap_err().contains("recorded progress"));
        assert!(p.check(100, 11).is_ok());
    }
}
