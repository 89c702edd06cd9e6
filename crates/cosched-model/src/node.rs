//! The process-level platform: nodes with CPUs, memory and a NIC, a network, and
//! the native OS scheduler each node runs. Every number of a preset carries its
//! source (docs/models/seed-parameters.md).

use serde::{Deserialize, Serialize};

/// Which native scheduler a node runs, with its parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "lowercase", deny_unknown_fields)]
pub enum OsConfig {
    /// Linux 2.4 epoch/counter goodness scheduler.
    Linux24 {
        /// Timer tick (10 ms at HZ = 100).
        #[serde(default = "default_tick_ms")]
        tick_ms: f64,
        /// Base time slice of a nice-0 process, in ticks (kernel: NICE_TO_TICKS(0) = 6 at HZ = 100; seed 002 states 50 ms).
        #[serde(default = "default_base_ticks")]
        base_ticks: u32,
    },
    /// A CFS-like fair scheduler.
    Cfs {
        #[serde(default = "default_latency_ms")]
        latency_ms: f64,
        #[serde(default = "default_min_granularity_ms")]
        min_granularity_ms: f64,
        #[serde(default = "default_wakeup_granularity_ms")]
        wakeup_granularity_ms: f64,
        /// Spread of the slices, as a coefficient of variation (standard deviation /
        /// mean): each slice the node grants is the model's `sched_slice` times a
        /// log-normal factor of mean 1 and this coefficient of variation, drawn from the
        /// node's seeded stream `"cfs-slice/<node>"`, so the nodes' slice boundaries drift
        /// apart as real CPUs' do. 0 (the default): every slice is exactly
        /// `sched_slice`, no draw is made.
        #[serde(default, skip_serializing_if = "is_zero")]
        slice_cv: f64,
    },
    /// EEVDF (Linux 6.6+) with `RUN_TO_PARITY` slice protection at the timer tick.
    Eevdf {
        /// Base slice (`sysctl_sched_base_slice`, 0.75 ms before the kernel's
        /// `1 + ilog2(CPUs)` scaling, kernel/sched/fair.c).
        #[serde(default = "default_base_slice_ms")]
        slice_ms: f64,
        /// Timer tick (4 ms at HZ = 250, the default `CONFIG_HZ`, kernel/Kconfig.hz).
        #[serde(default = "default_eevdf_tick_ms")]
        tick_ms: f64,
    },
    /// Multi-level feedback queue with the Solaris TS dispatch table.
    Mlfq {
        /// Multiplies every quantum of the table.
        #[serde(default = "one")]
        quantum_scale: f64,
    },
    /// Strict round robin.
    Rr {
        #[serde(default = "default_quantum_ms")]
        quantum_ms: f64,
    },
}

fn one() -> f64 {
    1.0
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// The largest `slice_cv` accepted: a spread of ten times the mean slice is far
/// beyond any measured scheduler (the log-normal factor's median would be 1/10).
pub const MAX_SLICE_CV: f64 = 10.0;

pub fn default_tick_ms() -> f64 {
    10.0
}
pub fn default_base_ticks() -> u32 {
    6
}
pub fn default_latency_ms() -> f64 {
    6.0
}
pub fn default_min_granularity_ms() -> f64 {
    0.75
}
pub fn default_wakeup_granularity_ms() -> f64 {
    1.0
}
pub fn default_base_slice_ms() -> f64 {
    0.75
}
pub fn default_eevdf_tick_ms() -> f64 {
    4.0
}
pub fn default_quantum_ms() -> f64 {
    50.0
}

impl Default for OsConfig {
    fn default() -> Self {
        OsConfig::Linux24 {
            tick_ms: default_tick_ms(),
            base_ticks: default_base_ticks(),
        }
    }
}

impl OsConfig {
    /// Checks the parameters; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        // Plausible ranges: a tick, slice or latency of 1 us to 10 s, a scale of 1/1000 to 1000.
        let pos = |name: &str, v: f64| {
            let (lo, hi) = if name == "quantum_scale" { (1e-3, 1e3) } else { (1e-3, 1e4) };
            plausible(&format!("os.{name}"), v, lo, hi)
        };
        match *self {
            OsConfig::Linux24 {
                tick_ms,
                base_ticks,
            } => {
                pos("tick_ms", tick_ms)?;
                if base_ticks == 0 {
                    return Err("os.base_ticks: must be at least 1".into());
                }
                Ok(())
            }
            OsConfig::Cfs {
                latency_ms,
                min_granularity_ms,
                wakeup_granularity_ms,
                slice_cv,
            } => {
                pos("latency_ms", latency_ms)?;
                pos("min_granularity_ms", min_granularity_ms)?;
                pos("wakeup_granularity_ms", wakeup_granularity_ms)?;
                if !(0.0..=MAX_SLICE_CV).contains(&slice_cv) {
                    return Err(format!(
                        "os.slice_cv: {slice_cv} is outside 0 to {MAX_SLICE_CV} (a coefficient of variation; 0 turns the spread off)"
                    ));
                }
                Ok(())
            }
            OsConfig::Eevdf { slice_ms, tick_ms } => {
                pos("slice_ms", slice_ms)?;
                pos("tick_ms", tick_ms)
            }
            OsConfig::Mlfq { quantum_scale } => pos("quantum_scale", quantum_scale),
            OsConfig::Rr { quantum_ms } => pos("quantum_ms", quantum_ms),
        }
    }
}

