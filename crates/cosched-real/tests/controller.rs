//! The controller on this machine with MPICH and the shim (`make real` builds
//! them; without them these tests fail). Jobs are the shim's probe program.

use cosched_real::controller::{run, Mpi, RealJob, RunSpec, Scheme};
use std::path::PathBuf;

fn build() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../build/real")
}

fn spec(name: &str, scheme: Scheme, policy: &str, argv: &[&str], n: usize) -> RunSpec {
    let probe = build().join("cosched-probe-mpich");
    assert!(
        probe.is_file(),
        "{} missing: run `make real`",
        probe.display()
    );
    let mut a = vec![probe.to_string_lossy().to_string()];
    a.extend(argv.iter().map(|s| s.to_string()));
    RunSpec {
        run: name.into(),
        work_dir: std::env::temp_dir().join(format!("cosched-ctl-{name}-{}", std::process::id())),
        mpi: Mpi::Mpich,
        shim: build().join("libcosched-mpich.so"),
        nodes: vec!["0".into(), "1".into()],
        node_memory_mb: 1000.0,
        scheme,
        node_policy: policy.into(),
        mpl: 2,
        packing: true,
        memory_aware: false,
        seed: 1,
        jobs: (0..n)
            .map(|i| RealJob {
                id: i as i64,
                procs: 2,
                submit_ns: 0,
                argv: a.clone(),
                memory_mb: 0.0,
                estimate_ns: 60_000_000_000,
                app: "probe".into(),
            })
            .collect(),
        time_limit_ns: 120_000_000_000,
        sample_ns: 50_000_000,
        boost_factor: 64.0,
        state_dir: cosched_real::state::default_dir(),
        library_waits: false,
        env: Default::default(),
    }
}

#[test]
fn two_jobs_run_and_are_measured() {
    // Rank 0 waits 0.3 s for rank 1: several 50 ms samples fall inside each job, however fast the machine.
    let s = spec("ctl-two", Scheme::Fcfs, "sb", &["sleepwait", "0.3"], 2);
    let out = run(&s, |_| true).unwrap();
    for (i, j) in out.jobs.iter().enumerate() {
        assert!(j.ok, "job {i}: {:?}", j.error);
        assert_eq!(j.ranks_registered, 2, "job {i}");
        assert!(j.cpu_ns > 0);
        assert_eq!(j.nodes, vec![0, 1]);
    }
    assert!(!out.timeline.is_empty());
    let _ = std::fs::remove_dir_all(&s.work_dir);
}

#[test]
fn a_crashing_job_fails_alone() {
    let mut s = spec("ctl-crash", Scheme::Fcfs, "nls", &["crash", "1"], 2);
    s.jobs[1].argv = s.jobs[0].argv[..1]
        .iter()
        .cloned()
        .chain(["pingpong".into(), "2000".into(), "8".into()])
        .collect();
    let out = run(&s, |_| true).unwrap();
    assert!(!out.jobs[0].ok);
    assert!(
        out.jobs[0].error.as_deref().unwrap().contains("exited"),
        "{:?}",
        out.jobs[0].error
    );
    assert!(out.jobs[1].ok, "{:?}", out.jobs[1].error);
    let _ = std::fs::remove_dir_all(&s.work_dir);
}

/// Processes whose environment holds `COSCHED_RUN=<run>` (a job's launcher and ranks).
fn processes_of_run(run: &str) -> Vec<u32> {
    let key = format!("COSCHED_RUN={run}");
    let mut v = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let env = std::fs::read(e.path().join("environ")).unwrap_or_default();
        if env.split(|&b| b == 0).any(|x| x == key.as_bytes()) {
            v.push(pid);
        }
    }
    v
}

