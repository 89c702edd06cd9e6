//! What the agent's integration tests share: a child process that is ended
//! when dropped, and a fake rank in Python that speaks the shim's side of the
//! protocol (its segment, REGISTER, the ACK), written once from the
//! protocol's constants so that a change of the protocol is made here only.

#![allow(dead_code)] // each test file uses its part

use cosched_real::proto::{msg, RankShm, PROTO_VERSION, SHM_MAGIC};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// A child process, killed and reaped when dropped.
pub struct Proc(pub Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The start of every fake rank (argv: run, job, rank, the agent's socket, then
/// the caller's own): creates the rank's segment under another run's name
/// (`<run>x`: the agent finds it by job, rank and pid), fills its header (2
/// ranks), connects, registers and reads the ACK. It leaves to the caller's
/// part `run, job, rank, path`, `m` (the segment), `s` (the socket), `ack` (the
/// ACK's fields), `msg(kind, job, rank, arg, t_ns, a, b)` (a `struct
/// cosched_msg` from this process) and the kind `MESSAGE`.
fn head() -> String {
    format!(
        r#"
import mmap, os, socket, struct, sys, time
MSG = "<IIiiiiQQQ"  # struct cosched_msg
MESSAGE = {message}
def msg(kind, job, rank, arg=0, t_ns=0, a=0, b=0):
    return struct.pack(MSG, kind, {version}, job, rank, os.getpid(), arg, t_ns, a, b)
run, job, rank, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
fd = os.open(f"/dev/shm/cosched.{{run}}x.{{job}}.{{rank}}", os.O_CREAT | os.O_RDWR, 0o600)
os.ftruncate(fd, {size})
m = mmap.mmap(fd, {size})
m[0:24] = struct.pack("<IIiiii", {magic}, {version}, job, rank, 2, os.getpid())
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(path)
s.send(msg({register}, job, rank, arg=2))
ack = struct.unpack(MSG, s.recv(64))
"#,
        message = msg::MESSAGE,
        version = PROTO_VERSION,
        size = size_of::<RankShm>(),
        magic = SHM_MAGIC,
        register = msg::REGISTER,
    )
}

/// A running fake rank and what it printed first (whitespace-separated integers).
pub struct FakeRank {
    pub proc: Proc,
    pub out: BufReader<ChildStdout>,
    pub input: ChildStdin,
    pub said: Vec<i64>,
}

/// Starts a fake rank that runs [`head`] then `tail` (Python, which prints one
/// line of integers first) with `args` after the socket, and reads that line.
pub fn fake_rank(
    tail: &str,
    run: &str,
    job: i32,
    rank: i32,
    socket: &Path,
    args: &[&str],
) -> FakeRank {
    let mut c = Command::new("python3")
        .args([
            "-c",
            &(head() + tail),
            run,
            &job.to_string(),
            &rank.to_string(),
        ])
        .arg(socket)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(c.stdout.take().unwrap());
    let input = c.stdin.take().unwrap();
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let said = line
        .split_whitespace()
        .map(|x| {
            x.parse()
                .unwrap_or_else(|_| panic!("fake rank said {line:?}"))
        })
        .collect();
    FakeRank {
        proc: Proc(c),
        out,
        input,
        said,
    }
}
