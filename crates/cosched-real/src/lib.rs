//! Real execution on Linux: the node agent that hosts cosched's node policies
//! and applies their decisions with Linux mechanisms, and its protocol with the
//! MPI shim (`real/include/cosched_proto.h`). See docs/real.md.

pub mod agent;
pub mod cgroup;
pub mod client;
pub mod controller;
pub mod coord;
pub mod gangnet;
pub mod mech;
pub mod nudge;
pub mod procfs;
pub mod slothost;
pub mod proto;
pub mod state;
