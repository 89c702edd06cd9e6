//! Time sharing at job level, for whole traces: jobs share processors up to an MPL,
//! each node's scheduling scheme slowing them by a fitted interference factor.
//!
//! Model:
//! - Every processor holds at most `mpl` processes. A job of `procs` processes gets
//!   `procs` distinct processors with fewer than `mpl` processes each, by the
//!   placement rule shared with the process level and the real controller
//!   ([`cosched_rules::place::packing`]; PACKING: contiguous processors in the
//!   least-loaded layer first, the gang matrix's rule for rows; NO PACKING: drawn
//!   at random); FCFS, a head that does not fit blocks the queue; a job wider than
//!   the machine is rejected.
//! - A job whose most loaded processor holds `k` processes progresses at rate
//!   `efficiency(class, k) / k` of dedicated speed (its slowest rank sets its pace),
//!   where `efficiency` is the scheme's fitted table (1 for `k = 1`; perfect sharing
//!   would be 1 for every `k`). The table comes from process-level runs
//!   (`cosched calibrate`); `class` is the job's communication-intensity class.
//! - Rates change only when a job starts or ends; between changes completion times
//!   follow in closed form. Only the jobs sharing a processor with the starting or
//!   ending job are updated, so a run costs O(n log n) plus the sharing degree.
//! - Busy time: a processor holding `k >= 1` processes is busy, each of them getting
//!   `1/k` of it; a job's CPU time is the integral of its shares (time lost to
//!   interference counts as busy, as spinning does at process level).

use crate::alloc::{node_count, Range};
use crate::cluster::{EngineError, EngineStats, JobRecord, JobStatus, SimOutput};
use crate::gang_fluid::fluid_instant;
use crate::metrics::MeasuredBusy;
use cosched_des::{RngStream, RngStreams, SimTime};
use cosched_model::{JobSpec, Placement, Platform, Workload};
use cosched_rules::place::packing;
use rand::seq::SliceRandom;
use std::collections::{BTreeSet, VecDeque};

/// Parameters of a job-level time-sharing run.
#[derive(Clone, Debug, PartialEq)]
pub struct TimeshareParams {
    pub mpl: u32,
    pub placement: Placement,
    pub seed: u64,
    /// Efficiency tables: `efficiency[class][k - 1]` for `k = 1..=mpl` processes on
    /// the busiest processor; values in (0, k].
    pub efficiency: Vec<Vec<f64>>,
    /// Each job's table (index into `efficiency`); empty means table 0 for every job.
    pub class_of: Vec<usize>,
    /// Name for the output (e.g. `timeshare[scheme=hybrid,mpl=3]`).
    pub name: String,
}

struct Running {
    procs: Vec<u32>,
    /// Share integrals of its processors at its start.
    share0: Vec<f64>,
    rate: f64,
    /// Dedicated work left (ns) as of `since`.
    left: f64,
    since: f64,
    finish: f64,
}

/// Runs `workload` on `platform` under job-level time sharing.
pub fn simulate_timeshare(
    workload: &Workload,
    platform: &Platform,
    p: &TimeshareParams,
) -> Result<(SimOutput, MeasuredBusy), EngineError> {
    platform.validate()?;
    check_params(p, workload.jobs.len())?;
    let jobs = &workload.jobs;
    if let Some(i) = jobs.windows(2).position(|w| w[1].submit < w[0].submit) {
        return Err(EngineError::Unsorted(i + 1));
    }
    let mut run = Fluid::new(jobs, platform, p);
    loop {
        let t_arrival = jobs.get(run.next_arrival).map(|j| j.submit.as_ns() as f64);
        let t_finish = run.finishing.first().map(|&(k, _)| f64::from_bits(k));
        let (now, is_arrival) = match (t_arrival, t_finish) {
            (None, None) => break,
            (Some(a), Some(f)) if a <= f => (a, true),
            (Some(a), None) => (a, true),
            (_, Some(f)) => (f, false),
        };
        let t_ns = fluid_instant(now, run.finishing.first().map(|&(_, j)| j), jobs)?;
        run.stats.events += 1;
        let mut affected: Vec<usize> = Vec::new();
        if is_arrival {
            run.arrive();
        } else {
            run.end_first(now, t_ns, &mut affected);
        }
        run.admit(now, t_ns, &mut affected);
        affected.sort_unstable();
        affected.dedup();
        run.retime(&affected, now);
    }
    let total_proc_s = run.cpus.busy_ns.iter().sum::<f64>() / 1e9;
    Ok((
        SimOutput {
            records: run.records,
            stats: run.stats,
            policy: p.name.clone(),
        },
        MeasuredBusy {
            job_cpu_s: run.cpu_s,
            total_proc_s,
        },
    ))
}

