//! A job-level cluster policy ([`ClusterPolicy`]: FCFS, EASY, conservative
//! backfilling, any registered one) run as a process-level admission policy
//! ([`AdmissionPolicy`]), so that one implementation serves both fidelities.
//!
//! Algorithm: nodes are the hosted policy's processors. The mechanism runs the
//! scheme at MPL 1 (one process per node, as the batch scheme, `batch.rs`), so a
//! job of `n` nodes is a job of `n` processors and a node is free when it is
//! idle. The adapter keeps what a [`ClusterView`] needs from the admission
//! events and its own starts:
//! - each arrived job's [`JobSpec`]: `procs` = the nodes it needs, `submit` = the
//!   instant of its arrival, `estimate` = its runtime estimate, given per job by
//!   the caller as for process-level EASY ([`super::batch::estimates_of`]:
//!   requested walltimes or perfect estimates); `runtime` is not known before the
//!   job ends and is set to the estimate (no registered policy reads it);
//! - each started job's start time; the free processors are the idle nodes.
//!
//! Events: `Arrived(j)` is `Submitted(j)`, `Ended(j)` is `Completed(j)` (a
//! process-level job is never killed at its estimate), a wake-up the policy
//! asked for is `Timer`. The job-level contract gives a policy every event of
//! an instant in one call (completions, then submissions, then the timer) and
//! a view in which every completion of the instant has freed its processors;
//! the process engine tells of each arrival and end as it happens. So the
//! adapter keeps the instant's events and asks the mechanism for a wake-up now
//! ([`AdmissionControl::wake_at`], delivered as the last event of the instant);
//! at that wake-up it calls the hosted policy once with them. The policy's own
//! wake-ups share the mechanism's one timer: one the adapter's request
//! replaced is asked for again after the call.
//! Decisions, applied in order: `Start(j)` starts `j` through
//! [`AdmissionControl::start`] among the idle nodes (placement stays the run's
//! rule); `StartOn(j, nodes)` starts it on exactly those nodes; `WakeAt(t)` is
//! [`AdmissionControl::wake_at`]. `Reject` has no process-level meaning (a
//! process-level job always runs) and a `StartOn` with the wrong node count
//! cannot apply: both are [`AdmissionError::Refused`], as is a start of a job
//! larger than the machine; the mechanism's own refusals pass through. No
//! decision is dropped.
//!
//! Parameters: those of the hosted policy, plus `estimates` and `round_s` (the
//! estimates' source, as for `batch[backfill=easy]`).

use cosched_contract::admission::{
    AdmissionControl, AdmissionError, AdmissionEvent, AdmissionPolicy,
};
use cosched_contract::cluster::{ClusterPolicy, ClusterView, Decision, Event};
use cosched_des::SimTime;
use cosched_model::{JobId, JobSpec};

/// A job-level policy hosted as an admission policy.
pub struct Hosted {
    policy: Box<dyn ClusterPolicy>,
    estimates: Vec<SimTime>,
    /// The spec of each arrived job, by job index.
    specs: Vec<Option<JobSpec>>,
    /// The start time of each started job, by job index.
    starts: Vec<Option<SimTime>>,
    decisions: Vec<Decision>,
    /// The instant's completions and submissions, not yet told.
    ended: Vec<Event>,
    arrived: Vec<Event>,
    /// The wake-up the hosted policy asked for, if pending.
    policy_wake: Option<SimTime>,
}

impl Hosted {
    /// Hosts `policy`; `estimates[j]` is job `j`'s runtime estimate.
    pub fn new(policy: Box<dyn ClusterPolicy>, estimates: Vec<SimTime>) -> Self {
        Self {
            policy,
            estimates,
            specs: Vec::new(),
            starts: Vec::new(),
            decisions: Vec::new(),
            ended: Vec::new(),
            arrived: Vec::new(),
            policy_wake: None,
        }
    }

    fn arrive(&mut self, j: usize, ctl: &dyn AdmissionControl) -> Result<(), AdmissionError> {
        let estimate = self.estimates.get(j).copied().ok_or_else(|| {
            AdmissionError::Policy(format!(
                "{}: no runtime estimate for job {j}",
                self.policy.name()
            ))
        })?;
        let procs = ctl.nodes_needed(j);
        if procs > ctl.nodes() {
            return Err(self.refused(
                &Decision::Start(JobId(j as u32)),
                format!(
                    "job {j} needs {procs} nodes, the machine has {}",
                    ctl.nodes()
                ),
            ));
        }
        if self.specs.len() <= j {
            self.specs.resize(j + 1, None);
            self.starts.resize(j + 1, None);
        }
        self.specs[j] = Some(JobSpec {
            source_id: j as i64,
            submit: ctl.now(),
            runtime: estimate,
            procs,
            requested: None,
            estimate,
            kill_after: None,
        });
        Ok(())
    }

