//! The process-level platform: nodes with CPUs, memory and a NIC, a network, and
//! the native OS scheduler each node runs. Every number of a preset carries its
//! source (docs/models/seed-parameters.md).

use serde::{Deserialize, Serialize};

/// Which native scheduler a node runs, with its parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "lowercase", deny_unknown_fields)]
pub enum OsConfig {
    /// Linux 2.4 epoch/counter goodness scheduler.
    Linux24 {
        /// Timer tick (10 ms at HZ = 100).
        #[serde(default = "default_tick_ms")]
        tick_ms: f64,
        /// Base time slice of a nice-0 process, in ticks (kernel: 6; seed 002 states 50 ms).
        #[serde(default = "default_base_ticks")]
        base_ticks: u32,
    },
    /// A CFS-like fair scheduler.
    Cfs {
        #[serde(default = "default_latency_ms")]
        latency_ms: f64,
        #[serde(default = "default_min_granularity_ms")]
        min_granularity_ms: f64,
        #[serde(default = "default_wakeup_granularity_ms")]
        wakeup_granularity_ms: f64,
    },
    /// Multi-level feedback queue with the Solaris TS dispatch table.
    Mlfq {
        /// Multiplies every quantum of the table.
        #[serde(default = "one")]
        quantum_scale: f64,
    },
    /// Strict round robin.
    Rr {
        #[serde(default = "default_quantum_ms")]
        quantum_ms: f64,
    },
}

fn one() -> f64 {
    1.0
}

pub fn default_tick_ms() -> f64 {
    10.0
}
pub fn default_base_ticks() -> u32 {
    6
}
pub fn default_latency_ms() -> f64 {
    6.0
}
pub fn default_min_granularity_ms() -> f64 {
    0.75
}
pub fn default_wakeup_granularity_ms() -> f64 {
    1.0
}
pub fn default_quantum_ms() -> f64 {
    50.0
}

impl Default for OsConfig {
    fn default() -> Self {
        OsConfig::Linux24 {
            tick_ms: default_tick_ms(),
            base_ticks: default_base_ticks(),
        }
    }
}

impl OsConfig {
    /// Checks the parameters; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        let pos = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!("os.{name}: must be a finite number > 0, got {v}"))
            }
        };
        match *self {
            OsConfig::Linux24 {
                tick_ms,
                base_ticks,
            } => {
                pos("tick_ms", tick_ms)?;
                if base_ticks == 0 {
                    return Err("os.base_ticks: must be at least 1".into());
                }
                Ok(())
            }
            OsConfig::Cfs {
                latency_ms,
                min_granularity_ms,
                wakeup_granularity_ms,
            } => {
                pos("latency_ms", latency_ms)?;
                pos("min_granularity_ms", min_granularity_ms)?;
                pos("wakeup_granularity_ms", wakeup_granularity_ms)
            }
            OsConfig::Mlfq { quantum_scale } => pos("quantum_scale", quantum_scale),
            OsConfig::Rr { quantum_ms } => pos("quantum_ms", quantum_ms),
        }
    }
}

/// A cluster for the process-level model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodePlatform {
    /// Number of nodes.
    pub nodes: u32,
    /// CPUs per node.
    pub cpus_per_node: u32,
    /// Memory per node available to jobs, MB.
    pub job_memory_mb: f64,
    /// One-way network latency between NICs for a zero-byte message, microseconds
    /// (excluding the CPU overheads below).
    pub latency_us: f64,
    /// Network bandwidth, MB/s (1 MB = 10^6 bytes).
    pub bandwidth_mb_s: f64,
    /// CPU time the sender spends per message, microseconds.
    pub send_overhead_us: f64,
    /// CPU time the receiver spends to consume a message, microseconds.
    pub recv_overhead_us: f64,
    /// CPU time charged to a process woken by a message interrupt, microseconds.
    pub interrupt_us: f64,
    /// CPU time of a context switch between two processes, microseconds.
    pub context_switch_us: f64,
    /// Power of an idle node, watts.
    pub idle_watts: f64,
    /// Power of a node whose CPUs are all busy, watts.
    pub busy_watts: f64,
    /// The native OS scheduler of every node.
    #[serde(default)]
    pub os: OsConfig,
}

impl NodePlatform {
    /// Checks that the platform can exist; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.nodes == 0 {
            return Err("nodes: must be at least 1".into());
        }
        if self.cpus_per_node == 0 {
            return Err("cpus_per_node: must be at least 1".into());
        }
        let nonneg = [
            ("job_memory_mb", self.job_memory_mb),
            ("latency_us", self.latency_us),
            ("send_overhead_us", self.send_overhead_us),
            ("recv_overhead_us", self.recv_overhead_us),
            ("interrupt_us", self.interrupt_us),
            ("context_switch_us", self.context_switch_us),
            ("idle_watts", self.idle_watts),
        ];
        for (name, v) in nonneg {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{name}: must be a finite number >= 0, got {v}"));
            }
        }
        if !(self.bandwidth_mb_s.is_finite() && self.bandwidth_mb_s > 0.0) {
            return Err(format!(
                "bandwidth_mb_s: must be a finite number > 0, got {}",
                self.bandwidth_mb_s
            ));
        }
        if !(self.busy_watts.is_finite() && self.busy_watts >= self.idle_watts) {
            return Err(format!(
                "busy_watts: must be finite and >= idle_watts, got {}",
                self.busy_watts
            ));
        }
        self.os.validate()
    }
}
