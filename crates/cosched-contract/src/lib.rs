//! The policy contracts of cosched, and nothing else: what a scheduling policy
//! receives and what it may answer, at every level. A mechanism (the simulator
//! engine, a real-execution agent) hosts a policy through these traits and
//! types; a policy (`cosched-policies`) implements them. Neither needs the
//! other.
//!
//! - [`cluster`]: job level. A [`ClusterPolicy`] receives batches of
//!   [`Event`]s and answers [`Decision`]s, which the mechanism validates
//!   ([`DecisionError`]).
//! - [`node`]: node level (the seeds' SchedAsst). A [`NodePolicy`] is called at
//!   the moments of a process's life on its node and answers [`NodeAction`]s,
//!   wait modes and recommendations; [`NodeView`] is what it may read.
//! - [`admission`]: process-level cluster scheduling, admission: an
//!   [`AdmissionPolicy`] is told of arrivals and ends and starts jobs through an
//!   [`AdmissionControl`] the mechanism implements.
//! - [`slots`]: process-level cluster scheduling, time slots: a
//!   [`SlotPolicy`] (gang scheduling and its flexible options) is a table of
//!   ops called at the moments of the schedule (arrival, end, slot timer,
//!   switch end, I/O wake, CPU given up, the gangedness estimator's class) and
//!   answers [`SlotDecision`]s (admit, run a row until, switch, stop, wake
//!   at), which CPU process runs and which CPU a woken process takes; it reads
//!   a [`SlotView`], carries its gang parameters, and shows the mechanism's
//!   observers its matrix and its perturbations; the mechanism validates each
//!   decision ([`SlotError`]).
//! - [`process`]: process-level cluster scheduling (gang matrix, flexible
//!   gang, perturbation harness): the parameters of the schemes.
//!
//! Rule code that the mechanisms and the policies share (the Ousterhout
//! matrix, PACKING placement, the reference FCFS admission) implements these
//! contracts and lives in `cosched-rules`, not here.
//!
//! Dependencies: `cosched-des <- cosched-model <- cosched-contract <-
//! cosched-rules <- {cosched-policies, cosched-engine, cosched-real}`; the
//! engine depends on the contract and the rules, not on the policies.

pub mod admission;
pub mod cluster;
pub mod node;
pub mod process;
pub mod slots;

pub use admission::{AdmissionControl, AdmissionError, AdmissionEvent, AdmissionPolicy};
pub use cluster::{ClusterPolicy, ClusterView, Decision, DecisionError, Event};
pub use node::{
    ActionError, DequeueReason, EnqueueReason, NodeAction, NodePolicy, NodeView, Ops, Pid, Stop,
    WaitEnd, WaitEndCause, WaitKind, WaitMode,
};
pub use slots::{MatrixView, SlotDecision, SlotError, SlotPolicy, SlotView};
