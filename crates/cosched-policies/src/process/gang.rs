//! Gang scheduling, SCore-D like (seed 000 §2.2, §5; seed 001 §5.2).
//!
//! Algorithm ([`Gang`], a [`SlotPolicy`]: it decides, the mechanism preempts,
//! idles and dispatches): an Ousterhout matrix
//! whose rows are time slots and whose columns are the nodes. A job of P
//! processes is placed in the first row with P free cells (on P distinct nodes;
//! PACKING by default, the configuration's `placement = "random"` draws the
//! nodes among the row's free cells); when no row has room the job waits, and
//! later jobs wait behind it (FCFS). The number of rows is the MPL. Every
//! `quantum` all CPUs of the machine are taken back, the machine idles for the
//! global synchronization (`switch_us`), then the next non-empty row runs (rows
//! are cycled, empty ones skipped; a row that empties ends its slot at once).
//! A slot whose next non-empty row is its own (one occupied row) is followed
//! by a new slot of that row without a switch: no idle time, no switch counted
//! (Ousterhout 1982: a matrix switch costs a context switch only when the row
//! that runs changes).
//! Inside a slot a node runs only its process of that row, which spins while it
//! waits (seed 000 §5.2: "nodes spend some spinning time waiting for a message
//! in SCore"); each node pays the platform's context switch when it resumes a
//! different process. With `alternate`, a node with no process in the active
//! row runs a runnable process of another row.
//!
//! Parameters (all defaults are assumption G-SCH-6 of
//! docs/models/seed-parameters.md; the seeds state that the cost exists but
//! give no magnitude):
//! - `quantum_ms` (100): slot length;
//! - `rows` (3): matrix rows = MPL (seed 000 §5.1 runs gang at MPL 3, like the
//!   time-sharing schemes);
//! - `switch_us` (1000): global synchronization per slot switch, every node
//!   idle (seed 001 §5.2: "A gang scheduler like SCore should spend some time to
//!   achieve the global synchronization across all the nodes per every
//!   scheduling quantum");
//! - `alternate` (false): alternate scheduling of other rows' processes.
//!
//! Flexible gang scheduling (seed 003 §2, §3.2, §6; algorithm in
//! [`super::flexgang`]; defaults give plain gang):
//! - `quanta` (none): per-job quanta, `app:ms/app:ms` (e.g.
//!   `io-bound:10/Barrier:20`); a row's slot lasts the longest quantum of its
//!   jobs (S003 §3.2 varies each job's quantum separately);
//! - `io_preempt` (false): a process woken by its disk completion preempts the
//!   active row's process on its node and keeps priority until it blocks
//!   (S003 §3.2: "higher priority jobs can interrupt lower priority jobs");
//! - `gang_bit` (false): jobs whose blocked process yields its slot to another
//!   row's runnable process (S003 §2: "each job is marked with a gang bit"; §3.2
//!   "its remaining time quantum is donated"): `true` (every job), `false`, or
//!   applications `app/app` (e.g. `Emp/io-bound`);
//! - `fill` (false), `low` (none), `fair_ms` (= `quantum_ms`): fragments go only
//!   to processes of low-gangedness jobs, least-served first, never to a process
//!   `fair_ms` of fragment time ahead of its job's least-served process (S003
//!   §6, §4; assumption G-S003-FLEX of docs/models/seed-parameters.md). `low`
//!   names the applications (`Emp/Workpile`) or is `auto`: the online
//!   gangedness estimator decides at run time (S003 §5; `ratio_threshold`
//!   (0.15, S003 Table 3's ratio gap) and `window` (32 records per set),
//!   assumption G-S003-5). With a `low` source, `io_preempt` interrupts only
//!   processes of low-gangedness jobs (or fragments) (S003 §3.2, §7);
//! - `est_quantum_ms` (10): length of the estimator's processor-quanta (every
//!   gang run estimates each job's gangedness; G-S003-5);
//! - `round_slots` (1), `round_us` (0): two-level hierarchy, the global round
//!   of `round_slots` slots is precomputed at a cost of `round_us`, added to the
//!   switch starting each round (S003 §2; magnitude assumption G-S003-FLEX);
//!   rounds are counted in switches, so a slot without a switch costs nothing.

