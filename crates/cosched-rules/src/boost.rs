//! The re-check schedule of a pending "boost until run" (`NodeAction::BoostUntilRun`),
//! shared by the real node agent, which carries it out, and the simulator engine,
//! which models it on platforms whose boost is the agent's (`boost_recheck = "agent"`).
//!
//! Algorithm. On Linux 6.x a boost is a weight raise (a cgroup's `cpu.shares` /
//! `cpu.weight`, or the rank's autogroup nice) followed by a reschedule check of the
//! rank's CPU; a weight write alone never preempts, and the check preempts only if the
//! boosted rank is then eligible (owed CPU). A rank that is not owed CPU at the boost
//! becomes so during the running task's slice, so the agent repeats the check: every
//! [`BOOST_CHECK`] (250 us) for the first [`BOOST_CHECKS_FAST`] checks (4 ms, one
//! slice at HZ = 250), then at doubling intervals up to [`BOOST_CHECK_MAX`] (16 ms);
//! after [`BOOST_CHECKS`] checks (0.45 s) without the rank having run, the boost is
//! dropped. The k-th check (k = 0, 1, ...) comes [`boost_check_delay`]`(k)` after the
//! previous one (after the boost for k = 0); the check that finds no next delay drops
//! the boost instead of checking.
//!
//! Source: the real agent's design (`cosched-real` `agent.rs`, `nudge.rs`; docs/real.md,
//! "DCS: the boost's reschedule check"). Parameters: 250 us is a sixteenth of the 4 ms
//! slice of two tasks at the kernel's tick, so a boost takes effect at most 250 us after
//! the rank becomes owed CPU during the first slice; the back-off bounds the agent's
//! wake-ups for a rank that cannot run (another long slice, a frozen job).

use std::time::Duration;

/// The interval of the first checks.
pub const BOOST_CHECK: Duration = Duration::from_micros(250);
/// Checks made at [`BOOST_CHECK`] intervals before the back-off.
pub const BOOST_CHECKS_FAST: u32 = 16;
/// The longest interval of the back-off.
pub const BOOST_CHECK_MAX: Duration = Duration::from_millis(16);
/// Checks after which a boost whose rank has not run is dropped.
pub const BOOST_CHECKS: u32 = 48;

/// The delay before the next check of a boost until run that was checked
/// `checks` times already; `None` once it should be dropped.
pub fn boost_check_delay(checks: u32) -> Option<Duration> {
    (checks < BOOST_CHECKS).then(|| {
        let doublings = (checks + 1).saturating_sub(BOOST_CHECKS_FAST).min(6);
        (BOOST_CHECK * (1u32 << doublings)).min(BOOST_CHECK_MAX)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// By hand: 16 delays of 250 us, then 500 us, 1, 2, 4, 8 ms and 16 ms from then
    /// on; 48 delays in all: 16 x 0.25 + (0.5 + 1 + 2 + 4 + 8) + 27 x 16 = 4 + 15.5
    /// + 432 = 451.5 ms.
    #[test]
    fn boost_until_run_checks_back_off_and_stop() {
        let d: Vec<u64> = (0..24)
            .map(|k| boost_check_delay(k).unwrap().as_micros() as u64)
            .collect();
        let mut want = vec![250; 16];
        want.extend([500, 1_000, 2_000, 4_000, 8_000, 16_000, 16_000, 16_000]);
        assert_eq!(d, want);
        let total: Duration = (0..BOOST_CHECKS)
            .map(|k| boost_check_delay(k).unwrap())
            .sum();
        assert_eq!(total, Duration::from_micros(451_500));
        assert!(boost_check_delay(BOOST_CHECKS - 1).is_some());
        assert_eq!(boost_check_delay(BOOST_CHECKS), None);
    }
}
