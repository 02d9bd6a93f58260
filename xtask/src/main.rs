//! `cargo xtask setup | demo | test | bench`: everything a fresh machine needs, in one place.

mod bench;
mod demo;
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
    /// Benchmarks: profiler overhead on a busy JVM, plus the criterion hot paths.
    Bench {
        /// Skip the criterion benchmarks (overhead run only).
        #[arg(long)]
        overhead_only: bool,
    },
}

fn main() -> anyhow::Result<()> {
    match Xtask::parse().task {
        Task::Setup => setup::ensure(),
        Task::Demo { seconds } => demo::run(seconds),
        Task::Test { filter } => test::run(filter.as_deref()),
        Task::Bench { overhead_only } => bench::run(overhead_only),
    }
}
