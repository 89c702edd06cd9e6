//! The online gangedness estimator of gang runs (seed 003 §5): an observer
//! ([`super::observe`]) of every gang run ([`Observer`]), fed by the engine's signals (messages
//! received, CPU time held, progress per process, slot starts and ends), it
//! classifies each job as of low or high gangedness from coarse message counts.
//! It measures and never decides: each class change reaches the slot policy
//! through the contract's measurement op `SlotPolicy::on_gangedness` (the
//! flexible options' `low = auto` use it), and the final estimates go into the
//! run's output. Its parameters are the slot policy's (`SlotPolicy::gang`: the
//! flexible options' `est_quantum`, and `low = auto`'s classification
//! parameters, else their defaults).
//!
//! **Records.** Every gang slot is cut into processor-quanta of about
//! `est_quantum` (`round(slot / est_quantum)` equal parts, at least one; S003's
//! Fugu scheduler records per processor and quantum of its fine-grained local
//! scheduler, §5.2). For every quantum, every job in the matrix with at least
//! two live ranks, and every live rank of it (a processor of the job), the
//! estimator counts the messages the rank received during the quantum and the
//! progress (useful CPU time, attributed to the quantum in which the engine
//! accounted it) of the job's other ranks (S003 §5.2: "we associate the number
//! of messages received by a processor to the amount of progress made by all
//! other processors"). A rank is *running* in a quantum when it held a CPU
//! (useful, spinning or switching) for at least half of it. Each record is
//! classified with S003 §5.2's sets:
//! - *gang* ("gang-all"): every live rank of the job ran;
//! - *non-gang-running*: some ranks ran, this one did;
//! - *non-gang-non-running*: some ranks ran, this one did not.
//!
//! A quantum in which no rank of the job ran gives no record (the job was not
//! scheduled). Messages that arrive during a global switch are not counted.
//! Non-gang quanta arise in ordinary gang runs from the gang bit (a blocked rank
//! yields its slot; another row's process runs there), I/O interrupts,
//! alternate scheduling, fragment filling, and ranks blocked on their disk.
//!
//! **Measure.** Running counts per job and class (records, messages, sender
//! progress). The gangedness measure is S003 Fig. 10's ratio of the mean
//! message count per non-gang-non-running record to the mean per gang record
//! (the non-running set has as many senders as the gang set); a high ratio
//! means low gangedness.
//!
//! **Class** ([`GangednessParams`]; assumption G-S003-5):
//! - a job that received no message in any of its records, once it has at
//!   least `window` records of any set, is `low` (no communication: none of its
//!   ranks can wait for an unscheduled peer's message; an I/O-bound job whose
//!   ranks are rarely all running has no gang records at all);
//! - otherwise `unknown` while the job has fewer than `window` gang records or
//!   fewer than `window` non-gang-non-running records;
//! - otherwise `low` when the ratio is at least `ratio_threshold` (messages
//!   only in non-gang quanta: an infinite ratio), `high` below.
//!
//! The default threshold 0.15 is the geometric middle of S003 Table 3's ratio
//! gap: the largest high-gangedness ratio (Water, 1.17 / 15.41 = 0.076) and the
//! smallest low-gangedness ratio (LU, 0.89 / 2.85 = 0.31), which the paper
//! calls "at least a factor of five" apart (S003 §5.2).

use super::observe::{self, Measure, Measurement, Measures, Probe, Signal, Signals};
use crate::os::Pid;
pub use cosched_contract::process::{
    GangClass, GangednessParams, DEFAULT_RATIO_THRESHOLD, DEFAULT_WINDOW,
};
use cosched_contract::process::{GangParams, LowGang, DEFAULT_EST_QUANTUM};
use cosched_des::SimTime;
use serde::Serialize;

/// Running counts of one set of records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetCount {
    /// Records (processor-quanta).
    pub n: u64,
    /// Messages received, summed over the records.
    pub msgs: u64,
    /// Sender progress (useful CPU time of the other ranks), summed, ns.
    pub progress_ns: i64,
}

impl SetCount {
    fn add(&mut self, msgs: u64, progress_ns: i64) {
        self.n += 1;
        self.msgs += msgs;
        self.progress_ns += progress_ns;
    }

    /// Mean messages per record (NaN without records).
    pub fn msg_mean(&self) -> f64 {
        if self.n == 0 {
            f64::NAN
        } else {
            self.msgs as f64 / self.n as f64
        }
    }
}

