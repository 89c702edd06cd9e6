//! The errors of a process-level run.

use cosched_des::SimTime;
use cosched_model::program::Rank;
use thiserror::Error;

/// Why a process-level run failed: bad input (named by job), a refused
/// decision, a deadlock, a limit reached, an interruption or a violated engine
/// invariant.
#[derive(Debug, Error)]
pub enum ProcError {
    #[error("invalid platform: {0}")]
    Platform(String),
    #[error("job {job}: needs {size} nodes but the machine has {nodes}")]
    TooWide { job: usize, size: u32, nodes: u32 },
    #[error("job {job}: {mb} MB per process does not fit in a node's {node_mb} MB of job memory")]
    TooBig { job: usize, mb: f64, node_mb: f64 },
    #[error("job {job}: {msg}")]
    BadProgram { job: usize, msg: String },
    #[error("mpl must be at least 1")]
    Mpl,
    #[error("invalid options: {0}")]
    Options(String),
    #[error("invalid admission decision: {0}")]
    Admission(#[from] cosched_contract::admission::AdmissionError),
    #[error("invalid slot decision: {0}")]
    Slot(#[from] cosched_contract::slots::SlotError),
    #[error("job {job}: rank {rank} sends to rank {to}, which does not exist")]
    BadRank { job: usize, rank: Rank, to: Rank },
    #[error("deadlock at t={time}: {waiting} process(es) wait for messages that can never arrive; first: {first}{dump}")]
    Deadlock {
        time: SimTime,
        waiting: usize,
        first: String,
        /// The nodes' state: each node's native scheduler and non-empty policy dump.
        dump: String,
    },
    #[error("job {job}: deadlock at t={time}: no rank of the job can ever progress, each waits for what only another waiting rank could give (an unsafe program: e.g. blocking rendezvous-size sends to each other with no receive posted deadlock, as in MPI): {detail}{dump}")]
    ProgramDeadlock {
        job: usize,
        time: SimTime,
        /// Each waiting rank's operation and what it waits for.
        detail: String,
        /// As for [`ProcError::Deadlock`].
        dump: String,
    },
    #[error("jobs not sorted by submit time at index {0}")]
    Unsorted(usize),
    #[error("engine invariant violated: {0}")]
    Invariant(String),
    #[error("event limit {limit} reached at t={time} with {unfinished} job(s) unfinished")]
    EventLimit {
        limit: u64,
        time: SimTime,
        unfinished: usize,
    },
    #[error("interrupted at t={time}")]
    Interrupted { time: SimTime },
    #[error("time limit {limit} reached with {unfinished} job(s) unfinished; first unfinished process: {first}{dump}")]
    TimeLimit {
        limit: SimTime,
        unfinished: usize,
        first: String,
        /// As for [`ProcError::Deadlock`].
        dump: String,
    },
}
