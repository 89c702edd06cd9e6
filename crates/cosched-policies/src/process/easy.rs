//! EASY backfilling at process level, as an admission policy (batch at MPL 1,
//! PBS like; the scheme `batch[backfill=easy]` / `easy`, [`super::batch`]).
//!
//! Algorithm (Lifka, "The ANL/IBM SP scheduling system", JSSPP 1995): nodes are
//! whole (one process per node). The queue is FCFS; when the head job does not
//! fit, it gets a reservation at the *shadow time*, the earliest time at which
//! enough nodes are free counting the running jobs' estimated ends (start +
//! estimate), and the *extra* nodes, those free at the shadow time (every job
//! ending at or before it counted) beyond what the head needs. A later job is
//! started now (backfilled) if it fits in the free nodes and either ends, by its
//! estimate, no later than the shadow time or uses no more than the extra nodes
//! (which then shrink). Estimates are given per job by the caller
//! ([`super::batch::estimates_of`]: requested walltimes or perfect estimates).
//!
//! The policy keeps its queue and the estimated ends of the jobs it started; it
//! reads only the idle nodes and each job's node count from the mechanism.

use cosched_contract::admission::{
    AdmissionControl, AdmissionError, AdmissionEvent, AdmissionPolicy,
};
use cosched_des::SimTime;
use std::collections::{BTreeMap, VecDeque};

/// EASY backfilling over whole nodes, from one runtime estimate per job.
#[derive(Clone, Debug)]
pub struct Easy {
    estimates: Vec<SimTime>,
    queue: VecDeque<usize>,
    /// Estimated end of each running job, by job.
    running: BTreeMap<usize, SimTime>,
}

impl Easy {
    /// `estimates[j]`: job `j`'s estimated runtime.
    pub fn new(estimates: Vec<SimTime>) -> Self {
        Self {
            estimates,
            queue: VecDeque::new(),
            running: BTreeMap::new(),
        }
    }

    fn estimate(&self, j: usize) -> Result<SimTime, AdmissionError> {
        self.estimates
            .get(j)
            .copied()
            .ok_or_else(|| AdmissionError::Policy(format!("easy: no runtime estimate for job {j}")))
    }
}

impl AdmissionPolicy for Easy {
    fn name(&self) -> String {
        "easy".into()
    }
    fn on_events(
        &mut self,
        events: &[AdmissionEvent],
        ctl: &mut dyn AdmissionControl,
    ) -> Result<(), AdmissionError> {
        for e in events {
            match *e {
                AdmissionEvent::Arrived(j) => self.queue.push_back(j),
                AdmissionEvent::Ended(j) => {
                    self.running.remove(&j);
                }
                AdmissionEvent::Timer => {}
            }
        }
        let now = ctl.now();
        let running: Vec<Running> = self
            .running
            .iter()
            .map(|(&j, &end)| Running {
                end,
                size: ctl.nodes_needed(j),
            })
            .collect();
        let mut queue = Vec::with_capacity(self.queue.len());
        for &j in &self.queue {
            queue.push(Queued {
                job: j,
                size: ctl.nodes_needed(j),
                estimate: self.estimate(j)?,
            });
        }
        let free = ctl.idle().len() as u32;
        for j in easy_starts(now, free, &running, &queue) {
            let idle = ctl.idle();
            ctl.start(j, &idle)?;
            self.queue.retain(|&x| x != j);
            self.running.insert(j, now + self.estimate(j)?);
        }
        Ok(())
    }
    fn dump(&self) -> String {
        format!(
            "queued: {:?}; running (estimated ends): {:?}",
            self.queue, self.running
        )
    }
}

/// A running job: estimated end and node count.
#[derive(Clone, Copy, Debug)]
struct Running {
    end: SimTime,
    size: u32,
}

/// A queued job: index, node count, estimated runtime.
#[derive(Clone, Copy, Debug)]
struct Queued {
    job: usize,
    size: u32,
    estimate: SimTime,
}

/// Jobs of `queue` (FCFS order) to start now with `free` free nodes: the head
/// jobs that fit in order, then EASY backfilling behind the first that does not.
fn easy_starts(now: SimTime, mut free: u32, running: &[Running], queue: &[Queued]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut k = 0;
    let mut running = running.to_vec();
    while k < queue.len() && queue[k].size <= free {
        free -= queue[k].size;
        running.push(Running {
            end: now + queue[k].estimate,
            size: queue[k].size,
        });
        starts.push(queue[k].job);
        k += 1;
    }
    let Some(head) = queue.get(k) else {
        return starts;
    };
    // Shadow time and extra nodes of the head job.
    running.sort_by_key(|r| r.end);
    // Every job ending by the shadow time counts, ties at the shadow time included.
    let mut avail = free;
    let mut shadow = SimTime::MAX;
    for r in &running {
        let end = r.end.max(now);
        if shadow != SimTime::MAX && end > shadow {
            break;
        }
        avail += r.size;
        if shadow == SimTime::MAX && avail >= head.size {
            shadow = end;
        }
    }
    let mut extra = avail.saturating_sub(head.size);
    for q in &queue[k + 1..] {
        if q.size > free {
            continue;
        }
        if now + q.estimate <= shadow {
            free -= q.size;
            starts.push(q.job);
        } else if q.size <= extra {
            free -= q.size;
            extra -= q.size;
            starts.push(q.job);
        }
    }
    starts
}

#[cfg(test)]
mod unit {
    use super::*;

    fn s(x: i64) -> SimTime {
        SimTime::from_secs(x)
    }

    #[test]
    fn backfills_only_without_delaying_the_head() {
        // 4 nodes, 3 busy until t=10; head needs 4 -> shadow 10, extra 0.
        let running = [Running {
            end: s(10),
            size: 3,
        }];
        let q = |job, size, est| Queued {
            job,
            size,
            estimate: s(est),
        };
        let queue = [q(0, 4, 5), q(1, 1, 20), q(2, 1, 8)];
        // Job 1 would end at 20 > 10 on the head's node: no. Job 2 ends at 8: yes.
        assert_eq!(easy_starts(s(0), 1, &running, &queue), vec![2]);
        // Head needs 2: shadow 10 with 4 free then, extra 2: job 1 may use an extra node.
        let queue = [q(0, 2, 5), q(1, 1, 20)];
        assert_eq!(easy_starts(s(0), 1, &running, &queue), vec![1]);
        // Two jobs end at the shadow time 10: both count. 1 free + 3 + 3 = 7 at 10,
        // head needs 4 -> extra 3 (the first tied job alone would give 0 extra), so a
        // 1-node job ending at 20 backfills.
        let tied = [
            Running {
                end: s(10),
                size: 3,
            },
            Running {
                end: s(10),
                size: 3,
            },
        ];
        assert_eq!(
            easy_starts(s(0), 1, &tied, &[q(0, 4, 5), q(1, 1, 20)]),
            vec![1]
        );
        // Heads that fit start in order.
        assert_eq!(
            easy_starts(s(0), 4, &[], &[q(0, 2, 1), q(1, 2, 1), q(2, 1, 1)]),
            vec![0, 1]
        );
    }
}
