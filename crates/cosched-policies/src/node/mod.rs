//! Node-level policies (the seeds' SchedAsst schemes), one file each.
//!
//! - [`nls`]: native local scheduling (spin waits).
//! - [`block`]: immediate blocking waits, no boosts.
//! - [`dcs`]: dynamic coscheduling (spin; interrupt and boost on message arrival).
//! - [`sb`]: spin-block at the receiver, spin at the sender.
//! - [`pb`]: periodic boost (spin; periodic round-robin boost).
//! - [`cc`]: co-ordinated coscheduling (spin-block; boost; most-messages recommendation).
//! - [`hybrid`]: immediate blocking; boost inside collectives.
//! - [`ics`]: implicit coscheduling (two-phase spin-block, conditional spin).
//! - [`fcs`]: flexible coscheduling (per-process CS / F / DC classification).
//! - [`yielding`] (`yield`): polling waits that yield the CPU (Open MPI's yield mode).

pub mod block;
pub mod cc;
pub mod dcs;
pub mod fcs;
pub mod hybrid;
pub mod ics;
pub mod nls;
pub mod pb;
pub mod sb;
pub mod yielding;

/// The demand-driven answer to a message arriving for process `p` (DCS, CC,
/// FCS's CS processes): nothing while it runs; otherwise, with `interrupt`,
/// the message's interrupt wakes it if it blocked, and it is boosted until it
/// next runs.
pub(crate) fn boost_on_message(
    p: cosched_contract::node::Pid,
    running: bool,
    interrupt: bool,
    out: &mut Vec<cosched_contract::node::NodeAction>,
) {
    use cosched_contract::node::NodeAction;
    if !running {
        if interrupt {
            out.push(NodeAction::Interrupt(p));
        }
        out.push(NodeAction::BoostUntilRun(p));
    }
}

/// The registry entry of a node policy that takes no parameters.
pub(crate) fn without_params(name: &'static str, summary: &'static str) -> crate::registry::PolicyInfo {
    crate::registry::PolicyInfo {
        name,
        level: "node",
        summary,
        params: Vec::new(),
    }
}

/// Builds a node policy that takes no parameters: any parameter in `spec` is an
/// error naming it.
pub(crate) fn build_without_params(
    spec: &crate::registry::PolicySpec,
    policy: impl cosched_contract::node::NodePolicy + 'static,
) -> Result<Box<dyn cosched_contract::node::NodePolicy>, crate::registry::RegistryError> {
    spec.expect_only(&[])?;
    Ok(Box::new(policy))
}

/// A time in microseconds, as policy names print their parameters.
pub(crate) fn as_us(t: cosched_des::SimTime) -> f64 {
    t.as_ns() as f64 / 1000.0
}

/// A hand-set node view for the policies' unit tests.
#[cfg(test)]
pub(crate) mod fake {
    use cosched_contract::node::{NodePolicy, NodeView, WaitKind, WaitMode};

    /// The wait mode `p` answers for process 0 (running, nothing buffered).
    pub fn wait_mode(p: &mut dyn NodePolicy, kind: WaitKind) -> WaitMode {
        p.wait_mode(&View::new(&[(0, true, 0)]), 0, kind)
    }
    use cosched_contract::node::Pid;
    use cosched_des::SimTime;

    /// Processes with (running, unconsumed messages), and optionally how long
    /// some have waited and their CPU time.
    pub struct View {
        procs: Vec<(Pid, bool, usize)>,
        pids: Vec<Pid>,
        waited: Vec<(Pid, SimTime)>,
        cpu: Vec<(Pid, SimTime)>,
    }

    impl View {
        pub fn new(procs: &[(Pid, bool, usize)]) -> Self {
            Self {
                procs: procs.to_vec(),
                pids: procs.iter().map(|p| p.0).collect(),
                waited: Vec::new(),
                cpu: Vec::new(),
            }
        }
        /// `p` has been waiting for `t`.
        pub fn waiting(mut self, p: Pid, t: SimTime) -> Self {
            self.waited.push((p, t));
            self
        }
        /// `p` has used `t` of CPU.
        pub fn cpu(mut self, p: Pid, t: SimTime) -> Self {
            self.cpu.push((p, t));
            self
        }
        fn get(&self, p: Pid) -> (Pid, bool, usize) {
            *self.procs.iter().find(|q| q.0 == p).expect("known pid")
        }
    }

    impl NodeView for View {
        fn now(&self) -> SimTime {
            SimTime::ZERO
        }
        fn processes(&self) -> &[Pid] {
            &self.pids
        }
        fn is_running(&self, p: Pid) -> bool {
            self.get(p).1
        }
        fn unconsumed(&self, p: Pid) -> usize {
            self.get(p).2
        }
        fn job_of(&self, _p: Pid) -> Option<u32> {
            Some(0)
        }
        fn waited(&self, p: Pid) -> Option<SimTime> {
            self.waited.iter().find(|w| w.0 == p).map(|w| w.1)
        }
        fn cpu_time(&self, p: Pid) -> Option<SimTime> {
            self.cpu.iter().find(|w| w.0 == p).map(|w| w.1)
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::registry::{build_node, node_catalog};

    /// A node policy whose entry lists no parameter refuses any parameter, naming
    /// it and saying that none is valid.
    #[test]
    fn a_policy_without_parameters_refuses_any() {
        let plain: Vec<_> = node_catalog().into_iter().filter(|i| i.params.is_empty()).collect();
        assert!(plain.iter().any(|i| i.name == "nls"), "nls takes no parameter");
        for info in plain {
            assert_eq!(info.level, "node");
            assert!(build_node(info.name).is_ok(), "{}", info.name);
            let e = build_node(&format!("{}[spin_us=5]", info.name)).err().expect("refused");
            assert_eq!(
                e.to_string(),
                format!(
                    "policy {}: unknown parameter \"spin_us\"; valid parameters: (none)",
                    info.name
                )
            );
        }
    }
}
