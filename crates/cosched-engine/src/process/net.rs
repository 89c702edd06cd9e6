//! Messaging of the process-level engine: the MPI protocols (eager and
//! rendezvous) over the user-level NICs.
//!
//! - **Eager** (a message shorter than the platform's `eager_limit_bytes`, or
//!   every message when it has none): the send completes once the message is
//!   copied out (the sender pays its CPU cost only, MPICH-GM's short protocol);
//!   the sender node's NIC then transmits it and it lands in GM's receive queue
//!   at the receiver whether or not the receiver runs. Each copy costs the
//!   platform's `eager_copy_ns` per byte: one at the sender (MPICH-GM's `memcpy`
//!   into a GM send buffer), charged with the send overhead, and one or two at the
//!   receiver, charged with the receive overhead when the receive consumes the
//!   message ([`Landed`]).
//! - **Unexpected eager messages** (MPICH-GM 1.2.4..8's ch_gm as shipped with
//!   MPICH 1.2.5, `mpid/ch_gm/gmpi_chshort.c`, and MPICH's ADI, `mpid/ch2/adi2recv.c`):
//!   the receiver handles GM's receive queue only when it polls, inside an MPI
//!   call: a send polls after copying out (`MPID_DRAIN_INCOMING` in
//!   `MPID_CH_Eagerb_send_short`), a blocking receive or a wait polls after posting
//!   its receive (`MPID_RecvContig` posts through `MPID_IrecvContig`, which only
//!   searches the unexpected queue, then polls in `MPID_RecvComplete` until its
//!   receive completes), a non-blocking receive does not poll, and a process waiting
//!   in MPI polls each message as it lands. A polled message that matches a posted
//!   receive is copied once, into the user's buffer (`MPID_CH_Eagerb_recv_short`);
//!   one that matches none is copied into a `malloc`'d buffer
//!   (`MPID_CH_Eagerb_save_short`) and copied again into the user's buffer when its
//!   receive is posted (`MPID_CH_Eagerb_unxrecv_start_short`), unless the process
//!   already holds `GMPI_MAX_UNEXPECTED_QUEUE_SIZE` (100,000,000, `gmpi.h`) bytes of
//!   saved messages: then it stays in GM's buffer and is copied once. The engine
//!   charges both receiver copies with the receive that consumes the message (MPICH-GM
//!   does the first one at the poll, earlier in the same or an earlier MPI call).
//! - **Rendezvous** (at least `eager_limit_bytes`): the sender's request-to-send
//!   (a control message, `latency` on the wire) waits at the receiver until the
//!   receiver answers it, which it does only while it executes an MPI wait
//!   (a receive, a blocking send's or a `Wait`'s completion) and holds a CPU, with
//!   a receive posted that matches (its current `Recv` or a posted `Irecv`). A
//!   blocked receiver is woken by the request's interrupt; it answers when it next
//!   runs. The clear-to-send crosses back in `latency`; then the sender's NIC
//!   transmits the data (without the sender's CPU: GM's directed send) and the
//!   send completes (for a blocking `Send`, a non-blocking one's `Wait`) one
//!   `latency` after the data arrived (GM's send callback).
//! - **NICs and packets**: each node's link is full duplex at the platform's
//!   `bandwidth_mb_s` per direction (choi2004: Myrinet 2000 under GM, assumption
//!   G-NET-1 of docs/models/seed-parameters.md). GM cuts every message into packets
//!   of at most [`PACKET_BYTES`] (`GM_MTU` = 4096 in GM's `gm_types.h`); a packet
//!   crosses the network cut-through, its head `latency` after it left, and needs the
//!   sender's outgoing link and the receiver's incoming link at once for its length.
//!   Each link is booked in time ([`Links`]): a message's packets, in order, take
//!   the earliest stretches from its start on in which both of its links are free,
//!   and the message is in the receiver's buffer when its last packet is. Messages
//!   are booked in order of the engine's requests (an earlier request keeps what it
//!   booked). So messages reaching one node together (many-to-one, an all-to-all's
//!   incast) are taken in one after the other, while their senders' links stay free
//!   for packets to other nodes meanwhile: a message waiting for a busy receiver
//!   does not hold its sender's link. Myrinet switches route cut-through with
//!   link-level flow control (Boden et al., "Myrinet: a gigabit-per-second local
//!   area network", IEEE Micro 1995, seed 000's reference [9]): a blocked packet
//!   holds its path back to the sender for at most the packets ahead of it at the
//!   receiving port, a packet time each, which the booking leaves out (the
//!   receiver's link is the bottleneck then and is counted in full), and the
//!   switch serves the packets waiting for one port round robin, where the
//!   booking takes whole messages in request order. A packet-level model with
//!   both was measured and is not used: docs/models/myrinet-packets.md (IS's
//!   communication at 16 processes 1.5x to 3.6x longer, depending on an
//!   unsourced rule of the sending NIC). A stretch shorter than one packet is not
//!   used except by a message's last, shorter packet.
//!
//! Each receive slot (the current `Recv`, each posted `Irecv`) answers at most one
//! request at a time: a slot already matched by a buffered message or by a
//! transfer in progress answers none.