/// A job's running counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobGangedness {
    pub gang: SetCount,
    pub non_gang_running: SetCount,
    pub non_gang_non_running: SetCount,
}

impl JobGangedness {
    /// Mean messages per non-gang-non-running record over mean per gang record:
    /// NaN without records of both sets or without any message, infinite when
    /// messages arrived only in non-gang-non-running records.
    pub fn ratio(&self) -> f64 {
        let (g, n) = (&self.gang, &self.non_gang_non_running);
        if g.n == 0 || n.n == 0 || g.msgs + n.msgs == 0 {
            return f64::NAN;
        }
        if g.msgs == 0 {
            return f64::INFINITY;
        }
        n.msg_mean() / g.msg_mean()
    }

    /// The class under `p` (module documentation).
    pub fn class(&self, p: &GangednessParams) -> GangClass {
        let (g, n, r) = (
            &self.gang,
            &self.non_gang_non_running,
            &self.non_gang_running,
        );
        if g.msgs + n.msgs + r.msgs == 0 && g.n + n.n + r.n >= p.window {
            return GangClass::Low;
        }
        if g.n < p.window || n.n < p.window {
            return GangClass::Unknown;
        }
        if self.ratio() >= p.ratio_threshold {
            GangClass::Low
        } else {
            GangClass::High
        }
    }
}

/// A job's final estimate (exported in the process-level summary).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JobEstimate {
    pub job: usize,
    pub counts: JobGangedness,
    /// [`JobGangedness::ratio`].
    pub ratio: f64,
    pub class: GangClass,
    /// When the job's class first left `unknown` (at a slot end), if it did.
    pub decided: Option<SimTime>,
}

/// The report's entry name in [`Measures`] (summary `process.measures`).
pub const NAME: &str = "gangedness";

/// The report: every job's final estimate, with its application's name.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimates {
    pub jobs: Vec<JobEstimate>,
    /// The application of each job (`Program::app`).
    pub apps: Vec<String>,
}

/// One job's estimate in the summary (docs/formats/summary.md,
/// `measures.gangedness`): non-finite numbers become null.
#[derive(Serialize)]
struct JobSummary<'a> {
    job: usize,
    app: &'a str,
    gang_n: u64,
    ngr_n: u64,
    ngn_n: u64,
    gang_msg_mean: Option<f64>,
    ngn_msg_mean: Option<f64>,
    ratio: Option<f64>,
    class: &'static str,
    /// When the class first left `unknown`, seconds.
    decided_s: Option<f64>,
}

impl Measure for Estimates {
    /// `{"jobs": [...]}`, one object per job in job order.
    fn summary(&self) -> serde_json::Value {
        let finite = |x: f64| x.is_finite().then_some(x);
        let jobs: Vec<JobSummary<'_>> = self
            .jobs
            .iter()
            .map(|e| {
                let c = &e.counts;
                JobSummary {
                    job: e.job,
                    app: &self.apps[e.job],
                    gang_n: c.gang.n,
                    ngr_n: c.non_gang_running.n,
                    ngn_n: c.non_gang_non_running.n,
                    gang_msg_mean: finite(c.gang.msg_mean()),
                    ngn_msg_mean: finite(c.non_gang_non_running.msg_mean()),
                    ratio: finite(e.ratio),
                    class: e.class.name(),
                    decided_s: e.decided.map(SimTime::as_secs_f64),
                }
            })
            .collect();
        serde_json::json!({ "jobs": jobs })
    }
}

/// The estimator's state inside a run.
#[derive(Clone, Debug, Default)]
pub struct Estimator {
    /// Length of an estimator quantum.
    quantum: SimTime,
    in_slot: bool,
    slot_start: SimTime,
    /// Per pid, in the current slot: arrival times of its messages, the
    /// intervals it held a CPU, its progress (ns) with the accounting time.
    msgs: Vec<Vec<SimTime>>,
    held: Vec<Vec<(SimTime, SimTime)>>,
    progress: Vec<Vec<(SimTime, i64)>>,
    /// Per pid: finished.
    done: Vec<bool>,
    /// Per job (index): the running counts.
    jobs: Vec<JobGangedness>,
    /// Per job: when its class first left `unknown`.
    decided: Vec<Option<SimTime>>,
}

fn at<T: Default + Clone>(v: &mut Vec<T>, k: usize) -> &mut T {
    if v.len() <= k {
        v.resize(k + 1, T::default());
    }
    &mut v[k]
}

