//! Admission of jobs to nodes: the engine's side of the process-level
//! admission contract ([`cosched_contract::admission`]). The run's
//! [`AdmissionPolicy`] decides which queued job starts when; the engine answers
//! its questions about the nodes, validates each start and carries it out
//! (placement by the run's rule, [`place::choose_nodes`]). Without a policy the
//! reference admission, strict FCFS under the MPL, decides. Gang mode admits
//! through its matrix instead (`admit_gang`, [`gang`]).

use super::{kb, place, Ev, ProcError, Sim};
use cosched_contract::admission::{
    AdmissionControl, AdmissionError, AdmissionEvent, AdmissionPolicy, Fcfs,
};
use cosched_contract::node::Pid;
use cosched_des::SimTime;
use std::sync::Arc;

/// Builds the admission policy of each run ([`super::ProcOptions::admission`]).
#[derive(Clone)]
pub struct AdmissionFactory(pub Arc<dyn Fn() -> Box<dyn AdmissionPolicy> + Send + Sync>);

impl AdmissionFactory {
    pub fn new(f: impl Fn() -> Box<dyn AdmissionPolicy> + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }
}

impl std::fmt::Debug for AdmissionFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AdmissionFactory({})", (self.0)().name())
    }
}

/// The admission policy of a run: the options' one, else the reference FCFS.
pub(super) fn policy_of(opts: &super::ProcOptions) -> Option<Box<dyn AdmissionPolicy>> {
    if opts.gang.is_some() {
        return None;
    }
    Some(match &opts.admission {
        Some(f) => (f.0)(),
        None => Box::new(Fcfs::default()),
    })
}

impl AdmissionControl for Sim<'_> {
    fn now(&self) -> SimTime {
        self.q.now()
    }
    fn nodes(&self) -> u32 {
        self.plat.nodes
    }
    fn nodes_needed(&self, job: usize) -> u32 {
        self.jobs[job].nodes_needed()
    }
    fn eligible(&self, job: usize) -> Vec<u32> {
        (0..self.plat.nodes)
            .filter(|&n| self.has_room(job, n))
            .collect()
    }
    fn idle(&self) -> Vec<u32> {
        (0..self.plat.nodes)
            .filter(|&n| self.nodes[n as usize].load == 0)
            .collect()
    }
    fn start(&mut self, job: usize, among: &[u32]) -> Result<(), AdmissionError> {
        let queued = job < self.jobs.len()
            && self.records[job].is_none()
            && self.jobs[job].submit <= self.q.now();
        if !queued {
            return Err(AdmissionError::NotQueued(job));
        }
        let sorted = among.windows(2).all(|w| w[0] < w[1]);
        if let Some(&node) = among
            .iter()
            .find(|&&n| n >= self.plat.nodes || !self.has_room(job, n) || !sorted)
        {
            return Err(AdmissionError::NoRoom { job, node });
        }
        let (size, rpn) = (self.jobs[job].nodes_needed(), self.jobs[job].ranks_per_node);
        if (among.len() as u32) < size {
            return Err(AdmissionError::TooFew {
                job,
                need: size,
                offered: among.len() as u32,
            });
        }
        let chosen = self.choose_nodes(among, size as usize, true);
        let ranks = self.jobs[job].program.size() as usize;
        let per_rank: Vec<u32> = (0..ranks).map(|r| chosen[r / rpn as usize]).collect();
        let now = self.q.now();
        self.start_job(job, per_rank, now);
        Ok(())
    }
}

impl Sim<'_> {
    /// Whether node `n` has room for `ranks_per_node` more processes of job `j`
    /// (and their memory, with memory-aware admission).
    fn has_room(&self, j: usize, n: u32) -> bool {
        let rpn = self.jobs[j].ranks_per_node;
        let need = kb(self.jobs[j].program.memory_mb) * i64::from(rpn);
        let nd = &self.nodes[n as usize];
        nd.load + rpn <= self.opts.mpl
            && (!self.opts.memory_aware || nd.committed_kb + need <= kb(self.plat.job_memory_mb))
    }

    /// Tells the admission (the policy, or gang's matrix) what happened now and
    /// carries out its starts. A start the engine refuses stops the run.
    pub(super) fn admit(&mut self, event: AdmissionEvent, now: SimTime) {
        let Some(mut policy) = self.admission.take() else {
            if let AdmissionEvent::Arrived(j) = event {
                self.pending.push_back(j);
            }
            return self.admit_gang(now);
        };
        if let Err(e) = policy.on_events(&[event], self) {
            self.failure.get_or_insert(ProcError::Admission(e));
        }
        self.admission = Some(policy);
    }

    /// `size` of the `eligible` nodes (sorted), by the run's placement rule
    /// ([`place::choose_nodes`]; PACKING fills the least-loaded layer first).
    /// A gang row is itself the layer: `by_load = false` places within it by
    /// first fit, whatever the other rows hold.
    fn choose_nodes(&mut self, eligible: &[u32], size: usize, by_load: bool) -> Vec<u32> {
        let nodes = &self.nodes;
        place::choose_nodes(
            self.opts.placement,
            eligible,
            size,
            |n| if by_load { nodes[n as usize].load } else { 0 },
            &mut self.rng,
        )
    }

    /// Gang admission: FCFS, each job into the first matrix row with room.
    fn admit_gang(&mut self, now: SimTime) {
        while let Some(&j) = self.pending.front() {
            // `rpn` consecutive ranks per node, each in its own CPU column.
            let rpn = self.jobs[j].ranks_per_node;
            let size = self.jobs[j].nodes_needed() as usize;
            let need = kb(self.jobs[j].program.memory_mb) * i64::from(rpn);
            let capacity = kb(self.plat.job_memory_mb);
            let g = self.gang.as_ref().expect("gang mode");
            let nodes = &self.nodes;
            let aware = self.opts.memory_aware;
            let Some((row, eligible)) = g.find_row(size, rpn as usize, |n| {
                !aware || nodes[n as usize].committed_kb + need <= capacity
            }) else {
                return;
            };
            let picked = self.choose_nodes(&eligible, size, false);
            let ranks = self.jobs[j].program.size() as usize;
            let chosen: Vec<u32> = (0..ranks).map(|r| picked[r / rpn as usize]).collect();
            self.pending.pop_front();
            let first = self.procs.len() as Pid;
            let g = self.gang.as_mut().expect("gang mode");
            g.place(j, row, &chosen, first);
            g.flex_place(j, &self.jobs[j].program.app());
            if g.active.is_none() {
                // The cycle was stopped (empty matrix): this row's slot starts now.
                g.active = Some(row);
                g.gen += 1;
                let (gen, quantum) = (g.gen, g.slot_quantum());
                self.q
                    .schedule(now + quantum, Ev::GangSwitch { gen })
                    .expect("future");
                g.est.slot_start(now);
                if let Some(pt) = &mut self.perturb {
                    pt.job_started(j, first, &chosen);
                    pt.slot_start(self.gang.as_ref().expect("gang mode"), now);
                }
            } else if let Some(pt) = &mut self.perturb {
                pt.job_started(j, first, &chosen);
            }
            self.start_job(j, chosen, now);
        }
    }
}
