//! The controller of `cosched run`: admits jobs over the virtual nodes of this
//! machine with the same cluster policy code as the simulator, launches them with
//! `mpiexec` under the shim, switches gang slots through the agent, and
//! measures what the simulator reports.
//!
//! * Admission: `fcfs` (MPL `mpl`), `batch` / `easy` (MPL 1) run the job-level
//!   [`ClusterPolicy`] of `cosched-policies` (`fcfs`, `fcfs[strict=false]` for
//!   `batch[strict=false]`, `easy`) over a view whose
//!   processors are the process slots: `mpl` per virtual node (times the rows
//!   under gang; memory-aware: only on nodes with memory left); a started job is then
//!   placed on distinct nodes by PACKING (the simulator's rule,
//!   [`cosched_contract::place::packing`]: the least-loaded layer with room, then
//!   the emptiest contiguous run; within a gang row, first fit) or NO PACKING
//!   (seeded random choice). A job that cannot be placed yet stays first in line.
//! * Gang: an Ousterhout matrix of `rows` rows and one column per node; a job
//!   takes the first row with room on enough nodes. Every `quantum_ms` the
//!   controller freezes every job of the active row (the agent answers when the
//!   kernel reports them frozen), then thaws the next non-empty row's jobs:
//!   stop-then-start, so two rows never run at once.
//! * Each job runs `mpiexec` in its own process group with the parent-death
//!   signal SIGTERM; a rank's environment names its node's agent socket
//!   (`COSCHED_AGENT`), the run, the job and `COSCHED_REQUIRED=1`.

use crate::agent::{Agent, AgentOptions, AgentStats, NodeSpec, Sample};
use crate::client::Client;
use cosched_contract::cluster::{ClusterPolicy, ClusterView, Decision, Event};
use cosched_contract::gang::Ousterhout;
use cosched_contract::place::packing;
use cosched_des::SimTime;
use cosched_model::{JobId, JobSpec};
use std::collections::{HashMap, VecDeque};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The MPI that launches the jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mpi {
    Mpich,
    OpenMpi,
}

impl Mpi {
    pub fn parse(s: &str) -> Result<Mpi, String> {
        match s {
            "mpich" => Ok(Mpi::Mpich),
            "openmpi" => Ok(Mpi::OpenMpi),
            _ => Err(format!("unknown MPI {s:?}; valid: mpich, openmpi")),
        }
    }
    pub fn launcher(self) -> &'static str {
        match self {
            Mpi::Mpich => "mpiexec.mpich",
            Mpi::OpenMpi => "mpirun.openmpi",
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Mpi::Mpich => "mpich",
            Mpi::OpenMpi => "openmpi",
        }
    }
    /// The launcher's option that prefixes every line a rank writes with its rank
    /// (MPICH Hydra: `[R] `; Open MPI: `[JOB,R]<stdout>:` or `<stderr>:`), so that a
    /// failure can show the ranks' own lines apart from the launcher's epilogue.
    pub fn tag_option(self) -> &'static str {
        match self {
            Mpi::Mpich => "-prepend-rank",
            Mpi::OpenMpi => "--tag-output",
        }
    }
}

/// Whether `line` of a job log was written by a rank (tagged by
/// [`Mpi::tag_option`]) rather than by the launcher itself.
fn rank_line(line: &str) -> bool {
    let Some(rest) = line.strip_prefix('[') else {
        return false;
    };
    let Some((tag, _)) = rest.split_once(']') else {
        return false;
    };
    !tag.is_empty() && tag.split(',').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// What a failed job's log says, for its error: the ranks' last lines (up to
/// `RANK_LINES`, where the cause is) and the launcher's last line (its verdict);
/// or the log's last lines when no rank wrote anything.
fn failure_summary(log: &str) -> String {
    const RANK_LINES: usize = 5;
    let lines: Vec<&str> = log
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with("----"))
        .collect();
    let ranks: Vec<&str> = lines.iter().copied().filter(|l| rank_line(l)).collect();
    let launcher: Vec<&str> = lines.iter().copied().filter(|l| !rank_line(l)).collect();
    if ranks.is_empty() {
        let tail = &lines[lines.len().saturating_sub(3)..];
        return format!("no line from a rank; last lines: {}", tail.join(" | "));
    }
    let mut out = format!(
        "ranks: {}",
        ranks[ranks.len().saturating_sub(RANK_LINES)..].join(" | ")
    );
    if let Some(last) = launcher.last() {
        out.push_str(&format!("; launcher: {last}"));
    }
    out
}

