//! The launcher's side of the agent socket: declare jobs, switch gang slots,
//! adopt processes, each answered by an ACK.

use crate::proto::msg::{ADOPT as MSG_ADOPT, SLOT as MSG_SLOT};
use crate::proto::{msg, JobMsg, Msg, Packet};
use nix::sys::socket::{self as sock, AddressFamily, MsgFlags, SockFlag, SockType, UnixAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

/// A connection of a launcher to one node socket of the agent.
pub struct Client {
    fd: OwnedFd,
}

fn err(what: &str, e: impl std::fmt::Display) -> String {
    format!("node agent {what}: {e}")
}

impl Client {
    /// Connects to `socket`, retrying for up to `wait` while the agent starts.
    pub fn connect(socket: &Path, wait: Duration) -> Result<Client, String> {
        let addr = UnixAddr::new(socket).map_err(|e| err("socket path", e))?;
        let t0 = std::time::Instant::now();
        loop {
            let fd = sock::socket(
                AddressFamily::Unix,
                SockType::SeqPacket,
                SockFlag::SOCK_CLOEXEC,
                None,
            )
            .map_err(|e| err("socket", e))?;
            match sock::connect(fd.as_raw_fd(), &addr) {
                Ok(()) => {
                    let tv = nix::sys::time::TimeVal::new(10, 0);
                    let _ = sock::setsockopt(&fd, sock::sockopt::ReceiveTimeout, &tv);
                    return Ok(Client { fd });
                }
                Err(e) if t0.elapsed() >= wait => {
                    return Err(err(
                        &format!("cannot be reached at {}", socket.display()),
                        e,
                    ))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// Sends a request and waits (up to the socket's 10 s receive timeout) for
    /// its answer. A signal caught meanwhile (Ctrl-C in the embedding process,
    /// delivered to this thread) interrupts the calls with EINTR even with
    /// SA_RESTART, because the socket has a timeout: they are retried, and the
    /// interruption is seen by the caller's own check.
    fn ask(&self, bytes: &[u8]) -> Result<i32, String> {
        use nix::errno::Errno;
        loop {
            match sock::send(self.fd.as_raw_fd(), bytes, MsgFlags::MSG_NOSIGNAL) {
                Err(Errno::EINTR) => continue,
                r => break r.map_err(|e| err("send", e))?,
            };
        };
        let mut buf = [0u8; 64];
        let t0 = std::time::Instant::now();
        let n = loop {
            match sock::recv(self.fd.as_raw_fd(), &mut buf, MsgFlags::empty()) {
                Err(Errno::EINTR) if t0.elapsed() < Duration::from_secs(10) => continue,
                r => break r.map_err(|e| err("no answer", e))?,
            }
        };
        let m = Msg::from_bytes(&buf[..n]).ok_or_else(|| err("answer", "not an ACK"))?;
        if m.kind != msg::ACK {
            return Err(err("answer", format!("type {}", m.kind)));
        }
        Ok(m.arg)
    }

    fn ok(&self, bytes: &[u8], what: &str) -> Result<(), String> {
        match self.ask(bytes)? {
            0 => Ok(()),
            e => Err(err(what, nix::Error::from_raw(e))),
        }
    }

    /// Declares `job` with its node policy spec.
    pub fn declare(&self, job: i32, spec: &str, optional: bool) -> Result<(), String> {
        let flags = if optional {
            crate::proto::JOB_OPTIONAL
        } else {
            0
        };
        let m = JobMsg::new(msg::JOB, job, flags, spec).ok_or_else(|| err("spec", "too long"))?;
        self.ok(
            m.as_bytes(),
            &format!("refused job {job} with policy {spec:?}"),
        )
    }

    /// Declares `job` for gang scheduling across `nnodes` nodes (the agent
    /// reports it to its gang coordinator), as the SPANK plugin does.
    pub fn declare_gang(&self, job: i32, spec: &str, nnodes: u32) -> Result<(), String> {
        let mut m = JobMsg::new(msg::JOB, job, crate::proto::JOB_GANG, spec)
            .ok_or_else(|| err("spec", "too long"))?;
        m.nnodes = nnodes;
        self.ok(
            m.as_bytes(),
            &format!("refused gang job {job} with policy {spec:?}"),
        )
    }

    /// Ends `job`: the agent restores everything it changed for its ranks.
    pub fn end(&self, job: i32) -> Result<(), String> {
        let m = JobMsg::new(msg::JOB_END, job, 0, "").unwrap();
        self.ok(m.as_bytes(), &format!("job end {job}"))
    }

    /// Runs (`true`) or freezes `job` on every node of the agent; returns when done.
    pub fn slot(&self, job: i32, run: bool) -> Result<(), String> {
        let m = Msg::new(MSG_SLOT, job, 0, run as i32);
        self.ok(m.as_bytes(), &format!("slot switch of job {job}"))
    }

    /// Tells the agent that `count` MESSAGE events from another node arrived
    /// for `rank` of `job`, `uncounted` of them not in the rank's `arrivals`
    /// yet, the latest sent at `sent_ns` (this machine's CLOCK_MONOTONIC; 0:
    /// unknown) (not answered).
    pub fn forward(
        &self,
        job: i32,
        rank: i32,
        count: u32,
        uncounted: u32,
        sent_ns: u64,
    ) -> Result<(), String> {
        let m = Msg {
            b: uncounted as u64,
            t_ns: sent_ns,
            ..Msg::new(msg::FORWARD, job, rank, count.min(i32::MAX as u32) as i32)
        };
        loop {
            match sock::send(self.fd.as_raw_fd(), m.as_bytes(), MsgFlags::MSG_NOSIGNAL) {
                Err(nix::errno::Errno::EINTR) => continue,
                r => return r.map(|_| ()).map_err(|e| err("send", e)),
            }
        }
    }

    /// Puts process `pid` (started by the caller) under node `node` as rank `rank` of `job`.
    pub fn adopt(&self, pid: u32, job: i32, rank: i32, node: i32) -> Result<(), String> {
        let m = Msg {
            pid: pid as i32,
            ..Msg::new(MSG_ADOPT, job, rank, node)
        };
        self.ok(m.as_bytes(), &format!("adopt process {pid}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::pthread::{pthread_kill, pthread_self};
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

    extern "C" fn ignore(_: i32) {}

    /// A signal caught while the answer is awaited (SA_RESTART does not restart
    /// a receive with a timeout: EINTR) does not fail the request.
    #[test]
    fn a_signal_while_waiting_for_the_answer_is_not_an_error() {
        let (mine, agent) = sock::socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap();
        let tv = nix::sys::time::TimeVal::new(10, 0);
        sock::setsockopt(&mine, sock::sockopt::ReceiveTimeout, &tv).unwrap();
        let client = Client { fd: mine };
        let act = SigAction::new(
            SigHandler::Handler(ignore),
            SaFlags::SA_RESTART,
            SigSet::empty(),
        );
        // SAFETY: the handler does nothing.
        unsafe { sigaction(Signal::SIGUSR2, &act) }.unwrap();
        let me = pthread_self();
        let answer = std::thread::spawn(move || {
            let mut buf = [0u8; 256];
            sock::recv(agent.as_raw_fd(), &mut buf, MsgFlags::empty()).unwrap();
            // Interrupt the waiting client twice, then answer.
            for _ in 0..2 {
                std::thread::sleep(Duration::from_millis(50));
                pthread_kill(me, Signal::SIGUSR2).unwrap();
            }
            std::thread::sleep(Duration::from_millis(50));
            let ack = Msg::new(msg::ACK, 0, 0, 0);
            sock::send(agent.as_raw_fd(), ack.as_bytes(), MsgFlags::empty()).unwrap();
            agent
        });
        assert_eq!(client.slot(3, true), Ok(()));
        drop(answer.join().unwrap());
    }
}