use super::flexgang::{Flex, Grid};
use super::ProcAdmission;
use crate::registry::{ParamInfo, PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::node::Pid;
use cosched_contract::process::{FlexParams, GangBit, LowGang, DEFAULT_EST_QUANTUM};
use cosched_contract::process::{GangClass, GangParams};
use cosched_contract::process::{GangednessParams, DEFAULT_RATIO_THRESHOLD, DEFAULT_WINDOW};
use cosched_contract::slots::{
    Interrupt, MatrixView, SlotDecision, SlotFactory, SlotPolicy, SlotSetup, SlotView,
};
use cosched_des::SimTime;

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "gang",
        level: "process",
        summary: "SCore-D-like gang scheduling: Ousterhout matrix, global slot switches every quantum.",
        params: vec![
            ParamInfo { name: "quantum_ms", kind: "float", default: "100", doc: "slot length, ms (assumption G-SCH-6)" },
            ParamInfo { name: "rows", kind: "int", default: "3", doc: "rows of the matrix = MPL (seed 000 §5.1)" },
            ParamInfo { name: "switch_us", kind: "float", default: "1000", doc: "global synchronization per slot switch, every node idle, µs (assumption G-SCH-6)" },
            ParamInfo { name: "alternate", kind: "bool", default: "false", doc: "a node with no process in the active row may run another row's process" },
            ParamInfo { name: "quanta", kind: "string", default: "", doc: "per-job quanta app:ms/app:ms; a row's slot lasts its longest job quantum (seed 003 §3.2)" },
            ParamInfo { name: "io_preempt", kind: "bool", default: "false", doc: "a process woken by its disk completion preempts the active row on its node (seed 003 §3.2)" },
            ParamInfo { name: "gang_bit", kind: "string", default: "false", doc: "jobs whose blocked process yields its slot to another row's process: true, false or app/app (seed 003 §2)" },
            ParamInfo { name: "fill", kind: "bool", default: "false", doc: "fragments go only to low-gangedness jobs, least-served process first (seed 003 §6)" },
            ParamInfo { name: "low", kind: "string", default: "", doc: "low-gangedness jobs for fill and the I/O interrupts' victims: app/app, or auto (the online estimator, seed 003 §5)" },
            ParamInfo { name: "ratio_threshold", kind: "float", default: "0.15", doc: "low=auto: a job whose non-gang/gang message ratio is at least this is of low gangedness (seed 003 Table 3; G-S003-5)" },
            ParamInfo { name: "window", kind: "int", default: "32", doc: "low=auto: gang and non-gang-non-running records a job needs before it is classified (G-S003-5)" },
            ParamInfo { name: "est_quantum_ms", kind: "float", default: "10", doc: "length of the gangedness estimator's processor-quanta, ms (G-S003-5)" },
            ParamInfo { name: "fair_ms", kind: "float", default: "quantum_ms", doc: "fill: max fragment time a process may lead its job's least-served process, ms (0: unbounded)" },
            ParamInfo { name: "round_slots", kind: "int", default: "1", doc: "slots per globally precomputed round (seed 003 §2)" },
            ParamInfo { name: "round_us", kind: "float", default: "0", doc: "round precomputation cost, added to the switch starting each round, µs" },
        ],
    }
}

/// The longest duration a gang parameter may give, milliseconds (1e6 s).
pub const MAX_DURATION_MS: f64 = 1e9;

