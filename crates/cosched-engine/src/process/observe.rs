//! Observers of a process-level run: measurements that follow the engine's
//! signals and never decide.
//!
//! **Contract.** An [`Observer`] subscribes to some of the engine's
//! [`Signal`]s ([`Observer::signals`]); the engine calls [`Observer::on`] for
//! each one, in the order of the run's list (`super::observers::of`), at the moments the
//! signals' documentation gives, with a read-only [`Probe`] of the engine. An
//! observer cannot change the run: it gets no mutable access to the engine,
//! schedules nothing and draws from no random stream. The one thing it may
//! hand back during a run is a [`Measurement`] ([`Observer::measured`], asked
//! after [`Signal::SlotEnded`] only), which the engine delivers to the slot
//! policy's measurement op (`SlotPolicy::on_gangedness`): the policy, not the
//! observer, decides what to do with it. At the end of a run each observer
//! checks its own figures ([`Observer::check`]: a failure is an engine
//! invariant error) and writes them into its entries of the output's
//! extensible section ([`Measures`], [`Observer::report`]).
//!
//! **Which observers a run has** (`super::observers::of`, a file of its own
//! so that this contract names no observer): the priority-inversion
//! measure ([`super::inversion`]) in every run; the wait time per job
//! ([`super::wait_time`]) when the options ask for it
//! (`ProcOptions::measure_waits`: it follows every wait); in gang mode (a slot policy), the
//! fragment-time counter ([`super::fragment`]), the online gangedness
//! estimator ([`super::gangedness`]) and the I/O interrupts per job
//! ([`super::io_interrupts`]); and the perturbation bookkeeping
//! ([`super::perturb`]) when the slot policy perturbs the schedule
//! (`SlotPolicy::perturbation`).
//!
//! An observer's signals may change during the run (the engine reads
//! [`Observer::signals`] again after each signal it tells it): an observer with
//! nothing to follow takes fewer. The engine tests a signal's bit in the union
//! before it does anything else, so a signal no observer takes at the moment
//! costs one test.

use super::{PState, Pid, Sim};
use cosched_contract::node::{WaitEnd, WaitKind};
use cosched_contract::process::GangClass;
use cosched_contract::slots::{MatrixView, PerturbView};
use cosched_des::SimTime;
use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// An engine signal. Each fires at the instant `Probe::now` and is told to
/// the observers subscribed to its [`Signals`] bit.
#[derive(Clone, Copy, Debug)]
pub enum Signal<'a> {
    /// Job `job` is admitted and starts now on `nodes` (one per rank), its
    /// processes pids `first..first + nodes.len()` (before they are created).
    JobStarted {
        job: usize,
        first: Pid,
        nodes: &'a [u32],
    },
    /// The last process of job `job` has ended.
    JobEnded { job: usize },
    /// Process `pid` finished its program (or was stopped, background).
    ProcessEnded { pid: Pid },
    /// `pid` is about to get a CPU of `node` (the node's CPUs are still as
    /// before the dispatch).
    Dispatched { node: u32, pid: Pid },
    /// `pid` is about to leave a CPU of `node` after holding it for `ran`
    /// (accounted up to now; the node's CPUs are still as before).
    Released { node: u32, pid: Pid, ran: SimTime },
    /// `pid` made `used` ns of progress (useful CPU time), accounted now.
    Progress { pid: Pid, used: i64 },
    /// A message reached `to`'s buffer.
    Message { to: Pid },
    /// A disk completion makes `pid` (blocked in its I/O burst) runnable; the
    /// node's CPUs are as before the wake-up.
    IoWoken { pid: Pid },
    /// `pid` begins a wait of kind `kind` (one told to the node policy's
    /// `on_wait_begin`; not a disk burst), on its CPU, after the policy chose
    /// its wait mode and before it spins or blocks.
    WaitBegan { pid: Pid, kind: WaitKind },
    /// A wait of `pid` (one that began with [`Signal::WaitBegan`]) ended:
    /// its condition was noticed now. `end` is what the node policy's
    /// `on_wait_end` is told (kind, length, spin, whether it blocked, what
    /// ended it).
    WaitEnded { pid: Pid, end: WaitEnd },
    /// An I/O interrupt (gang mode): `pid`, just woken by its disk completion,
    /// takes CPU `cpu` of `node` at once from `victim`, which the slot policy
    /// chose (`SlotPolicy::on_wake`); fired before `victim` is released.
    IoInterrupt {
        node: u32,
        cpu: u32,
        pid: Pid,
        victim: Pid,
    },
    /// A gang slot starts (after a switch, or the first slot): the slot
    /// policy's matrix has its new active row.
    SlotStarted,
    /// A gang slot ends: a global switch has taken every CPU back (each
    /// release signalled and accounted).
    SlotEnded,
}

