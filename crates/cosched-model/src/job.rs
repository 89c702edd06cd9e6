use cosched_des::SimTime;

/// Index of a job in its [`Workload`] (dense, 0-based, in submit order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub u32);

impl JobId {
    pub fn idx(self) -> usize {
        self.0 as usize
    }
}

/// What the simulator knows about one job.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    /// The job's number in its source (SWF field 1); not necessarily dense or unique.
    pub source_id: i64,
    /// Submission time, relative to the workload's time origin.
    pub submit: SimTime,
    /// Real execution time (what happens).
    pub runtime: SimTime,
    /// Number of processors.
    pub procs: u32,
    /// The user's requested time (SWF field 9), if known.
    pub requested: Option<SimTime>,
    /// The runtime estimate the scheduler sees (see [`crate::EstimateSource`]).
    pub estimate: SimTime,
    /// The time at which the engine kills the job, if the run kills at the estimate.
    pub kill_after: Option<SimTime>,
}

impl JobSpec {
    /// Time the job actually occupies its processors once started.
    pub fn effective_runtime(&self) -> SimTime {
        match self.kill_after {
            Some(k) if k < self.runtime => k,
            _ => self.runtime,
        }
    }
}

/// A list of jobs sorted by submit time (ties keep source order), plus the
/// counts of source records that did not become jobs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Workload {
    pub jobs: Vec<JobSpec>,
    /// Records dropped because the job never ran (SWF runtime -1).
    pub dropped_never_ran: u64,
    /// Records dropped because neither allocated nor requested processors is known (> 0).
    pub dropped_no_procs: u64,
    /// Human-readable warnings produced while building the workload.
    pub warnings: Vec<String>,
}

impl Workload {
    /// A workload of in-memory jobs: sorted stably by submit time, with one warning
    /// naming `origin` when they were not in submit order.
    pub fn from_jobs(mut jobs: Vec<JobSpec>, origin: &str) -> Self {
        let inversions = jobs
            .windows(2)
            .filter(|w| w[1].submit < w[0].submit)
            .count();
        let mut warnings = Vec::new();
        if inversions > 0 {
            jobs.sort_by_key(|j| j.submit);
            warnings.push(format!("{origin}: submit times are not sorted: {inversions} inversions; jobs sorted by submit time"));
        }
        Self {
            jobs,
            warnings,
            ..Default::default()
        }
    }

    pub fn dropped(&self) -> u64 {
        self.dropped_never_ran + self.dropped_no_procs
    }
    pub fn job(&self, id: JobId) -> &JobSpec {
        &self.jobs[id.idx()]
    }
}
