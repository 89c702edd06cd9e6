//! Gang scheduling at job level, for whole traces: an Ousterhout matrix whose rows
//! share the machine in time, with each job's progress computed in closed form
//! between matrix changes (a fluid model of the quantum-by-quantum rotation).
//!
//! Model (the contract `crates/cosched/tests/gang_fluid_vs_process.rs` checks against
//! the process-level gang scheduler, `crate::process::gang`):
//! - The matrix has at most `rows` rows (the MPL); each row is a full copy of the
//!   machine's processors. A job occupies `procs` processors of one row, chosen by
//!   the run's placement rule within that row, from its start to its end. The row of
//!   each job is reported ([`GangOutput::rows`], the job table's `gang_row`).
//! - Admission is FCFS: at every arrival or completion the queue head is placed in
//!   the first row (lowest index, existing rows first, then a new row while fewer
//!   than `rows` exist) with enough free processors; a head that fits nowhere blocks
//!   the queue. A job wider than the machine is rejected.
//! - The non-empty rows are served round robin, each for a quantum `q`, and each
//!   switch costs `c` (global synchronization plus context switch), during which no
//!   job progresses. With `R >= 2` non-empty rows a running job therefore progresses at
//!   rate `q / (R (q + c))` of real time. With one non-empty row (`rows = 1`, or
//!   several rows of which one is occupied) the row that runs next is the row already
//!   running: no process on any CPU changes, so no switch is paid (Ousterhout 1982: a
//!   slot switch is a context switch of the processors between rows) and its jobs run
//!   at rate 1, as under FCFS. Changes of `R` (arrivals, completions)
//!   change every job's rate at once; between them completion times follow in
//!   closed form.
//! - Busy time: each job's work (`runtime x procs`) plus the switches, charged to
//!   every processor of the machine while two or more rows are non-empty (the switch
//!   is global).
//!
//! Differences from the process-level gang scheduler (same rows, placement, starts at
//! submission; ends within `R (q + c) + slots x cs` in the differential test, measured
//! differences at most about half that):
//! - fluid rotation: the process level gives a job whole quanta in its row's turn, the
//!   fluid model spreads them evenly, so a job ends up to one rotation `R (q + c)`
//!   earlier or later (and a start that follows a completion moves with it);
//! - at process level a row that empties mid-slot ends the slot at once (paying `c`),
//!   and a row that gains its first job waits for its turn in index order; the fluid
//!   model redistributes rates at once;
//! - per-node context switches: at process level a CPU resuming another row's process
//!   pays the node's context switch (`context_switch_us`, 5 us on `choi2004`) at the
//!   start of the slot; the fluid model has no such cost (its run times are dedicated
//!   run times, which include the one context switch of a dedicated run);
//! - the process level stops the rotation (no switch cost) while the matrix is
//!   empty, as the fluid model does; with one non-empty row the process level still
//!   pays `c` per quantum (its slot timer switches to the next non-empty row even when
//!   that is the active row), the fluid model pays nothing.
//!
//! Runs in O((n + rows) log n) for n jobs.

use crate::alloc::{node_count, Allocator, Range};
use crate::cluster::{EngineError, EngineStats, JobRecord, JobStatus, SimOutput};
use crate::metrics::MeasuredBusy;
use cosched_des::{RngStreams, SimTime};
use cosched_model::{JobSpec, Placement, Platform, Workload};
use std::collections::{BTreeSet, VecDeque};

/// Parameters of job-level gang scheduling.
#[derive(Clone, Debug, PartialEq)]
pub struct GangParams {
    /// Rows of the matrix (the multiprogramming level).
    pub rows: u32,
    /// Time slice of a row.
    pub quantum: SimTime,
    /// Cost of one slot switch (all processors idle).
    pub switch: SimTime,
    pub placement: Placement,
    pub seed: u64,
}

struct Row {
    alloc: Allocator,
    jobs: usize,
}

/// What a fluid gang run produces.
#[derive(Clone, Debug)]
pub struct GangOutput {
    /// The job records (start, end, processors).
    pub out: SimOutput,
    /// The measured busy time (for [`crate::metrics::summarize_busy`]).
    pub busy: MeasuredBusy,
    /// The matrix row (0-based) each job ran in; `None` for a rejected job.
    pub rows: Vec<Option<u32>>,
}

