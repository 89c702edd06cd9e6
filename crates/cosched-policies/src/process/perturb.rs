//! Perturbed gang scheduling of one job (seed 003 §4, Fig. 4), the environment of
//! the takeaway/giveaway experiments and of the gangedness statistics (S003 §5.2).
//!
//! Algorithm ([`GangPerturb`], a [`SlotPolicy`] that wraps the gang policy
//! [`super::gang::Gang`] and changes only its `pick`): job 0 of the workload is
//! gang scheduled in its own matrix row against the jobs of the other rows (a
//! competing load). A perturbation changes one slot on one processor (the node
//! of one of job 0's ranks):
//! - *takeaway* (S003 §4 "each perturbation removes a quantum of processing time
//!   from a single processor"): in one of job 0's slots, that node runs the
//!   first runnable process of another row instead (the rows after the active
//!   one, cyclically: the competitor; idle if it has none);
//! - *giveaway* ("each perturbation gives an extra time quantum of processing
//!   time to a single processor"): in the slot that follows one of job 0's
//!   slots, that node runs job 0's process instead of the active row's (or
//!   idles while it is not runnable: the quantum is job 0's).
//!
//! Every other pick is the wrapped gang policy's. The processor is fixed (rank
//! `proc`, Sub_FX / Add_FX) or chosen round-robin (the k-th perturbation on rank
//! k mod P, Sub_RR / Add_RR). Perturbations come in batches of four, three of
//! job 0's slots apart (S003 §4: "randomly distributed across the run time of
//! the application in batches of four ... A fixed interval of three time quanta
//! separate perturbations within a batch"); the batch starts are drawn
//! uniformly over job 0's first `span` slots from the seeded stream
//! `"perturb"`, batches never overlapping ([`draw`]). A slot's perturbations are
//! fixed when it starts (a [`SlotDecision::Run`] of the wrapped policy) and
//! shown to the mechanism's observers through [`PerturbView`]: the
//! mechanism's bookkeeping (`cosched_engine::process::perturb`) measures job
//! 0's time inside its own slots and the per-quantum message and progress
//! statistics (gang, non-gang-running, non-gang-non-running).
//!
//! Parameters:
//! - `quantum_ms` (0.5): slot length; S003 §4 "Quantum size is fixed at 500,000
//!   instructions" (1 instruction = 1 ns on `lee4`);
//! - `rows` (2): matrix rows; job 0 and one competing row;
//! - `switch_us` (0): global switch cost; S003 §2 says the global work is small for
//!   the four-processor configuration (assumption G-S003-3; the rest of the
//!   environment is assumption G-S003-6);
//! - `kind` (`takeaway`): `takeaway` (Sub) or `giveaway` (Add), S003 §4;
//! - `choice` (`fixed`): `fixed` (FX: always rank `proc`) or `rr` (RR: round robin);
//! - `proc` (1): the fixed rank (S003 §4.2 uses processors 0, 1 and 3);
//! - `count` (0): number of perturbations (S003 Fig. 5-9 plot up to 20);
//! - `span` (200): batch starts are drawn over job 0's first `span` slots (the
//!   seed apps' run length, assumption G-S003-1);
//! - `seed` (0): seed of the batch draw.

use super::gang::Gang;
use super::ProcAdmission;
use crate::registry::{ParamInfo, PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::node::Pid;
use cosched_contract::process::{Choice, GangClass, GangParams, Kind, PerturbParams};
use cosched_contract::slots::{
    Interrupt, MatrixView, PerturbView, SlotDecision, SlotFactory, SlotPolicy, SlotView,
};
use cosched_des::{RngStreams, SimTime};

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "gang-perturb",
        level: "process",
        summary: "Gang scheduling of job 0 with quanta taken away or given away (seed 003 §4) and the gangedness estimator (§5).",
        params: vec![
            ParamInfo { name: "quantum_ms", kind: "float", default: "0.5", doc: "slot length, ms (S003 §4: 500,000 instructions)" },
            ParamInfo { name: "rows", kind: "int", default: "2", doc: "matrix rows: job 0 and the competing rows" },
            ParamInfo { name: "switch_us", kind: "float", default: "0", doc: "global switch cost, µs (assumption G-S003-3)" },
            ParamInfo { name: "kind", kind: "str", default: "takeaway", doc: "takeaway | giveaway (S003 §4)" },
            ParamInfo { name: "choice", kind: "str", default: "fixed", doc: "fixed | rr: fixed processor or round robin (S003 §4, Fig. 4)" },
            ParamInfo { name: "proc", kind: "int", default: "1", doc: "rank of job 0 perturbed when choice=fixed" },
            ParamInfo { name: "count", kind: "int", default: "0", doc: "number of perturbations, in batches of four three quanta apart" },
            ParamInfo { name: "span", kind: "int", default: "200", doc: "batch starts drawn over job 0's first `span` slots" },
            ParamInfo { name: "seed", kind: "int", default: "0", doc: "seed of the batch draw" },
        ],
    }
}

