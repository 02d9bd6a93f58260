//! `cargo xtask setup | demo | test | bench`: everything a fresh machine needs, in one place.

mod bench;
mod demo;
mod host_bench;
mod hotspot_bench;
mod hotspot_fixture;
mod jdks;
mod run;
mod setup;
mod test;

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
    /// Benchmarks: profiler overhead on a busy JVM and in host mode (100 processes, 1,000
    /// threads), plus the criterion hot paths; `--soak` adds the serve-mode memory soak.
    Bench {
        /// Skip the criterion benchmarks (overhead runs only).
        #[arg(long)]
        overhead_only: bool,
        /// Run only the host-mode overhead benchmark.
        #[arg(long, conflicts_with = "overhead_only")]
        host_only: bool,
        /// Also run the serve-mode memory soak for this many seconds (600 if no value) and print
        /// the RSS slope.
        #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "600")]
        soak: Option<f64>,
        /// Run only the soak (600 s unless --soak says otherwise).
        #[arg(long, conflicts_with_all = ["overhead_only", "host_only"])]
        soak_only: bool,
        /// Run only the HotSpot symbolization benchmark (a JVM with thousands of methods).
        #[arg(long, conflicts_with_all = ["overhead_only", "host_only", "soak_only"])]
        hotspot_only: bool,
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
    /// Workload process of the host benchmarks: THREADS threads, 1 ms busy / 4 ms asleep.
    #[command(hide = true)]
    Spin { threads: usize, seconds: f64 },
}

fn main() -> anyhow::Result<()> {
    match Xtask::parse().task {
        Task::Setup => setup::ensure(),
        Task::Demo { seconds } => demo::run(seconds),
        Task::Test { filter } => test::run(filter.as_deref()),
        Task::Bench { overhead_only, host_only, soak, soak_only, hotspot_only } => bench::run(bench::Selection {
            overhead_only,
            host_only,
            soak_only,
            hotspot_only,
            soak_s: if soak_only { soak.or(Some(600.0)) } else { soak },
        }),
        Task::DumpHotspotFixture { java, out } => hotspot_fixture::run(&java, &out),
        Task::Spin { threads, seconds } => host_bench::spin(threads, seconds),
    }
}