/// A cluster for the process-level model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodePlatform {
    /// Number of nodes.
    pub nodes: u32,
    /// CPUs per node.
    pub cpus_per_node: u32,
    /// Memory per node available to jobs, MB.
    pub job_memory_mb: f64,
    /// One-way network latency between NICs for a zero-byte message, microseconds
    /// (excluding the CPU overheads below).
    pub latency_us: f64,
    /// Network bandwidth, MB/s (1 MB = 10^6 bytes), per direction of each node's
    /// full-duplex link: a NIC sends one message at a time and takes in one at a
    /// time at this rate (messages reaching one node together are serialized there).
    pub bandwidth_mb_s: f64,
    /// CPU time the sender spends per message, microseconds.
    pub send_overhead_us: f64,
    /// CPU time the receiver spends to consume a message, microseconds.
    pub recv_overhead_us: f64,
    /// CPU time the sender and the receiver each spend per byte of a message,
    /// nanoseconds, on top of the per-message overheads: a host protocol stack that
    /// copies and checksums every byte (TCP/IP). 0 where the NIC moves the bytes by
    /// DMA. Charged with the send overhead before the message departs and with the
    /// receive overhead when the message is consumed.
    #[serde(default)]
    pub byte_overhead_ns: f64,
    /// CPU time the sender and the receiver each spend per byte of an eager message
    /// (shorter than `eager_limit_bytes`), nanoseconds, on top of
    /// `byte_overhead_ns`: an MPI library that copies an eager message through a
    /// staging buffer at both ends (MPICH-GM's short protocol). Rendezvous messages
    /// move by DMA from and to the user's buffers and pay nothing here. Charged like
    /// `byte_overhead_ns`. 0: no copies.
    #[serde(default)]
    pub eager_copy_ns: f64,
    /// CPU time charged to a process woken by a message interrupt, microseconds.
    pub interrupt_us: f64,
    /// CPU time of a context switch between two processes, microseconds.
    pub context_switch_us: f64,
    /// MPI messages of at least this many bytes use the rendezvous protocol: the
    /// sender's request waits at the receiver until the receiver, inside an MPI call
    /// with a matching receive posted, answers it; only then is the data sent. Smaller
    /// messages are eager: the send completes once the message is copied out.
    /// `None`: every message is eager.
    #[serde(default)]
    pub eager_limit_bytes: Option<u64>,
    /// Power of an idle node, watts.
    pub idle_watts: f64,
    /// Power of a node whose CPUs are all busy, watts.
    pub busy_watts: f64,
    /// Transfer rate of a node's disk, MB/s: paging reads and writes move their
    /// bytes at this rate after the access cost of [`SwapDisk::access_ms`].
    #[serde(default = "default_disk_mb_s")]
    pub disk_mb_s: f64,
    /// Paging: the access cost of each disk request and the swap read-ahead cluster.
    #[serde(default)]
    pub swap: SwapDisk,
    /// Speed of a CPU relative to the reference CPU on which application compute is
    /// expressed (seed 000's Athlon 1.76 GHz, where the NAS presets are calibrated):
    /// every compute burst of a program takes its duration divided by this
    /// ([`crate::program::Program::at_speed`]). Message overheads, context switches
    /// and interrupts are given per platform and do not scale.
    #[serde(default = "one")]
    pub cpu_speed: f64,
    /// The native OS scheduler of every node.
    #[serde(default)]
    pub os: OsConfig,
    /// OS noise: mean CPU time the node's periodic timer interrupt takes from the
    /// process computing when it fires, microseconds per tick (each tick draws
    /// uniformly in 0.5 to 1.5 times it; `cosched-engine` `process/osnoise.rs`).
    /// 0: no noise.
    #[serde(default)]
    pub os_noise_tick_us: f64,
    /// When a boost until run (DCS, PB, CC) whose process is not owed CPU at the
    /// boost is tested again ([`BoostRecheck`]). Omitted when `none`, the default.
    #[serde(default, skip_serializing_if = "BoostRecheck::is_none")]
    pub boost_recheck: BoostRecheck,
}

/// When the mechanism that applies a boost until run tests its preemption again.
///
/// - `none` (the default; every seed preset): at the boost and at the CPU's next
///   scheduling point only. The seeds' SchedAsst module acts in the kernel with the
///   NIC's interrupt, where Linux 2.4 decides the preemption at the interrupt's
///   return (assumption G-SCH-1, docs/models/seed-parameters.md; the engine's
///   `linux24` model notes).
/// - `agent`: the real node agent on Linux 6.x (`cosched agent`, docs/real.md):
///   besides the boost's own reschedule check, it repeats the check on the schedule
///   of `cosched-rules` `boost.rs` (every 250 us for 16 checks, then at doubling
///   intervals up to 16 ms; the boost dropped after 48 checks without the process
///   having run), so a boosted process that becomes owed CPU during the running
///   slice gets the CPU at the next check instead of at the slice's end; and, with
///   no dispatch hook in Linux, it boosts a node policy's recommendation of a process
///   that is not running until that process runs (after each op), where a kernel
///   module would only pass it to the next pick.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BoostRecheck {
    #[default]
    None,
    Agent,
}