    fn refused(&self, d: &Decision, why: String) -> AdmissionError {
        AdmissionError::Refused {
            policy: self.policy.name(),
            decision: format!("{d:?}"),
            why,
        }
    }

    fn apply(
        &mut self,
        d: &Decision,
        ctl: &mut dyn AdmissionControl,
    ) -> Result<(), AdmissionError> {
        match d {
            Decision::Start(j) => {
                let idle = ctl.idle();
                ctl.start(j.idx(), &idle)?;
            }
            Decision::StartOn(j, nodes) => {
                let need = ctl.nodes_needed(j.idx());
                if nodes.len() != need as usize {
                    return Err(
                        self.refused(d, format!("{} nodes given, {need} needed", nodes.len()))
                    );
                }
                ctl.start(j.idx(), nodes)?;
            }
            Decision::Reject(_) => {
                return Err(self.refused(d, "a process-level job cannot be rejected".into()))
            }
            Decision::WakeAt(t) => {
                // The job-level rule: an earlier request replaces a later one.
                if self.policy_wake.is_none_or(|p| *t < p) {
                    self.policy_wake = Some(*t);
                }
                return ctl.wake_at(*t);
            }
        }
        let (Decision::Start(j) | Decision::StartOn(j, _)) = d else {
            unreachable!("only starts reach here")
        };
        if let Some(s) = self.starts.get_mut(j.idx()) {
            *s = Some(ctl.now());
        }
        Ok(())
    }
}

impl Hosted {
    /// Calls the hosted policy with the events of one instant and applies its
    /// decisions in order, stopping at the first that cannot apply.
    fn tell(
        &mut self,
        cluster: &[Event],
        ctl: &mut dyn AdmissionControl,
    ) -> Result<(), AdmissionError> {
        let view = View {
            now: ctl.now(),
            nodes: ctl.nodes(),
            idle: ctl.idle().len() as u32,
            specs: &self.specs,
            starts: &self.starts,
        };
        let mut out = std::mem::take(&mut self.decisions);
        out.clear();
        self.policy.on_events(cluster, &view, &mut out);
        let mut result = Ok(());
        for d in &out {
            result = self.apply(d, ctl);
            if result.is_err() {
                break;
            }
        }
        self.decisions = out;
        result
    }
}

/// The [`ClusterView`] of the hosted policy: the adapter's records and the
/// mechanism's idle nodes.
struct View<'a> {
    now: SimTime,
    nodes: u32,
    idle: u32,
    specs: &'a [Option<JobSpec>],
    starts: &'a [Option<SimTime>],
}

impl ClusterView for View<'_> {
    fn now(&self) -> SimTime {
        self.now
    }
    fn total_procs(&self) -> u32 {
        self.nodes
    }
    fn free_procs(&self) -> u32 {
        self.idle
    }
    fn job(&self, id: JobId) -> &JobSpec {
        self.specs
            .get(id.idx())
            .and_then(Option::as_ref)
            .expect("a policy asks only about jobs it was told of")
    }
    fn start_time(&self, id: JobId) -> Option<SimTime> {
        self.starts.get(id.idx()).copied().flatten()
    }
}

impl AdmissionPolicy for Hosted {
    fn name(&self) -> String {
        self.policy.name()
    }

    fn on_events(
        &mut self,
        events: &[AdmissionEvent],
        ctl: &mut dyn AdmissionControl,
    ) -> Result<(), AdmissionError> {
        let mut timer = false;
        for e in events {
            match *e {
                AdmissionEvent::Arrived(j) => {
                    self.arrive(j, ctl)?;
                    self.arrived.push(Event::Submitted(JobId(j as u32)));
                }
                AdmissionEvent::Ended(j) => self.ended.push(Event::Completed(JobId(j as u32))),
                AdmissionEvent::Timer => timer = true,
            }
        }
        if !timer {
            // Tell the policy at the end of the instant.
            return ctl.wake_at(ctl.now());
        }
        let now = ctl.now();
        let mut cluster: Vec<Event> = self.ended.drain(..).chain(self.arrived.drain(..)).collect();
        if self.policy_wake.is_some_and(|t| t <= now) {
            self.policy_wake = None;
            cluster.push(Event::Timer);
        }
        if !cluster.is_empty() {
            self.tell(&cluster, ctl)?;
        }
        match self.policy_wake {
            Some(t) => ctl.wake_at(t),
            None => Ok(()),
        }
    }

    fn dump(&self) -> String {
        self.policy.dump()
    }
}
