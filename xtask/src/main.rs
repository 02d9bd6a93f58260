//! `cargo xtask setup | demo | test | bench | fuzz`: everything a fresh machine needs, in one place.

mod bench;
mod bpf_stats;
mod cgroup;
mod compare_jfr;
mod demo;
mod fuzz;
mod host_bench;
mod hotspot_bench;
mod hotspot_fixture;
mod jdks;
mod lint;
mod measure;
mod overhead;
mod run;
mod setup;
mod test;
mod unwind_fixture;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "joular-ebpf developer tasks")]
struct Xtask {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Install the eBPF toolchain (nightly rust-src, bpf-linker on nightly's LLVM). Idempotent.
    Setup,
    /// Build everything and profile the bundled Java demo workload.
    Demo {
        /// Seconds to run the demo workload.
        #[arg(long, default_value_t = 8)]
        seconds: u32,
    },
    /// Unit tests, then the root integration tests (real JVMs, real eBPF).
    Test {
        /// Only the tests whose name contains this.
        filter: Option<String>,
    },
    /// Benchmarks. With no selection: the side-by-side overhead benchmark, the host-mode one and the
    /// criterion hot paths. Every figure is a median of alternating rounds within one run.
    Bench {
        /// The busy-JVM overhead benchmark, side by side: none, joular-ebpf --pid and --all, bpftrace
        /// at 100 Hz (the eBPF floor) and JFR settings=profile.
        #[arg(long)]
        overhead: bool,
        /// Fewer, shorter rounds and no JFR (for iteration); implies --overhead.
        #[arg(long)]
        quick: bool,
        /// The overhead benchmark over the JVM's whole run, profiler start-up included (none,
        /// --pid and bpftrace); implies --overhead.
        #[arg(long)]
        from_start: bool,
        /// The overhead benchmark of the byte counters: none, --pid, and --pid --devices
        /// cpu,network,disk side by side; implies --overhead.
        #[arg(long)]
        devices: bool,
        /// Rounds of the overhead benchmark (default 5, 2 with --quick).
        #[arg(long, value_name = "N")]
        rounds: Option<usize>,
        /// Run the overhead benchmark's JVMs without -XX:+PreserveFramePointer (no JVM flags at all).
        #[arg(long)]
        no_frame_pointers: bool,
        /// Busy threads of the overhead benchmark's JVM (default 2). With fewer threads than CPUs
        /// the profiler has a CPU of its own, and the ratio shows only what it costs inside the
        /// JVM's threads.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
        jvm_threads: Option<u32>,
        /// The host-mode benchmark: `serve` next to 100 processes x 1,000 threads.
        #[arg(long)]
        host: bool,
        /// The criterion hot-path benchmarks.
        #[arg(long)]
        criterion: bool,
        /// RSS of `--pid` on a busy JVM after this many seconds (600 if no value).
        #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "600")]
        rss: Option<f64>,
        /// The serve-mode memory soak for this many seconds (600 if no value), with its RSS slope.
        #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "600")]
        soak: Option<f64>,
        /// The HotSpot symbolization benchmark: a JVM with thousands of methods, the cost per new
        /// Method* and per cycle.
        #[arg(long)]
        hotspot: bool,
        /// Older spellings: --overhead-only (overhead and host, no criterion), --host-only,
        /// --soak-only, --hotspot-only.
        #[arg(long, hide = true)]
        overhead_only: bool,
        #[arg(long, hide = true)]
        host_only: bool,
        #[arg(long, hide = true)]
        soak_only: bool,
        #[arg(long, hide = true)]
        hotspot_only: bool,
    },
    /// The Rust gates CI runs: clippy with warnings denied on the host workspace (all targets)
    /// and on the eBPF crate for bpfel-unknown-none; the fuzz targets checked to compile.
    Clippy,
    /// `cargo fmt --all -- --check` on the host workspace and on fuzz/ (the width is in
    /// rustfmt.toml).
    FmtCheck,
    /// Run every cargo-fuzz target (fuzz/) for SECONDS each; prints the coverage reached and
    /// fails on any crash. Installs nightly and cargo-fuzz if missing.
    Fuzz {
        /// Seconds per target.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Only the targets whose name contains this.
        target: Option<String>,
    },
    /// Real applications (Jetty, H2 from Debian; a CPU fixture) profiled beside JFR in the same
    /// JVM, no other JVM flag: thread-root share, no-Java-frame share, native energy without a
    /// Java caller, top-15 leaf methods against JFR's split-half noise. Installs what it needs.
    CompareJfr {
        /// Applications: jetty, h2, cpu (repeat or comma-separate).
        #[arg(long, value_delimiter = ',', default_values_t = ["jetty".to_string(), "h2".to_string()])]
        app: Vec<String>,
        /// JDKs: 11, 17 (the system's), 21, 25 (repeat or comma-separate).
        #[arg(long, value_delimiter = ',', default_values_t = [11, 17, 21, 25])]
        jdk: Vec<u32>,
        /// Seconds under load before the measured window (start-up, JSP compile, JIT warm-up).
        #[arg(long, default_value_t = 10)]
        warmup: u64,
        /// Seconds measured by both profilers.
        #[arg(long, default_value_t = 15)]
        window: u64,
        /// joular-ebpf's sampling frequency, in Hz.
        #[arg(long, default_value_t = 200)]
        frequency: u32,
        /// A JVM flag besides JFR's (repeat), e.g. `-XX:+UnlockDiagnosticVMOptions` and
        /// `-XX:+DebugNonSafepoints` to tell inlining granularity from other differences.
        #[arg(long = "jvm-flag", allow_hyphen_values = true)]
        jvm_flags: Vec<String>,
        /// The joular-ebpf binary to measure (e.g. an older build kept for a before/after);
        /// default: build this checkout's.
        #[arg(long)]
        profiler: Option<std::path::PathBuf>,
        /// Keep each run's raw material under DIR/<app>-<jdk>/ (our `--json` cycles,
        /// summary.json, JFR's recording).
        #[arg(long)]
        keep: Option<std::path::PathBuf>,
    },
    /// Record a HotSpot introspection fixture (tables, nmethods, scopes) from a live JVM.
    DumpHotspotFixture {
        /// The `java` launcher of the JDK to record.
        #[arg(long)]
        java: std::path::PathBuf,
        /// Output directory (e.g. tests/fixtures/hotspot-17).
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// Record the native unwinder's gdb fixture (cores of JDK 17 fixture JVMs, gdb's backtraces,
    /// the CFI of their files) into OUT (tests/fixtures/native-unwind). Needs root, gdb and
    /// libc6-dbg.
    RecordUnwindFixture {
        /// Output directory.
        #[arg(long, default_value = "tests/fixtures/native-unwind")]
        out: std::path::PathBuf,
    },
    /// Workload process of the host benchmarks: THREADS threads, 1 ms busy / 4 ms asleep.
    #[command(hide = true)]
    Spin { threads: usize, seconds: f64 },
}

fn main() -> anyhow::Result<()> {
    match Xtask::parse().task {
        Task::Setup => setup::ensure(),
        Task::Demo { seconds } => demo::run(seconds),
        Task::Test { filter } => test::run(filter.as_deref()),
        Task::Bench {
            overhead,
            quick,
            from_start,
            devices,
            rounds,
            no_frame_pointers,
            jvm_threads,
            host,
            criterion,
            rss,
            soak,
            hotspot,
            overhead_only,
            host_only,
            soak_only,
            hotspot_only,
        } => {
            let any = overhead
                || quick
                || from_start
                || devices
                || host
                || criterion
                || hotspot
                || rss.is_some()
                || soak.is_some()
                || overhead_only
                || host_only
                || soak_only
                || hotspot_only;
            let run_overhead = overhead || quick || from_start || devices || overhead_only || !any;
            let mut opts = match (from_start, devices, quick) {
                (true, _, _) => overhead::Options::from_start(),
                (false, true, _) => overhead::Options::devices(),
                (false, false, true) => overhead::Options::quick(),
                (false, false, false) => overhead::Options::full(),
            };
            opts.rounds = rounds.unwrap_or(opts.rounds).max(1);
            opts.frame_pointers = !no_frame_pointers;
            opts.jvm_threads = jvm_threads.unwrap_or(opts.jvm_threads);
            bench::run(bench::Selection {
                overhead: run_overhead.then_some(opts),
                host: host || host_only || overhead_only || !any,
                hotspot: hotspot || hotspot_only || !any,
                criterion: criterion || !any,
                soak_s: soak.or(soak_only.then_some(600.0)),
                rss_s: rss,
            })
        }
        Task::Clippy => lint::clippy(),
        Task::FmtCheck => lint::fmt_check(),
        Task::Fuzz { seconds, target } => fuzz::run(seconds, target.as_deref()),
        Task::CompareJfr { app, jdk, warmup, window, frequency, jvm_flags, profiler, keep } => {
            compare_jfr::run(&compare_jfr::Options {
                apps: app,
                jdks: jdk,
                warmup_s: warmup,
                window_s: window,
                frequency_hz: frequency,
                jvm_flags,
                profiler,
                keep,
            })
        }
        Task::DumpHotspotFixture { java, out } => hotspot_fixture::run(&java, &out),
        Task::RecordUnwindFixture { out } => unwind_fixture::run(&out),
        Task::Spin { threads, seconds } => host_bench::spin(threads, seconds),
    }
}