use super::{Cond, Ev, PState, Pid, Sim};
use cosched_contract::node::EnqueueReason;
use cosched_des::SimTime;
use cosched_model::program::Rank;

/// A rendezvous whose request has been sent and not answered yet.
#[derive(Clone, Copy, Debug)]
pub(super) struct Rndv {
    pub sender: Pid,
    pub dest: Pid,
    /// The sender's rank and the tag: what the receiver matches.
    pub from: Rank,
    pub tag: u32,
    pub bytes: u64,
    /// A blocking `Send` (completion as an acknowledgement) or an `Isend`.
    pub blocking: bool,
}

/// Where the MPI library holds an arrived message, hence how many times the
/// receiver copies an eager one (module doc: MPICH-GM's ch_gm).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Landed {
    /// In GM's receive queue: the receiver has not polled since it landed.
    Queued,
    /// Polled into a posted receive (or kept in GM's buffer past the unexpected
    /// queue's limit): copied once.
    Once,
    /// Polled with no receive posted for it: copied into an unexpected buffer,
    /// then into the user's buffer.
    Twice,
}

/// MPICH-GM copies no more unexpected messages out of GM's buffers once this many
/// bytes are saved (`GMPI_MAX_UNEXPECTED_QUEUE_SIZE`, ch_gm `gmpi.h`).
pub(super) const UNEXPECTED_SAVE_LIMIT: u64 = 100_000_000;

/// GM's packet size, bytes (`GM_MTU`, GM 1.x/2.x `gm_types.h`: `#define GM_MTU 4096`).
pub(super) const PACKET_BYTES: u64 = 4096;

/// Busy intervals `[start, end)` of one direction of one node's link, sorted by
/// start, disjoint and not touching (touching ones are merged); intervals that
/// ended before the current time are forgotten.
#[derive(Clone, Default)]
struct Busy(Vec<(SimTime, SimTime)>);

impl Busy {
    fn forget(&mut self, now: SimTime) {
        let k = self.0.partition_point(|&(_, e)| e <= now);
        self.0.drain(..k);
    }

    /// The first instant at or after `t` not inside an interval (shifted by
    /// `shift`), and the start of the next interval after it (`None`: free for ever).
    fn free_from(&self, t: SimTime, shift: SimTime) -> (SimTime, Option<SimTime>) {
        let mut t = t;
        let k = self.0.partition_point(|&(_, e)| e + shift <= t);
        for &(s, e) in &self.0[k..] {
            if s + shift > t {
                return (t, Some(s + shift));
            }
            t = t.max(e + shift);
        }
        (t, None)
    }

    /// Marks `[s, e)` busy; it overlaps no interval.
    fn add(&mut self, s: SimTime, e: SimTime) {
        let k = self.0.partition_point(|&(_, x)| x < s);
        let joins_left = k < self.0.len() && self.0[k].1 == s;
        let right = if joins_left { k + 1 } else { k };
        let joins_right = right < self.0.len() && self.0[right].0 == e;
        match (joins_left, joins_right) {
            (true, true) => {
                self.0[k].1 = self.0[right].1;
                self.0.remove(right);
            }
            (true, false) => self.0[k].1 = e,
            (false, true) => self.0[right].0 = s,
            (false, false) => self.0.insert(k, (s, e)),
        }
    }
}

/// Each node's link, both directions, booked packet by packet (module doc).
pub(super) struct Links {
    out: Vec<Busy>,
    inp: Vec<Busy>,
}