/// How jobs are admitted and time-sliced.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    /// FCFS under the MPL.
    Fcfs,
    /// MPL 1, FCFS (strict, or every job that fits: `strict=false`) or EASY
    /// backfilling.
    Batch {
        easy: bool,
        #[serde(default = "strict_default")]
        strict: bool,
    },
    /// Ousterhout matrix.
    Gang { rows: u32, quantum_ns: u64 },
}

fn strict_default() -> bool {
    true
}

/// One job to run.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct RealJob {
    pub id: i64,
    pub procs: u32,
    pub submit_ns: u64,
    /// The program and its arguments (every rank runs the same).
    pub argv: Vec<String>,
    pub memory_mb: f64,
    /// What EASY sees as the job's runtime estimate.
    pub estimate_ns: u64,
}

/// A run.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct RunSpec {
    pub run: String,
    /// Where job logs, the shim's log and the sockets go.
    pub work_dir: PathBuf,
    pub mpi: Mpi,
    /// libcosched for this MPI (LD_PRELOAD).
    pub shim: PathBuf,
    /// CPUs of each virtual node (cpuset lists).
    pub nodes: Vec<String>,
    pub node_memory_mb: f64,
    pub scheme: Scheme,
    pub node_policy: String,
    pub mpl: u32,
    pub packing: bool,
    pub memory_aware: bool,
    pub seed: u64,
    pub jobs: Vec<RealJob>,
    pub time_limit_ns: u64,
    pub sample_ns: u64,
    pub boost_factor: f64,
    pub state_dir: PathBuf,
    /// Every wait is the MPI library's own (`COSCHED_LIBRARY_WAITS=1` to the
    /// shim): a baseline of the library's wait mode; the agent still serves the ranks.
    #[serde(default)]
    pub library_waits: bool,
    /// More environment for every rank (e.g. `OMPI_MCA_mpi_yield_when_idle`).
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
}

/// What happened to one job.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct JobOut {
    pub start_ns: Option<u64>,
    pub end_ns: Option<u64>,
    pub nodes: Vec<u32>,
    pub ok: bool,
    pub error: Option<String>,
    pub cpu_ns: u64,
    pub ctx_voluntary: u64,
    pub ctx_involuntary: u64,
    pub ranks_registered: u32,
    pub gang_row: i64,
    /// Killed at the run's time limit (not `ok`, but not a failure of its program).
    pub timed_out: bool,
}

/// The result of a run.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RunOut {
    pub jobs: Vec<JobOut>,
    pub timeline: Vec<Sample>,
    pub agent: AgentStats,
    pub gang_switch_ns: Vec<u64>,
    pub makespan_ns: u64,
    pub mpi_version: String,
}

/// A progress snapshot for the display: (queued, running, done, failed, elapsed s).
/// The callback answers whether to go on: `false` (an interruption, Ctrl-C)
/// ends every running job and the run, with an error.
pub type Progress = (usize, usize, usize, usize, f64);

struct Running {
    child: Child,
    nodes: Vec<u32>,
    row: Option<u32>,
}

/// The launched jobs. Whatever way the controller's loop is left (an error, an
/// interruption), dropping this ends every job still running: SIGKILL to the
/// launcher's process group and to the job's registered ranks (MPICH's ranks
/// leave that group with `setsid`), then the launcher is reaped. A frozen rank
/// dies when the agent thaws it, which it does when it stops right after.
struct Jobs {
    running: HashMap<usize, Running>,
    shared: Arc<Mutex<crate::agent::Shared>>,
}

impl Jobs {
    /// Ends job `j` now (see the type's doc); `None` if it is not running.
    fn kill(&mut self, j: usize) -> Option<Running> {
        use nix::sys::signal::{kill, killpg, Signal};
        use nix::unistd::Pid;
        let mut r = self.running.remove(&j)?;
        let pids = self.shared.lock().unwrap().pids_of(j as i32);
        for p in pids {
            let _ = kill(Pid::from_raw(p as i32), Signal::SIGKILL);
        }
        let _ = killpg(Pid::from_raw(r.child.id() as i32), Signal::SIGKILL);
        let _ = r.child.wait();
        Some(r)
    }
}

