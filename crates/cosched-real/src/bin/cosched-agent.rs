//! `cosched-agent`: the node agent of real execution (see docs/real.md).

use clap::{Parser, Subcommand};
use cosched_real::agent::{Agent, AgentOptions, NodeSpec};
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
            eprintln!("cosched-agent: serving ({})", agent.stats.cgroups);
            match agent.run() {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("cosched-agent: {e}");
                    ExitCode::FAILURE
                }
            }
        }
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
