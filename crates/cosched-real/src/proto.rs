//! The agent/shim protocol of `real/include/cosched_proto.h`, mirrored in Rust.
//!
//! The header is the reference: every layout here is `#[repr(C)]` and a test
//! compares sizes and offsets with what a C compiler makes of the header. The
//! shared-memory segment's fields are atomics (the shim uses `__atomic_*` on them).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// 2: the segment's `spin_seen_ns` (a spinning rank stamps its tests) and the
/// MESSAGE event for a collective member's first message; 3: a collective's
/// messages posted as the simulator's algorithms send them (`coll_posted`).
pub const PROTO_VERSION: u32 = 3;
pub const SHM_MAGIC: u32 = 0x4d48_5343;
/// `spin_until` holds a wait's tag above this bit and the spin's end below it.
pub const SPIN_UNTIL_SHIFT: u32 = 40;
pub const WAIT_KINDS: usize = 4;
pub const SPEC_MAX: usize = 120;
/// `cosched_job_msg.flags`: run the job uncoscheduled if its spec cannot be hosted.
pub const JOB_OPTIONAL: u32 = 1;
/// `cosched_job_msg.flags`: the job takes part in gang scheduling across nodes.
pub const JOB_GANG: u32 = 2;
/// `cosched_job_msg.flags`: MESSAGE events to ranks on other nodes are forwarded.
pub const JOB_FORWARD: u32 = 4;

/// `enum cosched_wait_mode`.
pub mod mode {
    pub const SPIN: u32 = 0;
    pub const SPINBLOCK: u32 = 1;
    pub const BLOCK: u32 = 2;
    pub const LIBRARY: u32 = 3;
    pub const YIELD: u32 = 4;
}

/// The `event_mask` bits that name the MESSAGE events a node policy does
/// nothing with, by the destination's state; the sender's shim does not post
/// them (`COSCHED_SKIP_*` of the header, which says how the shim tells the state).
pub mod skip {
    /// No MESSAGE for a destination off a CPU.
    pub const OFF_CPU: u32 = 1 << 24;
    /// No MESSAGE for a destination on a CPU and in a wait.
    pub const ON_CPU_WAITING: u32 = 1 << 25;
    /// No MESSAGE for a destination on a CPU and not in a wait.
    pub const ON_CPU_BUSY: u32 = 1 << 26;
    /// Every bit with its header name (`COSCHED_SKIP_<name>`), for the layout test.
    pub const ALL: [(&str, u32); 3] = [
        ("OFF_CPU", OFF_CPU),
        ("ON_CPU_WAITING", ON_CPU_WAITING),
        ("ON_CPU_BUSY", ON_CPU_BUSY),
    ];
}

/// A spinning rank whose latest test of its wait (`spin_seen_ns`) is older
/// than this is taken as waiting for a CPU, not on one
/// (`COSCHED_ON_CPU_FRESH_NS`; a spin loop's test takes a few microseconds).
pub const ON_CPU_FRESH_NS: u64 = 100_000;

/// `enum cosched_rank_state`.
pub mod state {
    pub const COMPUTING: u32 = 0;
    pub const SPINNING: u32 = 1;
    pub const BLOCKED: u32 = 2;
    pub const FINISHED: u32 = 3;
}

/// `enum cosched_msg_type`.
pub mod msg {
    pub const REGISTER: u32 = 1;
    pub const ACK: u32 = 2;
    pub const UNREGISTER: u32 = 3;
    pub const WAIT_BEGIN: u32 = 4;
    pub const WAIT_END: u32 = 5;
    pub const COLL_ENTER: u32 = 6;
    pub const COLL_EXIT: u32 = 7;
    pub const MESSAGE: u32 = 8;
    pub const JOB: u32 = 9;
    pub const JOB_END: u32 = 10;
    /// Launcher-only (never an event bit): a gang slot switch, `arg` 1 run / 0 freeze.
    pub const SLOT: u32 = 64;
    /// Launcher-only: take a descendant of the sender under node `arg`'s mechanisms.
    pub const ADOPT: u32 = 65;
    /// Launcher-only: `arg` messages arrived from another node for `rank` of
    /// `job`; `b` of them are not in the receiver's `arrivals` yet.
    pub const FORWARD: u32 = 66;
    /// Every type with its header name (`COSCHED_MSG_<name>`), for the layout test.
    pub const ALL: [(&str, u32); 13] = [
        ("REGISTER", REGISTER),
        ("ACK", ACK),
        ("UNREGISTER", UNREGISTER),
        ("WAIT_BEGIN", WAIT_BEGIN),
        ("WAIT_END", WAIT_END),
        ("COLL_ENTER", COLL_ENTER),
        ("COLL_EXIT", COLL_EXIT),
        ("MESSAGE", MESSAGE),
        ("JOB", JOB),
        ("JOB_END", JOB_END),
        ("SLOT", SLOT),
        ("ADOPT", ADOPT),
        ("FORWARD", FORWARD),
    ];
}