impl Estimator {
    /// An estimator whose processor-quanta last `quantum` (a slot is cut into
    /// `round(slot / quantum)` equal quanta, at least one).
    pub fn new(quantum: SimTime) -> Self {
        Self {
            quantum,
            ..Default::default()
        }
    }

    /// A slot starts: the per-slot records restart.
    pub fn slot_start(&mut self, now: SimTime) {
        self.in_slot = true;
        self.slot_start = now;
        self.msgs.iter_mut().for_each(Vec::clear);
        self.held.iter_mut().for_each(Vec::clear);
        self.progress.iter_mut().for_each(Vec::clear);
    }

    /// A message reached `pid` at `now`.
    pub fn on_message(&mut self, pid: Pid, now: SimTime) {
        if self.in_slot {
            at(&mut self.msgs, pid as usize).push(now);
        }
    }

    /// `pid` made `ns` of progress, accounted at `now` (the progress is
    /// attributed to the quantum of its accounting).
    pub fn on_progress(&mut self, pid: Pid, ns: i64, now: SimTime) {
        if self.in_slot && ns > 0 {
            at(&mut self.progress, pid as usize).push((now, ns));
        }
    }

    /// `pid` held a CPU from `from` to `to` (counted when it gives the CPU up).
    pub fn on_held(&mut self, pid: Pid, from: SimTime, to: SimTime) {
        if self.in_slot && to > from {
            at(&mut self.held, pid as usize).push((from.max(self.slot_start), to));
        }
    }

    /// `pid` finished its program.
    pub fn on_finished(&mut self, pid: Pid) {
        *at(&mut self.done, pid as usize) = true;
    }

    /// The slot ends at `now` (every CPU taken back and accounted): records for
    /// every job of `jobs` (job index and its pids in rank order), one per live
    /// rank and processor-quantum.
    pub fn slot_end(&mut self, now: SimTime, jobs: &[(usize, Vec<Pid>)]) {
        if !self.in_slot {
            return;
        }
        self.in_slot = false;
        let len = (now - self.slot_start).as_ns();
        let u = self.quantum.as_ns().max(1);
        if len <= 0 {
            return;
        }
        let quanta = ((len + u / 2) / u).max(1);
        let bound = |i: i64| self.slot_start + SimTime(len * i / quanta);
        for (j, pids) in jobs {
            let live: Vec<Pid> = pids
                .iter()
                .copied()
                .filter(|&p| !self.done.get(p as usize).copied().unwrap_or(false))
                .collect();
            if live.len() < 2 {
                continue;
            }
            for i in 0..quanta {
                let (a, b) = (bound(i), bound(i + 1));
                let in_q = |t: SimTime| t >= a && (t < b || (i == quanta - 1 && t <= b));
                let held = |p: Pid| -> i64 {
                    self.held.get(p as usize).map_or(0, |v| {
                        v.iter()
                            .map(|&(f, t)| (t.min(b) - f.max(a)).as_ns().max(0))
                            .sum()
                    })
                };
                let ran: Vec<bool> = live
                    .iter()
                    .map(|&p| 2 * held(p) >= (b - a).as_ns())
                    .collect();
                let running = ran.iter().filter(|&&r| r).count();
                if running == 0 {
                    continue;
                }
                let prog = |p: Pid| -> i64 {
                    self.progress.get(p as usize).map_or(0, |v| {
                        v.iter().filter(|&&(t, _)| in_q(t)).map(|&(_, n)| n).sum()
                    })
                };
                let total: i64 = live.iter().map(|&p| prog(p)).sum();
                let counts: Vec<(u64, i64)> = live
                    .iter()
                    .map(|&p| {
                        let m = self
                            .msgs
                            .get(p as usize)
                            .map_or(0, |v| v.iter().filter(|&&t| in_q(t)).count() as u64);
                        (m, total - prog(p))
                    })
                    .collect();
                let est = at(&mut self.jobs, *j);
                for (&(m, sender), &r) in counts.iter().zip(&ran) {
                    let set = if running == live.len() {
                        &mut est.gang
                    } else if r {
                        &mut est.non_gang_running
                    } else {
                        &mut est.non_gang_non_running
                    };
                    set.add(m, sender);
                }
            }
        }
    }

    /// The running counts of job `j`.
    pub fn job(&self, j: usize) -> JobGangedness {
        self.jobs.get(j).copied().unwrap_or_default()
    }

