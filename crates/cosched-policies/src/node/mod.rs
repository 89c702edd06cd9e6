//! Node-level policies (the seeds' SchedAsst schemes), one file each.
//!
//! - [`nls`]: native local scheduling (spin waits).
//! - [`block`]: immediate blocking waits, no boosts.

pub mod block;
pub mod nls;