/// `struct cosched_msg`: one socket packet.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Msg {
    pub kind: u32,
    pub version: u32,
    pub job: i32,
    pub rank: i32,
    pub pid: i32,
    pub arg: i32,
    pub t_ns: u64,
    pub a: u64,
    pub b: u64,
}

/// `struct cosched_job_msg`: a launcher declares a job's node policy.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobMsg {
    pub kind: u32,
    pub version: u32,
    pub job: i32,
    pub flags: u32,
    pub spec: [u8; SPEC_MAX],
    /// With [`JOB_GANG`]: nodes of the job step.
    pub nnodes: u32,
}

/// `struct cosched_rank_shm`: one rank's shared-memory segment.
#[repr(C)]
pub struct RankShm {
    pub magic: AtomicU32,
    pub version: AtomicU32,
    pub job: AtomicU32,
    pub rank: AtomicU32,
    pub size: AtomicU32,
    pub pid: AtomicU32,
    pub wait_mode: [AtomicU32; WAIT_KINDS],
    pub spin_ns: [AtomicU64; WAIT_KINDS],
    /// A spin change of the current wait ([`RankShm::set_spin_end`]).
    pub spin_until: AtomicU64,
    pub event_mask: AtomicU32,
    pub agent_gen: AtomicU32,
    pub wake_seq: AtomicU32,
    pub state: AtomicU32,
    pub wait_kind: AtomicU32,
    pub coll_depth: AtomicU32,
    pub wait_start_ns: AtomicU64,
    pub arrivals: AtomicU64,
    pub consumed: AtomicU64,
    pub msgs_sent: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub msgs_recv: AtomicU64,
    pub bytes_recv: AtomicU64,
    pub waits: AtomicU64,
    pub wait_ns: AtomicU64,
    pub spin_ns_total: AtomicU64,
    pub block_ns: AtomicU64,
    pub blocks: AtomicU64,
    pub collectives: AtomicU64,
    /// Number of the current (or last) wait, from 1 (written by the shim).
    pub wait_id: AtomicU64,
    /// Waits whose spin a `spin_until` of the agent changed.
    pub spin_changes: AtomicU64,
    /// Time spun in those waits, ns.
    pub changed_spin_ns: AtomicU64,
    /// CLOCK_MONOTONIC time of the latest test of a spinning wait.
    pub spin_seen_ns: AtomicU64,
    /// The collective's messages this rank sends that a member has posted as
    /// MESSAGE events (written by the shims only; `real/include/cosched_proto.h`).
    pub coll_posted: [AtomicU64; 2],
}

/// Byte view of a plain `#[repr(C)]` packet.
pub trait Packet: Copy + Sized {
    fn as_bytes(&self) -> &[u8] {
        // SAFETY: the packets are repr(C) structs of integers without padding.
        unsafe { std::slice::from_raw_parts(self as *const Self as *const u8, size_of::<Self>()) }
    }
    /// Reads one from a packet of exactly its size.
    fn from_bytes(b: &[u8]) -> Option<Self> {
        if b.len() != size_of::<Self>() {
            return None;
        }
        // SAFETY: every bit pattern is valid for these integer structs; read_unaligned
        // copes with the buffer's alignment.
        Some(unsafe { std::ptr::read_unaligned(b.as_ptr() as *const Self) })
    }
}
impl Packet for Msg {}
impl Packet for JobMsg {}

impl Msg {
    pub fn new(kind: u32, job: i32, rank: i32, arg: i32) -> Msg {
        Msg {
            kind,
            version: PROTO_VERSION,
            job,
            rank,
            pid: std::process::id() as i32,
            arg,
            ..Msg::default()
        }
    }
}

impl JobMsg {
    /// A JOB (or JOB_END) declaration; `None` when the spec does not fit.
    pub fn new(kind: u32, job: i32, flags: u32, spec: &str) -> Option<JobMsg> {
        if spec.len() >= SPEC_MAX || spec.as_bytes().contains(&0) {
            return None;
        }
        let mut s = [0u8; SPEC_MAX];
        s[..spec.len()].copy_from_slice(spec.as_bytes());
        Some(JobMsg {
            kind,
            version: PROTO_VERSION,
            job,
            flags,
            spec: s,
            nnodes: 0,
        })
    }
    /// The spec up to its NUL.
    pub fn spec_str(&self) -> Result<&str, std::str::Utf8Error> {
        let end = self.spec.iter().position(|&c| c == 0).unwrap_or(SPEC_MAX);
        std::str::from_utf8(&self.spec[..end])
    }
}