    /// Records `now` as the time job `j` was first classified under `p`, if it
    /// now is and was not before.
    pub fn note_decided(&mut self, j: usize, now: SimTime, p: &GangednessParams) {
        if self.decided.get(j).copied().flatten().is_none()
            && self.job(j).class(p) != GangClass::Unknown
        {
            *at(&mut self.decided, j) = Some(now);
        }
    }

    /// The estimates of jobs `0..jobs` under `p`.
    pub fn estimates(&self, jobs: usize, p: &GangednessParams) -> Vec<JobEstimate> {
        (0..jobs)
            .map(|j| {
                let counts = self.job(j);
                JobEstimate {
                    job: j,
                    counts,
                    ratio: counts.ratio(),
                    class: counts.class(p),
                    decided: self.decided.get(j).copied().flatten(),
                }
            })
            .collect()
    }
}

/// The estimator as an observer of a gang run: its parameters, and the class
/// each job was last reported with.
#[derive(Clone, Debug)]
pub struct Observer {
    est: Estimator,
    params: GangednessParams,
    told: Vec<GangClass>,
    /// Class changes not yet handed to the engine.
    changed: Vec<(usize, GangClass)>,
}

impl Observer {
    /// The observer of a run whose slot policy runs with `gang` (module
    /// documentation: which parameters it takes from there).
    pub fn new(gang: Option<&GangParams>) -> Self {
        let quantum = gang.map_or(DEFAULT_EST_QUANTUM, |g| g.flex.est_quantum);
        let params = match gang.map(|g| &g.flex.low) {
            Some(LowGang::Auto(p)) => *p,
            _ => GangednessParams::default(),
        };
        Self {
            est: Estimator::new(quantum),
            params,
            told: Vec::new(),
            changed: Vec::new(),
        }
    }

    /// A slot starts.
    pub fn slot_start(&mut self, now: SimTime) {
        self.est.slot_start(now);
    }

    /// A message reached `pid`.
    pub fn on_message(&mut self, pid: Pid, now: SimTime) {
        self.est.on_message(pid, now);
    }

    /// `pid` made `ns` of progress, accounted at `now`.
    pub fn on_progress(&mut self, pid: Pid, ns: i64, now: SimTime) {
        self.est.on_progress(pid, ns, now);
    }

    /// `pid` held a CPU from `from` to `to`.
    pub fn on_held(&mut self, pid: Pid, from: SimTime, to: SimTime) {
        self.est.on_held(pid, from, to);
    }

    /// `pid` finished its program.
    pub fn on_finished(&mut self, pid: Pid) {
        self.est.on_finished(pid);
    }

    /// The slot ends at `now` with `jobs` running (job index and pids in rank
    /// order): the records are taken, and the jobs whose class changed are
    /// returned with their new class (to be reported to the policy).
    pub fn slot_end(
        &mut self,
        now: SimTime,
        jobs: &[(usize, Vec<Pid>)],
    ) -> Vec<(usize, GangClass)> {
        self.est.slot_end(now, jobs);
        let mut changed = Vec::new();
        for (j, _) in jobs {
            self.est.note_decided(*j, now, &self.params);
            let class = self.est.job(*j).class(&self.params);
            let told = at(&mut self.told, *j);
            if *told != class {
                *told = class;
                changed.push((*j, class));
            }
        }
        changed
    }

    /// The final estimate of every job (`jobs` of them).
    pub fn estimates(&self, jobs: usize) -> Vec<JobEstimate> {
        self.est.estimates(jobs, &self.params)
    }
}

/// The estimator's signals: slot starts and ends, messages, progress, CPU time
/// held, process ends. Its class changes are measurements for the slot policy
/// (`SlotPolicy::on_gangedness`); its report is every job's final estimate.
impl observe::Observer for Observer {
    fn signals(&self) -> Signals {
        Signals::QUANTUM_RECORDS | Signals::RELEASED | Signals::PROCESS_ENDED
    }

    fn on(&mut self, s: &Signal<'_>, probe: &Probe<'_, '_>) {
        let now = probe.now();
        match *s {
            Signal::SlotStarted => self.slot_start(now),
            Signal::SlotEnded => {
                let changed = self.slot_end(now, &probe.live_jobs());
                self.changed.extend(changed);
            }
            Signal::Message { to } => self.on_message(to, now),
            Signal::Progress { pid, used } => self.on_progress(pid, used, now),
            Signal::Released { pid, ran, .. } => self.on_held(pid, now - ran, now),
            Signal::ProcessEnded { pid } => self.on_finished(pid),
            _ => {}
        }
    }