#[expect(
    clippy::too_many_lines,
    reason = "the gang scheme's parameters read one after the other"
)]
pub fn build(spec: &PolicySpec) -> Result<ProcAdmission, RegistryError> {
    spec.expect_only(&[
        "quantum_ms",
        "rows",
        "switch_us",
        "alternate",
        "quanta",
        "io_preempt",
        "gang_bit",
        "fill",
        "low",
        "ratio_threshold",
        "window",
        "est_quantum_ms",
        "fair_ms",
        "round_slots",
        "round_us",
    ])?;
    let bad = |param: &str, msg: &str| RegistryError::BadValue {
        policy: spec.name.clone(),
        param: param.into(),
        value: spec.params.get(param).cloned().unwrap_or_default(),
        msg: msg.into(),
    };
    let quantum_ms: f64 = spec.get("quantum_ms", GangParams::DEFAULT_QUANTUM_MS)?;
    if !(quantum_ms.is_finite() && quantum_ms > 0.0) {
        return Err(bad("quantum_ms", "must be > 0"));
    }
    let rows: u32 = spec.get("rows", GangParams::DEFAULT_ROWS)?;
    if rows == 0 {
        return Err(bad("rows", "must be at least 1"));
    }
    let switch_us: f64 = spec.get("switch_us", GangParams::DEFAULT_SWITCH_US)?;
    if !(switch_us.is_finite() && switch_us >= 0.0) {
        return Err(bad("switch_us", "must be >= 0"));
    }
    let quantum = SimTime::from_secs_f64(quantum_ms / 1e3);
    if quantum <= SimTime::ZERO {
        return Err(bad("quantum_ms", "must be > 0"));
    }
    let list = |key: &str| -> Vec<String> {
        spec.params
            .get(key)
            .map(|v| {
                v.split('/')
                    .map(str::trim)
                    .filter(|a| !a.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut quanta = Vec::new();
    for item in list("quanta") {
        let parsed = item
            .split_once(':')
            .and_then(|(app, ms)| Some((app.trim().to_string(), ms.trim().parse::<f64>().ok()?)));
        match parsed {
            Some((app, ms)) if !app.is_empty() && ms.is_finite() && ms > 0.0 => {
                let q = SimTime::from_secs_f64(ms / 1e3);
                if q <= SimTime::ZERO {
                    return Err(bad("quanta", "every quantum must be > 0"));
                }
                quanta.push((app, q));
            }
            _ => return Err(bad("quanta", "expected app:ms/app:ms with ms > 0")),
        }
    }
    let fair_ms: f64 = spec.get("fair_ms", quantum_ms)?;
    if !(fair_ms.is_finite() && fair_ms >= 0.0) {
        return Err(bad("fair_ms", "must be >= 0"));
    }
    let round_slots: u32 = spec.get("round_slots", 1)?;
    if round_slots == 0 {
        return Err(bad("round_slots", "must be at least 1"));
    }
    let round_us: f64 = spec.get("round_us", 0.0)?;
    if !(round_us.is_finite() && round_us >= 0.0) {
        return Err(bad("round_us", "must be >= 0"));
    }
    let gang_bit = match spec.params.get("gang_bit").map(|v| v.trim()) {
        None | Some("false") => GangBit::Off,
        Some("true") => GangBit::All,
        Some(_) => {
            let apps = list("gang_bit");
            if apps.is_empty() {
                return Err(bad("gang_bit", "expected true, false or app/app"));
            }
            GangBit::Apps(apps)
        }
    };
    let auto = spec.params.get("low").is_some_and(|v| v.trim() == "auto");
    for key in ["ratio_threshold", "window"] {
        if !auto && spec.params.contains_key(key) {
            return Err(bad(key, "needs low=auto"));
        }
    }
    let low = if auto {
        let ratio_threshold: f64 = spec.get("ratio_threshold", DEFAULT_RATIO_THRESHOLD)?;
        if !(ratio_threshold.is_finite() && ratio_threshold > 0.0) {
            return Err(bad("ratio_threshold", "must be > 0"));
        }
        let window: u64 = spec.get("window", DEFAULT_WINDOW)?;
        if window == 0 {
            return Err(bad("window", "must be at least 1"));
        }
        LowGang::Auto(GangednessParams {
            ratio_threshold,
            window,
        })
    } else {
        LowGang::Declared(list("low"))
    };
    let est_quantum_ms: f64 =
        spec.get("est_quantum_ms", DEFAULT_EST_QUANTUM.as_ns() as f64 / 1e6)?;
    let est_quantum = SimTime::from_secs_f64(est_quantum_ms / 1e3);
    if !(est_quantum_ms.is_finite() && est_quantum > SimTime::ZERO) {
        return Err(bad("est_quantum_ms", "must be > 0"));
    }
    // Every duration at most MAX_DURATION_MS: larger ones overflowed the run's
    // nanosecond arithmetic (a quantum of 1.8e19 ms was a panic).
    let durations_ms = [
        ("quantum_ms", quantum_ms),
        ("switch_us", switch_us / 1e3),
        ("fair_ms", fair_ms),
        ("round_us", round_us / 1e3),
        ("est_quantum_ms", est_quantum_ms),
    ];
    let per_job = quanta
        .iter()
        .map(|(_, q)| ("quanta", q.as_secs_f64() * 1e3));
    if let Some((key, _)) = durations_ms
        .into_iter()
        .chain(per_job)
        .find(|(_, ms)| *ms > MAX_DURATION_MS)
    {
        return Err(bad(key, "must be at most 1e6 s (1e9 ms, 1e12 us)"));
    }
    Ok(ProcAdmission::Gang(GangParams {
        quantum,
        rows,
        switch: SimTime::from_secs_f64(switch_us / 1e6),
        alternate: spec.get("alternate", false)?,
        flex: FlexParams {
            quanta,
            io_preempt: spec.get("io_preempt", false)?,
            gang_bit,
            fill: spec.get("fill", false)?,
            low,
            fair: SimTime::from_secs_f64(fair_ms / 1e3),
            round_slots,
            round: SimTime::from_secs_f64(round_us / 1e6),
            est_quantum,
        },
    }))
}

/// The slot policy of `params`, for each run.
pub fn factory(params: GangParams) -> SlotFactory {
    SlotFactory::new(move |setup| Box::new(Gang::new(params.clone(), setup)))
}

/// Gang scheduling with the Ousterhout matrix (the module documentation
/// states the algorithm), with the flexible options of [`super::flexgang`].
#[derive(Clone, Debug)]
pub struct Gang {
    params: GangParams,
    grid: Grid,
    /// Row of each job (by job index), once placed.
    row_of: Vec<Option<usize>>,
    /// The active row, `None` while the cycle is stopped.
    active: Option<usize>,
    /// A global switch is in progress (every node idle).
    switching: bool,
    /// Slot switches asked for.
    switches: u64,
    /// Jobs waiting for admission, FCFS.
    queue: std::collections::VecDeque<usize>,
    /// The row of the job being admitted (between `Admit` and `on_started`).
    placing: Option<usize>,
    /// A job ended at this instant: the active row may have emptied.
    ended: bool,
    flex: Flex,
}

impl Gang {
    pub fn new(params: GangParams, setup: SlotSetup) -> Self {
        let rows = params.rows as usize;
        Self {
            flex: Flex::new(params.flex.clone()),
            grid: Grid::new(rows, setup.nodes, setup.cpus),
            row_of: vec![None; setup.jobs],
            params,
            active: None,
            switching: false,
            switches: 0,
            queue: Default::default(),
            placing: None,
            ended: false,
        }
    }

    /// The length of the active row's slot: the longest quantum of its jobs.
    fn slot_quantum(&self) -> SimTime {
        let q = self.params.quantum;
        let Some(r) = self.active else {
            return q;
        };
        self.grid.cells[r]
            .iter()
            .flatten()
            .map(|&(j, _)| self.flex.quantum(j, q))
            .max()
            .unwrap_or(q)
    }

    fn run(&self, row: usize, v: &dyn SlotView) -> SlotDecision {
        SlotDecision::Run {
            row,
            until: v.now() + self.slot_quantum(),
        }
    }

    /// The processes of job `j`.
    fn job_pids(&self, j: usize) -> impl Iterator<Item = Pid> + '_ {
        let row = self.row_of[j].map(|r| &self.grid.cells[r]);
        row.into_iter()
            .flatten()
            .filter_map(move |c| c.filter(|&(k, _)| k == j).map(|(_, p)| p))
    }
}

impl MatrixView for Gang {
    fn rows(&self) -> usize {
        self.grid.rows()
    }
    fn active(&self) -> Option<usize> {
        self.active
    }
    fn row_of(&self, job: usize) -> Option<usize> {
        self.row_of.get(job).copied().flatten()
    }
    fn cell(&self, row: usize, node: u32) -> Option<(usize, Pid)> {
        self.grid.cells.get(row)?;
        self.grid
            .node_cells(row, node)
            .iter()
            .copied()
            .flatten()
            .next()
    }
    fn placed(&self) -> Vec<(usize, Vec<Pid>)> {
        let mut out: Vec<(usize, Vec<Pid>)> = Vec::new();
        for row in &self.grid.cells {
            for &(j, p) in row.iter().flatten() {
                match out.iter_mut().find(|(k, _)| *k == j) {
                    Some((_, v)) => v.push(p),
                    None => out.push((j, vec![p])),
                }
            }
        }
        for (_, v) in &mut out {
            v.sort_unstable();
        }
        out
    }
}

impl SlotPolicy for Gang {
    fn name(&self) -> String {
        "gang".into()
    }

    fn on_arrival(&mut self, job: usize, _v: &dyn SlotView) {
        self.queue.push_back(job);
    }

    /// FCFS: the queue head goes into the first row with its nodes' columns
    /// free (and their memory, with memory-aware admission); else it waits,
    /// later jobs behind it. After a job's end, an emptied active row ends its
    /// slot at once.
    fn next(&mut self, v: &dyn SlotView) -> Option<SlotDecision> {
        if let Some(&j) = self.queue.front() {
            let (size, rpn) = (v.nodes_needed(j) as usize, v.ranks_per_node(j) as usize);
            if let Some((row, among)) = self.grid.find_row(size, rpn, |n| v.fits_memory(j, n)) {
                self.queue.pop_front();
                self.placing = Some(row);
                return Some(SlotDecision::Admit { job: j, among });
            }
        }
        let emptied = std::mem::take(&mut self.ended)
            && !self.switching
            && self.active.is_some_and(|r| self.grid.row_empty(r));
        emptied.then(|| SlotDecision::WakeAt(v.now()))
    }

    fn on_started(
        &mut self,
        job: usize,
        first: Pid,
        nodes: &[u32],
        v: &dyn SlotView,
    ) -> Vec<SlotDecision> {
        let row = self.placing.take().expect("on_started follows an Admit");
        self.grid.place(row, nodes, |k| (job, first + k as Pid));
        self.row_of[job] = Some(row);
        self.flex.place(job, &v.app(job));
        if self.active.is_some() {
            return Vec::new();
        }
        // The cycle was stopped (empty matrix): this row's slot starts now.
        self.active = Some(row);
        vec![self.run(row, v)]
    }

    fn on_process_end(&mut self, pid: Pid) {
        self.flex.blocked(pid);
    }

    fn on_job_end(&mut self, job: usize, _v: &dyn SlotView) {
        if let Some(r) = self.row_of[job] {
            self.grid.clear(r, |&(j, _)| j == job);
        }
        self.ended = true;
    }

    /// End of a slot: the global switch (the synchronization cost, plus the
    /// round precomputation when a round starts); with an empty matrix the
    /// cycle stops. When the active row is the only non-empty one, its next
    /// slot starts at once without a switch: the same processes keep their
    /// CPUs, so no node changes context and nothing is synchronized
    /// (Ousterhout 1982 pays a switch only when the running row changes). No
    /// idle time, no switch counted, and no round precomputation: rounds are
    /// counted in switches, and a round of one row has nothing to precompute.
    fn on_slot_timer(&mut self, v: &dyn SlotView) -> Vec<SlotDecision> {
        let Some(next) = self.grid.next_row(self.active) else {
            self.active = None;
            return vec![SlotDecision::Stop];
        };
        if Some(next) == self.active {
            return vec![self.run(next, v)];
        }
        self.switching = true;
        self.switches += 1;
        let idle = self.params.switch + self.flex.round_cost(self.switches);
        vec![SlotDecision::Switch { idle }]
    }

    /// End of the global switch: the next non-empty row's slot starts.
    fn on_switch_done(&mut self, v: &dyn SlotView) -> Vec<SlotDecision> {
        self.switching = false;
        self.active = self.grid.next_row(self.active);
        match self.active {
            Some(r) => vec![self.run(r, v)],
            None => vec![SlotDecision::Stop],
        }
    }

    fn on_io_wake(&mut self, pid: Pid) {
        self.flex.io_done(pid);
    }

    fn on_block(&mut self, pid: Pid) {
        self.flex.blocked(pid);
    }

    /// Time outside the process's own row's slot is fragment time.
    fn on_ran(&mut self, pid: Pid, job: usize, ran: SimTime) {
        if self.active.is_some() && self.row_of[job] != self.active {
            self.flex.add_fragment(pid, ran);
        }
    }

    /// A process with I/O priority; else a runnable process of the active row
    /// on the node; else, if a column of the active row lends its CPU and fewer
    /// CPUs than such columns already run lent time, a fragment for another
    /// row's process (the flexible options' choice). A column lends its CPU
    /// when it is empty (with `alternate`) or its process, of a job with the
    /// gang bit, is neither runnable nor running.
    fn pick(&self, node: u32, v: &dyn SlotView) -> Option<Pid> {
        if self.switching {
            return None;
        }
        let r = self.active?;
        if let Some(p) = self.flex.choose_prio(&self.grid, node, v) {
            return Some(p);
        }
        let own = self.grid.node_cells(r, node);
        if let Some(&(_, p)) = own.iter().flatten().find(|&&(_, p)| v.runnable(p)) {
            return Some(p);
        }
        let curs = v.running(node);
        let lending = own
            .iter()
            .filter(|c| match c {
                None => self.params.alternate,
                Some((j, p)) => self.flex.yields(*j) && !curs.contains(&Some(*p)),
            })
            .count();
        let lent = curs
            .iter()
            .flatten()
            .filter(|&&p| !self.flex.has_prio(p) && !own.iter().flatten().any(|&(_, q)| q == p))
            .count();
        if lent >= lending {
            return None;
        }
        let rows = self.grid.rows();
        let cands: Vec<(usize, Pid)> = (1..rows)
            .map(|k| (r + k) % rows)
            .flat_map(|q| self.grid.node_cells(q, node).iter().flatten().copied())
            .filter(|&(_, p)| v.runnable(p))
            .collect();
        self.flex.choose_fragment(&cands, |j| self.job_pids(j))
    }

    fn on_wake(&self, pid: Pid, node: u32, v: &dyn SlotView) -> Option<Interrupt> {
        if self.switching {
            return None;
        }
        let own = self.grid.node_cells(self.active?, node);
        let cpu = self.flex.victim(own, pid, &v.running(node))?;
        Some(Interrupt {
            cpu: cpu as u32,
            io: self.flex.has_prio(pid),
        })
    }

    fn on_gangedness(&mut self, job: usize, class: GangClass) {
        self.flex.set_class(job, class);
    }

    fn matrix(&self) -> Option<&dyn MatrixView> {
        Some(self)
    }

    fn gang(&self) -> Option<&GangParams> {
        Some(&self.params)
    }

    fn dump(&self) -> String {
        format!(
            "active row {:?}, switching {}, queued {:?}",
            self.active, self.switching, self.queue
        )
    }
}