/// A wait the rank is in now, as the shim published it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CurrentWait {
    /// Its `wait_id`.
    pub id: u64,
    /// Its `wait_start_ns` (CLOCK_MONOTONIC).
    pub start_ns: u64,
    /// Whether it spins (else it is blocked).
    pub spinning: bool,
}

/// The `spin_until` word that ends the spin of wait `id`, which started at
/// `start_ns`, at `end_ns` (CLOCK_MONOTONIC): the wait's tag and the end in ns
/// from its start (at least 1 ns, at most 2^40 - 1 ns).
pub fn spin_until_word(id: u64, start_ns: u64, end_ns: u64) -> u64 {
    let mask = (1u64 << SPIN_UNTIL_SHIFT) - 1;
    let tag = id & ((1u64 << (64 - SPIN_UNTIL_SHIFT)) - 1);
    let end = end_ns.saturating_sub(start_ns).clamp(1, mask);
    tag << SPIN_UNTIL_SHIFT | end
}

impl RankShm {
    /// Messages that arrived and are not consumed yet.
    pub fn unconsumed(&self) -> u64 {
        let a = self.arrivals.load(Ordering::Acquire);
        a.saturating_sub(self.consumed.load(Ordering::Acquire))
    }

    /// The wait the rank is in (spinning or blocked), read consistently: the
    /// `wait_id` loaded before and after `state` and `wait_start_ns` agree, so
    /// the start is that wait's (the shim stores `wait_id`, `wait_start_ns`,
    /// then `state`).
    pub fn current_wait(&self) -> Option<CurrentWait> {
        let id = self.wait_id.load(Ordering::SeqCst);
        let st = self.state.load(Ordering::SeqCst);
        let start_ns = self.wait_start_ns.load(Ordering::SeqCst);
        if self.wait_id.load(Ordering::SeqCst) != id || id == 0 {
            return None;
        }
        match st {
            state::SPINNING => Some(CurrentWait {
                id,
                start_ns,
                spinning: true,
            }),
            state::BLOCKED => Some(CurrentWait {
                id,
                start_ns,
                spinning: false,
            }),
            _ => None,
        }
    }

    /// The start (CLOCK_MONOTONIC) of the rank's current wait, or of its last
    /// one when it is not waiting; `None` before its first wait or when the
    /// shim was storing a new wait meanwhile (`wait_id` loaded before and
    /// after `wait_start_ns` differ). Read between the shim's stores of a new
    /// wait's `wait_id` and `wait_start_ns`, it is the previous wait's start
    /// (earlier, never later).
    /// Whether the rank is on a CPU as far as its segment tells: `Some(true)`
    /// when it spins in a wait and tested it within `fresh_ns` of `now_ns`
    /// (CLOCK_MONOTONIC), `Some(false)` when it spins but has not tested for
    /// longer (it waits for a CPU: /proc shows such a task running, `R`, too)
    /// or is blocked; `None` when it computes (the segment cannot tell).
    pub fn on_cpu(&self, now_ns: u64, fresh_ns: u64) -> Option<bool> {
        match self.state.load(Ordering::SeqCst) {
            state::SPINNING => {
                let seen = self.spin_seen_ns.load(Ordering::SeqCst);
                Some(now_ns.saturating_sub(seen) <= fresh_ns)
            }
            state::BLOCKED => Some(false),
            _ => None,
        }
    }

    /// Whether the rank spins in a wait now.
    pub fn is_spinning(&self) -> bool {
        self.state.load(Ordering::SeqCst) == state::SPINNING
    }

    /// Whether the rank, spinning in a wait at `t_ns` (CLOCK_MONOTONIC), has
    /// run since: it tested a spinning wait after `t_ns`, or it is no longer
    /// spinning (leaving a spin loop takes a CPU).
    pub fn spun_since(&self, t_ns: u64) -> bool {
        !self.is_spinning() || self.spin_seen_ns.load(Ordering::SeqCst) > t_ns
    }

    pub fn last_wait_start(&self) -> Option<u64> {
        let id = self.wait_id.load(Ordering::SeqCst);
        let start_ns = self.wait_start_ns.load(Ordering::SeqCst);
        (id != 0 && self.wait_id.load(Ordering::SeqCst) == id).then_some(start_ns)
    }

