//! Process-level cluster scheduling (admission and time slots of the process
//! engine), one file per scheme; [`build_process`] builds one from
//! `name[key=value,...]`.
//!
//! Admission is a policy behind the process-level admission contract
//! (`cosched_contract::admission`): FCFS (strict or not) is the contract's
//! reference `Fcfs`; [`batch::admission`] builds the batch scheme's. EASY
//! backfilling (`easy`, `batch[backfill=easy]`) is the job-level EASY, and
//! every job-level cluster policy of the registry whose name is not taken here
//! (`conservative`) is too: each runs as the admission through the adapter
//! [`hosted::Hosted`], at MPL 1 with nodes as its processors, so one
//! implementation serves both fidelities. Gang scheduling is a policy behind the
//! process-level slot contract (`cosched_contract::slots`): [`gang::Gang`]
//! with the flexible options of [`flexgang`] decides rows, slots, which
//! process a CPU runs and the fragments; [`gang::factory`] builds it for each
//! run. The perturbation harness of seed 003 is [`perturb::GangPerturb`], a
//! slot policy that wraps the gang policy and changes its picks on the
//! perturbed processors; the mechanism's observers (the perturbation
//! bookkeeping, the gangedness estimator) measure and never decide.

pub mod batch;
pub mod flexgang;
pub mod gang;
pub mod hosted;
pub mod perturb;
pub mod starving;

use crate::registry::{PolicyInfo, PolicySpec, RegistryError};
use cosched_contract::process::GangParams;
use cosched_contract::process::PerturbParams;

/// How the process engine admits and time-slices jobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcAdmission {
    /// FCFS admission under the configuration's `mpl`, native local scheduling.
    Fcfs,
    /// PBS-like batch: MPL 1, FCFS (strict or not), PACKING (`batch.rs`; with
    /// EASY backfilling it is [`ProcAdmission::Hosted`]).
    Batch(batch::BatchParams),
    /// SCore-D-like gang scheduling.
    Gang(GangParams),
    /// A job-level cluster policy (`policy`, its spec string) hosted as the
    /// admission at MPL 1, nodes as its processors ([`hosted::Hosted`]), from the
    /// runtime estimates `estimates` ([`batch::estimates_of`]); `easy` and
    /// `batch[backfill=easy]` are the hosted `easy`.
    Hosted {
        policy: String,
        estimates: batch::Estimates,
    },
    /// Gang scheduling with perturbations of job 0 and the gangedness estimator
    /// (seed 003; `perturb.rs`).
    GangPerturb {
        gang: GangParams,
        perturb: PerturbParams,
    },
}

type ProcBuilder = crate::registry::Make<ProcAdmission>;

fn fcfs_info() -> PolicyInfo {
    PolicyInfo {
        name: "fcfs",
        level: "process",
        summary: "FCFS admission of jobs with at most `mpl` processes per node; nodes time-share under their native scheduler and node policy.",
        params: Vec::new(),
    }
}

fn fcfs_build(spec: &PolicySpec) -> Result<ProcAdmission, RegistryError> {
    spec.expect_only(&[])?;
    Ok(ProcAdmission::Fcfs)
}

fn entries() -> Vec<(PolicyInfo, ProcBuilder)> {
    let mut v: Vec<(PolicyInfo, ProcBuilder)> = vec![
        (fcfs_info(), fcfs_build),
        (batch::info(), batch::build),
        (batch::easy_info(), batch::build_easy),
        (gang::info(), gang::build),
        (perturb::info(), perturb::build),
    ];
    // Every job-level policy whose name is free here runs through the adapter
    // (`fcfs` here is the MPL scheme; `easy`, the hosted job-level EASY, is
    // registered above as an alias of `batch[backfill=easy]`).
    for info in crate::registry::cluster_catalog() {
        if v.iter().all(|(i, _)| i.name != info.name) {
            v.push((hosted_info(info), hosted_build));
        }
    }
    v
}

/// A job-level policy's documentation at process level: its parameters and
/// those of the estimates.
pub(crate) fn hosted_info(job_level: PolicyInfo) -> PolicyInfo {
    let mut params = job_level.params;
    params.extend(
        batch::info()
            .params
            .into_iter()
            .filter(|p| matches!(p.name, "estimates" | "round_s")),
    );
    PolicyInfo {
        level: "process",
        params,
        ..job_level
    }
}

