//! Rule code shared by the mechanisms (the simulator engine, real execution)
//! and the policies: scheduling rules that more than one of them carries out
//! identically, so that each has one implementation. The contracts those rules
//! serve are in `cosched-contract`; this crate holds no contract.
//!
//! - [`gang`]: the Ousterhout matrix's placement and slot cycle
//!   ([`gang::Ousterhout`]), shared by the simulator, the single-machine
//!   controller and the Slurm gang coordinator.
//! - [`place`]: PACKING node placement ([`place::packing`]), shared by the
//!   simulator (process level and the job-level time-sharing model) and the
//!   single-machine controller.
//! - [`boost`]: the re-check schedule of a pending "boost until run"
//!   ([`boost::boost_check_delay`]), carried out by the real node agent and
//!   modelled by the simulator on platforms whose boost is the agent's.
//! - [`admission`]: the reference process-level admission, MPL-limited FCFS
//!   ([`admission::Fcfs`], strict or not), and its queue pass
//!   ([`admission::walk_queue`]).
//!
//! Dependencies: `cosched-des <- cosched-model <- cosched-contract <-
//! cosched-rules <- {cosched-policies, cosched-engine, cosched-real}`.

pub mod admission;
pub mod boost;
pub mod gang;
pub mod place;