impl BoostRecheck {
    /// Whether this is the default (no re-check).
    pub fn is_none(&self) -> bool {
        *self == BoostRecheck::None
    }
}

/// OS noise of a Linux node on IA32, microseconds of CPU per timer tick: D. Tsafrir,
/// "The context-switch overhead inflicted by hardware interrupts (and the enigma of
/// do-nothing loops)", ExpCS 2007: "the overall overhead is found to be 0.5-1.5% at
/// 1000 Hz, linearly proportional to the tick rate", i.e. 5 to 15 us per tick; the
/// middle of the range.
pub const LINUX_TICK_NOISE_US: f64 = 10.0;

/// TCP/IP's host CPU per byte at each end on seed 002's nodes, ns (G-NET-3): the
/// rule of thumb that a host needs 1 GHz of CPU per 1 Gbit/s of TCP throughput (1
/// cycle per bit, 8 per byte: sender or receiver), which A. P. Foong, T. R. Huff,
/// H. H. Hum, J. R. Patwardhan and G. J. Regnier, "TCP performance re-visited"
/// (ISPASS 2003), examine for the Linux 2.4 TCP stack (their abstract: "the 1
/// GHz/1 Gbps rule of thumb"), on S002 §3's "1.8GHz Pentium Xeon": 8 / 1.8 =
/// 4.444 ns per byte. Linux 2.4 touches every byte on the host at both ends
/// (`tcp_sendmsg` copies and checksums the user's data into socket buffers,
/// `tcp_recvmsg` copies it out), which seed 002's MPICH over TCP pays inside its
/// MPI calls.
pub const GHANESH_BYTE_NS: f64 = 8.0 / 1.8;

/// MPICH-GM's copy of an eager message at each end on seed 000's nodes, ns per byte
/// (G-NET-5). The short protocol (`mpid/ch_gm/gmpi_chshort.c`, MPICH-GM 1.2.4..8b,
/// the nearest version found to the seed's 1.2.5..9) copies the user's buffer into a
/// GM send buffer at the sender (`MPID_CH_Eagerb_send_short` and `_isend_short`:
/// `memcpy` after `gmpi_allocate_packet`) and out of GM's receive buffer into the
/// user's at the receiver (`MPID_CH_Eagerb_recv_short`; an unexpected message is
/// copied twice, into a `MALLOC`ed buffer and at the matching receive, which is not
/// modelled). The copy runs at the bus's peak: the Athlon's EV6 system bus moves 8
/// bytes per transfer (AMD: "operating at 200 MHz, is capable of delivering 1.6
/// Gbytes/sec data bandwidth"), at 266 MHz on Athlons past 1.4 GHz (assumption for
/// the seed's unnamed 1.76 GHz model): 2.128 GB/s; a memory-to-memory copy moves each
/// byte over it twice (read, write), so 1.064 GB/s, 1 / 1.064 = 0.9398 ns per byte.
/// A copy between cache-resident buffers is faster (sweep range 0.2 to 1.4 ns).
pub const CHOI_EAGER_COPY_NS: f64 = 2.0 / (266e6 * 8.0) * 1e9;

/// Seed 000's one-way MPI latency, application to application, µs (S000 §5.1
/// "around 9.7µsec ... This includes protocol processing overheads on both the
/// sender as well as the receiver ends").
pub const CHOI_ONE_WAY_US: f64 = 9.7;

/// GM's host CPU time per message, send and receive together, µs, and the clock of
/// the hosts it was measured on, GHz: Myricom, "GM 1.6.4 API Performance with
/// PCI64B and PCI64C Myrinet/PCI NICs" (April 2003): "Host-CPU utilization per
/// message (send + receive) 0.54 µs" on both NICs, "2-GHz Pentium-IV Xeon" hosts.
pub const GM_HOST_US: (f64, f64) = (0.54, 2.0);

/// GM's own short-message latency on the PCI64B NIC (LANai 9 at 133 MHz, seed
/// 000's NIC: "a 133 MHZ Lanai 9.2"), µs, same source: "Latency for short messages
/// 8.5 µs" (host CPU part included).
pub const GM_LATENCY_PCI64B_US: f64 = 8.5;

/// Seed 000's CPU clock, GHz (S000 §5.1 "Athlon 1.76 GHZ").
pub const CHOI_CLOCK_GHZ: f64 = 1.76;