impl Drop for Jobs {
    fn drop(&mut self) {
        let ids: Vec<usize> = self.running.keys().copied().collect();
        for j in ids {
            self.kill(j);
        }
    }
}

/// The job-level view: processors are the nodes that have room.
struct SlotView<'a> {
    now: SimTime,
    free: u32,
    total: u32,
    specs: &'a [JobSpec],
    starts: &'a HashMap<u32, SimTime>,
}

impl ClusterView for SlotView<'_> {
    fn now(&self) -> SimTime {
        self.now
    }
    fn total_procs(&self) -> u32 {
        self.total
    }
    fn free_procs(&self) -> u32 {
        self.free
    }
    fn job(&self, id: JobId) -> &JobSpec {
        &self.specs[id.0 as usize]
    }
    fn start_time(&self, id: JobId) -> Option<SimTime> {
        self.starts.get(&id.0).copied()
    }
}

/// Checks what a run needs on this machine; the error names what is missing.
pub fn check(spec: &RunSpec) -> Result<(), String> {
    let which = |p: &str| {
        std::env::var_os("PATH")
            .map(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()))
            .unwrap_or(false)
    };
    if !which(spec.mpi.launcher()) {
        return Err(format!(
            "{} not found on PATH: install {} (Debian: apt-get install {})",
            spec.mpi.launcher(),
            spec.mpi.name(),
            match spec.mpi {
                Mpi::Mpich => "mpich libmpich-dev",
                Mpi::OpenMpi => "openmpi-bin libopenmpi-dev",
            }
        ));
    }
    if !spec.shim.is_file() {
        return Err(format!(
            "the MPI shim {} is missing (build it: make real)",
            spec.shim.display()
        ));
    }
    let cg = crate::cgroup::Cgroups::detect();
    cg.require()?;
    if spec.nodes.is_empty() {
        return Err("no virtual node".into());
    }
    for (i, j) in spec.jobs.iter().enumerate() {
        if j.procs as usize > spec.nodes.len() {
            return Err(format!(
                "job {i} (id {}) needs {} processes on distinct nodes but the machine has {} virtual nodes",
                j.id,
                j.procs,
                spec.nodes.len()
            ));
        }
        if spec.memory_aware && j.memory_mb > spec.node_memory_mb {
            return Err(format!(
                "job {i} needs {} MB per node; a node has {} MB",
                j.memory_mb, spec.node_memory_mb
            ));
        }
        if j.argv.is_empty() {
            return Err(format!("job {i} has no program"));
        }
    }
    Ok(())
}

