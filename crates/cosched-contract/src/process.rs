//! The process-level cluster contract, first part: the parameters of the
//! process-level cluster schemes (gang scheduling with the Ousterhout matrix,
//! its flexible options of seed 003, the online gangedness estimator and the
//! perturbation harness). A scheme's policy string is parsed by
//! `cosched-policies` into these values; the mechanism that carries the scheme
//! out reads them. The schemes' algorithms are documented where they run.

use cosched_des::SimTime;

/// Parameters of gang scheduling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GangParams {
    /// Length of a time slot.
    pub quantum: SimTime,
    /// Rows of the matrix (the multiprogramming level).
    pub rows: u32,
    /// Global synchronization cost of a slot switch: every node idle this long.
    pub switch: SimTime,
    /// A node with no process in the active row may run another row's process.
    pub alternate: bool,
    /// Flexible gang scheduling options (seed 003).
    pub flex: FlexParams,
}

impl GangParams {
    /// The default rows of the matrix: seed 000's multiprogramming level of 3
    /// (seed 000 §5.1).
    pub const DEFAULT_ROWS: u32 = 3;
    /// The default slot length, ms (assumption G-SCH-6 of
    /// docs/models/seed-parameters.md).
    pub const DEFAULT_QUANTUM_MS: f64 = 100.0;
    /// The default global switch cost, µs (assumption G-SCH-6).
    pub const DEFAULT_SWITCH_US: f64 = 1000.0;
}

/// Which jobs carry the gang bit (may yield their slot when blocked).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum GangBit {
    /// No job (plain gang).
    #[default]
    Off,
    /// Every job.
    All,
    /// The jobs of these applications.
    Apps(Vec<String>),
}

impl GangBit {
    /// Whether the jobs of application `app` carry the gang bit.
    pub fn of(&self, app: &str) -> bool {
        match self {
            GangBit::Off => false,
            GangBit::All => true,
            GangBit::Apps(a) => a.iter().any(|x| x == app),
        }
    }
}

/// Where the flexible options learn which jobs are of low gangedness.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LowGang {
    /// The jobs of these applications (none: no gangedness source).
    Declared(Vec<String>),
    /// The online estimator's class (the engine's gangedness estimator).
    Auto(GangednessParams),
}

impl Default for LowGang {
    fn default() -> Self {
        LowGang::Declared(Vec::new())
    }
}

/// The default length of the estimator's processor-quanta (assumption G-S003-5).
pub const DEFAULT_EST_QUANTUM: SimTime = SimTime::from_ms(10);

/// The flexible options of gang scheduling; the default is plain gang.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlexParams {
    /// Per-application quanta: a job whose program is `app` (its name before any
    /// `[`) gets this slot length.
    pub quanta: Vec<(String, SimTime)>,
    /// A process woken by its disk completion preempts a process of its node.
    pub io_preempt: bool,
    /// Jobs whose blocked process gives its slot to another row's runnable process.
    pub gang_bit: GangBit,
    /// Fragments go only to low-gangedness jobs, least-served process first.
    pub fill: bool,
    /// The low-gangedness jobs (used by `fill` and by the I/O interrupts' victims).
    pub low: LowGang,
    /// Interprocess fairness bound of `fill` (zero: no bound).
    pub fair: SimTime,
    /// Slots per precomputed round (0 or 1: a round per slot).
    pub round_slots: u32,
    /// Cost of the global round precomputation, added to the switch that
    /// starts each round.
    pub round: SimTime,
    /// Length of the gangedness estimator's processor-quanta.
    pub est_quantum: SimTime,
}

impl Default for FlexParams {
    fn default() -> Self {
        Self {
            quanta: Vec::new(),
            io_preempt: false,
            gang_bit: GangBit::Off,
            fill: false,
            low: LowGang::default(),
            fair: SimTime::ZERO,
            round_slots: 0,
            round: SimTime::ZERO,
            est_quantum: DEFAULT_EST_QUANTUM,
        }
    }
}

/// Parameters of the online gangedness classification (seed 003 §5.2).
#[derive(Clone, Copy, Debug)]
pub struct GangednessParams {
    /// A job whose ratio is at least this is of low gangedness.
    pub ratio_threshold: f64,
    /// Records of each of the gang and non-gang-non-running sets a job needs
    /// before it is classified.
    pub window: u64,
}

/// The default threshold (geometric middle of S003 Table 3's ratio gap).
pub const DEFAULT_RATIO_THRESHOLD: f64 = 0.15;
/// The default window (records per set; assumption G-S003-5).
pub const DEFAULT_WINDOW: u64 = 32;

impl Default for GangednessParams {
    fn default() -> Self {
        Self {
            ratio_threshold: DEFAULT_RATIO_THRESHOLD,
            window: DEFAULT_WINDOW,
        }
    }
}

// Compared by bits so that the gang parameters stay `Eq`.
impl PartialEq for GangednessParams {
    fn eq(&self, o: &Self) -> bool {
        self.ratio_threshold.to_bits() == o.ratio_threshold.to_bits() && self.window == o.window
    }
}
impl Eq for GangednessParams {}

/// A job's gangedness class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GangClass {
    /// Too few records yet.
    #[default]
    Unknown,
    /// Low gangedness: tolerates interruptions, uses fragments.
    Low,
    /// High gangedness: must be ganged.
    High,
}

impl GangClass {
    pub fn name(self) -> &'static str {
        match self {
            GangClass::Unknown => "unknown",
            GangClass::Low => "low",
            GangClass::High => "high",
        }
    }
}

/// The perturbation harness (seed 003 §4): takeaway or giveaway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Takeaway,
    Giveaway,
}

/// How the perturbed processor is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Always the node of this rank of the target.
    Fixed(u32),
    /// The k-th perturbation on rank k mod P.
    RoundRobin,
}

/// Parameters of the perturbation harness.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerturbParams {
    pub kind: Kind,
    pub choice: Choice,
    /// Number of perturbations (batches of four; the last batch may be shorter).
    pub count: u32,
    /// Batch starts are drawn over the target's first `span` slots.
    pub span: u32,
    /// Seed of the batch draw (stream `"perturb"`).
    pub seed: u64,
}
