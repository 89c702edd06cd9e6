//! Node-level policies (the seeds' SchedAsst schemes), one file each.
//!
//! - [`nls`]: native local scheduling (spin waits).
//! - [`block`]: immediate blocking waits, no boosts.
//! - [`dcs`]: dynamic coscheduling (spin; interrupt and boost on message arrival).
//! - [`sb`]: spin-block at the receiver, spin at the sender.
//! - [`pb`]: periodic boost (spin; periodic round-robin boost).
//! - [`cc`]: co-ordinated coscheduling (spin-block; boost; most-messages recommendation).
//! - [`hybrid`]: immediate blocking; boost inside collectives.

pub mod block;
pub mod cc;
pub mod dcs;
pub mod hybrid;
pub mod nls;
pub mod pb;
pub mod sb;

/// A hand-set node view for the policies' unit tests.
#[cfg(test)]
pub(crate) mod fake {
    use cosched_contract::node::NodeView;
    use cosched_contract::node::Pid;
    use cosched_des::SimTime;

    /// Processes with (running, unconsumed messages).
    pub struct View(pub Vec<(Pid, bool, usize)>, pub Vec<Pid>);

    impl View {
        pub fn new(procs: &[(Pid, bool, usize)]) -> Self {
            Self(procs.to_vec(), procs.iter().map(|p| p.0).collect())
        }
        fn get(&self, p: Pid) -> (Pid, bool, usize) {
            *self.0.iter().find(|q| q.0 == p).expect("known pid")
        }
    }

    impl NodeView for View {
        fn now(&self) -> SimTime {
            SimTime::ZERO
        }
        fn processes(&self) -> &[Pid] {
            &self.1
        }
        fn is_running(&self, p: Pid) -> bool {
            self.get(p).1
        }
        fn unconsumed(&self, p: Pid) -> usize {
            self.get(p).2
        }
    }
}
