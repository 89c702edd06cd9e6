//! A node policy's spin change reaches the rank: the agent hosts ICS (the
//! simulator's code) for a fake rank that spins in a wait, and the message
//! event of a fake sender makes the agent store ICS's conditional spin in the
//! rank's segment (`spin_until`), tagged with the wait it applies to. Root and
//! cgroups are needed: without them this test fails.

mod common;

use common::Proc;
use cosched_real::client::Client;
use cosched_real::proto::{skip, state, RankShm, SPIN_UNTIL_SHIFT};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;

/// A fake rank (see `common`) that prints the ACK's errno and the event mask
/// the agent wrote. Role `spin`: then runs a busy loop (so the process is
/// running, as a spinning rank is). Role `send`: then, for each line on stdin (a
/// CLOCK_MONOTONIC time stamp, 0 for now), tells the agent it sent a message to
/// rank 1 of the job at that time, and prints `sent`.
const FAKE_RANK: &str = r#"
print(ack[5], struct.unpack("<I", m[80:84])[0], flush=True)
if sys.argv[5] == "spin":
    end = time.monotonic() + 120
    while time.monotonic() < end:
        pass
else:
    for line in sys.stdin:
        t = int(line) or time.monotonic_ns()
        s.send(msg(MESSAGE, job, 1, t_ns=t, a=64))
        print("sent", flush=True)
"#;

struct Rank {
    proc: Proc,
    out: BufReader<ChildStdout>,
    input: ChildStdin,
    ack: i64,
    mask: u32,
}

fn fake_rank(run: &str, job: i32, rank: i32, socket: &Path, role: &str) -> Rank {
    let r = common::fake_rank(FAKE_RANK, run, job, rank, socket, &[role]);
    assert_eq!(r.said.len(), 2, "fake rank said {:?}", r.said);
    Rank {
        proc: r.proc,
        out: r.out,
        input: r.input,
        ack: r.said[0],
        mask: r.said[1] as u32,
    }
}

impl Rank {
    /// Sends a message event stamped `t_ns` (0: now) and waits until it is sent.
    fn send(&mut self, t_ns: u64) {
        let i = &mut self.input;
        writeln!(i, "{t_ns}").unwrap();
        i.flush().unwrap();
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "sent");
    }
}

/// A rank's segment, mapped by the test.
struct Seg {
    ptr: std::ptr::NonNull<std::ffi::c_void>,
}
impl Seg {
    fn open(path: &Path) -> Seg {
        use nix::sys::mman::{mmap, MapFlags, ProtFlags};
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        // SAFETY: a shared mapping of a 256-byte segment; RankShm is all atomics.
        let ptr = unsafe {
            mmap(
                None,
                std::num::NonZeroUsize::new(size_of::<RankShm>()).unwrap(),
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                &f,
                0,
            )
            .unwrap()
        };
        Seg { ptr }
    }
    fn get(&self) -> &RankShm {
        // SAFETY: mapped for the lifetime of self.
        unsafe { self.ptr.cast::<RankShm>().as_ref() }
    }
    /// The rank starts wait `id` now, in `st` (spinning or blocked); returns its start.
    /// A spinning rank is on a CPU throughout: its latest test is stamped in the
    /// future (a real shim stamps every test, `spin_seen_ns`).
    fn begin_wait(&self, id: u64, st: u32) -> u64 {
        let s = self.get();
        let t0 = mono_ns();
        s.wait_id.store(id, Ordering::SeqCst);
        s.wait_start_ns.store(t0, Ordering::SeqCst);
        if st == state::SPINNING {
            s.spin_seen_ns.store(u64::MAX, Ordering::SeqCst);
        }
        s.state.store(st, Ordering::SeqCst);
        t0
    }
}
impl Drop for Seg {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping.
        unsafe {
            let _ = nix::sys::mman::munmap(self.ptr, size_of::<RankShm>());
        }
    }
}

fn mono_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).unwrap();
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("cosched-test-{name}-{}", std::process::id()))
}

/// The agent with its stderr read by a thread that passes on its stats lines.
struct Agent {
    proc: Proc,
    stats: mpsc::Receiver<serde_json::Value>,
}

impl Drop for Agent {
    /// SIGTERM: the agent restores everything and exits (its state directory
    /// then holds nothing more and goes too).
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.proc.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.proc.0.wait();
        let _ = std::fs::remove_dir(tmp("state"));
    }
}