pub fn build(spec: &PolicySpec) -> Result<ProcAdmission, RegistryError> {
    spec.expect_only(&[
        "quantum_ms",
        "rows",
        "switch_us",
        "kind",
        "choice",
        "proc",
        "count",
        "span",
        "seed",
    ])?;
    let bad = |param: &str, msg: &str| RegistryError::BadValue {
        policy: spec.name.clone(),
        param: param.into(),
        value: spec.params.get(param).cloned().unwrap_or_default(),
        msg: msg.into(),
    };
    let quantum_ms: f64 = spec.get("quantum_ms", 0.5)?;
    let quantum = SimTime::from_secs_f64(quantum_ms / 1e3);
    if !(quantum_ms.is_finite() && quantum > SimTime::ZERO) {
        return Err(bad("quantum_ms", "must be > 0"));
    }
    let rows: u32 = spec.get("rows", 2)?;
    if rows < 2 {
        return Err(bad(
            "rows",
            "must be at least 2 (job 0 and a competing row)",
        ));
    }
    let switch_us: f64 = spec.get("switch_us", 0.0)?;
    if !(switch_us.is_finite() && switch_us >= 0.0) {
        return Err(bad("switch_us", "must be >= 0"));
    }
    let kind = match spec.get("kind", "takeaway".to_string())?.as_str() {
        "takeaway" => Kind::Takeaway,
        "giveaway" => Kind::Giveaway,
        _ => return Err(bad("kind", "must be \"takeaway\" or \"giveaway\"")),
    };
    let proc: u32 = spec.get("proc", 1)?;
    let choice = match spec.get("choice", "fixed".to_string())?.as_str() {
        "fixed" => Choice::Fixed(proc),
        "rr" => Choice::RoundRobin,
        _ => return Err(bad("choice", "must be \"fixed\" or \"rr\"")),
    };
    let span: u32 = spec.get("span", 200)?;
    if span == 0 {
        return Err(bad("span", "must be at least 1"));
    }
    // As for gang: durations beyond 1e6 s overflowed the run's nanosecond arithmetic.
    for (key, ms) in [("quantum_ms", quantum_ms), ("switch_us", switch_us / 1e3)] {
        if ms > super::gang::MAX_DURATION_MS {
            return Err(bad(key, "must be at most 1e6 s (1e9 ms, 1e12 us)"));
        }
    }
    Ok(ProcAdmission::GangPerturb {
        gang: GangParams {
            quantum,
            rows,
            switch: SimTime::from_secs_f64(switch_us / 1e6),
            alternate: false,
            flex: Default::default(),
        },
        perturb: PerturbParams {
            kind,
            choice,
            count: spec.get("count", 0)?,
            span,
            seed: spec.get("seed", 0)?,
        },
    })
}

/// Perturbations per batch and their spacing in job 0's slots (S003 §4).
pub const BATCH: u32 = 4;
pub const SPACING: u32 = 3;

