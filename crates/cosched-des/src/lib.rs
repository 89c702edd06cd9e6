//! Discrete-event simulation kernel.
//!
//! This crate knows nothing about clusters, jobs or processes. It provides:
//! - [`SimTime`]: integer nanoseconds since the start of a simulation;
//! - [`EventQueue`]: a priority queue ordered by `(time, sequence number)`, so
//!   events at the same instant are delivered in insertion order, with
//!   cancellable entries ([`EventId`]);
//! - [`RngStreams`]: independent, reproducible random streams derived from one
//!   master seed and a stream name, so adding a component never perturbs the
//!   draws of another.

mod queue;
mod rng;
mod time;

pub use queue::{EventId, EventQueue, Scheduled};
pub use rng::{RngStream, RngStreams};
pub use time::SimTime;
