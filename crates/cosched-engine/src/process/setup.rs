//! Checks of a process-level run's input before it starts: options (MPL, the
//! slot policy's gang geometry and its per-job checks), job order, and each job's program, memory, niceness, ranks
//! per node, width and message destinations. Each failure is a [`ProcError`]
//! naming the job.

use super::{kb, ProcError, ProcJob, ProcOptions};
use cosched_contract::slots::SlotPolicy;
use cosched_des::SimTime;
use cosched_model::node::NodePlatform;
use cosched_model::program::{Op, Rank};

/// Checks `jobs` (already at the platform's speed) and `opts` against `plat`.
pub(super) fn validate(
    plat: &NodePlatform,
    jobs: &[ProcJob],
    opts: &ProcOptions,
    slots: Option<&dyn SlotPolicy>,
) -> Result<(), ProcError> {
    if opts.mpl == 0 {
        return Err(ProcError::Mpl);
    }
    if let Some(policy) = slots {
        if let Some(g) = policy.gang() {
            if g.rows == 0 || g.quantum <= SimTime::ZERO || g.switch < SimTime::ZERO {
                return Err(ProcError::Options(format!(
                    "gang needs rows >= 1, quantum > 0 and switch >= 0, got {g:?}"
                )));
            }
        }
        if opts.admission.is_some() {
            return Err(ProcError::Options(
                "gang admits through its matrix: no admission policy with gang".into(),
            ));
        }
        for (j, job) in jobs.iter().enumerate() {
            policy
                .check_job(j, job.program.size())
                .map_err(ProcError::Options)?;
        }
    }
    if let Some(i) = jobs.windows(2).position(|w| w[1].submit < w[0].submit) {
        return Err(ProcError::Unsorted(i + 1));
    }
    for (j, job) in jobs.iter().enumerate() {
        check_job(plat, opts, j, job)?;
    }
    Ok(())
}

/// Checks job `j`: its noise, memory, niceness, ranks per node, width and
/// message destinations.
fn check_job(
    plat: &NodePlatform,
    opts: &ProcOptions,
    j: usize,
    job: &ProcJob,
) -> Result<(), ProcError> {
    let cv = job.program.noise_cv;
    if !(cv.is_finite() && cv >= 0.0) {
        return Err(ProcError::BadProgram {
            job: j,
            msg: format!("noise_cv must be a finite number >= 0, got {cv}"),
        });
    }
    let mb = job.program.memory_mb;
    if !(mb.is_finite() && mb >= 0.0) || kb(mb) > kb(plat.job_memory_mb) {
        return Err(ProcError::TooBig {
            job: j,
            mb,
            node_mb: plat.job_memory_mb,
        });
    }
    if !(-20..=19).contains(&job.nice) {
        return Err(ProcError::BadProgram {
            job: j,
            msg: format!("nice must be between -20 and 19, got {}", job.nice),
        });
    }
    let rpn = job.ranks_per_node;
    if rpn == 0 || rpn > opts.mpl {
        return Err(ProcError::BadProgram {
            job: j,
            msg: format!(
                "ranks_per_node must be between 1 and the mpl ({}), got {rpn}",
                opts.mpl
            ),
        });
    }
    if opts.slots.is_some() && rpn > plat.cpus_per_node {
        return Err(ProcError::BadProgram {
            job: j,
            msg: format!(
                "gang: ranks_per_node {rpn} exceeds the {} CPU columns of a node",
                plat.cpus_per_node
            ),
        });
    }
    if job.nodes_needed() > plat.nodes {
        return Err(ProcError::TooWide {
            job: j,
            size: job.nodes_needed(),
            nodes: plat.nodes,
        });
    }
    let size = job.program.size();
    for (r, ops) in job.program.ranks.iter().enumerate() {
        for op in ops {
            if let Op::Send { to, .. } | Op::Isend { to, .. } = *op {
                if to >= size {
                    return Err(ProcError::BadRank {
                        job: j,
                        rank: r as Rank,
                        to,
                    });
                }
            }
        }
    }
    Ok(())
}