/// G-NET-2, the split of seed 000's 9.7 µs (docs/models/seed-parameters.md):
/// - NIC, PCI and wire (`latency_us`): GM's latency on the seed's NIC class less
///   GM's host CPU part, 8.5 - 0.54 = 7.96 µs (assumption: host-independent);
/// - GM's host CPU per message on the seed's CPU: 0.54 µs scaled by the clock
///   ratio 2.0 / 1.76 (the stated scaling rule) = 0.614 µs, half at each end
///   (assumption: the source gives no split);
/// - MPICH-GM's protocol above GM (matching, queues, eager copies; host software
///   in ch_gm): the rest of the 9.7 µs, 9.7 - 7.96 - 0.614 = 1.126 µs, derived,
///   half at each end (assumption).
///
/// Per side 0.307 + 0.563 = 0.87 µs of CPU; the clock rule moves only the
/// attribution between GM and MPICH-GM, not the sum.
pub const CHOI_NIC_US: f64 = GM_LATENCY_PCI64B_US - GM_HOST_US.0;
/// Per-message CPU at each end on choi2004 (see [`CHOI_NIC_US`]), µs.
pub const CHOI_OVERHEAD_US: f64 = (CHOI_ONE_WAY_US - CHOI_NIC_US) / 2.0;

/// GM's host CPU part of [`CHOI_OVERHEAD_US`], µs (the clock-ratio rule).
pub fn choi_gm_host_us() -> f64 {
    GM_HOST_US.0 * GM_HOST_US.1 / CHOI_CLOCK_GHZ / 2.0
}

/// G-MEM-1: the average sustained transfer rate of a 7200-rpm desktop disk of
/// seed 000's time, MB/s: Seagate Barracuda 7200.7, "Average sustained transfer
/// rate 58MB/sec" (The Tech Report, "Seagate's Barracuda 7200.8 hard drive",
/// specification table of the 7200.7; seed 000 names no disk).
pub fn default_disk_mb_s() -> f64 {
    58.0
}

/// Paging parameters of a node's swap disk (G-MEM-1, docs/models/seed-parameters.md).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwapDisk {
    /// Positioning cost of each disk request (a page-fault read or a write-out),
    /// ms: average seek plus average rotational latency. Default 8.5 + 4.16 =
    /// 12.66 ms, the Seagate Barracuda 7200.7's "Average seek time 8.5ms" and
    /// "Average rotational latency 4.16ms" (same source as [`default_disk_mb_s`]).
    pub access_ms: f64,
    /// Pages read by one page fault, KB: Linux 2.4's swap read-ahead reads an
    /// aligned block of `1 << page_cluster` swap entries (`swapin_readahead`,
    /// mm/memory.c) and `swap_setup` (mm/swap.c, 2.4.0) sets `page_cluster = 4` on a
    /// machine of 32 MB or more: 16 pages of 4 KB (i386) = 64 KB.
    pub readahead_kb: u32,
}

impl Default for SwapDisk {
    fn default() -> Self {
        SwapDisk {
            access_ms: 8.5 + 4.16,
            readahead_kb: 16 * 4,
        }
    }
}

/// The plausible range of `cpu_speed` (relative to the reference CPU): a CPU a
/// thousand times slower or faster is refused, since its runs would take years
/// of simulated time or resolve nothing.
pub const CPU_SPEED_RANGE: (f64, f64) = (1e-3, 1e3);
/// Plausible range of a platform's messaging and switching costs (latency, CPU
/// overheads, interrupt, context switch), microseconds: up to a second.
pub const COST_US_MAX: f64 = 1e6;
/// Plausible bound of a platform's CPU time per message byte, ns: a host that
/// cannot process even 1 MB/s is refused.
pub const BYTE_OVERHEAD_NS_MAX: f64 = 1e3;
/// Plausible range of a platform's network bandwidth, MB/s: 1 kB/s to 10 TB/s.
pub const BANDWIDTH_MB_S_RANGE: (f64, f64) = (1e-3, 1e7);

/// `Ok` when `v` is a finite number in `[lo, hi]`, else an error naming `name`.
fn plausible(name: &str, v: f64, lo: f64, hi: f64) -> Result<(), String> {
    if v.is_finite() && (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(format!(
            "{name}: must be a finite number between {lo} and {hi} (the plausible range), got {v}"
        ))
    }
}

