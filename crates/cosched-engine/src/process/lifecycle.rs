//! The start of a job's processes on the nodes admission chose (each process's
//! state, its fresh memory, its native scheduler entry and the policy's
//! `enqueue` op) and the stop of the background jobs once every foreground job
//! has ended; the end of a rank (its memory returned, its job's end, the
//! admissions the end allows).

use super::{
    kb, AdmissionEvent, After, DequeueReason, EnqueueReason, PState, Pid, Proc, ProcJobRecord, Sim,
    Stop, Wake,
};
use cosched_des::SimTime;
use cosched_model::program::Rank;

impl Sim<'_> {
    pub(super) fn start_job(&mut self, j: usize, nodes: Vec<u32>, now: SimTime) {
        let first = self.procs.len() as Pid;
        self.signal(super::observe::Signal::JobStarted {
            job: j,
            first,
            nodes: &nodes,
        });
        self.job_pids[j] = Some(first);
        self.ranks_left[j] = nodes.len() as u32;
        for (rank, &node) in nodes.iter().enumerate() {
            let pid = self.procs.len() as Pid;
            self.procs.push(Proc {
                job: j,
                rank: rank as Rank,
                node,
                ops: &self.jobs[j].program.ranks[rank],
                pc: 0,
                loops: Vec::new(),
                untils: Vec::new(),
                compute_ns: 0,
                bursts: None,
                in_flight: 0,
                state: PState::Ready,
                cpu_left: 0,
                after: After::Next,
                wait: None,
                mailbox: Vec::new(),
                saved_bytes: 0,
                posted: Vec::new(),
                acks_pending: 0,
                sends_pending: 0,
                rts: Vec::new(),
                granted: Vec::new(),
                last_from: None,
                blocked_at: now,
                cpu_ns: 0,
                spin_ns: 0,
                slept_ns: 0,
                end: SimTime::MAX,
                mem_kb: kb(self.jobs[j].program.memory_mb),
                resident_kb: 0,
                fresh_kb: 0,
                pages: Default::default(),
                paging: false,
                reading: false,
                pinned: false,
                last_ran: now,
                noise: (self.jobs[j].program.noise_cv > 0.0).then(|| {
                    let cv = self.jobs[j].program.noise_cv;
                    (
                        self.streams.stream(&format!("noise/{j}/{rank}")),
                        (1.0 + cv * cv).ln().sqrt(),
                    )
                }),
                os_noise_rng: None,
                boost_until_run: false,
                boosts_until_run: 0,
                state_since: now,
            });
            // Fresh pages: as much of the footprint as free memory holds; the rest
            // is made room for (taking other processes' pages) when the process
            // first touches it, and costs no read.
            let need = self.procs[pid as usize].mem_kb;
            let got = need.min(self.nodes[node as usize].free_kb);
            let p = &mut self.procs[pid as usize];
            p.resident_kb = got;
            p.fresh_kb = need - got;
            p.pages = super::paging::Pages::new(p.ops, need, got);
            self.nodes[node as usize].free_kb -= got;
            self.nodes[node as usize].committed_kb += need;
            let n = &mut self.nodes[node as usize];
            n.load += 1;
            n.procs.push(pid);
            self.debug_check_memory(node);
            let n = &mut self.nodes[node as usize];
            n.sched.add(pid, now);
            if self.jobs[j].nice != 0 {
                n.sched.set_nice(pid, self.jobs[j].nice);
            }
            self.hook_enqueue(pid, EnqueueReason::Admitted, now);
            self.nodes[node as usize].sched.enqueue(pid, Wake::New, now);
            self.arm_timer(node, now);
            self.arm_tick(node, now);
        }
        self.records[j] = Some(ProcJobRecord {
            start: now,
            end: now,
            nodes: nodes.clone(),
        });
        for node in nodes {
            self.schedule(node, now);
        }
    }

    /// Every foreground job has finished: background jobs waiting for admission are
    /// dropped and every running background process is stopped where it is.
    pub(super) fn stop_background(&mut self, now: SimTime) {
        // Only background processes are left: no page-in starts any more.
        for n in &mut self.nodes {
            n.page_queue.clear();
        }
        for pid in 0..self.procs.len() as Pid {
            let p = &self.procs[pid as usize];
            if p.state == PState::Done {
                continue;
            }
            debug_assert!(
                self.jobs[p.job].background,
                "only background processes are left"
            );
            let node = p.node;
            match p.state {
                PState::Running(cpu) => {
                    self.account(node, cpu, now);
                    self.release_cpu(node, cpu, pid, Stop::Blocked, now);
                    self.hook_dequeue(pid, DequeueReason::Stopped, now);
                }
                PState::Ready => {
                    self.nodes[node as usize].sched.remove(pid, now);
                    self.hook_dequeue(pid, DequeueReason::Stopped, now);
                }
                PState::Blocked | PState::Done => {}
            }
            let send_ns = self.send_ns;
            let p = &mut self.procs[pid as usize];
            self.abandoned_ns += p.cpu_left;
            p.cpu_left = 0;
            p.pages.compute_ns = 0;
            if matches!(p.after, After::Depart { .. }) {
                self.unsent_ns += send_ns;
            }
            p.after = After::Next;
            p.wait = None;
            p.paging = false;
            p.reading = false;
            self.dropped += p.mailbox.len() as u64 + p.in_flight as u64;
            p.mailbox.clear();
            p.saved_bytes = 0;
            p.posted.clear();
            p.rts.clear();
            p.granted.clear();
            self.finish_rank(pid, now);
        }
    }

    /// Process `pid` finished its program now.
    pub(super) fn finish_rank(&mut self, pid: Pid, now: SimTime) {
        let (j, node) = (self.procs[pid as usize].job, self.procs[pid as usize].node);
        self.set_state(pid, PState::Done, now);
        self.procs[pid as usize].end = now;
        let (resident, mem) = (
            self.procs[pid as usize].resident_kb,
            self.procs[pid as usize].mem_kb,
        );
        self.procs[pid as usize].resident_kb = 0;
        self.procs[pid as usize].fresh_kb = 0;
        self.procs[pid as usize].pages.ahead_kb = 0;
        self.procs[pid as usize].pages.clean_kb = 0;
        let n = &mut self.nodes[node as usize];
        n.free_kb += resident;
        n.committed_kb -= mem;
        n.sched.exit(pid);
        n.procs.retain(|&p| p != pid);
        n.load -= 1;
        self.signal(super::observe::Signal::ProcessEnded { pid });
        self.slot_process_end(pid);
        self.debug_check_memory(node);
        self.pump_paging(node, now);
        self.ranks_left[j] -= 1;
        if self.ranks_left[j] > 0 {
            // The others may wait for this one.
            self.check_program_deadlock(pid, now);
        }
        if self.ranks_left[j] == 0 {
            debug_assert!(!self.ended[j], "job {j} ends twice");
            self.ended[j] = true;
            self.records[j].as_mut().expect("started").end = now;
            self.jobs_done += 1;
            self.signal(super::observe::Signal::JobEnded { job: j });
            self.slot_job_end(j);
            if !self.jobs[j].background {
                self.fg_left -= 1;
                if self.fg_left == 0 {
                    self.stop_background(now);
                    return;
                }
            }
            self.admit(AdmissionEvent::Ended(j), now);
        }
    }
}
