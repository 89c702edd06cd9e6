//! Model types shared by the engine, the policies and the bindings: job
//! specifications, workloads, the job-level platform, run configuration and the
//! Standard Workload Format (SWF) reader and writer.
//!
//! Nothing here simulates; these are plain data with validation.

pub mod apps;
pub mod config;
pub mod export;
pub mod interference;
pub mod job;
pub mod node;
pub mod platform;
pub mod program;
pub mod spec;
pub mod swf;
pub mod write;

pub use config::{
    ConfigError, EstimateSource, EventOrder, LimitsConfig, LoadScaleBy, OverrunPolicy, Placement, RunConfig,
    WorkloadOptions,
};
pub use job::{JobId, JobSpec, Workload};
pub use platform::{Platform, PlatformError};
