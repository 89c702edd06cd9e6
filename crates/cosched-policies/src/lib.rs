//! Scheduling policies, one file each, and the registry that builds them from a
//! `name[param=value,...]` string.
//!
//! Cluster-level (job-level engine):
//! - [`fcfs`]: first come, first served.
//! - [`easy`]: EASY backfilling.
//! - [`conservative`]: conservative backfilling.
//!
//! Node-level (process-level engine): [`node`].
//!
//! Process-level cluster scheduling (admission, gang slots): [`process`]
//! (`fcfs`, `batch`, `easy`, `gang`, `gang-perturb`, and every job-level policy
//! whose name is free there, e.g. `conservative`, hosted by
//! [`process::hosted`]), built by [`build_process`].

pub mod conservative;
pub mod easy;
pub mod fcfs;
pub mod node;
pub mod process;
pub mod profile;
pub mod registry;

pub use process::{build_process, process_catalog, ProcAdmission};
pub use registry::{
    build, build_node, catalog, node_catalog, ParamInfo, PolicyInfo, PolicySpec, RegistryError,
};
