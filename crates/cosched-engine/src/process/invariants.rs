//! End-of-run invariants of a process-level run (conservation of CPU work and
//! messages, every process finished, gang switches idle); a violation is
//! [`ProcError::Invariant`].

use super::*;

impl Sim<'_> {
    /// End-of-run checks: CPU work is conserved (the useful CPU time equals the
    /// programs' compute plus every overhead paid), every message was consumed
    /// exactly once, every process finished, the CPU time of the processes is
    /// their useful plus spinning time, and under gang no CPU worked during the
    /// global switches.
    #[expect(
        clippy::too_many_lines,
        reason = "one check per end-of-run invariant, in sequence"
    )]
    pub(super) fn check_invariants(&self) -> Result<(), ProcError> {
        let bad = |m: String| Err(ProcError::Invariant(m));
        let c = &self.counters;
        let asked: i64 = self.procs.iter().map(|p| p.compute_ns).sum();
        if asked != c.compute_ns {
            return bad(format!(
                "processes asked for {asked} ns of compute, the counter says {} ns",
                c.compute_ns
            ));
        }
        // Every foreground job without noise asked for exactly its program's compute
        // (when the program fixes it: no LoopUntil, no drawn burst).
        for (j, job) in self.jobs.iter().enumerate() {
            if job.background || job.program.noise_cv != 0.0 || self.os_noise.is_on() {
                continue;
            }
            let program: Option<i64> = job
                .program
                .ranks
                .iter()
                .map(|ops| cosched_model::program::static_compute_ns(ops))
                .sum();
            let Some(program) = program else { continue };
            let run: i64 = self
                .procs
                .iter()
                .filter(|p| p.job == j)
                .map(|p| p.compute_ns)
                .sum();
            if run != program {
                return bad(format!(
                    "job {j}: {run} ns of compute run, the program holds {program} ns"
                ));
            }
        }
        let compute = c.compute_ns;
        let expected = compute
            + c.messages as i64 * self.send_ns
            + c.consumed as i64 * self.recv_ns
            + self.byte_cpu_ns
            + (c.interrupts + c.policy_interrupts) as i64 * self.interrupt_ns
            + self.unsent_ns;
        if c.useful_ns + self.abandoned_ns != expected {
            return bad(format!(
                "useful CPU time {} ns + {} ns abandoned by stopped background processes, expected {} ns (compute + overheads)",
                c.useful_ns, self.abandoned_ns, expected
            ));
        }
        if c.consumed + self.dropped != c.messages {
            return bad(format!(
                "{} messages sent, {} consumed, {} dropped at stopped background processes",
                c.messages, c.consumed, self.dropped
            ));
        }
        if let Some(p) = self
            .procs
            .iter()
            .find(|p| p.state != PState::Done || !p.mailbox.is_empty())
        {
            return bad(format!(
                "job {} rank {} ended in state {:?} with {} unconsumed messages",
                p.job,
                p.rank,
                p.state,
                p.mailbox.len()
            ));
        }
        // Every job ended exactly once (the flag is set once, asserted in debug
        // builds), except a background job that never started.
        if let Some(j) = (0..self.jobs.len()).find(|&j| {
            let never_started = self.jobs[j].background && self.job_pids[j].is_none();
            !(self.ended[j] || never_started)
        }) {
            return bad(format!("job {j} never ended"));
        }
        let capacity = kb(self.plat.job_memory_mb);
        if let Some((k, n)) = self
            .nodes
            .iter()
            .enumerate()
            .find(|(_, n)| n.free_kb != capacity || n.committed_kb != 0)
        {
            return bad(format!(
                "node {k} ended with {} KB free of {capacity} and {} KB committed",
                n.free_kb, n.committed_kb
            ));
        }
        // Gang: every slot switch idles every CPU for the switch cost, and no switch
        // is in progress at the end (nothing runs during one, so no job ends then).
        if let Some(g) = &self.slots {
            let idle = g.idle_ns;
            let switches = self.counters.gang_switches;
            let switch = g.params().map_or(SimTime::ZERO, |p| p.switch);
            if idle < switches as i64 * switch.as_ns() {
                return bad(format!(
                    "{switches} gang switches idled only {idle} ns in total"
                ));
            }
            let span = self.q.now().as_ns();
            if g.switching {
                return bad("a gang switch was in progress at the end".into());
            }
            if let Some((k, busy)) = self.nodes.iter().enumerate().find_map(|(k, n)| {
                let busy: i64 = n.cpus.iter().map(|c| c.busy_ns).sum();
                (busy > (span - idle) * n.cpus.len() as i64).then_some((k, busy))
            }) {
                return bad(format!(
                    "node {k} busy {busy} ns in a {span} ns run with {} ns of gang switches",
                    idle
                ));
            }
        }
        // The observers' own checks (e.g. the perturbation bookkeeping's).
        self.check_observers().map_err(ProcError::Invariant)?;
        let cpu: i64 = self.procs.iter().map(|p| p.cpu_ns).sum();
        if cpu != c.useful_ns + c.spin_ns {
            return bad(format!(
                "process CPU time {cpu} ns != useful {} + spin {}",
                c.useful_ns, c.spin_ns
            ));
        }
        Ok(())
    }
}