    /// Ends the spin of wait `w` at `end_ns` (CLOCK_MONOTONIC): earlier than
    /// its wait mode's spin cuts it, later extends it. The shim ignores the
    /// word once that wait is over.
    pub fn set_spin_end(&self, w: CurrentWait, end_ns: u64) {
        self.spin_until
            .store(spin_until_word(w.id, w.start_ns, end_ns), Ordering::SeqCst);
    }
}

/// (field, offset, size) of every field of the three layouts, in the header's
/// order, for the layout test and `cosched-agent --layout`.
pub fn layout() -> Vec<(&'static str, usize, usize)> {
    use std::mem::{offset_of, size_of_val};
    let m = Msg::default();
    let j = JobMsg::new(msg::JOB, 0, 0, "").unwrap();
    // SAFETY: an all-zero RankShm is valid (atomics of zero).
    let r: RankShm = unsafe { std::mem::zeroed() };
    macro_rules! f {
        ($v:ident, $t:ty, $c:literal, $f:ident) => {
            ($c, offset_of!($t, $f), size_of_val(&$v.$f))
        };
    }
    vec![
        ("cosched_msg", 0, size_of::<Msg>()),
        f!(m, Msg, "type", kind),
        f!(m, Msg, "version", version),
        f!(m, Msg, "job", job),
        f!(m, Msg, "rank", rank),
        f!(m, Msg, "pid", pid),
        f!(m, Msg, "arg", arg),
        f!(m, Msg, "t_ns", t_ns),
        f!(m, Msg, "a", a),
        f!(m, Msg, "b", b),
        ("cosched_job_msg", 0, size_of::<JobMsg>()),
        f!(j, JobMsg, "type", kind),
        f!(j, JobMsg, "version", version),
        f!(j, JobMsg, "job", job),
        f!(j, JobMsg, "flags", flags),
        f!(j, JobMsg, "spec", spec),
        f!(j, JobMsg, "nnodes", nnodes),
        ("cosched_rank_shm", 0, size_of::<RankShm>()),
        f!(r, RankShm, "magic", magic),
        f!(r, RankShm, "version", version),
        f!(r, RankShm, "job", job),
        f!(r, RankShm, "rank", rank),
        f!(r, RankShm, "size", size),
        f!(r, RankShm, "pid", pid),
        f!(r, RankShm, "wait_mode", wait_mode),
        f!(r, RankShm, "spin_ns", spin_ns),
        f!(r, RankShm, "spin_until", spin_until),
        f!(r, RankShm, "event_mask", event_mask),
        f!(r, RankShm, "agent_gen", agent_gen),
        f!(r, RankShm, "wake_seq", wake_seq),
        f!(r, RankShm, "state", state),
        f!(r, RankShm, "wait_kind", wait_kind),
        f!(r, RankShm, "coll_depth", coll_depth),
        f!(r, RankShm, "wait_start_ns", wait_start_ns),
        f!(r, RankShm, "arrivals", arrivals),
        f!(r, RankShm, "consumed", consumed),
        f!(r, RankShm, "msgs_sent", msgs_sent),
        f!(r, RankShm, "bytes_sent", bytes_sent),
        f!(r, RankShm, "msgs_recv", msgs_recv),
        f!(r, RankShm, "bytes_recv", bytes_recv),
        f!(r, RankShm, "waits", waits),
        f!(r, RankShm, "wait_ns", wait_ns),
        f!(r, RankShm, "spin_ns_total", spin_ns_total),
        f!(r, RankShm, "block_ns", block_ns),
        f!(r, RankShm, "blocks", blocks),
        f!(r, RankShm, "collectives", collectives),
        f!(r, RankShm, "wait_id", wait_id),
        f!(r, RankShm, "spin_changes", spin_changes),
        f!(r, RankShm, "changed_spin_ns", changed_spin_ns),
        f!(r, RankShm, "spin_seen_ns", spin_seen_ns),
        f!(r, RankShm, "coll_posted", coll_posted),
    ]
}

