//! Issue 24 acceptance on a real application: Jetty 9.4 from Debian (`jetty9`, installed by
//! `cargo xtask test`) serving a JSP under a bounded loopback `wrk`, on a JVM with no flags but
//! JFR's, which records the same window for comparison. Run as root by `cargo xtask test`.
//!
//! Which of JFR's samples are a reference for ours depends on the JDK:
//! - JDK 25 has CPU-time samples (JEP 509: a signal per 2 ms of each thread's CPU time, the
//!   stack taken where the thread was), which follow CPU time as ours do: ours must agree with
//!   them within their own split-half noise. Its execution samples are taken at the thread's
//!   next safepoint (JEP 518, cooperative sampling) and land on the safepoint polls of loop
//!   back-edges and returns: 39-53 pp from ours, 41-56 pp from its own CPU-time samples, where
//!   ours were 4.1-6.1 pp from those and their split-half noise 6.3-7.9 pp (8 runs).
//! - JDK 17 has execution samples only, taken by signal where the thread was. As a whole they
//!   disagree with ours by 8-14 pp where their split-half noise is 4-6 pp, and not by chance:
//!   pooled and dealt out again at random, the two sides' samples differ by at most 4.4-6.4 pp
//!   (95th percentile of 200 such deals, in each of 8 runs). JFR puts 10-15 pp more of its
//!   samples than we do on the longest loops (`Integer.getChars`, `StringLatin1.hashCode`,
//!   `HashMap.resize`) and fewer on short methods called often. The cause is JFR's: a thread
//!   its signal finds on a CPU is sampled only if it is still in Java code when the handler
//!   runs, which long loops are and short stretches between native calls often are not
//!   (`joular_tests::jfr_signals`). JFR's samples of threads it found on a CPU were 16.7-21.9 pp
//!   from ours and 12.7-18.0 pp from its own samples of threads waiting for a CPU (chance:
//!   8.7-10.2 pp); those of waiting threads, 6.1-7.7 pp from ours, within their split-half
//!   noise of 7.7-8.7 pp (3 runs). They are the reference here, held to the bar.
use joular_tests::apps::{compare, App, Comparison, Run};
use joular_tests::leaf_distance::TOP_METHODS;
use joular_tests::statistical;

/// Whole call paths: ≥ 97% of the application threads' samples reach their thread's root,
/// native code without a Java caller stays under 2% of the process's energy, and the top
/// leaf methods agree within their split-half noise with JFR's samples, in the same JVM, of
/// threads its signal found waiting for a CPU.
#[test]
fn jdk17_jetty_from_debian_keeps_whole_call_paths_and_agrees_with_jfr() {
    statistical::two_attempts("jetty on JDK 17", jdk17_attempt);
}

/// The same on JDK 25, where the top leaf methods agree with JFR's CPU-time samples within
/// their own split-half noise.
#[test]
fn jdk25_jetty_from_debian_keeps_whole_call_paths_and_agrees_with_jfr_cpu_time_samples() {
    statistical::two_attempts("jetty on JDK 25", jdk25_attempt);
}

/// One attempt: every bar counts samples of a real server under load, so a miss is measured
/// once more.
fn jdk17_attempt() {
    let c = jetty(17);
    let mut failures = call_path_failures(&c);
    match &c.by_thread_state {
        Some(s) if s.waiting.samples < 300 => {
            failures.push(format!("too few JFR samples of threads waiting for a CPU: {}", s.waiting.samples))
        }
        // Samples JFR took of a thread bpftrace saw no signal to: the two clocks, or the
        // watch, are wrong.
        Some(s) if s.unmatched * 10 > s.waiting.samples + s.on_cpu.samples + s.unmatched => failures.push(format!(
            "{} of JFR's samples of application threads matched to no signal (on a CPU {}, waiting {})",
            s.unmatched, s.on_cpu.samples, s.waiting.samples
        )),
        Some(s) if s.waiting.leaf_distance_pp > s.waiting.split_half_pp => failures.push(format!(
            "top-{TOP_METHODS} leaf methods {:.1} pp from JFR's samples of waiting threads, beyond their split-half noise {:.1} pp",
            s.waiting.leaf_distance_pp, s.waiting.split_half_pp
        )),
        Some(_) => {}
        None => failures.push("no signals recorded beside JFR".to_owned()),
    }
    statistical::check(failures.is_empty(), || format!("Jetty on JDK 17: {failures:?}\n{c}"));
}

fn jdk25_attempt() {
    let c = jetty(25);
    let mut failures = call_path_failures(&c);
    match &c.cpu_time {
        Some(cpu) if cpu.samples < 300 => failures.push(format!("too few JFR CPU-time samples: {}", cpu.samples)),
        Some(cpu) if cpu.leaf_distance_pp > cpu.split_half_pp => failures.push(format!(
            "top-{TOP_METHODS} leaf methods {:.1} pp from JFR's CPU-time samples, beyond their split-half noise {:.1} pp",
            cpu.leaf_distance_pp, cpu.split_half_pp
        )),
        Some(_) => {}
        None => failures.push("JDK 25 recorded no CPU-time samples".to_owned()),
    }
    statistical::check(failures.is_empty(), || format!("Jetty on JDK 25: {failures:?}\n{c}"));
}

fn jetty(jdk: u32) -> Comparison {
    let c = compare(&Run { app: App::Jetty, jdk, warmup_s: 10, window_s: 15, frequency_hz: 200, ..Run::default() });
    eprintln!("{c}");
    c
}

/// The bars of whole call paths, and that both sides saw enough of the load to compare.
fn call_path_failures(c: &Comparison) -> Vec<String> {
    let mut failures = Vec::new();
    // The comparison means something only when both sides saw the load, and JFR its roots.
    if c.ours_samples < 1_000 || c.jfr_samples < 300 {
        failures.push(format!("too few samples: ours {}, JFR {}", c.ours_samples, c.jfr_samples));
    }
    if c.jfr_rooted_share < 0.97 {
        failures.push(format!("JFR itself reaches a thread root in {:.1}%", 100.0 * c.jfr_rooted_share));
    }
    if c.ours_rooted_share < 0.97 {
        failures.push(format!("{:.1}% of samples reach a thread root (floor 97%)", 100.0 * c.ours_rooted_share));
    }
    if c.native_energy_percent >= 2.0 {
        failures.push(format!("native without a Java caller: {:.2}% of the energy (bar 2%)", c.native_energy_percent));
    }
    failures
}
