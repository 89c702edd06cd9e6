//! Scheduling policies, one file each, and the registry that builds them from a
//! `name[param=value,...]` string.
//!
//! Cluster-level (job-level engine):
//! - [`fcfs`]: first come, first served.
//! - [`easy`]: EASY backfilling.
//! - [`conservative`]: conservative backfilling.
//!
//! Node-level (process-level engine): [`node`].

pub mod conservative;
pub mod easy;
pub mod fcfs;
pub mod node;
pub mod profile;
pub mod registry;

pub use registry::{build, build_node, catalog, ParamInfo, PolicyInfo, PolicySpec, RegistryError};