impl Links {
    pub fn new(nodes: usize) -> Self {
        Links {
            out: vec![Busy::default(); nodes],
            inp: vec![Busy::default(); nodes],
        }
    }

    /// Books a message of length `len` (of which a packet takes `packet`) from
    /// `from`'s outgoing link to `to`'s incoming link, whose head takes `lat` to
    /// cross, starting at or after `earliest` (>= `now`); returns when its last
    /// byte is taken in. An empty message takes no link time.
    fn book(
        &mut self,
        (from, to): (usize, usize),
        earliest: SimTime,
        (len, packet, lat): (SimTime, SimTime, SimTime),
        now: SimTime,
    ) -> SimTime {
        if len <= SimTime::ZERO {
            return earliest + lat;
        }
        self.out[from].forget(now);
        self.inp[to].forget(now);
        // The incoming link's intervals, moved back by `lat`, in the sender's time.
        let back = SimTime(-lat.0);
        let (mut t, mut left, mut pieces) = (earliest, len, Vec::new());
        loop {
            // The next stretch [t, end) in which both links are free.
            let (a, a_next) = self.out[from].free_from(t, SimTime::ZERO);
            let (b, b_next) = self.inp[to].free_from(a, back);
            if b > a {
                t = b;
                continue;
            }
            t = a;
            let end = match (a_next, b_next) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, y) => x.or(y),
            };
            let room = end.map_or(left, |e| e - t);
            let take = if room >= left {
                left
            } else {
                // Whole packets only, unless the rest fits.
                SimTime(room.0 / packet.0.max(1) * packet.0.max(1))
            };
            if take > SimTime::ZERO {
                pieces.push((t, t + take));
                left = left - take;
            }
            if left <= SimTime::ZERO {
                break;
            }
            t = end.expect("a bounded stretch when bytes are left");
        }
        for &(s, e) in &pieces {
            self.out[from].add(s, e);
            self.inp[to].add(s + lat, e + lat);
        }
        pieces.last().expect("a non-empty message").1 + lat
    }
}

/// The rendezvous in progress, by id (a slab with a free list).
#[derive(Default)]
pub(super) struct Rndvs {
    slots: Vec<Rndv>,
    free: Vec<u32>,
}

impl Rndvs {
    fn insert(&mut self, r: Rndv) -> u32 {
        match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = r;
                id
            }
            None => {
                self.slots.push(r);
                (self.slots.len() - 1) as u32
            }
        }
    }
    pub fn get(&self, id: u32) -> Rndv {
        self.slots[id as usize]
    }
    fn remove(&mut self, id: u32) -> Rndv {
        self.free.push(id);
        self.slots[id as usize]
    }
}