fn launch(
    spec: &RunSpec,
    idx: usize,
    job: &RealJob,
    nodes: &[u32],
    sockets: &[PathBuf],
) -> std::io::Result<Child> {
    let mut c = Command::new(spec.mpi.launcher());
    let log = spec.work_dir.join(format!("job{idx}.log"));
    let out = std::fs::File::create(&log)?;
    c.stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out);
    let set = |k: &str, v: &str| match spec.mpi {
        Mpi::Mpich => vec!["-env".to_string(), k.to_string(), v.to_string()],
        Mpi::OpenMpi => vec!["-x".to_string(), format!("{k}={v}")],
    };
    if spec.mpi == Mpi::OpenMpi {
        c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        c.args(["--oversubscribe", "--bind-to", "none"]);
    }
    c.arg(spec.mpi.tag_option());
    for (r, &n) in nodes.iter().enumerate() {
        if r > 0 {
            c.arg(":");
        }
        c.arg(if spec.mpi == Mpi::Mpich { "-n" } else { "-np" })
            .arg("1");
        for (k, v) in [
            (
                "COSCHED_AGENT",
                sockets[n as usize].to_string_lossy().to_string(),
            ),
            ("COSCHED_RUN", spec.run.clone()),
            ("COSCHED_JOB", idx.to_string()),
            ("COSCHED_REQUIRED", "1".into()),
            (
                "COSCHED_LOG",
                spec.work_dir
                    .join("shim.jsonl")
                    .to_string_lossy()
                    .to_string(),
            ),
            ("LD_PRELOAD", spec.shim.to_string_lossy().to_string()),
            (
                "COSCHED_LIBRARY_WAITS",
                if spec.library_waits { "1" } else { "0" }.into(),
            ),
        ] {
            c.args(set(k, &v));
        }
        for (k, v) in &spec.env {
            c.args(set(k, v));
        }
        c.args(&job.argv);
    }
    // SAFETY: async-signal-safe calls between fork and exec.
    unsafe {
        c.pre_exec(|| {
            libc::setpgid(0, 0);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    c.spawn()
}

fn mpi_version(mpi: Mpi) -> String {
    Command::new(mpi.launcher())
        .arg("--version")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .map(|o| {
            let text = String::from_utf8_lossy(&o.stdout).to_string();
            let line = text
                .lines()
                .find(|l| l.contains("Version:") || l.contains("Open MPI"));
            line.unwrap_or("")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// Runs `spec` for real; `progress` is called about twice a second.
pub fn run(spec: &RunSpec, mut progress: impl FnMut(Progress) -> bool) -> Result<RunOut, String> {
    check(spec)?;
    std::fs::create_dir_all(&spec.work_dir)
        .map_err(|e| format!("{}: {e}", spec.work_dir.display()))?;
    let sockets: Vec<PathBuf> = (0..spec.nodes.len())
        .map(|i| spec.work_dir.join(format!("agent-n{i}.sock")))
        .collect();
    let opts = AgentOptions {
        run: spec.run.clone(),
        nodes: spec
            .nodes
            .iter()
            .enumerate()
            .map(|(i, c)| NodeSpec {
                node: i as u32,
                cpus: Some(c.clone()),
                socket: sockets[i].clone(),
            })
            .collect(),
        default_policy: spec.node_policy.clone(),
        boost_factor: spec.boost_factor,
        state_dir: spec.state_dir.clone(),
        realtime: true,
    };
    cosched_policies::registry::build_node(&spec.node_policy)
        .map_err(|e| format!("scheduler.node_policy: {e}"))?;
    let mut agent = Agent::new(opts).map_err(|e| e.to_string())?;
    agent.set_sampling(Duration::from_nanos(spec.sample_ns));
    let stopper = agent.stopper();
    let shared = agent.shared();
    let handle = std::thread::Builder::new()
        .name("cosched-agent".into())
        .spawn(move || {
            let r = agent.run();
            (r, agent.stats.clone())
        })
        .map_err(|e| e.to_string())?;
    let result = control(spec, &sockets, &shared, &mut progress);
    stopper.stop();
    let (r, stats) = handle
        .join()
        .map_err(|_| "the agent thread panicked".to_string())?;
    r.map_err(|e| e.to_string())?;
    let mut out = result?;
    out.agent = stats;
    let sh = shared.lock().unwrap();
    for (j, o) in out.jobs.iter_mut().enumerate() {
        if let Some(u) = sh.usage.get(&(j as i32)) {
            o.cpu_ns = u.cpu_ns;
            o.ctx_voluntary = u.ctx_voluntary;
            o.ctx_involuntary = u.ctx_involuntary;
            o.ranks_registered = u.ranks;
        }
    }
    out.timeline = sh.timeline.clone();
    out.mpi_version = mpi_version(spec.mpi);
    Ok(out)
}

/// The job-level policy of `cosched-policies` that admits jobs under `scheme`.
fn admission(scheme: &Scheme) -> Result<Box<dyn ClusterPolicy>, String> {
    let name = match scheme {
        Scheme::Batch { easy: true, .. } => "easy",
        Scheme::Batch { strict: false, .. } => "fcfs[strict=false]",
        _ => "fcfs",
    };
    cosched_policies::registry::build(name).map_err(|e| e.to_string())
}

/// PACKING in the controller: `size` of the `cand` nodes of `row` by the
/// simulator's rule ([`packing`]). With `by_load` a node's load is the jobs
/// placed on it in `row` (the one row of FCFS and batch, `mpl` slots per node);
/// a gang row is itself the layer (every load 0: first fit within the row, as in
/// the engine).
fn packed(grid: &Ousterhout<usize>, row: usize, cand: &[u32], size: usize, by_load: bool) -> Vec<u32> {
    packing(cand, size, |n| {
        if by_load {
            grid.node_cells(row, n).iter().filter(|c| c.is_some()).count() as u32
        } else {
            0
        }
    })
}

/// The controller's loop: completions, submissions, the cluster policy's decisions,
/// placement and launch, gang slot switches, progress, the time limit.
// Longer than the function-length cap (clippy.toml): one loop over the run's state; to be split into
// admission, placement and gang parts.
#[allow(clippy::too_many_lines)]
fn control(
    spec: &RunSpec,
    sockets: &[PathBuf],
    shared: &Arc<Mutex<crate::agent::Shared>>,
    progress: &mut impl FnMut(Progress) -> bool,
) -> Result<RunOut, String> {
    let client = Client::connect(&sockets[0], Duration::from_secs(10))?;
    let n_nodes = spec.nodes.len() as u32;
    let (mpl, rows) = match spec.scheme {
        Scheme::Fcfs => (spec.mpl, 1),
        Scheme::Batch { .. } => (1, 1),
        Scheme::Gang { rows, .. } => (1, rows),
    };
    let mut policy = admission(&spec.scheme)?;
    let specs: Vec<JobSpec> = spec
        .jobs
        .iter()
        .map(|j| JobSpec {
            source_id: j.id,
            submit: SimTime(j.submit_ns as i64),
            runtime: SimTime(j.estimate_ns as i64),
            procs: j.procs,
            requested: None,
            estimate: SimTime(j.estimate_ns as i64),
            kill_after: None,
        })
        .collect();
    let mut order: Vec<usize> = (0..spec.jobs.len()).collect();
    order.sort_by_key(|&i| spec.jobs[i].submit_ns);
    let mut to_submit: VecDeque<usize> = order.into();
    let mut out = RunOut {
        jobs: vec![
            JobOut {
                gang_row: -1,
                ..JobOut::default()
            };
            spec.jobs.len()
        ],
        ..RunOut::default()
    };
    // The matrix (`cosched_contract::gang`, the simulator's): `rows` rows, `mpl`
    // process slots per node, each holding the job placed there; memory per node.
    let mut grid: Ousterhout<usize> = Ousterhout::new(rows as usize, n_nodes, mpl);
    let mut mem = vec![0f64; n_nodes as usize];
    let mut jobs = Jobs {
        running: HashMap::new(),
        shared: shared.clone(),
    };
    let mut pending: VecDeque<usize> = VecDeque::new();
    let mut starts: HashMap<u32, SimTime> = HashMap::new();
    let mut rng = spec
        .seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut active_row = 0u32;
    let mut next_switch = None;
    let t0 = Instant::now();
    let mut last_progress = Instant::now() - Duration::from_secs(1);
    let (mut done, mut failed) = (0usize, 0usize);
    loop {
        let now = t0.elapsed();
        let mut events = vec![];
        // Completions.
        let ids: Vec<usize> = jobs.running.keys().copied().collect();
        for j in ids {
            let r = jobs.running.get_mut(&j).unwrap();
            let status = match r.child.try_wait() {
                Ok(Some(s)) => s,
                Ok(None) => continue,
                Err(e) => return Err(format!("job {j}: {e}")),
            };
            let r = jobs.running.remove(&j).unwrap();
            let _ = client.end(j as i32);
            let o = &mut out.jobs[j];
            o.end_ns = Some(t0.elapsed().as_nanos() as u64);
            o.ok = status.success();
            if !o.ok {
                let log = spec.work_dir.join(format!("job{j}.log"));
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                o.error = Some(format!(
                    "{} exited with {status}; log job{j}.log: {}",
                    spec.mpi.launcher(),
                    failure_summary(&text)
                ));
                failed += 1;
            } else {
                done += 1;
            }
            grid.clear(r.row.unwrap_or(0) as usize, |&x| x == j);
            for &n in &r.nodes {
                mem[n as usize] -= spec.jobs[j].memory_mb;
            }
            events.push(Event::Completed(JobId(j as u32)));
        }
        while let Some(&j) = to_submit.front() {
            if Duration::from_nanos(spec.jobs[j].submit_ns) > now {
                break;
            }
            to_submit.pop_front();
            events.push(Event::Submitted(JobId(j as u32)));
        }
        if !events.is_empty() {
            // Processors of the view: the free process slots (MPL x rows per node)
            // of the nodes with memory left.
            let free = (0..n_nodes)
                .filter(|&n| !spec.memory_aware || mem[n as usize] < spec.node_memory_mb)
                .map(|n| {
                    (0..rows as usize)
                        .map(|r| grid.node_cells(r, n).iter().filter(|c| c.is_none()).count())
                        .sum::<usize>() as u32
                })
                .sum::<u32>();
            let view = SlotView {
                now: SimTime(now.as_nanos() as i64),
                free,
                total: n_nodes * mpl * rows,
                specs: &specs,
                starts: &starts,
            };
            let mut decisions = vec![];
            policy.on_events(&events, &view, &mut decisions);
            for d in decisions {
                match d {
                    Decision::Start(id) | Decision::StartOn(id, _) => {
                        pending.push_back(id.0 as usize)
                    }
                    Decision::Reject(id) => {
                        out.jobs[id.0 as usize].error = Some("rejected by the policy".into());
                        failed += 1;
                    }
                    Decision::WakeAt(_) => {}
                }
            }
        }
        // Place the started jobs in order; one that does not fit yet stays first.
        let gang = matches!(spec.scheme, Scheme::Gang { .. });
        while let Some(&j) = pending.front() {
            let job = &spec.jobs[j];
            // The first row with a free slot on enough nodes with memory left.
            let placed = grid
                .find_row(job.procs as usize, 1, |n| {
                    !spec.memory_aware || mem[n as usize] + job.memory_mb <= spec.node_memory_mb
                })
                .map(|(row, mut cand)| {
                    if spec.packing {
                        return (row, packed(&grid, row, &cand, job.procs as usize, !gang));
                    }
                    for i in (1..cand.len()).rev() {
                        rng = rng
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        cand.swap(i, ((rng >> 33) as usize) % (i + 1));
                    }
                    cand.truncate(job.procs as usize);
                    cand.sort_unstable();
                    (row, cand)
                });
            let Some((row, nodes)) = placed else { break };
            pending.pop_front();
            client.declare(j as i32, &spec.node_policy, false)?;
            if gang && row as u32 != active_row {
                client.slot(j as i32, false)?;
            }
            let child = match launch(spec, j, job, &nodes, sockets) {
                Ok(c) => c,
                Err(e) => {
                    let _ = client.end(j as i32);
                    out.jobs[j].error = Some(format!("cannot start {}: {e}", spec.mpi.launcher()));
                    failed += 1;
                    continue;
                }
            };
            grid.place(row, &nodes, |_| j);
            for &n in &nodes {
                mem[n as usize] += job.memory_mb;
            }
            starts.insert(j as u32, SimTime(now.as_nanos() as i64));
            let o = &mut out.jobs[j];
            o.start_ns = Some(now.as_nanos() as u64);
            o.nodes = nodes.clone();
            o.gang_row = if gang { row as i64 } else { -1 };
            jobs.running.insert(
                j,
                Running {
                    child,
                    nodes,
                    row: gang.then_some(row as u32),
                },
            );
        }
        // Gang slot switches.
        if let Scheme::Gang { quantum_ns, .. } = spec.scheme {
            let quantum = Duration::from_nanos(quantum_ns);
            let next = *next_switch.get_or_insert(now + quantum);
            if now >= next {
                next_switch = Some(now + quantum);
                // The next non-empty row, cyclically (the active one last).
                let target = grid.next_row(Some(active_row as usize)).map(|r| r as u32);
                if let Some(target) = target.filter(|&t| t != active_row) {
                    let t = Instant::now();
                    for (&j, r) in &jobs.running {
                        if r.row == Some(active_row) {
                            client.slot(j as i32, false)?;
                        }
                    }
                    for (&j, r) in &jobs.running {
                        if r.row == Some(target) {
                            client.slot(j as i32, true)?;
                        }
                    }
                    out.gang_switch_ns.push(t.elapsed().as_nanos() as u64);
                    active_row = target;
                }
            }
        }
        let queued = to_submit.len() + pending.len();
        if last_progress.elapsed() >= Duration::from_millis(500) {
            if !progress((queued, jobs.running.len(), done, failed, now.as_secs_f64())) {
                return Err("interrupted".into());
            }
            last_progress = Instant::now();
        }
        if to_submit.is_empty() && pending.is_empty() && jobs.running.is_empty() {
            break;
        }
        if now > Duration::from_nanos(spec.time_limit_ns) {
            let ids: Vec<usize> = jobs.running.keys().copied().collect();
            for j in ids {
                let _ = client.end(j as i32);
                jobs.kill(j);
                let o = &mut out.jobs[j];
                o.end_ns = Some(t0.elapsed().as_nanos() as u64);
                o.error = Some(format!(
                    "killed at the time limit ({} s)",
                    spec.time_limit_ns / 1_000_000_000
                ));
                o.timed_out = true;
                failed += 1;
            }
            for j in pending.drain(..).chain(to_submit.drain(..)) {
                out.jobs[j].error = Some("not started before the time limit".into());
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = progress((0, 0, done, failed, t0.elapsed().as_secs_f64()));
    out.makespan_ns = t0.elapsed().as_nanos() as u64;
    Ok(out)
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn a_failure_shows_the_ranks_lines_apart_from_the_launchers_epilogue() {
        // Open MPI 4.1 with --tag-output: the rank's lines, then mpirun's epilogue.
        let ompi = "[1,0]<stdout>:starting\n[1,1]<stderr>:libcosched (rank 1): cannot reach the agent\n\
            --------------------------------------------------------------------------\n\
            Primary job  terminated normally, but 1 process returned\n\
            a non-zero exit code. Per user-direction, the job has been aborted.\n\
            --------------------------------------------------------------------------\n\
            mpirun.openmpi detected that one or more processes exited with non-zero status\n";
        assert_eq!(
            failure_summary(ompi),
            "ranks: [1,0]<stdout>:starting | [1,1]<stderr>:libcosched (rank 1): cannot reach the agent; \
             launcher: mpirun.openmpi detected that one or more processes exited with non-zero status"
        );
        // MPICH Hydra with -prepend-rank: only the last 5 rank lines.
        let mpich: String = (0..8).map(|i| format!("[{}] line {i}\n", i % 2)).collect::<String>()
            + "===================\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n";
        assert_eq!(
            failure_summary(&mpich),
            "ranks: [1] line 3 | [0] line 4 | [1] line 5 | [0] line 6 | [1] line 7; \
             launcher: =   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES"
        );
        // Nothing from a rank: the log's last lines.
        assert_eq!(
            failure_summary("a\nb\n\nc\nd\n"),
            "no line from a rank; last lines: b | c | d"
        );
        assert!(rank_line("[12] x") && rank_line("[1,3]<stderr>:x"));
        assert!(!rank_line("[mpiexec@host] x") && !rank_line("[] x") && !rank_line("x [1] y"));
    }

    #[test]
    fn packing_in_the_controller_is_the_simulators_rule() {
        // 4 virtual nodes, MPL 2 (one row, two slots per node); job 0 holds nodes
        // 0 and 1. A 2-node job goes to the empty nodes 2-3 (layer 0), not onto
        // the loaded 0-1 (the old rule took the lowest nodes with a free slot).
        let mut grid: Ousterhout<usize> = Ousterhout::new(1, 4, 2);
        grid.place(0, &[0, 1], |_| 0);
        let (row, cand) = grid.find_row(2, 1, |_| true).unwrap();
        assert_eq!((row, cand.clone()), (0, vec![0, 1, 2, 3]));
        assert_eq!(packed(&grid, row, &cand, 2, true), vec![2, 3]);
        // A 3-node job: layer 0 has 2 nodes, layer 1 all 4; runs 0-2 (load 2) and
        // 1-3 (load 1): 1-3.
        assert_eq!(packed(&grid, row, &cand, 3, true), vec![1, 2, 3]);
        // A gang row is its own layer: first fit within it (the first contiguous
        // run), whatever the other rows hold.
        assert_eq!(packed(&grid, row, &[0, 2, 3], 2, false), vec![2, 3]);
    }

    #[test]
    fn batch_without_strict_order_admits_by_the_shared_non_strict_fcfs() {
        let name = |scheme: Scheme| admission(&scheme).unwrap().name();
        assert_eq!(name(Scheme::Batch { easy: false, strict: false }), "fcfs[strict=false]");
        assert_eq!(name(Scheme::Batch { easy: false, strict: true }), "fcfs");
        assert_eq!(name(Scheme::Batch { easy: true, strict: true }), "easy");
        assert_eq!(name(Scheme::Fcfs), "fcfs");
        // The run specification from Python: `strict` defaults to true.
        let s: Scheme = serde_json::from_str(r#"{"batch": {"easy": false}}"#).unwrap();
        assert_eq!(s, Scheme::Batch { easy: false, strict: true });
    }
}
