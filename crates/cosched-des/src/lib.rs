//! Discrete-event simulation kernel.
//!
//! This crate knows nothing about clusters, jobs or processes. It provides:
//! - [`SimTime`]: integer nanoseconds since the start of a simulation;
//! - [`EventQueue`]: a priority queue ordered by `(time, sequence number)`, so
//!   events at the same instant are delivered in insertion order, with
//!   cancellable entries ([`EventId`]);
//! - [`TimerSlots`]: re-settable timers kept beside an `EventQueue` and ordered
//!   with its events (a replaced timer leaves no cancelled entry behind);
//! - [`RngStreams`]: independent, reproducible random streams derived from one
//!   master seed and a stream name, so adding a component never perturbs the
//!   draws of another;
//! - [`interrupt`]: the process-wide interruption request every simulation loop polls.

pub mod interrupt;
mod queue;
mod rng;
mod slots;
mod time;

pub use queue::{EventId, EventQueue, Scheduled};
pub use rng::{RngStream, RngStreams};
pub use slots::TimerSlots;
pub use time::{SimTime, TimeRangeError};