/// Checks the MPL, the efficiency tables (one value in `(0, k]` for each `k` up
/// to the MPL) and the job classes.
fn check_params(p: &TimeshareParams, jobs: usize) -> Result<(), EngineError> {
    if p.mpl == 0 || p.efficiency.is_empty() {
        return Err(EngineError::Params(
            "timeshare: mpl must be >= 1 and at least one efficiency table is needed".into(),
        ));
    }
    for (t, table) in p.efficiency.iter().enumerate() {
        if table.len() < p.mpl as usize {
            return Err(EngineError::Params(format!(
                "timeshare: efficiency table {t} has {} values, mpl {} needs as many",
                table.len(),
                p.mpl
            )));
        }
        if let Some((k, e)) = table
            .iter()
            .enumerate()
            .find(|(k, e)| !(e.is_finite() && **e > 0.0 && **e <= (*k + 1) as f64))
        {
            return Err(EngineError::Params(format!(
                "timeshare: efficiency table {t}: value for {} processes must be in (0, {}], got {e}",
                k + 1,
                k + 1
            )));
        }
    }
    if !p.class_of.is_empty() && p.class_of.len() != jobs {
        return Err(EngineError::Params(format!(
            "timeshare: {} job classes for {} jobs",
            p.class_of.len(),
            jobs
        )));
    }
    if let Some(&c) = p.class_of.iter().find(|&&c| c >= p.efficiency.len()) {
        return Err(EngineError::Params(format!(
            "timeshare: job class {c} has no efficiency table ({} tables)",
            p.efficiency.len()
        )));
    }
    Ok(())
}

/// Per processor: its load, the jobs on it, the integral of 1/load over time (a
/// process's CPU share), its busy time and its last update.
struct Cpus {
    load: Vec<u32>,
    on: Vec<Vec<usize>>,
    share: Vec<f64>,
    busy_ns: Vec<f64>,
    last: Vec<f64>,
}

impl Cpus {
    fn new(total: u32) -> Self {
        Self {
            load: vec![0u32; total as usize],
            on: vec![Vec::new(); total as usize],
            share: vec![0.0f64; total as usize],
            busy_ns: vec![0.0f64; total as usize],
            last: vec![0.0f64; total as usize],
        }
    }

    /// Brings processor `c`'s share integral and busy time up to `now`.
    fn touch(&mut self, c: usize, now: f64) {
        if self.load[c] > 0 {
            self.share[c] += (now - self.last[c]) / self.load[c] as f64;
            self.busy_ns[c] += now - self.last[c];
        }
        self.last[c] = now;
    }
}

/// The state of a time-sharing run.
struct Fluid<'a> {
    jobs: &'a [JobSpec],
    p: &'a TimeshareParams,
    total: u32,
    ppn: u32,
    rng: RngStream,
    records: Vec<JobRecord>,
    cpus: Cpus,
    running: Vec<Option<Running>>,
    cpu_s: Vec<f64>,
    /// Running jobs by finish time (its bits, for ordering) and index.
    finishing: BTreeSet<(u64, usize)>,
    /// Jobs waiting for processors, FCFS.
    queue: VecDeque<usize>,
    next_arrival: usize,
    stats: EngineStats,
}

impl<'a> Fluid<'a> {
    fn new(jobs: &'a [JobSpec], platform: &Platform, p: &'a TimeshareParams) -> Self {
        let total = platform.total_procs();
        let n = jobs.len();
        Self {
            jobs,
            p,
            total,
            ppn: platform.procs_per_node,
            rng: RngStreams::new(p.seed).stream("placement"),
            records: vec![JobRecord::unstarted(JobStatus::Completed); n],
            cpus: Cpus::new(total),
            running: (0..n).map(|_| None).collect(),
            cpu_s: vec![0.0f64; n],
            finishing: BTreeSet::new(),
            queue: VecDeque::new(),
            next_arrival: 0,
            stats: EngineStats::default(),
        }
    }

    /// The efficiency of job `j` with `k` processes on its busiest processor.
    fn eff(&self, j: usize, k: u32) -> f64 {
        let class = self.p.class_of.get(j).copied().unwrap_or(0);
        self.p.efficiency[class][(k.max(1) - 1) as usize]
    }

    /// The next job arrives: queued, or rejected if wider than the machine.
    fn arrive(&mut self) {
        let j = self.next_arrival;
        self.next_arrival += 1;
        if self.jobs[j].procs > self.total {
            self.records[j].status = JobStatus::Rejected;
        } else {
            self.queue.push_back(j);
        }
    }