bitflags::bitflags! {
    /// A set of [`Signal`] kinds (one bit each): combine with `|`.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct Signals: u16 {
        const JOB_STARTED = 1;
        const JOB_ENDED = 1 << 1;
        const PROCESS_ENDED = 1 << 2;
        const DISPATCHED = 1 << 3;
        const RELEASED = 1 << 4;
        const PROGRESS = 1 << 5;
        const MESSAGE = 1 << 6;
        const IO_WOKEN = 1 << 7;
        const SLOT_STARTED = 1 << 8;
        const SLOT_ENDED = 1 << 9;
        const WAIT_BEGAN = 1 << 10;
        const WAIT_ENDED = 1 << 11;
        const IO_INTERRUPT = 1 << 12;
    }
}

impl Signals {
    pub const NONE: Self = Self::empty();
    /// What per-quantum records of a gang run follow (the gangedness
    /// estimator, the perturbation bookkeeping): slot starts and ends, and the
    /// messages and progress within them.
    pub const QUANTUM_RECORDS: Self = Self::SLOT_STARTED
        .union(Self::SLOT_ENDED)
        .union(Self::MESSAGE)
        .union(Self::PROGRESS);

    /// The kind of `s`.
    #[inline]
    pub fn of(s: &Signal<'_>) -> Self {
        match s {
            Signal::JobStarted { .. } => Self::JOB_STARTED,
            Signal::JobEnded { .. } => Self::JOB_ENDED,
            Signal::ProcessEnded { .. } => Self::PROCESS_ENDED,
            Signal::Dispatched { .. } => Self::DISPATCHED,
            Signal::Released { .. } => Self::RELEASED,
            Signal::Progress { .. } => Self::PROGRESS,
            Signal::Message { .. } => Self::MESSAGE,
            Signal::IoWoken { .. } => Self::IO_WOKEN,
            Signal::SlotStarted => Self::SLOT_STARTED,
            Signal::SlotEnded => Self::SLOT_ENDED,
            Signal::WaitBegan { .. } => Self::WAIT_BEGAN,
            Signal::WaitEnded { .. } => Self::WAIT_ENDED,
            Signal::IoInterrupt { .. } => Self::IO_INTERRUPT,
        }
    }
}

/// What an observer may hand back during a run (see the module contract).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measurement {
    /// Job `job`'s gangedness class changed to `class`.
    Gangedness { job: usize, class: GangClass },
}

/// [`Any`] for every type, so that an entry of [`Measures`] can be read back
/// as its own type ([`Measures::get`]).
pub trait AsAny {
    fn as_any(&self) -> &dyn Any;
}

impl<T: Any> AsAny for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One entry of the output's observer section: an observer's figures, typed
/// for Rust readers ([`Measures::get`]) and with their summary form.
pub trait Measure: AsAny + fmt::Debug + Send + Sync {
    /// The entry's object under `process.measures` in summary.json
    /// (docs/formats/summary.md: each observer's keys, in summary units).
    fn summary(&self) -> serde_json::Value;
}

/// A total time, ns (the priority inversion, the fragment time); summary
/// form `{"total_s": seconds}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TotalNs(pub i64);

impl Measure for TotalNs {
    fn summary(&self) -> serde_json::Value {
        serde_json::json!({ "total_s": self.0 as f64 / 1e9 })
    }
}