#[test]
fn an_interruption_ends_the_running_jobs_and_restores() {
    // Two gang-scheduled jobs that would wait 60 s; the display callback asks to stop after 2 s.
    let s = spec(
        "ctl-int",
        Scheme::Gang {
            policy: "gang[rows=2,quantum_ms=100]".into(),
        },
        "nls",
        &["sleepwait", "60"],
        2,
    );
    let t = std::time::Instant::now();
    let err = run(&s, |p| p.4 < 2.0).unwrap_err();
    assert_eq!(err, "interrupted");
    assert!(
        t.elapsed().as_secs() < 30,
        "the jobs ran on: {:?}",
        t.elapsed()
    );
    // Nothing of the run is left: no launcher or rank, no cgroup.
    // Killed ranks may still be exiting: wait for them (generously: the machine may be loaded).
    let t0 = std::time::Instant::now();
    while !processes_of_run("ctl-int").is_empty() && t0.elapsed().as_secs() < 15 {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(processes_of_run("ctl-int"), Vec::<u32>::new());
    let cg = cosched_real::cgroup::Cgroups::detect();
    for h in cg.roots() {
        let left: Vec<_> = h
            .ours()
            .into_iter()
            .filter(|p| p.to_string_lossy().contains("cosched.ctl-int."))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
    let _ = std::fs::remove_dir_all(&s.work_dir);
}

#[test]
fn collectives_reach_a_message_policy_as_their_algorithms_messages() {
    // One job of 2 ranks running the probe's `calls`: point-to-point sends
    // (rank 0: Send, Ssend, Isend, Isend, Sendrecv; rank 1: Send, Isend, Isend,
    // Sendrecv: 9 messages) then six collectives, posting the MESSAGE events of
    // the simulator's algorithms (real/shim/coll_algo.c): Barrier, Allreduce,
    // Alltoall, Allgather one per member (8), Bcast from 0 only 0 -> 1 and
    // Reduce to 0 only 1 -> 0 (2): 10. NLS subscribes to no event, DCS to
    // MESSAGE for a receiver off a CPU: the difference in the agent's events
    // plus the events the shims skipped (receiver on a CPU, their log's
    // events_skipped) is the 19 MESSAGE events.
    let events = |policy: &str| {
        let s = spec(
            &format!("ctl-coll-{policy}"),
            Scheme::Fcfs,
            policy,
            &["calls"],
            1,
        );
        let out = run(&s, |_| true).unwrap();
        assert!(out.jobs[0].ok, "{policy}: {:?}", out.jobs[0].error);
        let log = std::fs::read_to_string(s.work_dir.join("shim.jsonl")).unwrap();
        let skipped: u64 = log
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["events_skipped"]
                    .as_u64()
                    .unwrap()
            })
            .sum();
        let _ = std::fs::remove_dir_all(&s.work_dir);
        (out.agent.events, skipped)
    };
    let ((nls, nls_skipped), (dcs, dcs_skipped)) = (events("nls"), events("dcs"));
    assert_eq!(nls_skipped, 0, "NLS subscribes to no MESSAGE event");
    assert_eq!(
        dcs - nls + dcs_skipped,
        9 + 10,
        "events: nls {nls}, dcs {dcs}, skipped by dcs's shims {dcs_skipped}"
    );
}

#[test]
fn each_open_mpi_job_keeps_its_session_directory_under_the_work_dir() {
    // Two Open MPI jobs at once; each one's session directory lies under its own base
    // in the run's work dir (`mpirun`s sharing /tmp/ompi.<host>.<uid> race: one removes
    // that top directory while another creates its own in it). The ranks are a shell
    // printing the process session directory Open MPI gives them (OMPI_FILE_LOCATION).
    let mut s = spec("ctl-ompi-session", Scheme::Fcfs, "nls", &[], 2);
    s.mpi = Mpi::OpenMpi;
    s.shim = build().join("libcosched-openmpi.so");
    for j in &mut s.jobs {
        j.argv = ["sh", "-c", "echo session=$OMPI_FILE_LOCATION"]
            .map(String::from)
            .to_vec();
    }
    run(&s, |_| true).unwrap();
    for i in 0..2 {
        let log = std::fs::read_to_string(s.work_dir.join(format!("job{i}.log"))).unwrap();
        let want = format!(
            "session={}/",
            s.work_dir.join(format!("ompi-job{i}")).display()
        );
        assert_eq!(
            log.lines().filter(|l| l.contains(&want)).count(),
            2,
            "job {i}: both ranks under {want}:\n{log}"
        );
    }
    let _ = std::fs::remove_dir_all(&s.work_dir);
}