/// Runs `workload` on `platform` under fluid gang scheduling.
pub fn simulate_gang(
    workload: &Workload,
    platform: &Platform,
    p: &GangParams,
) -> Result<GangOutput, EngineError> {
    platform.validate()?;
    if p.rows == 0 || p.quantum <= SimTime::ZERO || p.switch < SimTime::ZERO {
        return Err(EngineError::Params(format!(
            "gang: rows must be >= 1, quantum > 0 and switch >= 0 (got rows={}, quantum={}, switch={})",
            p.rows, p.quantum, p.switch
        )));
    }
    let jobs = &workload.jobs;
    if let Some(i) = jobs.windows(2).position(|w| w[1].submit < w[0].submit) {
        return Err(EngineError::Unsorted(i + 1));
    }
    let mut run = Matrix::new(jobs, platform, p);
    loop {
        let r = run.rows.iter().filter(|r| r.jobs > 0).count();
        // The share of real time spent switching: none with one non-empty row.
        let switching = if r > 1 { run.c / (run.q + run.c) } else { 0.0 };
        let rate = if r == 0 {
            0.0
        } else {
            (1.0 - switching) / r as f64
        };
        let t_arrival = jobs.get(run.next_arrival).map(|j| j.submit.as_ns() as f64);
        let t_finish = run
            .finishing
            .first()
            .map(|&(k, _)| run.now + (f64::from_bits(k) - run.service).max(0.0) / rate);
        let (t, is_arrival) = match (t_arrival, t_finish) {
            (None, None) => break,
            (Some(a), Some(f)) if a <= f => (a, true),
            (Some(a), None) => (a, true),
            (_, Some(f)) => (f, false),
        };
        // Advance to t.
        if r > 0 {
            run.service += (t - run.now) * rate;
            run.busy_switch_ns += (t - run.now) * switching * run.total as f64;
        }
        run.now = t;
        let t_ns = fluid_instant(run.now, run.finishing.first().map(|&(_, j)| j), jobs)?;
        if is_arrival {
            run.arrive();
        } else {
            run.end_first(t_ns);
        }
        run.admit(t_ns);
    }
    Ok(run.output())
}

/// The state of a fluid gang run.
struct Matrix<'a> {
    jobs: &'a [JobSpec],
    p: &'a GangParams,
    total: u32,
    ppn: u32,
    /// The quantum and the switch cost, ns.
    q: f64,
    c: f64,
    records: Vec<JobRecord>,
    row_of: Vec<usize>,
    rows: Vec<Row>,
    queue: VecDeque<usize>,
    /// Service: ns of progress every running job has received since t=0.
    service: f64,
    /// The running jobs keyed by the service at which they finish (its bits:
    /// service is >= 0, so bit order is numeric order).
    finishing: BTreeSet<(u64, usize)>,
    /// ns.
    now: f64,
    next_arrival: usize,
    busy_switch_ns: f64,
    stats: EngineStats,
}

impl<'a> Matrix<'a> {
    fn new(jobs: &'a [JobSpec], platform: &Platform, p: &'a GangParams) -> Self {
        let n = jobs.len();
        Self {
            jobs,
            p,
            total: platform.total_procs(),
            ppn: platform.procs_per_node,
            q: p.quantum.as_ns() as f64,
            c: p.switch.as_ns() as f64,
            records: vec![JobRecord::unstarted(JobStatus::Completed); n],
            row_of: vec![usize::MAX; n],
            rows: Vec::new(),
            queue: VecDeque::new(),
            service: 0.0,
            finishing: BTreeSet::new(),
            now: 0.0,
            next_arrival: 0,
            busy_switch_ns: 0.0,
            stats: EngineStats::default(),
        }
    }

    /// The next job arrives: queued, or rejected if wider than the machine.
    fn arrive(&mut self) {
        let j = self.next_arrival;
        self.next_arrival += 1;
        self.stats.events += 1;
        if self.jobs[j].procs > self.total {
            self.records[j].status = JobStatus::Rejected;
        } else {
            self.queue.push_back(j);
        }
    }

    /// The first finishing job ends; its row's processors are freed.
    fn end_first(&mut self, t_ns: SimTime) {
        let &(k, j) = self.finishing.first().expect("a finishing job");
        self.finishing.remove(&(k, j));
        self.service = self.service.max(f64::from_bits(k));
        self.stats.events += 1;
        // A job never ends before its dedicated run time: at full speed (one non-empty
        // row) the rounding of the service sum (f64 ns, ~4 ns at 3e16 ns) could say so.
        let start = self.records[j].start.expect("a running job has started");
        self.records[j].end = Some(t_ns.max(start.saturating_add(self.jobs[j].runtime)));
        let row = &mut self.rows[self.row_of[j]];
        row.alloc.release(&self.records[j].alloc);
        row.jobs -= 1;
    }