impl Sim<'_> {
    /// The message leaves: eagerly through the sender node's NIC, or as a
    /// rendezvous request (module doc).
    pub(super) fn depart(
        &mut self,
        pid: Pid,
        to: Rank,
        bytes: u64,
        tag: u32,
        blocking: bool,
        now: SimTime,
    ) {
        let p = &self.procs[pid as usize];
        let first = self.job_pids[p.job].expect("admitted");
        let (dest, from) = (first + to, p.rank);
        self.counters.messages += 1;
        self.procs[dest as usize].in_flight += 1;
        if bytes >= self.eager_limit {
            self.counters.rendezvous += 1;
            let p = &mut self.procs[pid as usize];
            if blocking {
                p.acks_pending += 1;
            } else {
                p.sends_pending += 1;
            }
            let id = self.rndv.insert(Rndv {
                sender: pid,
                dest,
                from,
                tag,
                bytes,
                blocking,
            });
            self.q
                .schedule(now + SimTime(self.latency_ns), Ev::Rts { id })
                .expect("future");
            return;
        }
        let arrival = self.transmit(pid, dest, bytes, now);
        self.q
            .schedule(
                arrival,
                Ev::Msg {
                    to: dest,
                    from,
                    tag,
                    bytes,
                },
            )
            .expect("future");
    }

    /// The sender's link transmits `bytes` to `dest` from `earliest` on, packet by
    /// packet in the stretches both links are free (module doc); returns when the
    /// message is in the receiver's buffer.
    fn transmit(&mut self, sender: Pid, dest: Pid, bytes: u64, earliest: SimTime) -> SimTime {
        let node = self.procs[sender as usize].node as usize;
        let to_node = self.procs[dest as usize].node as usize;
        let time = |b: u64| SimTime((b as f64 * self.ns_per_byte).round() as i64);
        let (len, packet) = (time(bytes), time(PACKET_BYTES));
        let now = self.q.now();
        let lat = SimTime(self.latency_ns);
        self.links
            .book((node, to_node), earliest, (len, packet, lat), now)
    }

    /// A rendezvous request reaches its receiver.
    pub(super) fn rts_arrived(&mut self, id: u32, now: SimTime) {
        let to = self.rndv.get(id).dest;
        self.procs[to as usize].rts.push(id);
        self.message_arrived(to, now);
        let p = &self.procs[to as usize];
        let Some(w) = p.wait else {
            // Sent to a rank that has finished: its sender may wait for ever.
            self.check_program_deadlock(to, now);
            return;
        };
        if w.cond == Cond::Io {
            return;
        }
        match p.state {
            PState::Running(_) => self.answer_rts(to, w.cond, now),
            // It answers when it runs; a receive slot must match for the wake-up.
            PState::Blocked if !self.matching_rts(to, w.cond).is_empty() => {
                self.wake(to, EnqueueReason::Woken, now)
            }
            _ => {}
        }
        // A request no receive slot matches may close a cycle of waits.
        self.check_program_deadlock(to, now);
    }

    /// The requests `pid`, waiting for `cond`, can answer now, one per free
    /// receive slot, as indices into its `rts` list.
    pub(super) fn matching_rts(&self, pid: Pid, cond: Cond) -> Vec<usize> {
        let p = &self.procs[pid as usize];
        if p.rts.is_empty() {
            return Vec::new();
        }
        // (from, tag, the LoopUntil stop tag also accepted)
        let mut slots: Vec<(Option<Rank>, u32, Option<u32>)> =
            p.posted.iter().map(|&(f, t)| (f, t, None)).collect();
        match cond {
            Cond::Msg { from, tag } => slots.push((from, tag, None)),
            Cond::MsgOr { from, tag, stop } => slots.push((from, tag, Some(stop))),
            _ => {}
        }
        let (mut mail, mut granted, mut chosen) = (Vec::new(), Vec::new(), Vec::new());
        for (sf, st, stop) in slots {
            let m = |f: Rank, t: u32| (t == st || Some(t) == stop) && sf.is_none_or(|x| x == f);
            let free = |used: &Vec<usize>, n: usize, key: &dyn Fn(usize) -> (Rank, u32)| {
                (0..n).find(|k| {
                    let (f, t) = key(*k);
                    !used.contains(k) && m(f, t)
                })
            };
            if let Some(k) = free(&mail, p.mailbox.len(), &|k| {
                let (f, t, _, _) = p.mailbox[k];
                (f, t)
            }) {
                mail.push(k);
            } else if let Some(k) = free(&granted, p.granted.len(), &|k| p.granted[k]) {
                granted.push(k);
            } else if let Some(k) = (0..p.rts.len()).find(|k| {
                let r = self.rndv.get(p.rts[*k]);
                !chosen.contains(k) && m(r.from, r.tag)
            }) {
                chosen.push(k);
            }
        }
        chosen
    }

    /// `pid`, inside an MPI wait for `cond` and on a CPU, answers the requests its
    /// receive slots match: each clear-to-send crosses back and the sender's NIC
    /// sends the data.
    pub(super) fn answer_rts(&mut self, pid: Pid, cond: Cond, now: SimTime) {
        let mut chosen = self.matching_rts(pid, cond);
        chosen.sort_unstable();
        for k in chosen.into_iter().rev() {
            let id = self.procs[pid as usize].rts.remove(k);
            let r = self.rndv.remove(id);
            self.procs[pid as usize].granted.push((r.from, r.tag));
            let cts = now + SimTime(self.latency_ns);
            let arrival = self.transmit(r.sender, pid, r.bytes, cts);
            self.q
                .schedule(
                    arrival,
                    Ev::Msg {
                        to: pid,
                        from: r.from,
                        tag: r.tag,
                        bytes: r.bytes,
                    },
                )
                .expect("future");
            let done = arrival + SimTime(self.latency_ns);
            let ev = if r.blocking {
                Ev::Ack { to: r.sender }
            } else {
                Ev::SendDone { to: r.sender }
            };
            self.q.schedule(done, ev).expect("future");
        }
    }

    /// The CPU time one end of a message spends on its `bytes`: the platform's
    /// `byte_overhead_ns` per byte, and `copies` times its `eager_copy_ns` per byte
    /// when the message is eager (the MPI library's copies through its buffers),
    /// rounded to the ns.
    pub(super) fn bytes_cpu_ns(&self, bytes: u64, copies: u32) -> i64 {
        let copy = if bytes < self.eager_limit {
            self.eager_copy_ns * f64::from(copies)
        } else {
            0.0
        };
        (bytes as f64 * (self.byte_ns + copy)).round() as i64
    }

    /// `pid` polls GM's receive queue inside an MPI call (module doc), with its
    /// posted non-blocking receives and `recv` (the blocking receive or wait it is
    /// in, if any) posted: each queued message, in arrival order, lands in the first
    /// matching receive no earlier message holds ([`Landed::Once`]) or is saved as
    /// unexpected ([`Landed::Twice`]). With `until_done`, it stops once `recv` holds
    /// (`MPID_RecvComplete` polls until its receive completes), before polling
    /// anything if it already does.
    pub(super) fn poll(&mut self, pid: Pid, recv: Option<Cond>, until_done: bool) {
        let limit = self.eager_limit;
        let p = &mut self.procs[pid as usize];
        let Some(first) = p.mailbox.iter().position(|m| m.3 == Landed::Queued) else {
            return;
        };
        // Receive slots in posting order (from, tag, the LoopUntil stop tag also
        // accepted), the blocking receive last; whether a message holds each.
        let mut slots: Vec<(Option<Rank>, u32, Option<u32>)> =
            p.posted.iter().map(|&(f, t)| (f, t, None)).collect();
        match recv {
            Some(Cond::Msg { from, tag }) => slots.push((from, tag, None)),
            Some(Cond::MsgOr { from, tag, stop }) => slots.push((from, tag, Some(stop))),
            _ => {}
        }
        let mut held = vec![false; slots.len()];
        let done = |held: &[bool], p: &super::Proc<'_>| match recv {
            Some(Cond::Msg { .. } | Cond::MsgOr { .. }) => held[held.len() - 1],
            Some(Cond::Completion) => {
                p.acks_pending == 0 && p.sends_pending == 0 && held.iter().all(|&h| h)
            }
            _ => false,
        };
        for k in 0..p.mailbox.len() {
            if k >= first && until_done && done(&held, p) {
                return;
            }
            let (f, t, bytes, landed) = p.mailbox[k];
            let slot = (0..slots.len()).find(|&s| {
                let (sf, st, stop) = slots[s];
                !held[s] && (t == st || Some(t) == stop) && sf.is_none_or(|x| x == f)
            });
            if let Some(s) = slot {
                held[s] = true;
            }
            if landed != Landed::Queued {
                continue;
            }
            let saved = slot.is_none() && bytes > 0 && bytes < limit;
            p.mailbox[k].3 = if saved && p.saved_bytes < UNEXPECTED_SAVE_LIMIT {
                p.saved_bytes += bytes;
                Landed::Twice
            } else {
                Landed::Once
            };
        }
    }

    /// A message's data lands in `to`'s buffer; a process waiting in MPI polls it.
    pub(super) fn msg_arrived(&mut self, to: Pid, from: Rank, tag: u32, bytes: u64, now: SimTime) {
        let p = &mut self.procs[to as usize];
        p.in_flight -= 1;
        p.mailbox.push((from, tag, bytes, Landed::Queued));
        if let Some(k) = p.granted.iter().position(|&g| g == (from, tag)) {
            p.granted.swap_remove(k);
        }
        match p.wait {
            Some(w) if w.cond != Cond::Io => self.poll(to, Some(w.cond), false),
            _ => {}
        }
        self.signal(super::observe::Signal::Message { to });
        self.message_arrived(to, now);
        self.condition_changed(to, now);
    }

    /// The NIC delivered something for `to` (data or a rendezvous request): the
    /// node policy's `on_message`.
    fn message_arrived(&mut self, to: Pid, now: SimTime) {
        let node = self.procs[to as usize].node;
        let running = matches!(self.procs[to as usize].state, PState::Running(_));
        self.with_policy(node, now, super::Apply::Now, |p, v, out| {
            p.on_message(v, to, running, out)
        });
    }
}
