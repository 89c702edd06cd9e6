//! First come, first served.
//!
//! Algorithm: jobs wait in submission order; whenever processors are released or
//! a job arrives, the engine's free-processor count is compared with the queue
//! head, and heads are started while they fit. A job that does not fit blocks
//! every job behind it (no backfilling).
//!
//! Parameters: none.

use crate::registry::{ParamInfo, PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::cluster::{ClusterPolicy, ClusterView, Decision, Event};
use cosched_model::JobId;
use std::collections::VecDeque;

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "fcfs",
        level: "cluster",
        summary: "First come, first served; no backfilling.",
        params: Vec::<ParamInfo>::new(),
    }
}

pub fn build(spec: &PolicySpec) -> Result<Box<dyn ClusterPolicy>, RegistryError> {
    spec.expect_only(&[])?;
    Ok(Box::new(Fcfs::default()))
}

#[derive(Default)]
pub struct Fcfs {
    queue: VecDeque<JobId>,
}

impl ClusterPolicy for Fcfs {
    fn name(&self) -> String {
        "fcfs".into()
    }

    fn on_events(&mut self, events: &[Event], view: &dyn ClusterView, out: &mut Vec<Decision>) {
        for e in events {
            if let Event::Submitted(j) = e {
                self.queue.push_back(*j);
            }
        }
        let mut free = view.free_procs();
        while let Some(&j) = self.queue.front() {
            let need = view.job(j).procs;
            if need > free {
                break;
            }
            free -= need;
            out.push(Decision::Start(j));
            self.queue.pop_front();
        }
    }

    fn dump(&self) -> String {
        format!(
            "fcfs: {} queued, head {:?}",
            self.queue.len(),
            self.queue.front()
        )
    }
}