    /// FCFS admission into the first row with room.
    fn admit(&mut self, t_ns: SimTime) {
        while let Some(&j) = self.queue.front() {
            let need = self.jobs[j].procs;
            let slot = match self.rows.iter().position(|r| r.alloc.free_count() >= need) {
                Some(k) => k,
                None if (self.rows.len() as u32) < self.p.rows => {
                    self.rows.push(Row {
                        // Each row draws random placements from its own seeded streams.
                        alloc: Allocator::new(
                            self.total,
                            self.p.placement,
                            &RngStreams::new(
                                self.p.seed
                                    ^ (self.rows.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                            ),
                        ),
                        jobs: 0,
                    });
                    self.rows.len() - 1
                }
                None => break,
            };
            self.queue.pop_front();
            self.start(j, slot, t_ns);
        }
    }

    /// Starts job `j` in row `slot`.
    fn start(&mut self, j: usize, slot: usize, t_ns: SimTime) {
        let alloc: Vec<Range> = self.rows[slot].alloc.allocate(self.jobs[j].procs);
        self.rows[slot].jobs += 1;
        self.row_of[j] = slot;
        self.records[j].start = Some(t_ns);
        self.records[j].nodes = node_count(&alloc, self.ppn);
        self.records[j].alloc = alloc;
        self.stats.decisions += 1;
        let work = self.jobs[j].runtime.as_ns() as f64;
        if work <= 0.0 {
            self.records[j].end = Some(t_ns);
            let row = &mut self.rows[slot];
            row.alloc.release(&self.records[j].alloc);
            row.jobs -= 1;
        } else {
            self.finishing.insert(((self.service + work).to_bits(), j));
        }
    }

    /// The run's records, busy time and rows.
    fn output(self) -> GangOutput {
        let p = self.p;
        let job_cpu_s: Vec<f64> = self
            .jobs
            .iter()
            .zip(&self.records)
            .map(|(j, r)| {
                if r.start.is_some() {
                    j.runtime.as_secs_f64() * j.procs as f64
                } else {
                    0.0
                }
            })
            .collect();
        let total_proc_s = job_cpu_s.iter().sum::<f64>() + self.busy_switch_ns / 1e9;
        GangOutput {
            out: SimOutput {
                records: self.records,
                stats: self.stats,
                policy: format!(
                    "gang[rows={},quantum_ms={},switch_us={}]",
                    p.rows,
                    p.quantum.as_secs_f64() * 1e3,
                    p.switch.as_secs_f64() * 1e6
                ),
            },
            busy: MeasuredBusy {
                job_cpu_s,
                total_proc_s,
            },
            rows: self
                .row_of
                .iter()
                .map(|&r| (r != usize::MAX).then_some(r as u32))
                .collect(),
        }
    }
}

/// The instant `now_ns` of a fluid model's event loop as a [`SimTime`], after
/// polling the interruption flag; an instant beyond the representable range
/// (only a completion, of job `finishing`, can be) is [`EngineError::TimeOverflow`].
pub(crate) fn fluid_instant(
    now_ns: f64,
    finishing: Option<usize>,
    jobs: &[cosched_model::JobSpec],
) -> Result<SimTime, EngineError> {
    let t = SimTime::checked_from_ns_f64(now_ns);
    if cosched_des::interrupt::requested() {
        return Err(EngineError::Interrupted {
            time: t.unwrap_or(SimTime::MAX),
        });
    }
    t.ok_or_else(|| {
        let j = finishing.unwrap_or(0);
        EngineError::TimeOverflow {
            time: SimTime::MAX,
            job: jobs.get(j).map_or(-1, |s| s.source_id),
            index: j,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
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

    fn params(rows: u32, q_ms: f64, c_ms: f64) -> GangParams {
        GangParams {
            rows,
            quantum: SimTime::from_secs_f64(q_ms / 1e3),
            switch: SimTime::from_secs_f64(c_ms / 1e3),
            placement: Placement::Packing,
            seed: 0,
        }
    }

    fn run(jobs: Vec<JobSpec>, procs: u32, p: &GangParams) -> SimOutput {
        let w = Workload::from_jobs(jobs, "test");
        simulate_gang(&w, &Platform::new(procs, 1), p).unwrap().out
    }

    fn secs(t: Option<SimTime>) -> f64 {
        t.unwrap().as_secs_f64()
    }

    #[test]
    fn one_non_empty_row_pays_no_switch() {
        // One job, rows = 1, quantum 1 s, switch 10 ms: the next row is always the
        // running one, so no switch: response = run time = 90 s.
        let out = run(vec![job(0.0, 90.0, 4)], 4, &params(1, 1000.0, 10.0));
        assert_eq!(secs(out.records[0].end), 90.0);
        // Three rows of which only row 0 is occupied: the same, 90 s.
        let out = run(vec![job(0.0, 90.0, 4)], 4, &params(3, 1000.0, 10.0));
        assert_eq!(secs(out.records[0].end), 90.0);
    }

    #[test]
    fn two_occupied_rows_pay_the_switch_every_quantum() {
        // Two 4-wide jobs on 4 processors, rows = 2, quantum 1 s, switch 10 ms: while
        // both run each progresses at q / (R (q + c)) = 1 / (2 x 1.01) of real time.
        // - 10 s and 10 s: both end at 10 x 2 x 1.01 = 20.2 s;
        // - 5 s and 10 s: the first ends at 5 x 2.02 = 10.1 s, the second then has 5 s
        //   left and runs alone with no switch: ends at 15.1 s.
        for (runtimes, ends) in [([10.0, 10.0], [20.2, 20.2]), ([5.0, 10.0], [10.1, 15.1])] {
            let jobs = runtimes.iter().map(|&r| job(0.0, r, 4)).collect();
            let out = run(jobs, 4, &params(2, 1000.0, 10.0));
            for (record, end) in out.records.iter().zip(ends) {
                assert!((secs(record.end) - end).abs() < 1e-6, "{runtimes:?}");
            }
        }
    }

    #[test]
    fn two_full_width_jobs_share_the_machine_by_rows() {
        // Two 4-wide jobs on 4 processors: two rows, each job progresses at half speed
        // (no switch cost) until the shorter one ends, then at full speed.
        let out = run(
            vec![job(0.0, 10.0, 4), job(0.0, 30.0, 4)],
            4,
            &params(3, 100.0, 0.0),
        );
        assert!((secs(out.records[0].end) - 20.0).abs() < 1e-6);
        assert!((secs(out.records[1].end) - 40.0).abs() < 1e-6);
        // Narrow jobs fit in one row: no sharing.
        let out = run(
            vec![job(0.0, 10.0, 2), job(0.0, 30.0, 2)],
            4,
            &params(3, 100.0, 0.0),
        );
        assert_eq!(secs(out.records[0].end), 10.0);
        assert_eq!(secs(out.records[1].end), 30.0);
    }

    #[test]
    fn mpl_limits_the_rows_and_fcfs_blocks() {
        // rows = 2: the third full-width job waits for a row, and the narrow fourth waits behind it.
        let jobs = vec![
            job(0.0, 10.0, 4),
            job(0.0, 10.0, 4),
            job(1.0, 10.0, 4),
            job(2.0, 1.0, 1),
        ];
        let out = run(jobs, 4, &params(2, 100.0, 0.0));
        assert!((secs(out.records[0].end) - 20.0).abs() < 1e-6);
        assert!((secs(out.records[2].start) - 20.0).abs() < 1e-6);
        assert!(secs(out.records[3].start) >= 20.0 - 1e-6);
    }

    #[test]
    fn busy_time_is_work_plus_switches_and_rejects_too_wide_jobs() {
        let jobs = vec![job(0.0, 45.0, 4), job(0.0, 45.0, 4), job(0.0, 5.0, 8)];
        let w = Workload::from_jobs(jobs, "t");
        let g = simulate_gang(&w, &Platform::new(4, 1), &params(3, 90.0, 10.0)).unwrap();
        let (out, busy) = (g.out, g.busy);
        assert_eq!(out.records[2].status, JobStatus::Rejected);
        assert_eq!(g.rows, vec![Some(0), Some(1), None]);
        // Two rows non-empty for 45 x 2 x 100 / 90 = 100 s of wall time: 10% switching
        // on 4 processors, 0.1 x 100 x 4 = 40 processor-seconds, plus the work 2 x 45 x 4.
        assert!((busy.total_proc_s - (2.0 * 45.0 * 4.0 + 0.1 * 100.0 * 4.0)).abs() < 1e-6);
    }
}