/// The perturbations as (job 0's slot index, rank), sorted by slot, for a
/// job 0 of `ranks` processes.
pub fn draw(params: &PerturbParams, ranks: u32) -> Vec<(u32, u32)> {
    use rand::Rng;
    let batches = params.count.div_ceil(BATCH);
    let width = (BATCH - 1) * SPACING + 1; // slots one batch covers
    let mut rng = RngStreams::new(params.seed).stream("perturb");
    let mut starts: Vec<u32> = Vec::new();
    let room = params.span.saturating_sub(width).max(1);
    // Rejection sampling of non-overlapping batches; if the span is too short for
    // them all, later batches are placed after the last one.
    let mut tries = 0;
    while (starts.len() as u32) < batches {
        let s = rng.gen_range(0..room);
        tries += 1;
        if tries > 10_000 {
            let next = starts.iter().max().map_or(0, |m| m + width);
            starts.push(next);
            continue;
        }
        if starts.iter().all(|&t| s.abs_diff(t) >= width) {
            starts.push(s);
        }
    }
    starts.sort_unstable();
    let mut out = Vec::new();
    let mut k = 0u32;
    for s in starts {
        for i in 0..BATCH {
            if k == params.count {
                break;
            }
            let rank = match params.choice {
                Choice::Fixed(r) => r,
                Choice::RoundRobin => k % ranks.max(1),
            };
            out.push((s + i * SPACING, rank));
            k += 1;
        }
    }
    out
}

/// The slot policy of `gang` perturbed by `perturb`, for each run.
pub fn factory(gang: GangParams, perturb: PerturbParams) -> SlotFactory {
    SlotFactory::new(move |setup| {
        Box::new(GangPerturb::new(
            Box::new(Gang::new(gang.clone(), setup)),
            perturb.clone(),
        ))
    })
}

/// The perturbation harness as a slot policy: a decorator of the gang policy
/// `inner` (the module documentation states the algorithm). The measured job
/// is job 0.
pub struct GangPerturb {
    inner: Box<dyn SlotPolicy>,
    params: PerturbParams,
    /// Job 0 started (on these nodes, in rank order) and has not ended.
    started: bool,
    done: bool,
    nodes: Vec<u32>,
    /// The perturbations, (job 0's slot index, rank) ([`draw`]).
    plan: Vec<(u32, u32)>,
    /// Job 0's slot that the next slot of another row follows, if any.
    after_own: Option<u32>,
    /// Job 0's slots started.
    own_slots: u32,
    /// A slot runs (from its `Run` to the switch that ends it).
    in_slot: bool,
    /// The ranks the current slot perturbs.
    perturbed: Vec<u32>,
    applied: u32,
}

/// The measured job.
const TARGET: usize = 0;

impl GangPerturb {
    pub fn new(inner: Box<dyn SlotPolicy>, params: PerturbParams) -> Self {
        Self {
            inner,
            params,
            started: false,
            done: false,
            nodes: Vec::new(),
            plan: Vec::new(),
            after_own: None,
            own_slots: 0,
            in_slot: false,
            perturbed: Vec::new(),
            applied: 0,
        }
    }

    /// Follows the slots the wrapped policy's decisions start and end.
    fn observe(&mut self, ds: Vec<SlotDecision>) -> Vec<SlotDecision> {
        for d in &ds {
            match d {
                SlotDecision::Run { .. } => self.slot_start(),
                SlotDecision::Switch { .. } => self.in_slot = false,
                _ => {}
            }
        }
        ds
    }

    /// A slot starts: takeaways hit job 0's own slot k, giveaways the slot
    /// right after it.
    fn slot_start(&mut self) {
        self.in_slot = true;
        self.perturbed.clear();
        let Some(m) = self.inner.matrix() else {
            return;
        };
        let own_row = m.row_of(TARGET);
        let own_now = !self.done && own_row.is_some() && m.active() == own_row;
        if !self.started || self.done {
            return;
        }
        let k = if own_now {
            self.after_own = Some(self.own_slots);
            self.own_slots += 1;
            (self.params.kind == Kind::Takeaway).then_some(self.own_slots - 1)
        } else {
            self.after_own
                .take()
                .filter(|_| self.params.kind == Kind::Giveaway)
        };
        if let Some(k) = k {
            self.perturbed = self
                .plan
                .iter()
                .filter(|&&(s, _)| s == k)
                .map(|&(_, r)| r)
                .collect();
            self.applied += self.perturbed.len() as u32;
        }
    }
}

impl PerturbView for GangPerturb {
    fn target(&self) -> usize {
        TARGET
    }
    fn perturbed(&self) -> &[u32] {
        &self.perturbed
    }
    fn applied(&self) -> u32 {
        self.applied
    }
    fn planned(&self) -> u32 {
        self.params.count
    }
}

