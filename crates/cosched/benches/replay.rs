//! Whole-trace replay benchmarks (job-level engine).
//!
//! `cargo bench -p cosched --bench replay` replays HPC2N (202,871 jobs) and
//! CEA-Curie (312,826 jobs) under EASY and conservative backfilling, and
//! measures the SWF parse separately. Traces are read from `../shared/data/traces`
//! beside the repository (or `$COSCHED_TRACES`); a missing trace is skipped with a message.

use cosched::engine::metrics::summarize;
use cosched::engine::{simulate, SimOptions};
use cosched::model::swf;
use cosched::model::WorkloadOptions;
use cosched::platform_of;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::path::PathBuf;
use std::time::Duration;

fn traces_dir() -> PathBuf {
    std::env::var_os("COSCHED_TRACES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/data/traces"
            ))
        })
}

fn bench_trace(c: &mut Criterion, file: &str) {
    let path = traces_dir().join(file);
    if !path.exists() {
        eprintln!("skipping {file}: {} not found", path.display());
        return;
    }
    let mut g = c.benchmark_group(file.trim_end_matches(".swf.gz"));
    g.sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .warm_up_time(Duration::from_secs(1));
    let trace = swf::read_swf(&path).expect("trace parses");
    let opts = WorkloadOptions::default();
    let (w, m) = swf::to_workload(&trace, &opts, None).expect("workload");
    let platform = platform_of(&m);
    g.throughput(Throughput::Elements(w.jobs.len() as u64));
    g.bench_function("parse", |b| {
        b.iter(|| swf::to_workload(&swf::read_swf(&path).unwrap(), &opts, None).unwrap())
    });
    for policy in ["easy", "conservative"] {
        g.bench_function(policy, |b| {
            b.iter(|| {
                let mut p = cosched::policies::build(policy).unwrap();
                simulate(&w, &platform, p.as_mut(), &SimOptions::default()).unwrap()
            })
        });
    }
    let mut p = cosched::policies::build("easy").unwrap();
    let out = simulate(&w, &platform, p.as_mut(), &SimOptions::default()).unwrap();
    g.bench_function("metrics", |b| {
        b.iter(|| summarize(&w, &platform, &out, 10.0))
    });
    g.finish();
}

fn replay(c: &mut Criterion) {
    bench_trace(c, "HPC2N-2002-2.2-cln.swf.gz");
    bench_trace(c, "CEA-Curie-2011-2.1-cln.swf.gz");
}

criterion_group!(benches, replay);
criterion_main!(benches);
