//! `cosched-agent`: the node agent of real execution (see docs/real.md).

use clap::{Parser, Subcommand};
use cosched_real::agent::{Agent, AgentOptions, NodeSpec};
use cosched_real::coord::{self, CoordOptions};
use cosched_real::gangnet::{self, GangHandle, GangNet, GangOptions};
use cosched_real::{cgroup::Cgroups, proto, state};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "cosched-agent",
    about = "cosched node agent: hosts node policies on this machine"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve virtual nodes: one `--node ID:CPUS:SOCKET` each (CPUS a cpuset list,
    /// or empty for every CPU). Runs until SIGTERM/SIGINT/SIGHUP, then restores
    /// everything it changed.
    Serve {
        /// Run id, [A-Za-z0-9_-]{1,32} (names the cgroups cosched.<run>.n<node>).
        #[arg(long)]
        run: String,
        #[arg(long = "node", required = true)]
        nodes: Vec<String>,
        /// Node policy of ranks whose job was not declared.
        #[arg(long, default_value = "nls")]
        default_policy: String,
        /// A boost multiplies the rank's cgroup CPU weight by this.
        #[arg(long, default_value_t = 64.0)]
        boost_factor: f64,
        #[arg(long)]
        state_dir: Option<PathBuf>,
        /// Do not switch to SCHED_FIFO.
        #[arg(long)]
        no_realtime: bool,
        /// The gang coordinator (`cosched-agent coordinate`) to take slot
        /// schedules from, HOST:PORT, or a comma-separated list, primary first,
        /// then standby coordinators (the first that accepts is used). Without
        /// it, gang jobs are refused.
        #[arg(long)]
        coord: Option<String>,
        /// This node's name for the coordinator (default: the host name).
        #[arg(long)]
        node_name: Option<String>,
        /// Append one JSON line per gang slot switch to this file.
        #[arg(long)]
        gang_log: Option<PathBuf>,
        /// Forwarded message events go to the coordinator at most once per
        /// this many microseconds (0: each at once).
        #[arg(long, default_value_t = gangnet::FORWARD_BATCH_NS / 1000)]
        forward_batch_us: u64,
    },
    /// The gang coordinator: hosts the gang slot policy (the simulator's
    /// policy object) over the gang jobs the agents report and sends them slot
    /// schedules (switch times agreed ahead). Runs until SIGTERM/SIGINT/SIGHUP,
    /// then tells every agent to thaw.
    Coordinate {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:7460")]
        listen: String,
        /// The gang slot policy, the simulator's string (`gang[rows=3,quantum_ms=100]`);
        /// without it, --rows and --quantum-ms give `gang[rows=R,quantum_ms=Q,switch_us=0]`.
        #[arg(long, conflicts_with_all = ["rows", "quantum_ms"])]
        policy: Option<String>,
        /// Rows of the matrix (at least the partition's over-subscription MPL).
        #[arg(long, default_value_t = 3)]
        rows: usize,
        /// Slot length, ms.
        #[arg(long, default_value_t = 100.0)]
        quantum_ms: f64,
        /// How far ahead of its start a schedule is sent, ms.
        #[arg(long, default_value_t = 20.0)]
        lead_ms: f64,
        /// How long agents keep switching without hearing from the coordinator, ms.
        #[arg(long, default_value_t = 3000.0)]
        lease_ms: f64,
    },
    /// Restore what agents that are not running any more left behind: continue
    /// stopped processes, move processes back, thaw and remove cosched.* cgroups.
    Cleanup {
        /// State directory (default $COSCHED_STATE_DIR or /run/cosched).
        #[arg(long)]
        state_dir: Option<PathBuf>,
    },
    /// Print the protocol layout (struct.field offset size) as this build sees it.
    Layout,
    /// Print which cgroup interface serves each role on this machine.
    Cgroups,
}

fn host_name() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// The agent's side of the gang channel, when a coordinator is given.
fn start_gang(
    agent: &mut Agent,
    coord: Option<String>,
    node_name: Option<String>,
    log: Option<PathBuf>,
    agent_socket: PathBuf,
    forward_batch_ns: u64,
) -> std::io::Result<Option<GangHandle>> {
    let Some(coord) = coord else { return Ok(None) };
    let g = GangNet::new(GangOptions {
        coord,
        node: node_name.unwrap_or_else(host_name),
        agent_socket,
        log,
        forward_batch_ns,
    })?;
    agent.set_job_hook(g.hook());
    agent.set_forward_hook(g.forward_hook());
    agent.set_rank_hook(g.rank_hook());
    g.spawn().map(Some)
}