impl NodePlatform {
    /// Checks that the platform can exist; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.nodes == 0 {
            return Err("nodes: must be at least 1".into());
        }
        if self.cpus_per_node == 0 {
            return Err("cpus_per_node: must be at least 1".into());
        }
        let nonneg = [
            ("job_memory_mb", self.job_memory_mb),
            ("latency_us", self.latency_us),
            ("send_overhead_us", self.send_overhead_us),
            ("recv_overhead_us", self.recv_overhead_us),
            ("byte_overhead_ns", self.byte_overhead_ns),
            ("eager_copy_ns", self.eager_copy_ns),
            ("interrupt_us", self.interrupt_us),
            ("context_switch_us", self.context_switch_us),
            ("idle_watts", self.idle_watts),
            ("os_noise_tick_us", self.os_noise_tick_us),
        ];
        for (name, v) in nonneg {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{name}: must be a finite number >= 0, got {v}"));
            }
        }
        if self.eager_limit_bytes == Some(0) {
            return Err("eager_limit_bytes: must be at least 1 (omit it for no rendezvous)".into());
        }
        if !(self.disk_mb_s.is_finite() && self.disk_mb_s > 0.0) {
            return Err(format!(
                "disk_mb_s: must be a finite number > 0, got {}",
                self.disk_mb_s
            ));
        }
        // Up to a second per disk request.
        plausible("swap.access_ms", self.swap.access_ms, 0.0, 1e3)?;
        if !(1..=1 << 20).contains(&self.swap.readahead_kb) {
            return Err(format!(
                "swap.readahead_kb: must be between 1 and 1048576 KB, got {}",
                self.swap.readahead_kb
            ));
        }
        plausible("cpu_speed", self.cpu_speed, CPU_SPEED_RANGE.0, CPU_SPEED_RANGE.1)?;
        // Messaging and switching costs (the `[node_platform]` overrides): at most a
        // second each, so the run's nanosecond arithmetic stays in range.
        for (name, v) in [
            ("latency_us", self.latency_us),
            ("send_overhead_us", self.send_overhead_us),
            ("recv_overhead_us", self.recv_overhead_us),
            ("interrupt_us", self.interrupt_us),
            ("context_switch_us", self.context_switch_us),
        ] {
            plausible(name, v, 0.0, COST_US_MAX)?;
        }
        let (lo, hi) = BANDWIDTH_MB_S_RANGE;
        plausible("bandwidth_mb_s", self.bandwidth_mb_s, lo, hi)?;
        // Up to a microsecond of CPU per byte (1 MB/s of host protocol processing).
        plausible(
            "byte_overhead_ns",
            self.byte_overhead_ns,
            0.0,
            BYTE_OVERHEAD_NS_MAX,
        )?;
        plausible(
            "eager_copy_ns",
            self.eager_copy_ns,
            0.0,
            BYTE_OVERHEAD_NS_MAX,
        )?;
        // A tick handler of up to 10 ms: beyond the plausible range of any OS timer.
        plausible("os_noise_tick_us", self.os_noise_tick_us, 0.0, 1e4)?;
        if !(self.busy_watts.is_finite() && self.busy_watts >= self.idle_watts) {
            return Err(format!(
                "busy_watts: must be finite and >= idle_watts, got {}",
                self.busy_watts
            ));
        }
        self.os.validate()
    }
}

/// `cpu_speed` of the `ghanesh` preset, fitted by `cosched::calibrate::fit_cpu_speed`
/// (a dedicated EP class B run at 4 processes matches seed 002 Table 1's 228.6 s; a
/// test checks it against a fresh fit).
pub const GHANESH_CPU_SPEED: f64 = 0.5477;

/// Names of the built-in platform presets.
pub const PRESETS: [&str; 4] = ["choi2004", "ghanesh", "lee4", "lee32"];