    /// The first finishing job ends at `now`; the jobs that shared its
    /// processors are `affected`.
    fn end_first(&mut self, now: f64, t_ns: SimTime, affected: &mut Vec<usize>) {
        let &(key, j) = self.finishing.first().expect("finishing job");
        self.finishing.remove(&(key, j));
        let r = self.running[j].take().expect("running");
        self.records[j].end = Some(t_ns);
        for (&c, s0) in r.procs.iter().zip(&r.share0) {
            let c = c as usize;
            self.cpus.touch(c, now);
            self.cpu_s[j] += (self.cpus.share[c] - s0) / 1e9;
            self.cpus.load[c] -= 1;
            self.cpus.on[c].retain(|&x| x != j);
            affected.extend_from_slice(&self.cpus.on[c]);
        }
    }

    /// Starts queued jobs in FCFS order while the head fits; the jobs sharing
    /// their processors are `affected`.
    fn admit(&mut self, now: f64, t_ns: SimTime, affected: &mut Vec<usize>) {
        while let Some(&j) = self.queue.front() {
            let need = self.jobs[j].procs as usize;
            let eligible: Vec<u32> = (0..self.total)
                .filter(|&c| self.cpus.load[c as usize] < self.p.mpl)
                .collect();
            if eligible.len() < need {
                break;
            }
            let chosen = choose(
                &eligible,
                need,
                self.p.placement,
                &self.cpus.load,
                &mut self.rng,
            );
            self.queue.pop_front();
            self.stats.decisions += 1;
            self.start(j, chosen, now, t_ns, affected);
        }
    }

    /// Starts job `j` on the processors `chosen`.
    fn start(
        &mut self,
        j: usize,
        chosen: Vec<u32>,
        now: f64,
        t_ns: SimTime,
        affected: &mut Vec<usize>,
    ) {
        let mut share0 = Vec::with_capacity(chosen.len());
        for &c in &chosen {
            self.cpus.touch(c as usize, now);
            share0.push(self.cpus.share[c as usize]);
            self.cpus.load[c as usize] += 1;
            self.cpus.on[c as usize].push(j);
        }
        let ranges: Vec<Range> = crate::alloc::to_ranges(&chosen);
        self.records[j].start = Some(t_ns);
        self.records[j].nodes = node_count(&ranges, self.ppn);
        self.records[j].alloc = ranges;
        let work = self.jobs[j].runtime.as_ns() as f64;
        if work <= 0.0 {
            self.records[j].end = Some(t_ns);
            for &c in &chosen {
                self.cpus.load[c as usize] -= 1;
                self.cpus.on[c as usize].retain(|&x| x != j);
            }
            return;
        }
        for &c in &chosen {
            affected.extend_from_slice(&self.cpus.on[c as usize]);
        }
        self.running[j] = Some(Running {
            procs: chosen,
            share0,
            rate: 0.0,
            left: work,
            since: now,
            finish: f64::INFINITY,
        });
    }

    /// Re-times the jobs in `affected` at `now` after a load change.
    fn retime(&mut self, affected: &[usize], now: f64) {
        for &j in affected {
            let Some(r) = self.running[j].as_ref() else {
                continue;
            };
            let k = r
                .procs
                .iter()
                .map(|&c| self.cpus.load[c as usize])
                .max()
                .unwrap_or(1);
            let rate = self.eff(j, k) / k as f64;
            let r = self.running[j].as_mut().expect("running");
            r.left = (r.left - (now - r.since) * r.rate).max(0.0);
            r.since = now;
            if rate != r.rate || !self.finishing.contains(&(r.finish.to_bits(), j)) {
                self.finishing.remove(&(r.finish.to_bits(), j));
                r.rate = rate;
                r.finish = now + r.left / rate;
                self.finishing.insert((r.finish.to_bits(), j));
            }
        }
    }
}