fn coordinate(
    listen: String,
    policy: Option<String>,
    rows: usize,
    quantum_ms: f64,
    lead_ms: f64,
    lease_ms: f64,
) -> ExitCode {
    let ns = |ms: f64| (ms * 1e6).round().max(0.0) as u64;
    if rows == 0 || !(quantum_ms > 0.0 && lead_ms >= 0.0 && lease_ms > 0.0) {
        eprintln!("cosched-agent coordinate: --rows, --quantum-ms and --lease-ms must be > 0, --lead-ms >= 0");
        return ExitCode::from(2);
    }
    let opts = CoordOptions {
        listen,
        policy: policy.unwrap_or_else(|| CoordOptions::gang(rows, ns(quantum_ms))),
        lead_ns: ns(lead_ms),
        lease_ns: ns(lease_ms),
        max_nodes: coord::MAX_NODES,
        max_jobs: coord::MAX_JOBS,
    };
    match coord::serve(opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cosched-agent coordinate: {e}");
            ExitCode::FAILURE
        }
    }
}

#[expect(clippy::too_many_lines, reason = "the agent's command line: one match arm per subcommand, each only wiring options to a library call")]
fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Serve {
            run,
            nodes,
            default_policy,
            boost_factor,
            state_dir,
            no_realtime,
            coord,
            node_name,
            gang_log,
            forward_batch_us,
        } => {
            let mut specs = vec![];
            for n in &nodes {
                let f: Vec<&str> = n.splitn(3, ':').collect();
                let (Some(id), Some(cpus), Some(sock)) =
                    (f.first().and_then(|x| x.parse().ok()), f.get(1), f.get(2))
                else {
                    eprintln!("cosched-agent: --node {n:?} is not ID:CPUS:SOCKET");
                    return ExitCode::from(2);
                };
                specs.push(NodeSpec {
                    node: id,
                    cpus: (!cpus.is_empty()).then(|| cpus.to_string()),
                    socket: PathBuf::from(sock),
                });
            }
            let first_socket = specs.first().map(|s| s.socket.clone()).unwrap_or_default();
            let opts = AgentOptions {
                run,
                nodes: specs,
                default_policy,
                boost_factor,
                state_dir: state_dir.unwrap_or_else(state::default_dir),
                realtime: !no_realtime,
            };
            let mut agent = match Agent::new(opts) {
                Ok(a) => a,
                Err(e) => {
                    eprintln!("cosched-agent: {e}");
                    return ExitCode::FAILURE;
                }
            };
            if let Err(e) = agent.handle_signals() {
                eprintln!("cosched-agent: signals: {e}");
                return ExitCode::FAILURE;
            }
            let gang = match start_gang(
                &mut agent,
                coord,
                node_name,
                gang_log,
                first_socket,
                forward_batch_us.saturating_mul(1000),
            ) {
                Ok(g) => g,
                Err(e) => {
                    eprintln!("cosched-agent: gang channel: {e}");
                    return ExitCode::FAILURE;
                }
            };
            eprintln!("cosched-agent: serving ({})", agent.stats.cgroups);
            let r = agent.run();
            // The agent restored everything; the gang thread stops, and a switch
            // it may be waiting on ends when the agent's sockets close (drop).
            if let Some(h) = &gang {
                h.request_stop();
            }
            agent.print_stats();
            drop(agent);
            if let Some(h) = gang {
                h.join();
            }
            match r {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("cosched-agent: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Cmd::Coordinate {
            listen,
            policy,
            rows,
            quantum_ms,
            lead_ms,
            lease_ms,
        } => coordinate(listen, policy, rows, quantum_ms, lead_ms, lease_ms),
        Cmd::Cleanup { state_dir } => {
            let dir = state_dir.unwrap_or_else(state::default_dir);
            match state::cleanup(&dir, &Cgroups::detect()) {
                Ok(c) => {
                    println!("{}", state::describe(&c));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("cosched-agent cleanup: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Cmd::Layout => {
            print!("{}", proto::layout_text());
            ExitCode::SUCCESS
        }
        Cmd::Cgroups => {
            println!("{}", Cgroups::detect().describe());
            ExitCode::SUCCESS
        }
    }
}