/// The extensible section of a run's output the observers report into: named
/// entries in the order they were reported (observers in `observers::of`
/// order). Each observer's file holds its entry names and types; the summary
/// takes every entry's own summary form ([`Measures::summary`]), so a new
/// observer adds no summary field.
#[derive(Clone, Debug, Default)]
pub struct Measures(Vec<(&'static str, Arc<dyn Measure>)>);

impl Measures {
    /// Adds entry `name` (an observer reports each of its names once).
    pub fn put(&mut self, name: &'static str, m: impl Measure + 'static) {
        debug_assert!(self.entry(name).is_none(), "{name} reported twice");
        self.0.push((name, Arc::new(m)));
    }

    /// Entry `name`, if an observer of the run reported it.
    pub fn entry(&self, name: &str) -> Option<&dyn Measure> {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, m)| m.as_ref())
    }

    /// Entry `name` as its own type `T` (`None` when absent, or of another type).
    pub fn get<T: Measure + 'static>(&self, name: &str) -> Option<&T> {
        self.entry(name)?.as_any().downcast_ref()
    }

    /// Entry `name` as a time in ns (0 when absent: the run had no such observer).
    pub fn ns(&self, name: &str) -> i64 {
        self.get::<TotalNs>(name).map_or(0, |t| t.0)
    }

    /// Every entry, in report order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &dyn Measure)> {
        self.0.iter().map(|(n, m)| (*n, m.as_ref()))
    }

    /// The summary's `process.measures` object: each entry's summary form
    /// under its name (keys in alphabetical order, as every JSON object the
    /// summary builds from maps).
    pub fn summary(&self) -> serde_json::Map<String, serde_json::Value> {
        self.iter()
            .map(|(n, m)| (n.to_string(), m.summary()))
            .collect()
    }
}

/// A measurement that follows engine signals (module contract).
pub trait Observer {
    /// The signals it takes now (read at the start of the run and again
    /// after each signal it is told).
    fn signals(&self) -> Signals;
    /// Signal `s` fired (one of [`Observer::signals`]).
    fn on(&mut self, s: &Signal<'_>, probe: &Probe<'_, '_>);
    /// Measurements for the slot policy since the last call (after
    /// [`Signal::SlotEnded`]).
    fn measured(&mut self, _out: &mut Vec<Measurement>) {}
    /// End-of-run checks of its own figures (after every job ended).
    fn check(&self, _probe: &Probe<'_, '_>) -> Result<(), String> {
        Ok(())
    }
    /// Writes its figures into the output's section.
    fn report(self: Box<Self>, probe: &Probe<'_, '_>, into: &mut Measures);
}

/// A read-only view of the engine for observers.
pub struct Probe<'s, 'a>(&'s Sim<'a>);

impl Probe<'_, '_> {
    /// The time of the signal.
    pub fn now(&self) -> SimTime {
        self.0.q.now()
    }

    /// The jobs of the run.
    pub fn jobs(&self) -> usize {
        self.0.jobs.len()
    }

    /// The job of process `pid`.
    pub fn job_of(&self, pid: Pid) -> usize {
        self.0.procs[pid as usize].job
    }

    /// The application name of job `j`'s program.
    pub fn app(&self, j: usize) -> String {
        self.0.jobs[j].program.app()
    }

    /// The time process `pid` has spent blocked so far (off every CPU and not
    /// runnable: asleep in a wait, parked by a yielding wait, in its disk
    /// burst, or waiting for its pages), ns.
    pub fn slept_ns(&self, pid: Pid) -> i64 {
        let p = &self.0.procs[pid as usize];
        let now = if p.state == PState::Blocked {
            (self.now() - p.state_since).as_ns()
        } else {
            0
        };
        p.slept_ns + now
    }

    /// The node of process `pid`.
    pub fn node_of(&self, pid: Pid) -> u32 {
        self.0.procs[pid as usize].node
    }

    /// Whether a CPU of `pid`'s node runs a process of another job.
    pub fn other_job_runs(&self, pid: Pid) -> bool {
        let procs = &self.0.procs;
        let j = procs[pid as usize].job;
        self.0.nodes[procs[pid as usize].node as usize]
            .cpus
            .iter()
            .any(|c| c.cur.is_some_and(|q| procs[q as usize].job != j))
    }

    /// The slot policy's matrix (gang mode).
    pub fn matrix(&self) -> Option<&dyn MatrixView> {
        self.0.slots.as_ref().and_then(|s| s.policy().matrix())
    }

    /// The slot policy's perturbations (when it perturbs).
    pub fn perturbation(&self) -> Option<&dyn PerturbView> {
        self.0
            .slots
            .as_ref()
            .and_then(|s| s.policy().perturbation())
    }

    /// The jobs admitted and not ended, each with its pids in rank order.
    pub fn live_jobs(&self) -> Vec<(usize, Vec<Pid>)> {
        let s = self.0;
        (0..s.jobs.len())
            .filter(|&j| !s.ended[j])
            .filter_map(|j| {
                let first = s.job_pids[j]?;
                Some((j, (first..first + s.jobs[j].program.size()).collect()))
            })
            .collect()
    }

