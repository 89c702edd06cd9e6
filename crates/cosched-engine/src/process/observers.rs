//! The observers a process-level run subscribes ([`of`]): the one list an
//! observer is registered in (the contract, [`super::observe`], names none).

use super::observe::{Observer, Observers};
use super::{fragment, gangedness, inversion, io_interrupts, perturb, slots, wait_time};

/// The observers of a run on `nodes` nodes with `jobs` jobs, the slot policy
/// of `slots` (gang mode), if any, and options `opts`, in the order they are
/// told each signal and report (`super::observe`, "Which observers a run
/// has").
pub(super) fn of(
    (nodes, jobs): (u32, usize),
    slots: Option<&slots::Slots>,
    opts: &super::ProcOptions,
) -> Observers {
    let mut list: Vec<Box<dyn Observer>> = vec![Box::new(inversion::Inversion::new(nodes))];
    if opts.measure_waits {
        list.push(Box::new(wait_time::WaitTime::new(jobs)));
    }
    if let Some(s) = slots {
        let p = s.policy();
        list.push(Box::new(fragment::Fragment::default()));
        list.push(Box::new(gangedness::Observer::new(p.gang())));
        list.push(Box::new(io_interrupts::IoInterrupts::new(jobs)));
        if let Some(pv) = p.perturbation() {
            list.push(Box::new(perturb::Recorder::new(pv.target())));
        }
    }
    Observers::new(list)
}
