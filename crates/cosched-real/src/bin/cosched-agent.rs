//! `cosched-agent`: the node agent of real execution (see docs/real.md).

use clap::{Parser, Subcommand};
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
        Cmd::Cleanup { state_dir } => {
            let dir = state_dir.unwrap_or_else(state::default_dir);
            match state::cleanup(&dir, &Cgroups::detect()) {
                Ok(c) => {
                    println!(
                        "removed {} cgroups, continued {} processes, moved back {}, unlinked {} segments",
                        c.cgroups_removed, c.processes_continued, c.processes_moved_back, c.segments_unlinked
                    );
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