impl Agent {
    fn start(run: &str, socket: &Path) -> Agent {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cosched-agent"))
            .args(["serve", "--run", run, "--default-policy", "nls"])
            .arg("--state-dir")
            .arg(tmp("state"))
            .arg("--node")
            .arg(format!("0::{}", socket.display()))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = BufReader::new(c.stderr.take().unwrap());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in err.lines().map_while(Result::ok) {
                if let Some(j) = line.strip_prefix("cosched-agent: stats ") {
                    let _ = tx.send(serde_json::from_str(j).unwrap());
                }
            }
        });
        Agent {
            proc: Proc(c),
            stats: rx,
        }
    }

    /// The agent's counters once `pred` holds for them (asked again with
    /// SIGUSR1 until then, for up to 30 s); panics with the last ones otherwise.
    fn stats_once(&self, pred: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        let pid = nix::unistd::Pid::from_raw(self.proc.0.id() as i32);
        let mut last = serde_json::Value::Null;
        for _ in 0..300 {
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGUSR1).unwrap();
            if let Ok(v) = self.stats.recv_timeout(Duration::from_secs(10)) {
                if pred(&v) {
                    return v;
                }
                last = v;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the agent's counters never got there: {last}");
    }
}

#[test]
fn ics_spin_change_on_a_message_reaches_the_spinning_rank_s_segment() {
    let run = "t-ics";
    let socket = tmp("ics.sock");
    let agent = Agent::start(run, &socket);
    let c = Client::connect(&socket, Duration::from_secs(30)).unwrap();
    // Baseline spin 100 us, conditional spin 5 ms.
    c.declare(4, "ics[rtt_us=100,switch_us=0,cond_us=5000]", false)
        .unwrap();
    let spinner = fake_rank(run, 4, 1, &socket, "spin");
    assert_eq!(spinner.ack, 0, "ACK");
    // ICS asks for MESSAGE events: its rule is about a receiver that runs and
    // waits, so the events to one off a CPU or not waiting are not posted.
    assert_eq!(
        spinner.mask,
        1 << 8 | skip::OFF_CPU | skip::ON_CPU_BUSY,
        "ICS needs MESSAGE events only, to a running receiver in a wait"
    );
    let seg = Seg::open(Path::new(&format!("/dev/shm/cosched.{run}x.4.1")));
    let mut sender = fake_rank(run, 4, 0, &socket, "send");
    assert_eq!(sender.ack, 0);
    // Both registrations answered, so both counted.
    let st = agent.stats_once(|_| true);
    assert_eq!(st["registered"], 2, "{st}");

    // Wait 7 spins. A message sent before it began did not land during it: no
    // change. One sent during it extends the spin to 5 ms from when the agent
    // acts (ICS: max(cond, baseline - waited)).
    let start = seg.begin_wait(7, state::SPINNING);
    sender.send(start - 1);
    let before = mono_ns();
    sender.send(0);
    let s = seg.get();
    let mut word = 0;
    for _ in 0..3000 {
        word = s.spin_until.load(Ordering::SeqCst);
        if word != 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let after = mono_ns();
    assert_ne!(word, 0, "no spin change reached the segment");
    assert_eq!(word >> SPIN_UNTIL_SHIFT, 7, "tagged with wait 7");
    let end = start + (word & ((1 << SPIN_UNTIL_SHIFT) - 1));
    assert!(
        end >= before + 5_000_000 && end <= after + 5_000_000,
        "the spin ends {} ns after the wait's start, not 5 ms after the agent acted (between {} and {})",
        end - start,
        before + 5_000_000 - start,
        after + 5_000_000 - start
    );
    let st = agent.stats_once(|v| v["spin_changes"] == 1);
    assert_eq!(st["spins_refused"], 1, "the stale message's change: {st}");

    // Blocked in wait 8: the rank is asleep, so the agent takes it as not
    // running (its segment says so) and ICS asks for nothing: no change, no
    // refusal.
    seg.begin_wait(8, state::BLOCKED);
    let events = agent.stats_once(|_| true)["events"].as_u64().unwrap();
    sender.send(0);
    let st = agent.stats_once(|v| v["events"].as_u64() == Some(events + 1));
    assert_eq!(st["spin_changes"], 1, "{st}");
    assert_eq!(st["spins_refused"], 1, "{st}");
    assert_eq!(s.spin_until.load(Ordering::SeqCst), word);

    // Spinning in wait 9: the change is tagged with wait 9.
    seg.begin_wait(9, state::SPINNING);
    sender.send(0);
    agent.stats_once(|v| v["spin_changes"] == 2);
    assert_eq!(s.spin_until.load(Ordering::SeqCst) >> SPIN_UNTIL_SHIFT, 9);

    drop(sender.proc);
    drop(spinner.proc);
    c.end(4).unwrap();
}