    fn measured(&mut self, out: &mut Vec<Measurement>) {
        out.extend(
            self.changed
                .drain(..)
                .map(|(job, class)| Measurement::Gangedness { job, class }),
        );
    }

    fn report(self: Box<Self>, probe: &Probe<'_, '_>, into: &mut Measures) {
        let jobs = self.estimates(probe.jobs());
        let apps = (0..probe.jobs()).map(|j| probe.app(j)).collect();
        into.put(NAME, Estimates { jobs, apps });
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    const MS: i64 = 1_000_000;

    fn t(ms: i64) -> SimTime {
        SimTime(ms * MS)
    }

    #[test]
    fn quanta_are_classified_by_which_ranks_held_a_cpu_half_of_them() {
        // A 20 ms slot of two 10 ms quanta.
        let mut e = Estimator::new(t(10));
        let job = vec![(0usize, vec![0, 1, 2])];
        e.slot_start(t(0));
        // Quantum 1: all three ranks run; rank 0 gets 4 messages.
        for p in 0..3 {
            e.on_progress(p, 1_000, t(5));
        }
        (0..4).for_each(|_| e.on_message(0, t(3)));
        // Quantum 2: rank 1 holds only 4 ms of it (from 10 to 14): non-gang.
        e.on_held(0, t(0), t(20));
        e.on_held(1, t(0), t(14));
        e.on_held(2, t(0), t(20));
        e.on_message(1, t(15));
        e.slot_end(t(20), &job);
        // A slot where nobody ran: no record.
        e.slot_start(t(22));
        e.on_message(2, t(25));
        e.slot_end(t(32), &job);
        let g = e.job(0);
        assert_eq!(g.gang.n, 3);
        assert_eq!(g.gang.msgs, 4);
        assert_eq!(
            g.gang.progress_ns,
            3 * 2_000,
            "each record: the other two ranks' progress"
        );
        assert_eq!(g.non_gang_running.n, 2);
        assert_eq!(g.non_gang_non_running.n, 1);
        assert_eq!(g.non_gang_non_running.msgs, 1);
        assert!((g.ratio() - 1.0 / (4.0 / 3.0)).abs() < 1e-12);
    }

    #[test]
    fn class_needs_a_window_and_splits_at_the_threshold() {
        let p = GangednessParams {
            ratio_threshold: 0.15,
            window: 2,
        };
        let set = |n, msgs| SetCount {
            n,
            msgs,
            progress_ns: 0,
        };
        let mut g = JobGangedness::default();
        assert_eq!(g.class(&p), GangClass::Unknown);
        g.gang = set(2, 20);
        g.non_gang_non_running = set(1, 0);
        assert_eq!(g.class(&p), GangClass::Unknown, "one non-gang record");
        g.non_gang_non_running = set(2, 1);
        assert_eq!(g.class(&p), GangClass::High, "ratio 0.05");
        g.non_gang_non_running.msgs = 4;
        assert_eq!(g.class(&p), GangClass::Low, "ratio 0.2");
        g.gang.msgs = 0;
        assert_eq!(g.ratio(), f64::INFINITY);
        assert_eq!(g.class(&p), GangClass::Low);
        g.non_gang_non_running.msgs = 0;
        assert!(g.ratio().is_nan());
        assert_eq!(g.class(&p), GangClass::Low, "no communication at all");
        // No messages in enough records of any set: low even without gang records.
        let mut io = JobGangedness {
            non_gang_non_running: set(1, 0),
            ..Default::default()
        };
        assert_eq!(io.class(&p), GangClass::Unknown, "one record");
        io.non_gang_running = set(1, 0);
        assert_eq!(io.class(&p), GangClass::Low);
        io.non_gang_running.msgs = 1;
        assert_eq!(
            io.class(&p),
            GangClass::Unknown,
            "it communicates: the window applies"
        );
    }

    #[test]
    fn finished_ranks_and_switch_time_messages_are_left_out() {
        let mut e = Estimator::new(t(10));
        let job = vec![(0usize, vec![0, 1, 2])];
        e.on_message(0, t(0)); // before any slot: a switch
        e.on_finished(2);
        e.slot_start(t(1));
        e.on_held(0, t(1), t(11));
        e.on_held(1, t(1), t(11));
        e.slot_end(t(11), &job);
        let g = e.job(0);
        assert_eq!(g.gang.n, 2, "rank 2 finished: the two live ranks ran");
        assert_eq!(g.gang.msgs, 0);
    }
}
