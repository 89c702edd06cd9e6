//! Node-level policies (the seeds' SchedAsst schemes), one file each.
//!
//! - [`nls`]: native local scheduling.

pub mod nls;