impl SlotPolicy for GangPerturb {
    fn name(&self) -> String {
        "gang-perturb".into()
    }
    fn on_arrival(&mut self, job: usize, v: &dyn SlotView) {
        self.inner.on_arrival(job, v);
    }
    fn next(&mut self, v: &dyn SlotView) -> Option<SlotDecision> {
        let d = self.inner.next(v)?;
        self.observe(vec![d]).pop()
    }
    fn on_started(
        &mut self,
        job: usize,
        first: Pid,
        nodes: &[u32],
        v: &dyn SlotView,
    ) -> Vec<SlotDecision> {
        if job == TARGET {
            self.started = true;
            self.nodes = nodes.to_vec();
            self.plan = draw(&self.params, nodes.len() as u32);
        }
        let ds = self.inner.on_started(job, first, nodes, v);
        self.observe(ds)
    }
    fn on_process_end(&mut self, pid: Pid) {
        self.inner.on_process_end(pid);
    }
    fn on_job_end(&mut self, job: usize, v: &dyn SlotView) {
        if job == TARGET {
            self.done = true;
        }
        self.inner.on_job_end(job, v);
    }
    fn on_slot_timer(&mut self, v: &dyn SlotView) -> Vec<SlotDecision> {
        let ds = self.inner.on_slot_timer(v);
        self.observe(ds)
    }
    fn on_switch_done(&mut self, v: &dyn SlotView) -> Vec<SlotDecision> {
        let ds = self.inner.on_switch_done(v);
        self.observe(ds)
    }
    fn on_io_wake(&mut self, pid: Pid) {
        self.inner.on_io_wake(pid);
    }
    fn on_block(&mut self, pid: Pid) {
        self.inner.on_block(pid);
    }
    fn on_ran(&mut self, pid: Pid, job: usize, ran: SimTime) {
        self.inner.on_ran(pid, job, ran);
    }
    fn on_gangedness(&mut self, job: usize, class: GangClass) {
        self.inner.on_gangedness(job, class);
    }

    /// The wrapped policy's pick, except on a perturbed node: a taken-away
    /// node runs the first runnable process of the other rows (cyclically
    /// after the active one) or idles; a given-away node runs job 0's process
    /// or idles.
    fn pick(&self, node: u32, v: &dyn SlotView) -> Option<Pid> {
        let hint = self.inner.pick(node, v);
        let hit = self
            .perturbed
            .iter()
            .any(|&r| self.nodes.get(r as usize) == Some(&node));
        if !self.in_slot || !hit {
            return hint;
        }
        let m = self.inner.matrix()?;
        let active = m.active()?;
        match self.params.kind {
            Kind::Takeaway => {
                let rows = m.rows();
                (1..rows)
                    .map(|k| (active + k) % rows)
                    .filter_map(|r| m.cell(r, node).map(|(_, p)| p))
                    .find(|&p| v.runnable(p))
            }
            Kind::Giveaway => {
                let own = m.row_of(TARGET)?;
                m.cell(own, node).map(|(_, p)| p).filter(|&p| v.runnable(p))
            }
        }
    }
    fn on_wake(&self, pid: Pid, node: u32, v: &dyn SlotView) -> Option<Interrupt> {
        self.inner.on_wake(pid, node, v)
    }
    fn matrix(&self) -> Option<&dyn MatrixView> {
        self.inner.matrix()
    }
    fn gang(&self) -> Option<&GangParams> {
        self.inner.gang()
    }

    /// A fixed perturbed rank must exist in job 0.
    fn check_job(&self, job: usize, ranks: u32) -> Result<(), String> {
        match self.params.choice {
            Choice::Fixed(r) if job == TARGET && r >= ranks => Err(format!(
                "perturbed rank {r} does not exist in job 0 ({ranks} ranks)"
            )),
            _ => self.inner.check_job(job, ranks),
        }
    }
    fn perturbation(&self) -> Option<&dyn PerturbView> {
        Some(self)
    }
    fn dump(&self) -> String {
        format!(
            "{}; perturbed ranks {:?}, {} of {} applied",
            self.inner.dump(),
            self.perturbed,
            self.applied,
            self.params.count
        )
    }
}
