//! Issue 2 acceptance: the kernel samplers and scheduler accounting against a real JVM with a
//! 100% thread and a ~30% thread. Run as root by `cargo xtask test`.

use std::time::Duration;

use joular_tests::*;

struct Run {
    jvm: Jvm,
    cycles: Vec<serde_json::Value>,
    _dir: tempfile::TempDir,
}

fn profile_duty_cycle(extra: &[&str]) -> Run {
    profile_duty_cycle_for(3, extra)
}

fn profile_duty_cycle_for(seconds: usize, extra: &[&str]) -> Run {
    let jvm = Jvm::start("DutyCycle", &["20", "1.0", "0.3"], &[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cycles.jsonl");
    let pid = jvm.pid().to_string();
    let duration = seconds.to_string();
    let mut args = vec!["--pid", &pid, "--duration", &duration, "--json", json.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = profile(&args, Duration::from_secs(60));
    assert_success(&out);
    let cycles = read_jsonl(&json);
    assert_eq!(cycles.len(), seconds, "{seconds} s at 1 s cycles gives {seconds} cycles");
    Run { jvm, cycles, _dir: dir }
}

/// The light thread runs 30% of periods drawn between 6 and 14 ms: a fixed 10 ms period plus
/// wake-up latency came out at ~97 Hz, in lockstep with the sampler, which then saw it up to a
/// third more or less often than its CPU time says (the sampling bias the README describes;
/// one CI run missed the bar twice, at 0.71 and 1.31). Random periods leave the binomial
/// noise of ~175 samples over 6 s (±6% one standard deviation), so the bar shows whether the
/// sampler fires at its frequency on whatever runs.
#[test]
fn samples_follow_frequency_times_on_cpu_time() {
    statistical::two_attempts("samples follow frequency", samples_follow_frequency_attempt);
}

/// One attempt: a sample count against its expectation is a statistical bar (the light
/// thread's phase against the sampler's moves it between runs).
fn samples_follow_frequency_attempt() {
    const UNLOCKED_HZ: f64 = 97.0;
    let run = profile_duty_cycle_for(6, &["--frequency", "97"]);
    let on_cpu = per_thread_sum(&run.cycles, "on_cpu_ns");
    let samples = per_thread_sum(&run.cycles, "samples");
    for name in ["busy", "light"] {
        let tid = run.jvm.tid_of(name) as u64;
        let expected = UNLOCKED_HZ * on_cpu[&tid] / 1e9;
        let got = samples[&tid];
        assert!(expected > 20.0, "{name}: too little on-CPU time to judge ({expected} expected samples)");
        statistical::check((got - expected).abs() <= 0.25 * expected, || {
            format!("{name}: {got} samples, expected {expected:.0} ±25%")
        });
    }
}

#[test]
fn busier_thread_gets_the_larger_share_and_no_other_process_appears() {
    let run = profile_duty_cycle(&[]);
    let on_cpu = per_thread_sum(&run.cycles, "on_cpu_ns");
    let samples = per_thread_sum(&run.cycles, "samples");
    let (busy, light) = (run.jvm.tid_of("busy") as u64, run.jvm.tid_of("light") as u64);
    // Only the order is asserted: on a shared 2-CPU machine other load squeezes both threads.
    assert!(on_cpu[&busy] > on_cpu[&light], "busy {} vs light {}", on_cpu[&busy], on_cpu[&light]);
    assert!(samples[&busy] > samples[&light], "busy {} vs light {} samples", samples[&busy], samples[&light]);
    for c in &run.cycles {
        for t in c["threads"].as_array().unwrap() {
            assert_eq!(t["pid"].as_u64().unwrap(), run.jvm.pid() as u64, "a thread of another process: {t}");
        }
        assert!(c["cpus"].as_array().unwrap().iter().all(|cpu| cpu["busy_ns"].as_u64().is_some()));
        assert!(c["drops"].is_object());
    }
}

#[test]
fn ebpf_on_cpu_time_matches_proc_jiffies() {
    let run = profile_duty_cycle(&["--verbose"]);
    let ebpf = per_thread_sum(&run.cycles, "on_cpu_ns");
    let procfs = per_thread_sum(&run.cycles, "proc_on_cpu_ns");
    for name in ["busy", "light"] {
        let tid = run.jvm.tid_of(name) as u64;
        let (e, p) = (ebpf[&tid], procfs[&tid]);
        assert!(p > 0.0, "{name}: no /proc cross-check value in --verbose JSON");
        assert!((e - p).abs() <= 0.10 * p, "{name}: eBPF {:.3} s vs /proc {:.3} s", e / 1e9, p / 1e9);
    }
}

/// A thread's CPU time as the kernel counts it (`/proc/<pid>/task/<tid>/schedstat`, ns).
fn schedstat_ns(pid: u32, tid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).expect("schedstat");
    text.split_whitespace().next().and_then(|f| f.parse().ok()).unwrap_or_else(|| panic!("bad schedstat {text:?}"))
}

/// Time the kernel's task clock leaves out of every task's run time, all CPUs together, ns:
/// `/proc/stat`'s irq, softirq and steal (a hypervisor running another guest on our vCPU).
fn left_out_of_task_clocks_ns() -> u64 {
    let text = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let fields: Vec<u64> =
        text.lines().next().unwrap().split_whitespace().skip(1).map(|f| f.parse().unwrap()).collect();
    // user nice system idle iowait irq softirq steal ...
    (fields[5] + fields[6] + fields[7]) * ns_per_jiffy()
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec; CLOCK_MONOTONIC is the clock of the cycles' start_ns/end_ns.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `(at_ns, value)` readings, increasing in time: the value at `t_ns`, linearly interpolated.
fn value_at(readings: &[(u64, u64)], t_ns: u64) -> f64 {
    let after = readings.iter().position(|r| r.0 >= t_ns).unwrap_or_else(|| panic!("no reading after {t_ns}"));
    assert!(after > 0, "no reading before {t_ns}");
    let ((t0, v0), (t1, v1)) = (readings[after - 1], readings[after]);
    v0 as f64 + (v1 - v0) as f64 * (t_ns - t0) as f64 / (t1 - t0).max(1) as f64
}

/// The per-thread on-CPU time the scheduler programs count (per-CPU thread slots, spilled to
/// `THREAD_CPU_*`) against the kernel's own nanosecond count for a busy thread, over the same
/// span: its schedstat, read every 2 ms during the run and interpolated at the cycle bounds.
/// The first cycle also holds the slice since the programs were attached, so it is left out.
/// The programs count wall-clock time between scheduler events; schedstat counts the task
/// clock, which leaves out interrupts and, in a VM, the time the hypervisor stole from the
/// vCPU (3% of it on this 2-vCPU VM under load). So eBPF may exceed schedstat by what
/// `/proc/stat` says was stolen or spent in interrupts in the window, never fall short of it.
#[test]
fn ebpf_on_cpu_time_of_a_busy_thread_matches_its_schedstat() {
    let jvm = Jvm::start("DutyCycle", &["20", "1.0", "0.3"], &[]);
    let (pid, busy) = (jvm.pid(), jvm.tid_of("busy"));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let (mut readings, mut left_out) = (Vec::new(), Vec::new());
            loop {
                let done = stop.load(std::sync::atomic::Ordering::Relaxed);
                let at = monotonic_ns();
                readings.push((at, schedstat_ns(pid, busy)));
                left_out.push((at, left_out_of_task_clocks_ns()));
                if done {
                    return (readings, left_out);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cycles.jsonl");
    let out = profile(
        &["--pid", &pid.to_string(), "--duration", "4", "--json", json.to_str().unwrap()],
        Duration::from_secs(60),
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (readings, left_out) = reader.join().expect("schedstat reader");
    assert_success(&out);
    let cycles = read_jsonl(&json);
    assert_eq!(cycles.len(), 4, "4 s at 1 s cycles gives 4 cycles");
    let counted = &cycles[1..];
    let ebpf_ns = per_thread_sum(counted, "on_cpu_ns")[&(busy as u64)];
    let (from, to) = (counted[0]["start_ns"].as_u64().unwrap(), counted.last().unwrap()["end_ns"].as_u64().unwrap());
    let kernel_ns = value_at(&readings, to) - value_at(&readings, from);
    assert!(kernel_ns > 1e9, "the busy thread ran only {kernel_ns} ns in {} ns", to - from);
    let left_out_ns = value_at(&left_out, to) - value_at(&left_out, from);
    assert!(
        ebpf_ns >= 0.97 * kernel_ns && ebpf_ns <= 1.03 * kernel_ns + left_out_ns,
        "busy thread: eBPF {:.4} s vs schedstat {:.4} s over the same {:.3} s, with {:.4} s of interrupts and \
         stolen time on the CPUs",
        ebpf_ns / 1e9,
        kernel_ns / 1e9,
        (to - from) as f64 / 1e9,
        left_out_ns / 1e9
    );
}

#[test]
fn a_target_that_exits_mid_run_still_gets_a_summary() {
    // 3 s: the profiler must be running before the target exits, and its start (verifying the
    // sampler) takes 1-2 s on a busy 2-CPU machine.
    let jvm = Jvm::start("DutyCycle", &["3", "1.0", "0.3"], &[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.jsonl");
    let pid = jvm.pid().to_string();
    let out = profile(&["--pid", &pid, "--duration", "30", "--json", json.to_str().unwrap()], Duration::from_secs(30));
    assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("summary"), "no summary: {stdout}");
    assert!(stdout.contains("busy"), "summary lacks the busy thread: {stdout}");
    let cycles = read_jsonl(&json);
    // The cycle in which the target exited still holds the busy thread's last slice.
    let last_busy: Vec<u64> = cycles
        .iter()
        .map(|c| {
            c["threads"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|t| t["comm"] == "busy")
                .map(|t| t["on_cpu_ns"].as_u64().unwrap())
                .sum()
        })
        .collect();
    assert!(
        last_busy.iter().rev().take(2).any(|&ns| ns > 0),
        "the exiting target's last slices were lost: {last_busy:?}"
    );
    assert!(cycles.len() <= 4, "kept running after the target exited: {} cycles", cycles.len());
}

#[test]
fn record_runs_java_and_returns_its_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.jsonl");
    let mut args = vec!["record".to_string(), "--json".into(), json.display().to_string(), "--".into()];
    args.extend(java_cmd("DutyCycle", &["2", "1.0", "0.3"], &["-DexitCode=7"]));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = profile(&argv, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(7), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let cycles = read_jsonl(&json);
    let names: Vec<String> = cycles
        .iter()
        .flat_map(|c| c["threads"].as_array().unwrap().iter().map(|t| t["comm"].as_str().unwrap().to_string()))
        .collect();
    assert!(names.iter().any(|n| n == "busy"), "record did not see the busy thread: {names:?}");
    let samples: f64 = per_thread_sum(&cycles, "samples").values().sum();
    assert!(samples > 150.0, "record mode saw only {samples} samples of a 2 s busy JVM");
}

#[test]
fn clear_errors_for_bad_input() {
    let out = profile(&["--pid", "999999999", "--duration", "1"], Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(2), "bad input exits 2, as clap's own usage errors do");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("PID 999999999 not found"), "{err}");
    let out = profile(&["--duration", "1"], Duration::from_secs(20));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--pid"), "must say what to give");
}
