//! A reschedule check on the CPU of a boosted rank: what makes a weight boost
//! take effect before the running task's slice ends.
//!
//! Why it is needed (Linux 6.x, EEVDF, `kernel/sched/fair.c`): a boost is a
//! write of the rank's cgroup weight (`cpu.shares` / `cpu.weight`), and
//! `__sched_group_set_shares` only reweights the group's entities
//! (`update_load_avg`, `update_cfs_group` -> `reweight_entity`); nothing there
//! calls `resched_curr` or `wakeup_preempt`. A boosted rank that spins (it is
//! runnable, not asleep, so no wake-up comes with the boost) therefore waits
//! for the next scheduling point of its CPU: the tick that ends the running
//! task's slice (4 ms at HZ = 250 on this machine kind).
//!
//! The check ([`crate::mech::NodeMech::nudge`]): `setpriority` on the boosted
//! rank's main thread, nice + 1 ([`step_of`]) then back. `set_user_nice` (`kernel/sched/syscalls.c`) ends in
//! `prio_changed_fair`, which, for a queued task that is not running, calls
//! `wakeup_preempt(rq, p, 0)` whatever the direction of the change; for a fair
//! task that is `check_preempt_wakeup_fair`, which walks both tasks up to
//! sibling entities (`find_matching_se`) and preempts (`resched_curr`) when
//! `pick_eevdf` of that level now returns the boosted rank's entity. Both
//! changes leave the task's weight as it was (its own nice weighs it inside
//! its rank cgroup, where it is alone) and the second restores the value.
//!
//! What it cannot do: EEVDF picks only *eligible* entities (lag >= 0, i.e. owed
//! CPU), and a reweight keeps the sign of the lag (`reweight_eevdf`). A boosted
//! rank that has just had its slice (negative lag) becomes eligible only when the
//! running entity's virtual runtime passes its own, however large its weight;
//! until then the running entity keeps the CPU (and its slice protection,
//! `RUN_TO_PARITY`). So the check preempts at once when the boosted rank is
//! owed CPU, and otherwise does nothing; the agent repeats it at its
//! boost-until-run checks (1 ms, then 2, 4 ... ms later) so that a rank that
//! becomes eligible during the running slice gets the CPU then. Measured numbers
//! and the test: docs/real.md, "DCS: the boost's reschedule check".
//!
//! Safety: only the main thread (tid = pid) of a rank the agent serves is
//! touched; its nice at registration is in the agent's state record, and a
//! cleanup after a SIGKILL that fell between the two calls puts it back.

use std::io;

/// The nice value of thread `tid`.
pub fn nice_of(tid: u32) -> io::Result<i32> {
    // getpriority returns -1 for nice -1 as for an error: errno tells them apart.
    nix::errno::Errno::clear();
    // SAFETY: getpriority reads a thread's nice value; no memory is passed.
    let v = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) };
    if v == -1 && nix::errno::Errno::last_raw() != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v)
}

/// Sets thread `tid`'s nice value.
pub fn set_nice(tid: u32, nice: i32) -> io::Result<()> {
    // SAFETY: setpriority changes a thread's nice value; no memory is passed.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The nice value the check passes through for a thread at `nice`: one step
/// lower in priority, or one higher at the lowest priority (19).
pub fn step_of(nice: i32) -> i32 {
    if nice < 19 {
        nice + 1
    } else {
        nice - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_stays_within_the_nice_range() {
        assert_eq!(step_of(0), 1);
        assert_eq!(step_of(-20), -19);
        assert_eq!(step_of(18), 19);
        assert_eq!(step_of(19), 18);
    }
}
