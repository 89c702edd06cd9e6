//! Speed of the process-level engine on a synthetic workload: 20 bulk-synchronous
//! jobs (compute, then an allreduce, repeated) of 4 to 16 processes on 16
//! uniprocessor nodes, MPL 3, Linux 2.4 scheduler, NLS (spin) or blocking waits.
//! The applications are synthetic stand-ins, not the calibrated NAS models.
//! Usage: cargo run --release -p cosched --example process_level

use cosched::des::SimTime;
use cosched::engine::process::policy::NodePolicy;
use cosched::engine::process::{simulate_processes, ProcJob, ProcOptions};
use cosched::model::node::{NodePlatform, OsConfig};
use cosched::model::program::{Builder, Op};
use std::time::Instant;

fn main() {
    let plat = NodePlatform {
        nodes: 16,
        cpus_per_node: 1,
        job_memory_mb: 900.0,
        latency_us: 7.7,
        bandwidth_mb_s: 200.0,
        send_overhead_us: 1.0,
        recv_overhead_us: 1.0,
        byte_overhead_ns: 0.0,
        eager_copy_ns: 0.0,
        interrupt_us: 10.0,
        context_switch_us: 5.0,
        eager_limit_bytes: None,
        idle_watts: 219.10,
        busy_watts: 238.068,
        disk_mb_s: 20.0,
        swap: Default::default(),
        os_noise_tick_us: 0.0,
        boost_recheck: Default::default(),
        cpu_speed: 1.0,
        os: OsConfig::default(),
    };
    let sizes = [4u32, 8, 16, 8, 4];
    let jobs: Vec<ProcJob> = (0..20)
        .map(|i| {
            let p = sizes[i % sizes.len()];
            let mut b = Builder::new(p);
            b.repeat(200, |b| {
                b.each(|r| {
                    vec![Op::Compute {
                        ns: 2_000_000 + 100_000 * (r as i64 % 3),
                    }]
                });
                b.allreduce(64);
            });
            ProcJob::new(b.build("bsp", 10.0), SimTime::from_secs(i as i64 / 2))
        })
        .collect();
    for (name, make) in [
        (
            "nls",
            &(|| cosched::policies::build_node("nls").unwrap()) as &dyn Fn() -> Box<dyn NodePolicy>,
        ),
        ("block", &|| cosched::policies::build_node("block").unwrap()),
    ] {
        let t = Instant::now();
        let out = simulate_processes(
            &plat,
            &jobs,
            make,
            &ProcOptions {
                mpl: 3,
                ..Default::default()
            },
        )
        .unwrap();
        let wall = t.elapsed().as_secs_f64();
        let mean_resp: f64 = out
            .jobs
            .iter()
            .zip(&jobs)
            .map(|(r, j)| (r.end - j.submit).as_secs_f64())
            .sum::<f64>()
            / jobs.len() as f64;
        println!(
            "{name}: simulated_s={:.2} mean_response_s={:.3} spin_s={:.2} events={} wall_s={:.3} simulated_s_per_wall_s={:.1}",
            out.end.as_secs_f64(),
            mean_resp,
            out.counters.spin_ns as f64 / 1e9,
            out.counters.events,
            wall,
            out.end.as_secs_f64() / wall
        );
        println!(
            "events_per_second: {:.0}",
            out.counters.events as f64 / wall
        );
    }
}