    /// Job `j`'s span (start to end) if it ended, and the useful CPU time of
    /// its processes (CPU time not spent spinning), ns.
    pub fn job_span_and_useful(&self, j: usize) -> Option<(i64, i64)> {
        let s = self.0;
        let rec = s.records.get(j)?.as_ref()?;
        let first = s.job_pids[j].unwrap_or(0) as usize;
        let size = s.jobs[j].program.size() as usize;
        let useful: i64 = s.procs[first..(first + size).min(s.procs.len())]
            .iter()
            .map(|p| p.cpu_ns - p.spin_ns)
            .sum();
        Some(((rec.end - rec.start).as_ns(), useful))
    }
}

/// The observers a run subscribes (each with its signals), and the union of
/// their signals.
#[derive(Default)]
pub struct Observers {
    list: Vec<(Signals, Box<dyn Observer>)>,
    wants: Signals,
    measured: Vec<Measurement>,
}

impl Observers {
    /// These observers, each with the signals it takes now.
    pub(super) fn new(list: Vec<Box<dyn Observer>>) -> Self {
        let list: Vec<_> = list.into_iter().map(|o| (o.signals(), o)).collect();
        let wants = list.iter().fold(Signals::NONE, |w, (s, _)| w | *s);
        Self {
            list,
            wants,
            measured: Vec::new(),
        }
    }

    /// Whether some observer takes signals of kind `k`.
    #[inline]
    pub fn wants(&self, k: Signals) -> bool {
        self.wants.contains(k)
    }
}

impl Sim<'_> {
    /// Tells signal `s` to the observers that take it.
    #[inline]
    pub(super) fn signal(&mut self, s: Signal<'_>) {
        let k = Signals::of(&s);
        if self.obs.wants(k) {
            self.tell(k, &s);
        }
    }

    /// Tells `s` (of kind `k`) to the observers that take it, then reads
    /// their signals again.
    #[inline(never)]
    fn tell(&mut self, k: Signals, s: &Signal<'_>) {
        let mut list = std::mem::take(&mut self.obs.list);
        {
            let probe = Probe(self);
            for (w, o) in list.iter_mut().filter(|(w, _)| w.contains(k)) {
                o.on(s, &probe);
                *w = o.signals();
            }
        }
        self.obs.wants = list.iter().fold(Signals::NONE, |u, (w, _)| u | *w);
        self.obs.list = list;
    }

    /// The slot ends (gang mode): the observers take their records, then the
    /// slot policy receives their measurements.
    pub(super) fn signal_slot_end(&mut self) {
        self.signal(Signal::SlotEnded);
        let mut out = std::mem::take(&mut self.obs.measured);
        for (_, o) in &mut self.obs.list {
            o.measured(&mut out);
        }
        for m in out.drain(..) {
            match m {
                Measurement::Gangedness { job, class } => {
                    self.slot_op(|p, _| p.on_gangedness(job, class));
                }
            }
        }
        self.obs.measured = out;
    }

    /// `pid` is blocked in its I/O burst and not paging: its disk completion
    /// makes it runnable ([`Signal::IoWoken`]).
    pub(super) fn signal_io_done(&mut self, pid: Pid) {
        let p = &self.procs[pid as usize];
        if p.state == PState::Blocked && !p.paging {
            self.signal(Signal::IoWoken { pid });
        }
    }

    /// The observers' end-of-run checks.
    pub(super) fn check_observers(&self) -> Result<(), String> {
        let probe = Probe(self);
        self.obs.list.iter().try_for_each(|(_, o)| o.check(&probe))
    }

    /// The observers' figures (at the end of the run).
    pub(super) fn observed(&mut self) -> Measures {
        let list = std::mem::take(&mut self.obs.list);
        let probe = Probe(self);
        let mut m = Measures::default();
        for (_, o) in list {
            o.report(&probe, &mut m);
        }
        m
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn entries_read_back_by_type_and_summarize_under_their_names() {
        // 1,500,000,000 ns is 1.5 s; an entry of another type or name reads
        // as absent (0 ns).
        let mut m = Measures::default();
        m.put("b_time", TotalNs(1_500_000_000));
        m.put("a_time", TotalNs(250));
        assert_eq!(m.get::<TotalNs>("b_time"), Some(&TotalNs(1_500_000_000)));
        assert_eq!(m.ns("a_time"), 250);
        assert_eq!(m.ns("missing"), 0);
        let s = serde_json::Value::Object(m.summary());
        assert_eq!(
            s.to_string(),
            r#"{"a_time":{"total_s":2.5e-7},"b_time":{"total_s":1.5}}"#
        );
    }
}