/// The layout as text, one `struct.field offset size` line each (a struct's own
/// line is `struct size`).
pub fn layout_text() -> String {
    let mut out = String::new();
    let mut cur = "";
    for (name, off, size) in layout() {
        if name.starts_with("cosched_") {
            cur = name;
            out += &format!("{name} {size}\n");
        } else {
            out += &format!("{cur}.{name} {off} {size}\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_the_header_comments() {
        assert_eq!(size_of::<Msg>(), 48);
        assert_eq!(size_of::<JobMsg>(), 140);
        assert_eq!(size_of::<RankShm>(), 256);
    }

    #[test]
    fn a_spin_end_is_tagged_with_its_wait_and_counted_from_its_start() {
        // Wait 3 started at 1,000 ns; its spin ends at 31,000 ns: 30,000 ns after.
        assert_eq!(spin_until_word(3, 1_000, 31_000), 3 << 40 | 30_000);
        // The tag is the wait number's low 24 bits.
        assert_eq!(spin_until_word((1 << 24) + 5, 0, 7) >> SPIN_UNTIL_SHIFT, 5);
        // An end at or before the start still ends the spin (1 ns, never the
        // empty word 0); an end beyond 2^40 - 1 ns is clamped.
        assert_eq!(spin_until_word(1, 500, 400), 1 << 40 | 1);
        assert_eq!(spin_until_word(1, 0, u64::MAX), 1 << 40 | ((1 << 40) - 1));
        // SAFETY: an all-zero RankShm is valid (atomics of zero).
        let r: RankShm = unsafe { std::mem::zeroed() };
        assert_eq!(r.current_wait(), None, "no wait yet");
        assert_eq!(r.last_wait_start(), None, "no wait yet");
        r.wait_id.store(4, Ordering::SeqCst);
        r.wait_start_ns.store(9_000, Ordering::SeqCst);
        r.state.store(state::SPINNING, Ordering::SeqCst);
        let w = r.current_wait().unwrap();
        assert_eq!((w.id, w.start_ns, w.spinning), (4, 9_000, true));
        r.set_spin_end(w, 10_000);
        assert_eq!(r.spin_until.load(Ordering::SeqCst), 4 << 40 | 1_000);
        r.state.store(state::BLOCKED, Ordering::SeqCst);
        assert!(!r.current_wait().unwrap().spinning);
        r.state.store(state::COMPUTING, Ordering::SeqCst);
        assert_eq!(r.current_wait(), None, "not waiting");
        // The last wait's start stays readable after it ended.
        assert_eq!(r.last_wait_start(), Some(9_000));
    }

    #[test]
    fn a_spinning_rank_is_on_a_cpu_only_while_it_tests_its_wait() {
        // SAFETY: an all-zero RankShm is valid (atomics of zero).
        let r: RankShm = unsafe { std::mem::zeroed() };
        assert_eq!(
            r.on_cpu(1_000_000, 100_000),
            None,
            "computing: the segment cannot tell"
        );
        r.state.store(state::SPINNING, Ordering::SeqCst);
        r.spin_seen_ns.store(950_000, Ordering::SeqCst);
        // Tested 50 us ago: on a CPU; 100 us ago: still; 100 us + 1 ns ago: waiting for one.
        assert_eq!(r.on_cpu(1_000_000, 100_000), Some(true));
        assert_eq!(r.on_cpu(1_050_000, 100_000), Some(true));
        assert_eq!(r.on_cpu(1_050_001, 100_000), Some(false));
        // A test stamped after the agent's clock read counts as now.
        assert_eq!(r.on_cpu(900_000, 100_000), Some(true));
        // Spinning at 1 ms, last test at 0.95 ms: it has not run since; a test at
        // 1 ms + 1 ns, or leaving the spin, says it has.
        assert!(!r.spun_since(1_000_000));
        r.spin_seen_ns.store(1_000_001, Ordering::SeqCst);
        assert!(r.spun_since(1_000_000));
        r.spin_seen_ns.store(950_000, Ordering::SeqCst);
        r.state.store(state::BLOCKED, Ordering::SeqCst);
        assert!(r.spun_since(1_000_000), "it left the spin");
        assert_eq!(r.on_cpu(950_000, 100_000), Some(false), "blocked: asleep");
    }

    #[test]
    fn packets_round_trip_and_reject_wrong_lengths() {
        let m = Msg {
            t_ns: 7,
            a: 1,
            b: 2,
            ..Msg::new(msg::WAIT_END, 3, 1, 2)
        };
        assert_eq!(Msg::from_bytes(m.as_bytes()), Some(m));
        assert_eq!(Msg::from_bytes(&m.as_bytes()[..40]), None);
        let j = JobMsg::new(msg::JOB, 4, JOB_OPTIONAL, "sb[spin_us=300]").unwrap();
        assert_eq!(
            JobMsg::from_bytes(j.as_bytes())
                .unwrap()
                .spec_str()
                .unwrap(),
            "sb[spin_us=300]"
        );
        assert!(JobMsg::new(msg::JOB, 4, 0, &"x".repeat(SPEC_MAX)).is_none());
    }
}