/// Builds a hosted job-level policy: `estimates` and `round_s` are the
/// adapter's, every other parameter goes to the policy (built here once, so a
/// bad one is refused before the run).
fn hosted_build(spec: &PolicySpec) -> Result<ProcAdmission, RegistryError> {
    // An unknown parameter is named with every valid one, the estimates' too.
    if let Some(info) = crate::registry::cluster_catalog()
        .into_iter()
        .find(|i| i.name == spec.name)
    {
        let valid: Vec<&str> = hosted_info(info).params.iter().map(|p| p.name).collect();
        spec.expect_only(&valid)?;
    }
    let estimates = batch::estimates(spec)?;
    let own: Vec<String> = spec
        .params
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "estimates" | "round_s"))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let policy = if own.is_empty() {
        spec.name.clone()
    } else {
        format!("{}[{}]", spec.name, own.join(","))
    };
    crate::registry::build(&policy)?;
    Ok(ProcAdmission::Hosted { policy, estimates })
}

/// Documentation of every process-level scheme.
pub fn process_catalog() -> Vec<PolicyInfo> {
    entries().into_iter().map(|(i, _)| i).collect()
}

/// Builds the process-level scheme named by `spec` (`"fcfs"`, `"batch"`,
/// `"batch[backfill=easy]"`, `"easy"`, `"gang[quantum_ms=100,rows=3]"`).
pub fn build_process(spec: &str) -> Result<ProcAdmission, RegistryError> {
    crate::registry::lookup(spec, &entries())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_contract::process::GangednessParams;
    use cosched_contract::process::{FlexParams, GangBit, LowGang};
    use cosched_des::SimTime;

    fn err_of(s: &str) -> String {
        build_process(s).unwrap_err().to_string()
    }

    #[test]
    #[expect(
        clippy::too_many_lines,
        reason = "one table of bad gang/flexgang strings and the error each must give"
    )]
    fn builds_every_scheme_and_rejects_bad_input() {
        for i in process_catalog() {
            build_process(i.name).unwrap();
        }
        let easy = ProcAdmission::Hosted {
            policy: "easy".into(),
            estimates: batch::Estimates::DEFAULT,
        };
        assert_eq!(
            build_process("batch").unwrap(),
            ProcAdmission::Batch(batch::BatchParams::STRICT)
        );
        assert_eq!(build_process("easy").unwrap(), easy);
        assert_eq!(build_process("batch[backfill=easy]").unwrap(), easy);
        assert!(err_of("easy[strict=true]")
            .contains("unknown parameter \"strict\"; valid parameters: estimates, round_s"));
        assert_eq!(
            build_process("gang[quantum_ms=50, rows=2, switch_us=200, alternate=true]").unwrap(),
            ProcAdmission::Gang(GangParams {
                quantum: SimTime::from_ms(50),
                rows: 2,
                switch: SimTime::from_us(200),
                alternate: true,
                flex: FlexParams {
                    fair: SimTime::from_ms(50),
                    round_slots: 1,
                    ..Default::default()
                },
            })
        );
        let err = err_of;
        assert!(
            err("gang[rows=0]").contains("parameter rows=\"0\": must be at least 1"),
            "{}",
            err("gang[rows=0]")
        );
        assert!(err("gang[quantum_ms=-1]").contains("must be > 0"));
        assert!(err("gang[quantum_ms=abc]").contains("quantum_ms=\"abc\""));
        assert!(err("gang[switch_us=-3]").contains("must be >= 0"));
        // Flexible gang options (seed 003).
        let ProcAdmission::Gang(g) = build_process(
            "gang[quantum_ms=20, quanta=io-bound:2.5/Barrier:40, io_preempt=true, gang_bit=true, fill=true, low=Emp/Workpile, fair_ms=5, round_slots=4, round_us=300]",
        )
        .unwrap() else {
            panic!("gang")
        };
        assert_eq!(
            g.flex,
            FlexParams {
                quanta: vec![
                    ("io-bound".into(), SimTime::from_us(2500)),
                    ("Barrier".into(), SimTime::from_ms(40)),
                ],
                io_preempt: true,
                gang_bit: GangBit::All,
                fill: true,
                low: LowGang::Declared(vec!["Emp".into(), "Workpile".into()]),
                fair: SimTime::from_ms(5),
                round_slots: 4,
                round: SimTime::from_us(300),
                est_quantum: SimTime::from_ms(10),
            }
        );
        // Per-job gang bit and the online gangedness estimate.
        let ProcAdmission::Gang(g) = build_process(
            "gang[gang_bit=Emp/io-bound, fill=true, low=auto, ratio_threshold=0.2, window=8, est_quantum_ms=5]",
        )
        .unwrap() else {
            panic!("gang")
        };
        assert_eq!(
            g.flex.gang_bit,
            GangBit::Apps(vec!["Emp".into(), "io-bound".into()])
        );
        assert_eq!(
            g.flex.low,
            LowGang::Auto(GangednessParams {
                ratio_threshold: 0.2,
                window: 8
            })
        );
        assert_eq!(g.flex.est_quantum, SimTime::from_ms(5));
        let ProcAdmission::Gang(g) = build_process("gang[low=auto, gang_bit=false]").unwrap()
        else {
            panic!("gang")
        };
        assert_eq!(g.flex.gang_bit, GangBit::Off);
        assert_eq!(g.flex.low, LowGang::Auto(GangednessParams::default()));
        assert!(err("gang[ratio_threshold=0.2]").contains("needs low=auto"));
        assert!(err("gang[low=auto,window=0]").contains("must be at least 1"));
        assert!(err("gang[low=auto,ratio_threshold=-1]").contains("must be > 0"));
        assert!(err("gang[gang_bit=/]").contains("expected true, false or app/app"));
        assert!(err("gang[est_quantum_ms=0]").contains("must be > 0"));
        assert!(err("gang[quanta=io-bound]").contains("expected app:ms/app:ms"));
        assert!(err("gang[quanta=io-bound:-1]").contains("expected app:ms/app:ms"));
        assert!(err("gang[round_slots=0]").contains("must be at least 1"));
        assert!(err("gang[round_us=-1]").contains("must be >= 0"));
        assert!(err("gang[quantum=5]").contains("unknown parameter \"quantum\"; valid parameters: quantum_ms, rows, switch_us, alternate, quanta, io_preempt, gang_bit, fill, low, ratio_threshold, window, est_quantum_ms, fair_ms, round_slots, round_us"));
        assert!(err("batch[backfill=conservative]").contains("\"none\" or \"easy\""));
        assert!(err("sjf")
            .contains("valid policies: fcfs, batch, easy, gang, gang-perturb, conservative"));
        assert_eq!(
            build_process("conservative[estimates=perfect]").unwrap(),
            ProcAdmission::Hosted {
                policy: "conservative".into(),
                estimates: batch::Estimates::Perfect
            }
        );
        assert!(err("conservative[depth=2]")
            .contains("policy conservative: unknown parameter \"depth\""));
        assert!(err("conservative[estimates=exact]").contains("\"request\" or \"perfect\""));
        assert!(err("gang-perturb[kind=steal]").contains("\"takeaway\" or \"giveaway\""));
        assert!(err("gang-perturb[choice=random]").contains("\"fixed\" or \"rr\""));
        assert!(err("gang-perturb[rows=1]").contains("at least 2"));
        assert!(err("gang-perturb[count=x]").contains("count=\"x\""));
        assert!(err("gang-perturb[batch=4]").contains("unknown parameter \"batch\""));
        match build_process("gang-perturb[kind=giveaway,choice=rr,count=8,seed=3]").unwrap() {
            ProcAdmission::GangPerturb { gang, perturb } => {
                assert_eq!((gang.rows, gang.quantum), (2, SimTime::from_us(500)));
                assert_eq!(perturb.count, 8);
                assert_eq!(perturb.seed, 3);
                assert_eq!(
                    perturb.choice,
                    cosched_contract::process::Choice::RoundRobin
                );
                assert_eq!(perturb.kind, cosched_contract::process::Kind::Giveaway);
            }
            other => panic!("{other:?}"),
        }
    }
}
