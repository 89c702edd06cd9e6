use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The job-level view of a cluster: identical nodes of `procs_per_node`
/// processors, and a linear per-node power model.
///
/// Node power at time t = `idle_watts + (busy_watts - idle_watts) * busy_procs(t) / procs_per_node`,
/// so integrating it exactly needs only the processor-seconds of every job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Platform {
    /// Number of nodes.
    pub nodes: u32,
    /// Processors per node.
    #[serde(default = "one")]
    pub procs_per_node: u32,
    /// Power of an idle node, watts. Default: seed 000 Sec. 5.4, B = 219.10 W.
    #[serde(default = "default_idle_watts")]
    pub idle_watts: f64,
    /// Power of a fully busy node, watts. Default: seed 000, B + X = 219.10 + 18.968 W.
    #[serde(default = "default_busy_watts")]
    pub busy_watts: f64,
}

fn one() -> u32 {
    1
}
/// Seed 000 (Choi et al.), Section 5.4: idle power B = 219.10 W per node.
pub const CHOI_IDLE_WATTS: f64 = 219.10;
/// Seed 000 (Choi et al.), Section 5.4: extra busy power X = 18.968 W per node.
pub const CHOI_EXTRA_BUSY_WATTS: f64 = 18.968;
fn default_idle_watts() -> f64 {
    CHOI_IDLE_WATTS
}
fn default_busy_watts() -> f64 {
    CHOI_IDLE_WATTS + CHOI_EXTRA_BUSY_WATTS
}

#[derive(Debug, Error, PartialEq)]
pub enum PlatformError {
    #[error("platform.{field}: {msg}")]
    Invalid { field: &'static str, msg: String },
}

impl Platform {
    pub fn new(nodes: u32, procs_per_node: u32) -> Self {
        Self {
            nodes,
            procs_per_node,
            idle_watts: default_idle_watts(),
            busy_watts: default_busy_watts(),
        }
    }

    pub fn total_procs(&self) -> u32 {
        self.nodes * self.procs_per_node
    }

    /// Checks that the platform can exist.
    pub fn validate(&self) -> Result<(), PlatformError> {
        let bad = |field, msg: String| Err(PlatformError::Invalid { field, msg });
        if self.nodes == 0 {
            return bad("nodes", "must be at least 1".into());
        }
        if self.procs_per_node == 0 {
            return bad("procs_per_node", "must be at least 1".into());
        }
        if (self.nodes as u64) * (self.procs_per_node as u64) > u32::MAX as u64 {
            return bad(
                "nodes",
                format!(
                    "nodes x procs_per_node = {} overflows",
                    self.nodes as u64 * self.procs_per_node as u64
                ),
            );
        }
        if !(self.idle_watts.is_finite() && self.idle_watts >= 0.0) {
            return bad(
                "idle_watts",
                format!("must be a finite number >= 0, got {}", self.idle_watts),
            );
        }
        if !(self.busy_watts.is_finite() && self.busy_watts >= self.idle_watts) {
            return bad(
                "busy_watts",
                format!(
                    "must be finite and >= idle_watts ({}), got {}",
                    self.idle_watts, self.busy_watts
                ),
            );
        }
        Ok(())
    }
}
