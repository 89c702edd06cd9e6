//! The agent's side of the gang channel, as a process: a gang job is refused
//! by an agent without a coordinator, and reported (hello, job with its node
//! count, job end) to one, which the test plays on a loopback listener; the
//! agent reconnects after the coordinator closed the connection and reports
//! its declared jobs again.

use cosched_real::client::Client;
use cosched_real::gangnet::ToCoord;
use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

/// An agent: SIGTERM at the end, so that it restores everything it set up.
struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.0.wait();
    }
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("cosched-gang-{name}-{}", std::process::id()))
}

fn agent(run: &str, socket: &Path, extra: &[String]) -> Proc {
    Proc(
        Command::new(env!("CARGO_BIN_EXE_cosched-agent"))
            .args(["serve", "--run", run, "--no-realtime"])
            .arg("--state-dir")
            .arg(tmp(&format!("state-{run}")))
            .arg("--node")
            .arg(format!("0::{}", socket.display()))
            .args(extra)
            .spawn()
            .unwrap(),
    )
}

/// Leaves no cgroup of `run` and removes the state directory.
fn assert_restored(run: &str) {
    let left: Vec<_> = ["cpu", "cpuacct", "cpuset", "freezer"]
        .iter()
        .flat_map(|h| {
            std::fs::read_dir(format!("/sys/fs/cgroup/{h}"))
                .into_iter()
                .flatten()
                .flatten()
        })
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("cosched.{run}."))
        })
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let _ = std::fs::remove_dir_all(tmp(&format!("state-{run}")));
}

fn next(r: &mut BufReader<TcpStream>) -> ToCoord {
    let mut l = String::new();
    r.read_line(&mut l).expect("a line from the agent");
    serde_json::from_str(&l).unwrap_or_else(|e| panic!("{l:?}: {e}"))
}

#[test]
fn an_agent_without_a_coordinator_refuses_gang_jobs() {
    let s = tmp("nocoord.sock");
    let run = format!("gn{}", std::process::id());
    let a = agent(&run, &s, &[]);
    let c = Client::connect(&s, Duration::from_secs(10)).unwrap();
    let e = c.declare_gang(3, "nls", 2).unwrap_err();
    assert!(e.contains("not connected"), "{e}");
    // Not a gang job: accepted as before.
    c.declare(3, "nls", false).unwrap();
    drop(a);
    assert_restored(&run);
}

#[test]
fn gang_jobs_are_reported_to_the_coordinator_and_again_after_a_reconnection() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let s = tmp("coord.sock");
    let args = ["--coord".into(), addr, "--node-name".into(), "cnX".into()];
    let run = format!("gc{}", std::process::id());
    let a = agent(&run, &s, &args);
    let (conn, _) = l.accept().unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut r = BufReader::new(conn);
    assert_eq!(next(&mut r), ToCoord::Hello { node: "cnX".into() });
    let c = Client::connect(&s, Duration::from_secs(10)).unwrap();
    c.declare_gang(5, "nls", 2).unwrap();
    assert_eq!(next(&mut r), ToCoord::Job { job: 5, nnodes: 2 });
    // A second declaration (another step) and a job without gang: nothing sent.
    c.declare_gang(5, "nls", 2).unwrap();
    c.declare(6, "nls", false).unwrap();
    c.end(5).unwrap();
    c.declare_gang(7, "nls", 4).unwrap();
    assert_eq!(next(&mut r), ToCoord::Job { job: 7, nnodes: 4 });
    // The coordinator goes away; the agent comes back within its 1 s retry and
    // reports its declared gang jobs again.
    drop(r);
    let (conn, _) = l.accept().unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut r = BufReader::new(conn);
    assert_eq!(next(&mut r), ToCoord::Hello { node: "cnX".into() });
    let mut jobs = vec![next(&mut r), next(&mut r)];
    jobs.sort_by_key(|m| format!("{m:?}"));
    assert_eq!(
        jobs,
        vec![
            ToCoord::Job { job: 5, nnodes: 2 },
            ToCoord::Job { job: 7, nnodes: 4 }
        ]
    );
    c.end(5).unwrap();
    assert_eq!(next(&mut r), ToCoord::JobEnd { job: 5 });
    drop(a);
    assert_restored(&run);
}
