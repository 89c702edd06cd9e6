//! OpenPBS's default FIFO scheduler with its starving-job rule: non-strict
//! queue order plus `help_starving_jobs` (the admission of `batch[strict=false]`).
//!
//! Algorithm, at every scheduling point (a job's arrival or end; a start can
//! only become possible at one):
//! 1. A queued job is *starving* when it has waited longer than `max_starve`
//!    (`now - arrival > max_starve`, strictly). The most starving job is the one
//!    that has waited longest: with one queue in submission order, the queue
//!    head, so only the head is ever checked.
//! 2. If the head is starving, it is the only job that may start: it starts if
//!    the nodes it needs have room, and otherwise every later job waits too
//!    (the scheduler holds the freed nodes for it; with no backfilling nothing
//!    may use them meanwhile).
//! 3. Otherwise the pass is OpenPBS's non-strict order (`strict_ordering:
//!    false`): each queued job in order starts if it fits now; a job that does
//!    not fit keeps its place and holds no reservation.
//!
//! Source: OpenPBS v2.3's FIFO scheduler (`src/scheduler.cc/samples/fifo/`,
//! kept in adaptivecomputing/torque): `update_starvation` in `fifo.c` marks a
//! queued job starving when `qtime + max_starve < now` and picks the one
//! starving longest; `check_starvation` in `check.c` refuses every other job
//! while that one has not run. The default `sched_config` has
//! `help_starving_jobs: true ALL` and `max_starve: 24:00:00`; Altair's PBS
//! Professional guide ("Implement Starving Jobs", 2021.1) states the same rule:
//! "If a job is considered starving, no lower-priority jobs will run until the
//! starving job can be run, unless backfilling is also specified", default
//! starving time 24 hours.
//!
//! Parameters: `max_starve` (the starving threshold; OpenPBS default 24 h).
//! Under strict FIFO or EASY the rule changes nothing (the head already blocks
//! the queue or holds a reservation), so only the non-strict order uses it.

use cosched_contract::admission::{
    AdmissionControl, AdmissionError, AdmissionEvent, AdmissionPolicy,
};
use cosched_des::SimTime;
use cosched_rules::admission::walk_queue;
use std::collections::VecDeque;

/// Non-strict FIFO with OpenPBS's `help_starving_jobs`.
#[derive(Clone, Debug)]
pub struct StarvingFifo {
    max_starve: SimTime,
    /// Queued jobs in submission order, each with its arrival time.
    queue: VecDeque<(usize, SimTime)>,
}

impl StarvingFifo {
    pub fn new(max_starve: SimTime) -> Self {
        Self {
            max_starve,
            queue: VecDeque::new(),
        }
    }
}

impl AdmissionPolicy for StarvingFifo {
    fn name(&self) -> String {
        format!(
            "fcfs[strict=false,max_starve_s={}]",
            self.max_starve.as_secs_f64()
        )
    }

    fn on_events(
        &mut self,
        events: &[AdmissionEvent],
        ctl: &mut dyn AdmissionControl,
    ) -> Result<(), AdmissionError> {
        let now = ctl.now();
        for e in events {
            if let AdmissionEvent::Arrived(j) = *e {
                self.queue.push_back((j, now));
            }
        }
        // Only the head can be the most starving job (module documentation).
        let max_starve = self.max_starve;
        walk_queue(
            &mut self.queue,
            |&(j, _)| j,
            ctl,
            |k, &(_, arrived)| k == 0 && now - arrived > max_starve,
        )
    }

    fn dump(&self) -> String {
        format!("queued (job, arrival): {:?}", self.queue)
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    /// Nodes with one slot each; `busy[n]` while a job holds node n.
    struct Machine {
        now: SimTime,
        need: Vec<u32>,
        busy: Vec<bool>,
        started: Vec<(usize, SimTime)>,
    }

    impl AdmissionControl for Machine {
        fn now(&self) -> SimTime {
            self.now
        }
        fn nodes(&self) -> u32 {
            self.busy.len() as u32
        }
        fn nodes_needed(&self, job: usize) -> u32 {
            self.need[job]
        }
        fn eligible(&self, _job: usize) -> Vec<u32> {
            (0..self.nodes())
                .filter(|&n| !self.busy[n as usize])
                .collect()
        }
        fn idle(&self) -> Vec<u32> {
            self.eligible(0)
        }
        fn start(&mut self, job: usize, among: &[u32]) -> Result<(), AdmissionError> {
            for &n in &among[..self.need[job] as usize] {
                self.busy[n as usize] = true;
            }
            self.started.push((job, self.now));
            Ok(())
        }
    }

    #[test]
    fn a_starving_head_holds_the_freed_nodes_and_a_younger_one_does_not() {
        // 2 nodes. t=0: job 0 (1 node) starts. t=10: job 1 (2 nodes) queues.
        // t=20: job 2 (1 node) starts on the free node (non-strict order).
        // t=100: job 0 ends; job 1 has waited 90 s.
        //  - max_starve 60 s: job 1 is starving, so job 3 (1 node, arrived at
        //    t=100) may not take the freed node; at t=130 job 2 ends and job 1
        //    starts on both nodes.
        //  - max_starve 24 h: job 1 is not starving, job 3 starts at t=100.
        let s = SimTime::from_secs;
        let run = |max_starve: SimTime| {
            let mut m = Machine {
                now: s(0),
                need: vec![1, 2, 1, 1],
                busy: vec![false, false],
                started: Vec::new(),
            };
            let mut p = StarvingFifo::new(max_starve);
            let mut at = |m: &mut Machine, t: i64, ev: &[AdmissionEvent], free: &[usize]| {
                m.now = s(t);
                for &n in free {
                    m.busy[n] = false;
                }
                p.on_events(ev, m).unwrap();
            };
            use AdmissionEvent::*;
            at(&mut m, 0, &[Arrived(0)], &[]);
            at(&mut m, 10, &[Arrived(1)], &[]);
            at(&mut m, 20, &[Arrived(2)], &[]);
            at(&mut m, 100, &[Ended(0), Arrived(3)], &[0]);
            let node_of_2 = 1; // job 0 took node 0, job 2 node 1
            at(&mut m, 130, &[Ended(2)], &[node_of_2]);
            m.started
        };
        assert_eq!(
            run(s(60)),
            vec![(0, s(0)), (2, s(20)), (1, s(130))],
            "job 1 starving from t=70: job 3 waits behind it"
        );
        assert_eq!(
            run(s(86_400)),
            vec![(0, s(0)), (2, s(20)), (3, s(100))],
            "no starving job: job 3 takes the freed node"
        );
        // Exactly max_starve of waiting is not starving yet (strict inequality).
        assert_eq!(run(s(90))[2], (3, s(100)));
        assert_eq!(run(s(89))[2], (1, s(130)));
    }
}
