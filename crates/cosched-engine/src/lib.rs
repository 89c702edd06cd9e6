//! The mechanism side of cosched: engines that apply policies' decisions.
//!
//! - [`cluster`]: the job-level cluster engine. It owns time, processors and
//!   job states; a [`ClusterPolicy`] receives batches of [`Event`]s and returns
//!   [`Decision`]s, which the engine validates (a typed [`DecisionError`] for an
//!   invalid one) and applies.
//! - [`alloc`]: processor allocators (PACKING and NO PACKING placement).
//! - [`metrics`]: per-job rows and the run summary, with exact energy integration.
//! - [`check`]: an independent checker of a finished schedule's invariants.
//! - [`os`]: native OS CPU scheduler models of a node (Linux 2.4, CFS-like, MLFQ, round robin).

pub mod alloc;
pub mod check;
pub mod cluster;
pub mod gang_fluid;
pub mod metrics;
pub mod os;
/// The cluster-policy contract (defined in `cosched-contract`).
pub mod policy {
    pub use cosched_contract::cluster::*;
}
pub mod process;
pub mod timeshare_fluid;

pub use cluster::{
    simulate, EngineError, EngineStats, JobRecord, JobStatus, SimOptions, SimOutput,
};
pub use policy::{ClusterPolicy, ClusterView, Decision, DecisionError, Event};
