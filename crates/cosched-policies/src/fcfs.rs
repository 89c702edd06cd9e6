//! First come, first served.
//!
//! Algorithm: jobs wait in submission order; whenever processors are released or
//! a job arrives, the engine's free-processor count is compared with the queue
//! head, and heads are started while they fit. A job that does not fit blocks
//! every job behind it (no backfilling).
//!
//! With `strict=false` (OpenPBS's default scheduler, `strict_ordering: false ALL`
//! in `src/scheduler/pbs_sched_config` of openpbs/openpbs; the process-level
//! `batch[strict=false]` is the same rule): each pass goes through the queue in
//! order and starts every job that fits now; a job that does not fit keeps its
//! place but holds no reservation.
//!
//! Parameters: `strict` (default `true`).

use crate::registry::{ParamInfo, PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::cluster::{ClusterPolicy, ClusterView, Decision, Event};
use cosched_model::JobId;
use std::collections::VecDeque;

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "fcfs",
        level: "cluster",
        summary: "First come, first served; no backfilling.",
        params: vec![ParamInfo {
            name: "strict",
            kind: "bool",
            default: "true",
            doc: "strict order (the head blocks the queue); false: every job that fits starts (OpenPBS strict_ordering: false)",
        }],
    }
}

pub fn build(spec: &PolicySpec) -> Result<Box<dyn ClusterPolicy>, RegistryError> {
    spec.expect_only(&["strict"])?;
    Ok(Box::new(Fcfs {
        queue: VecDeque::new(),
        strict: spec.get("strict", true)?,
    }))
}

pub struct Fcfs {
    queue: VecDeque<JobId>,
    strict: bool,
}

impl Default for Fcfs {
    fn default() -> Self {
        Fcfs {
            queue: VecDeque::new(),
            strict: true,
        }
    }
}

impl ClusterPolicy for Fcfs {
    fn name(&self) -> String {
        if self.strict {
            "fcfs".into()
        } else {
            "fcfs[strict=false]".into()
        }
    }

    fn on_events(&mut self, events: &[Event], view: &dyn ClusterView, out: &mut Vec<Decision>) {
        for e in events {
            if let Event::Submitted(j) = e {
                self.queue.push_back(*j);
            }
        }
        let mut free = view.free_procs();
        let mut k = 0;
        while let Some(&j) = self.queue.get(k) {
            let need = view.job(j).procs;
            if need > free {
                if self.strict {
                    break;
                }
                k += 1;
                continue;
            }
            free -= need;
            out.push(Decision::Start(j));
            self.queue.remove(k);
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