/// The processors a job of `need` processes gets among the `eligible` ones
/// (sorted), `load[c]` being processor `c`'s process count: PACKING, the shared
/// rule (contiguous processors in the least-loaded layer with room, see
/// [`packing`]); NO PACKING, drawn at random (loads unused).
fn choose(
    eligible: &[u32],
    need: usize,
    placement: Placement,
    load: &[u32],
    rng: &mut RngStream,
) -> Vec<u32> {
    match placement {
        Placement::Packing => packing(eligible, need, |c| load[c as usize]),
        Placement::Random => {
            let mut c: Vec<u32> = eligible.choose_multiple(rng, need).copied().collect();
            c.sort_unstable();
            c
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_des::SimTime;
    use cosched_model::JobSpec;

    fn job(submit: f64, runtime: f64, procs: u32) -> JobSpec {
        let rt = SimTime::from_secs_f64(runtime);
        JobSpec {
            source_id: 0,
            submit: SimTime::from_secs_f64(submit),
            runtime: rt,
            procs,
            requested: None,
            estimate: rt,
            kill_after: None,
        }
    }

    fn run(jobs: Vec<JobSpec>, procs: u32, mpl: u32, eff: &[f64]) -> (SimOutput, MeasuredBusy) {
        let w = Workload::from_jobs(jobs, "test");
        let p = TimeshareParams {
            mpl,
            placement: Placement::Packing,
            seed: 0,
            efficiency: vec![eff.to_vec()],
            class_of: Vec::new(),
            name: "timeshare".into(),
        };
        simulate_timeshare(&w, &Platform::new(procs, 1), &p).unwrap()
    }

    fn end(o: &SimOutput, j: usize) -> f64 {
        o.records[j].end.unwrap().as_secs_f64()
    }

    #[test]
    fn identical_jobs_slow_down_by_k_over_efficiency() {
        let (o, b) = run(vec![job(0.0, 10.0, 4); 3], 4, 3, &[1.0, 0.9, 0.75]);
        for j in 0..3 {
            assert!(
                (end(&o, j) - 10.0 * 3.0 / 0.75).abs() < 1e-6,
                "{}",
                end(&o, j)
            );
        }
        // 4 processors busy for 40 s, shared equally.
        assert!((b.total_proc_s - 160.0).abs() < 1e-6);
        for c in &b.job_cpu_s {
            assert!((c - 160.0 / 3.0).abs() < 1e-6);
        }
    }

    #[test]
    fn rates_change_when_a_sharing_job_ends() {
        // Two 2-wide jobs on the same processors at efficiency 1 (fair sharing): the short one
        // (5 s of work) ends at 10 s, then the long one runs alone: 10 s of work -> ends at 15 s.
        let (o, b) = run(vec![job(0.0, 5.0, 2), job(0.0, 10.0, 2)], 2, 2, &[1.0, 1.0]);
        assert!((end(&o, 0) - 10.0).abs() < 1e-6);
        assert!((end(&o, 1) - 15.0).abs() < 1e-6);
        let sum: f64 = b.job_cpu_s.iter().sum();
        assert!((sum - b.total_proc_s).abs() < 1e-6);
        // A job on other processors is not affected (MPL 1 forces disjoint processors).
        let (o, _) = run(vec![job(0.0, 5.0, 2), job(0.0, 10.0, 2)], 4, 1, &[1.0]);
        assert!((end(&o, 0) - 5.0).abs() < 1e-6 && (end(&o, 1) - 10.0).abs() < 1e-6);
    }

    #[test]
    fn packing_fills_the_least_loaded_layer_first() {
        // 4 processors, MPL 2, loads [1, 1, 0, 0]: a 2-wide job goes to 2-3 (layer 0 has
        // exactly the 2 empty processors, contiguous), not onto the first run 0-1.
        let mut rng = RngStreams::new(0).stream("placement");
        let all = [0, 1, 2, 3];
        let c = choose(&all, 2, Placement::Packing, &[1, 1, 0, 0], &mut rng);
        assert_eq!(c, vec![2, 3]);
        // Through a run: job 0 (2 wide) takes 0-1 on the empty machine; job 1 (2 wide)
        // then sees loads [1, 1, 0, 0] and gets 2-3 (the old first-run rule stacked it
        // on 0-1, halving both jobs' speed on a half-empty machine).
        // Job 2 (3 wide, at 1 s) sees loads [1, 1, 1, 1]: layer 1, runs 0-2 and 1-3 both
        // total 3, the lowest-numbered wins: 0-2.
        let (o, _) = run(
            vec![job(0.0, 10.0, 2), job(0.0, 10.0, 2), job(1.0, 1.0, 3)],
            4,
            2,
            &[1.0, 1.0],
        );
        assert_eq!(o.records[0].alloc, vec![(0, 2)]);
        assert_eq!(o.records[1].alloc, vec![(2, 4)]);
        assert_eq!(o.records[2].alloc, vec![(0, 3)]);
    }

    #[test]
    fn mpl_blocks_fcfs_and_bad_tables_are_errors() {
        let (o, _) = run(
            vec![job(0.0, 10.0, 2), job(0.0, 10.0, 2), job(1.0, 1.0, 1)],
            2,
            1,
            &[1.0],
        );
        assert_eq!(o.records[1].start.unwrap().as_secs_f64(), 10.0);
        assert!(o.records[2].start.unwrap().as_secs_f64() >= 20.0);
        let w = Workload::from_jobs(vec![job(0.0, 1.0, 1)], "t");
        let bad = TimeshareParams {
            mpl: 3,
            placement: Placement::Packing,
            seed: 0,
            efficiency: vec![vec![1.0, 0.5]],
            class_of: Vec::new(),
            name: "t".into(),
        };
        assert!(simulate_timeshare(&w, &Platform::new(2, 1), &bad).is_err());
    }
}