impl NodePlatform {
    /// A built-in platform. Every number cites its source; "assumption" marks a value
    /// no seed states (docs/models/seed-parameters.md §5 gives the reasoning and the
    /// sweep range of each).
    pub fn preset(name: &str) -> Result<Self, String> {
        let linux = |slice_ticks| OsConfig::Linux24 {
            tick_ms: 10.0,
            base_ticks: slice_ticks,
        };
        match name {
            // Seed 000/001 (Choi et al.) §5.1: 16-node Myrinet Linux 2.4.7 cluster, uniprocessor
            // Athlon 1.76 GHz nodes with 1 GB.
            "choi2004" => Ok(NodePlatform {
                nodes: 16,                      // S000 §5.1 "a 16-node Linux (version 2.4.7-10) cluster"
                cpus_per_node: 1,               // S000 §5.1 "Athlon 1.76 GHZ uni-processor machine"
                job_memory_mb: 900.0, // S000 §5.3 "maximum memory size allocated for the parallel programs is 900 Mbytes"
                latency_us: CHOI_NIC_US, // G-NET-2: GM's own latency on the seed's NIC class minus GM's host CPU part
                bandwidth_mb_s: 200.0, // assumption G-NET-1: Myrinet 2000 with GM, PCI-limited host; per direction, at the sender's and the receiver's NIC
                send_overhead_us: CHOI_OVERHEAD_US, // G-NET-2: GM's host cost (scaled) + MPICH-GM's, half each side
                recv_overhead_us: CHOI_OVERHEAD_US, // G-NET-2
                byte_overhead_ns: 0.0, // GM: the NIC moves the bytes by DMA
                eager_copy_ns: CHOI_EAGER_COPY_NS, // G-NET-5: MPICH-GM's short protocol copies at both ends (memcpy)
                interrupt_us: 10.0, // assumption G-OS-3
                context_switch_us: 5.0, // assumption G-OS-2
                // MPICH-GM (ch_gm, gmpi.h, GMPI_VERSION 1.2.4..8b): GMPI_EAGER_SIZE_DEFAULT = 1024*16-96 = 16288
                // bytes; a message shorter than it is sent eagerly, others by rendezvous (G-NET-4)
                eager_limit_bytes: Some(16_288),
                idle_watts: 219.10, // S000 §5.4 "B ... 219.10 watts"
                busy_watts: 219.10 + 18.968, // S000 §5.4 "X ... 18.968 watts"
                disk_mb_s: default_disk_mb_s(), // G-MEM-1: a 7200-rpm desktop disk of the time
                swap: SwapDisk::default(),       // G-MEM-1: its access cost; Linux 2.4's 64 KB read-ahead
                cpu_speed: 1.0, // the reference CPU: the NAS presets are calibrated on this platform
                os: linux(6), // 60 ms slice: NICE_TO_TICKS(0) = 6 ticks at HZ=100 (Linux 2.4 kernel/sched.c; G-OS-1); 10 ms tick
                os_noise_tick_us: LINUX_TICK_NOISE_US, // Linux on IA32: Tsafrir, ExpCS 2007 (see the constant)
                boost_recheck: BoostRecheck::None, // no user-space agent: a boost acts where it is given
            }),
            // Seed 002 (Ghanesh et al.) §3: dual 1.8 GHz Xeon nodes, 100 Mbit/s Ethernet, Linux 2.4.7-10.
            "ghanesh" => Ok(NodePlatform {
                nodes: 9, // S002 §3 "4 or 8 Dual processor nodes" (9 for the 9-thread SP and BT runs)
                cpus_per_node: 2, // S002 §3 "1.8GHz Pentium Xeon Duos"
                job_memory_mb: 1000.0, // S002 §3.4 "nominally 1 Gigabyte" (the OS share is not stated)
                latency_us: 50.0, // assumption G-NET-3: 100 us one-way in all, 25 us CPU each side
                bandwidth_mb_s: 11.0, // assumption G-NET-3: ~90 Mbit/s measured on period Fast Ethernet
                send_overhead_us: 25.0, // assumption G-NET-3
                recv_overhead_us: 25.0, // assumption G-NET-3
                byte_overhead_ns: GHANESH_BYTE_NS, // G-NET-3: Linux 2.4 TCP's copy and checksum, 8 cycles per byte at 1.8 GHz
                eager_copy_ns: 0.0, // S002's MPI over TCP is not named: the stack's copies are in byte_overhead_ns
                interrupt_us: 10.0,   // assumption G-OS-3
                context_switch_us: 5.0, // assumption G-OS-2
                eager_limit_bytes: None, // S002 does not name its MPI over Ethernet: no rendezvous (assumption G-NET-4)
                idle_watts: 219.10,   // not stated in S002 (no energy results): seed 000's values
                busy_watts: 219.10 + 18.968,
                disk_mb_s: default_disk_mb_s(), // G-MEM-1: a 7200-rpm desktop disk of the time
                swap: SwapDisk::default(),       // G-MEM-1: its access cost; Linux 2.4's 64 KB read-ahead
                // Calibrated on a dedicated run (`cosched::calibrate::fit_cpu_speed`): EP class B,
                // 4 processes, alone on 4 nodes takes S002 Table 1's 228.6 s. EP is pure compute,
                // so this is the Xeon/g77 speed relative to seed 000's Athlon on NAS code.
                cpu_speed: GHANESH_CPU_SPEED,
                // S002 §3.3 says "default time slice quantum of 50 milliseconds" for kernel 2.4.7-10,
                // the kernel source's own "around 50ms or so"; the kernel computes NICE_TO_TICKS(0)
                // = 6 ticks = 60 ms at HZ=100 (kernel/sched.c; G-OS-1). Fig. 2's slices are set explicitly.
                os: linux(6),
                os_noise_tick_us: LINUX_TICK_NOISE_US, // Linux on IA32: Tsafrir, ExpCS 2007 (see the constant)
                boost_recheck: BoostRecheck::None, // no user-space agent: a boost acts where it is given
            }),
            // Seed 003 (Lee et al.) §2: the 4-processor Fugu configuration. Fugu time is counted
            // in instructions; here 1 instruction = 1 ns (assumption: the seed gives no clock).
            "lee4" => Ok(NodePlatform {
                nodes: 4,               // S003 §2 "a four-processor configuration"
                cpus_per_node: 1,       // S003 §2 "one process per processor"
                job_memory_mb: 1.0e6,   // memory is not a factor in S003
                latency_us: 1.0,        // not stated; assumption
                bandwidth_mb_s: 1000.0, // not stated; assumption
                send_overhead_us: 0.01, // S003 §2 "roughly 10 cycles to send"
                recv_overhead_us: 0.1, // S003 §2 "roughly 100 cycles to process a null active message"
                byte_overhead_ns: 0.0, // S003's active messages: no per-byte host cost stated
                eager_copy_ns: 0.0,
                interrupt_us: 0.1,     // S003 §2: the same interrupt-driven receive
                context_switch_us: 0.0, // G-S003-3: switch cost not stated ("small")
                eager_limit_bytes: None, // S003's active messages have no rendezvous
                idle_watts: 0.0,       // no power model in S003
                busy_watts: 0.0,
                disk_mb_s: default_disk_mb_s(), // memory is not a factor in S003
                swap: SwapDisk::default(),
                cpu_speed: 1.0, // programs are written in Fugu instructions (1 ns each)
                os: OsConfig::Rr { quantum_ms: 0.5 }, // S003 §4 "Quantum size is fixed at 500,000 instructions"
                os_noise_tick_us: 0.0, // Fugu is simulated, not measured: no OS noise in S003's runs
                boost_recheck: BoostRecheck::None, // no user-space agent: a boost acts where it is given
            }),
            // Seed 003 §3: the 32-processor gang-scheduled machine of the I/O study.
            "lee32" => Ok(NodePlatform {
                nodes: 32, // S003 Fig. 2 caption "on a 32-processor, gang-scheduled machine"
                cpus_per_node: 1,
                job_memory_mb: 1.0e6,   // memory is not a factor in S003
                latency_us: 1.0,        // not stated; assumption
                bandwidth_mb_s: 1000.0, // not stated; assumption
                send_overhead_us: 0.01,
                recv_overhead_us: 0.1,
                byte_overhead_ns: 0.0,
                eager_copy_ns: 0.0,
                interrupt_us: 0.1,
                context_switch_us: 0.0,
                eager_limit_bytes: None, // S003's active messages have no rendezvous
                idle_watts: 0.0,
                busy_watts: 0.0,
                disk_mb_s: default_disk_mb_s(), // memory is not a factor in S003
                swap: SwapDisk::default(),
                cpu_speed: 1.0, // programs are written in Fugu instructions (1 ns each)
                os: OsConfig::Rr { quantum_ms: 10.0 }, // S003 §3.2 quanta varied 1-40 ms; 10 ms as the default
                os_noise_tick_us: 0.0,                 // a simulated machine in S003: no OS noise
                boost_recheck: BoostRecheck::None, // no user-space agent: a boost acts where it is given
            }),
            other => Err(format!(
                "unknown platform preset {other:?}; valid presets: {}",
                PRESETS.join(", ")
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid() {
        for name in PRESETS {
            NodePlatform::preset(name).unwrap().validate().unwrap();
        }
        let c = NodePlatform::preset("choi2004").unwrap();
        // The seed's measured one-way latency is the sum of the three parts.
        assert!((c.latency_us + c.send_overhead_us + c.recv_overhead_us - 9.7).abs() < 1e-9);
        // G-NET-2 by hand: NIC 8.5 - 0.54 = 7.96 us; each end (9.7 - 7.96) / 2 = 0.87
        // us, of which GM's 0.54 x 2.0 / 1.76 / 2 = 0.3068 us and MPICH-GM's 0.5632 us.
        assert!((c.latency_us - 7.96).abs() < 1e-9);
        assert!((c.send_overhead_us - 0.87).abs() < 1e-9);
        assert!((c.recv_overhead_us - 0.87).abs() < 1e-9);
        let gm = choi_gm_host_us();
        assert!((gm - 0.306_818).abs() < 1e-6, "{gm}");
        assert!((CHOI_OVERHEAD_US - gm - 0.563_182).abs() < 1e-6);
        assert_eq!(
            NodePlatform::preset("x").unwrap_err(),
            "unknown platform preset \"x\"; valid presets: choi2004, ghanesh, lee4, lee32"
        );
    }

    #[test]
    fn only_the_tcp_preset_pays_per_byte() {
        // G-NET-3 by hand: 1 GHz per Gbit/s is 1 cycle per bit, 8 per byte; at
        // 1.8 GHz, 8 / 1.8 = 4.444 ns per byte at each end (a 1 MB message: 4.44 ms
        // of CPU at the sender and 4.44 ms at the receiver).
        let g = NodePlatform::preset("ghanesh").unwrap();
        assert!(
            (g.byte_overhead_ns - 4.444_444).abs() < 1e-6,
            "{}",
            g.byte_overhead_ns
        );
        for name in ["choi2004", "lee4", "lee32"] {
            assert_eq!(
                NodePlatform::preset(name).unwrap().byte_overhead_ns,
                0.0,
                "{name}"
            );
        }
        let with = |v: f64| {
            let mut p = g.clone();
            p.byte_overhead_ns = v;
            p.validate()
        };
        assert_eq!(with(0.0), Ok(()));
        assert_eq!(with(1e3), Ok(()));
        for bad in [-1.0, 1000.5, f64::NAN, f64::INFINITY] {
            let e = with(bad).unwrap_err();
            assert!(
                e.starts_with("byte_overhead_ns: must be a finite number"),
                "{e}"
            );
        }
    }

    #[test]
    fn only_the_myrinet_preset_copies_eager_messages() {
        // G-NET-5 by hand: the EV6 bus at 266 MHz x 8 bytes = 2.128 GB/s; a copy
        // moves each byte twice, 1.064 GB/s: 1 / 1.064 = 0.93985 ns per byte (a 16 KB
        // eager message: 15.4 us of copy at each end).
        let c = NodePlatform::preset("choi2004").unwrap();
        let copy = c.eager_copy_ns;
        assert!((copy - 0.939_85).abs() < 1e-5, "{copy}");
        for name in ["ghanesh", "lee4", "lee32"] {
            let p = NodePlatform::preset(name).unwrap();
            assert_eq!(p.eager_copy_ns, 0.0, "{name}");
        }
        let with = |v: f64| {
            let mut p = c.clone();
            p.eager_copy_ns = v;
            p.validate()
        };
        assert_eq!(with(1e3), Ok(()));
        for bad in [-0.5, 1000.5, f64::NAN] {
            let e = with(bad).unwrap_err();
            assert!(
                e.starts_with("eager_copy_ns: must be a finite number"),
                "{e}"
            );
        }
    }

    #[test]
    fn costs_beyond_the_plausible_range_are_refused_at_their_bounds() {
        // A latency of 1e300 us once overflowed the run's nanosecond arithmetic (a panic).
        let ok = NodePlatform::preset("lee4").unwrap();
        for (field, lo, hi) in [
            ("latency_us", 0.0, 1e6),
            ("send_overhead_us", 0.0, 1e6),
            ("recv_overhead_us", 0.0, 1e6),
            ("interrupt_us", 0.0, 1e6),
            ("context_switch_us", 0.0, 1e6),
            ("bandwidth_mb_s", 1e-3, 1e7),
        ] {
            let with = |v: f64| {
                let mut p = ok.clone();
                *match field {
                    "latency_us" => &mut p.latency_us,
                    "send_overhead_us" => &mut p.send_overhead_us,
                    "recv_overhead_us" => &mut p.recv_overhead_us,
                    "interrupt_us" => &mut p.interrupt_us,
                    "context_switch_us" => &mut p.context_switch_us,
                    _ => &mut p.bandwidth_mb_s,
                } = v;
                p.validate()
            };
            assert_eq!(with(lo), Ok(()), "{field} = {lo}");
            assert_eq!(with(hi), Ok(()), "{field} = {hi}");
            for bad in [hi * 1.000001, 1e300] {
                let e = with(bad).unwrap_err();
                assert!(e.starts_with(&format!("{field}: must be a finite number between ")), "{e}");
            }
            for bad in [f64::INFINITY, f64::NAN, -1.0] {
                let e = with(bad).unwrap_err();
                assert!(e.starts_with(&format!("{field}: must be a finite number")), "{e}");
            }
        }
    }

    #[test]
    fn invalid_platforms_name_the_field() {
        let mut c = NodePlatform::preset("choi2004").unwrap();
        c.bandwidth_mb_s = 0.0;
        assert_eq!(
            c.validate().unwrap_err(),
            "bandwidth_mb_s: must be a finite number between 0.001 and 10000000 (the plausible range), got 0"
        );
        c.bandwidth_mb_s = 1.0;
        c.os = OsConfig::Rr { quantum_ms: -1.0 };
        assert_eq!(
            c.validate().unwrap_err(),
            "os.quantum_ms: must be a finite number between 0.001 and 10000 (the plausible range), got -1"
        );
    }

    #[test]
    fn the_cfs_slice_spread_is_optional_and_checked() {
        // Absent: 0, and not written back (configs without it serialize as before).
        let os: OsConfig = serde_json::from_str(r#"{"model": "cfs"}"#).unwrap();
        assert!(matches!(os, OsConfig::Cfs { slice_cv, .. } if slice_cv == 0.0));
        assert!(!serde_json::to_string(&os).unwrap().contains("slice_cv"));
        let os: OsConfig = serde_json::from_str(r#"{"model": "cfs", "slice_cv": 0.25}"#).unwrap();
        assert!(matches!(os, OsConfig::Cfs { slice_cv, .. } if slice_cv == 0.25));
        assert!(os.validate().is_ok());
        for bad in [-0.1, 10.5, f64::NAN] {
            let os = OsConfig::Cfs {
                latency_ms: 6.0,
                min_granularity_ms: 0.75,
                wakeup_granularity_ms: 1.0,
                slice_cv: bad,
            };
            let e = os.validate().unwrap_err();
            assert!(e.starts_with("os.slice_cv: "), "{e}");
        }
        // Only CFS has it.
        assert!(serde_json::from_str::<OsConfig>(r#"{"model": "rr", "slice_cv": 0.25}"#).is_err());
    }

    #[test]
    fn the_eevdf_model_is_parsed_by_name_with_kernel_defaults() {
        let os: OsConfig = serde_json::from_str(r#"{"model": "eevdf"}"#).unwrap();
        assert_eq!(
            os,
            OsConfig::Eevdf {
                slice_ms: 0.75,
                tick_ms: 4.0
            }
        );
        let os: OsConfig =
            serde_json::from_str(r#"{"model": "eevdf", "slice_ms": 4, "tick_ms": 1}"#).unwrap();
        assert_eq!(
            os,
            OsConfig::Eevdf {
                slice_ms: 4.0,
                tick_ms: 1.0
            }
        );
        let bad = OsConfig::Eevdf {
            slice_ms: 0.0,
            tick_ms: 4.0,
        };
        assert!(bad.validate().unwrap_err().starts_with("os.slice_ms: "));
        assert!(serde_json::from_str::<OsConfig>(r#"{"model": "eevdf", "latency_ms": 6}"#).is_err());
    }
}
