//! The profiling session: load, attach, drain every cycle, emit, and finish cleanly on
//! duration, Ctrl-C, SIGTERM, or when the target exits.

mod crosscheck;
mod cycle;
mod energy;
mod exporter;
mod jsonl;
mod labels;
pub mod profiles;
mod retire;
mod stop;
mod summary;
mod symbolize;
pub mod target;

use std::time::Duration;

use anyhow::Context as _;
use joular_user::collect::Collector;
use joular_user::ebpf::{Probe, ProbeOptions, SchedulerHook};
use joular_user::output::{MethodFilter, Results, ResultsConfig};
use joular_user::symbols::SymbolizerOptions;
use tokio::signal::unix::{signal, SignalKind};
use tokio::time::Instant;

use crate::cli::args::{CommonArgs, CpuTimeSource, JavaSymbols};
use jsonl::JsonLines;
use summary::Summary;
use target::Target;

/// `serve`: the Prometheus endpoint and its registry, the optional result tree and the
/// optional periodic profile files.
pub struct FleetOptions {
    pub listen: std::net::SocketAddr,
    pub top_methods: usize,
    pub retain_exited: Duration,
    pub results: bool,
    pub profiles: Option<profiles::ProfileOptions>,
}

/// Runs a session to its end; returns the process exit code.
pub async fn run(mut target: Target, common: &CommonArgs, fleet: Option<FleetOptions>) -> anyhow::Result<i32> {
    // Bind first: a taken port is reported before anything is loaded.
    let exporter = match &fleet {
        Some(f) => Some(exporter::Exporter::start(f, &common.proc_root).await?),
        None => None,
    };
    let opts = ProbeOptions {
        frequency_hz: common.frequency,
        all_processes: matches!(target, Target::All),
        follow_children: target.follows_children(),
        ebpf_log: common.ebpf_log,
        scheduler: common.cpu_time == CpuTimeSource::Ebpf,
        proc_root: common.proc_root.clone(),
        sys_root: "/sys".into(),
    };
    // Energy first: a bad --sysfs-root or --tdp is reported before anything is loaded.
    let mut energy = energy::EnergyStage::open(&common.energy_options())?;
    let mut probe = Probe::load(&opts)?;
    for pid in target.pids() {
        probe.add_target(pid).with_context(|| format!("adding PID {pid} to the kernel filter"))?;
    }
    // Reading a JVM's tables takes a moment: the targets are sampled meanwhile (those first
    // samples' Java frames are named from their pcs), then walked.
    let mut symbols = symbolize::SymbolStage::new(SymbolizerOptions {
        proc_root: common.proc_root.clone(),
        hotspot: common.java_symbols == JavaSymbols::Hotspot,
        ..Default::default()
    });
    for pid in target.pids() {
        symbols.watch(pid);
    }
    symbols.update_kernel(&mut probe);
    let mut collector = Collector::new();
    // Loading took a while; the first cycle's energy must start where its CPU time starts.
    energy.read_at_flip(0)?;
    if let Target::Command(child) = &mut target {
        child.release();
    }
    let pids = (!matches!(target, Target::All)).then(|| target.pids());
    // Without the scheduler hook, /proc jiffies stand in for the kernel's per-thread time.
    let mut procfs_time = match probe.scheduler_hook {
        Some(_) => None,
        None => Some(crosscheck::ProcTime::start(&common.proc_root, pids.clone())?),
    };
    let mut crosscheck = if common.verbose && procfs_time.is_none() {
        Some(crosscheck::ProcTime::start(&common.proc_root, pids.clone())?)
    } else {
        None
    };
    let mut json = common.json.as_deref().map(JsonLines::create).transpose()?;
    errln!(
        "joular-ebpf: profiling {} at {} Hz, {} s cycles (CPU time from {}); Ctrl-C to stop",
        describe(&target),
        common.frequency,
        common.interval,
        match probe.scheduler_hook {
            Some(SchedulerHook::BtfTracepoint) => "tp_btf/sched_switch",
            Some(SchedulerHook::ClassicTracepoint) => "tracepoint sched/sched_switch",
            None => "/proc jiffies",
        }
    );

    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigchld = signal(SignalKind::child())?;
    let mut stopper = stop::Stopper::default();
    let mut leader_names = target::LeaderNames::default();
    let interval = Duration::from_secs_f64(common.interval);
    let start = Instant::now();
    let deadline = common.duration.map(|d| start + Duration::from_secs_f64(d));
    let serve = fleet.as_ref();
    let mut results = Results::new(ResultsConfig {
        results_root: common.output.clone(),
        // A daemon writes the tree only when asked, process by process as they end.
        write_files: serve.is_none_or(|f| f.results),
        filter: MethodFilter::parse(&common.filter),
        start_epoch_ms: cycle::epoch_ms(),
        energy_source: energy.source_label().to_string(),
        estimated: energy.estimated(),
        report_stacks: json.is_some(),
        // A daemon would grow evolution files without bound.
        evolution: !common.no_evolution && fleet.is_none(),
        runtime_call_trees: common.runtime_call_trees,
        top_n: common.top,
    })
    .with_context(|| format!("--output {}", common.output.display()))?;
    let mut labeler = matches!(target, Target::All).then(|| labels::Labeler::new(joular_user::fleet::ProcFs::new(common.proc_root.clone())));
    let mut profiles = match serve.and_then(|f| f.profiles.as_ref()) {
        Some(p) => Some(profiles::ProfileExport::new(p, energy.source_label(), energy.estimated(), cycle::epoch_ms())?),
        None => None,
    };
    let mut retirement = serve.map(|_| retire::Retirement::new(common.proc_root.clone()));
    // A daemon logs a cycle line a minute unless --verbose.
    let cycle_line_every = if serve.is_some() && !common.verbose { 60 } else { 1 };
    let mut summary = Summary::default();
    let mut next_tick = start + interval;
    let mut stop_reason = None;
    while stop_reason.is_none() {
        let wake = deadline.map_or(next_tick, |d| d.min(next_tick));
        match wait_for(wake, stopper.kill_at(), &mut sigint, &mut sigterm, &mut sigchld).await {
            Wake::Tick => {}
            Wake::Signal(why) => match stopper.on_signal(&mut target, &probe, why) {
                Some(reason) => stop_reason = Some(reason),
                None => continue,
            },
            Wake::Grace => stop_reason = Some(stopper.on_grace_expired(&mut target, &probe)),
            // Only `record`'s command is our child: stop as soon as it ends.
            Wake::Child if target.ended(&common.proc_root) => stop_reason = Some("target exited"),
            Wake::Child => continue,
        }
        next_tick += interval;
        let span = collector.flip(&mut probe)?;
        energy.read_at_flip_or_skip(span.1 - span.0);
        let mut raw = collector.read(&mut probe, span)?;
        if let Some(p) = procfs_time.as_mut() {
            p.replace_cpu_time(&mut raw)?;
        }
        let mut report = cycle::base_report(summary.cycles(), &raw, &common.proc_root);
        energy.attribute(&raw.cpus, &raw.thread_cpu, raw.end_ns - raw.start_ns, &mut report);
        if let Some(l) = labeler.as_mut() {
            l.fill(&mut report, &raw.exits);
        } else {
            leader_names.fill(&mut report, &common.proc_root);
        }
        if let Some(c) = crosscheck.as_mut() {
            c.fill(&mut report)?;
        }
        if report.cycle.is_multiple_of(cycle_line_every) {
            print_cycle_line(&report, energy.estimated(), common.verbose);
        }
        let stacks = symbols.cycle(&raw);
        symbols.update_kernel(&mut probe);
        results.on_cycle(&mut report, &stacks)?;
        if let Some(e) = &exporter {
            e.on_cycle(&report);
        }
        if let Some(p) = profiles.as_mut() {
            p.on_cycle(&report, &stacks);
        }
        if let Some(j) = json.as_mut() {
            j.write(&report)?;
        }
        summary.add(&report, &stacks);
        if let Some(r) = retirement.as_mut() {
            let ended = r.ended(&raw.exits, results.pids());
            for &pid in &ended.pids {
                // A daemon goes on when one process's files cannot be written (disk full).
                match results.retire(pid) {
                    Ok(Some(files)) => log::info!("results of ended process {pid}: {}", files.dir.display()),
                    Ok(None) => {}
                    Err(e) => errln!("joular-ebpf: warning: results of ended process {pid} not written: {e}"),
                }
            }
            summary.forget(&ended);
            energy.totals.forget_processes(&ended.pids);
            energy.totals.forget_threads(&ended.threads);
        }
        if stop_reason.is_some() {
            // A signal, the grace period or the command's end already decided.
        } else if deadline.is_some_and(|d| Instant::now() >= d) {
            stop_reason = Some("duration reached");
        } else if target.ended(&common.proc_root) {
            stop_reason = Some("target exited");
        }
    }
    errln!("joular-ebpf: stopping ({})", stop_reason.unwrap_or_default());
    if energy.failed_reads > 0 {
        errln!("joular-ebpf: warning: energy could not be read in {} cycle(s); they count 0 J", energy.failed_reads);
    }
    if let Some(p) = profiles.as_mut() {
        // The last, partial interval: a daemon stopped for an upgrade loses nothing.
        p.flush(cycle::epoch_ms());
        let (written, failed) = p.counts();
        errln!("joular-ebpf: {written} profile files written, {failed} failed");
    }
    let st = symbols.stats();
    if st.perf_map_bad_lines > 0 || st.perf_map_dump_failures > 0 || st.jit_misses > 0 {
        errln!(
            "joular-ebpf: symbols: {} JVM(s), {} perf-map entries, {} malformed perf-map lines skipped, {} dumps ({} failed), {} JIT addresses missing from the map",
            st.jvms, st.perf_map_entries, st.perf_map_bad_lines, st.perf_map_dumps, st.perf_map_dump_failures, st.jit_misses
        );
    }
    if st.hotspot_jvms > 0 {
        errln!("joular-ebpf: {}", symbolize::hotspot_line(&st));
    }
    // Written before anything is printed: the terminal may be gone (`| head`), the results not.
    let finished = results.finish();
    out!("{}", summary.render(common.top, &energy.totals, energy.source_label(), energy.estimated()));
    let finished = finished.with_context(|| format!("writing the results under --output {}", common.output.display()))?;
    outln!("\n{}", finished.table);
    for out in &finished.outputs {
        outln!("results: {}", out.dir.display());
        for f in out.files.iter().filter(|f| f.extension().is_some_and(|e| e == "svg")) {
            outln!("flame graph: {}", f.display());
        }
    }

    Ok(match &mut target {
        Target::Command(child) => stopper.end_command(child, &probe, &mut sigint, &mut sigterm).await,
        _ => 0,
    })
}

/// What ended a wait of the session loop.
enum Wake {
    Tick,
    Signal(&'static str),
    /// The grace period `record`'s command was given after the first signal is over.
    Grace,
    /// SIGCHLD: `record`'s command may have ended.
    Child,
}

async fn wait_for(
    tick: Instant,
    kill_at: Option<Instant>,
    sigint: &mut tokio::signal::unix::Signal,
    sigterm: &mut tokio::signal::unix::Signal,
    sigchld: &mut tokio::signal::unix::Signal,
) -> Wake {
    tokio::select! {
        _ = tokio::time::sleep_until(tick) => Wake::Tick,
        _ = sigint.recv() => Wake::Signal("interrupted"),
        _ = sigterm.recv() => Wake::Signal("terminated"),
        _ = tokio::time::sleep_until(kill_at.unwrap_or(tick)), if kill_at.is_some() => Wake::Grace,
        _ = sigchld.recv() => Wake::Child,
    }
}

fn describe(target: &Target) -> String {
    match target {
        Target::Pids { pids, follow_children } => format!(
            "PID {}{}",
            pids.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
            if *follow_children { " and the processes they start" } else { "" }
        ),
        Target::All => "every process".into(),
        Target::Command(c) => format!("command (PID {}) and the processes it starts", c.pid()),
    }
}

fn print_cycle_line(r: &joular_user::model::CycleReport, estimated: bool, verbose: bool) {
    let secs = r.end_ns.saturating_sub(r.start_ns) as f64 / 1e9;
    let on_cpu: u64 = r.threads.iter().map(|t| t.on_cpu_ns).sum();
    let samples: u64 = r.threads.iter().map(|t| t.samples).sum();
    let busy: Vec<String> = r
        .cpus
        .iter()
        .map(|c| format!("cpu{} {:.0}%", c.cpu, 100.0 * c.busy_ns as f64 / (c.busy_ns + c.idle_ns).max(1) as f64))
        .collect();
    let drops: u64 = r.drops.values().sum();
    let socket_uj: f64 = r.sockets.iter().map(|s| s.energy_uj).sum();
    let target_uj: f64 = r.processes.iter().map(|p| p.energy_uj).sum();
    let est = if estimated { " estimated" } else { "" };
    errln!(
        "[cycle {:>3}] {secs:.2} s  host {:.2} J ({:.1} W{est})  profiled {:.2} J ({:.1} W)  threads {:>4}  on-CPU {:.3} s  samples {:>5}  | {} | drops {drops}",
        r.cycle,
        socket_uj / 1e6,
        socket_uj / 1e6 / secs.max(1e-9),
        target_uj / 1e6,
        target_uj / 1e6 / secs.max(1e-9),
        r.threads.len(),
        on_cpu as f64 / 1e9,
        samples,
        busy.join(" ")
    );
    if verbose {
        for t in &r.threads {
            let proc = t.proc_on_cpu_ns.map(|p| format!("  /proc {:>8.3} ms", p as f64 / 1e6)).unwrap_or_default();
            errln!(
                "    {:>7} {:>7} {:<16} on-CPU {:>8.3} ms{proc}  samples {:>4}  {:>8.3} J",
                t.pid, t.tid, t.comm, t.on_cpu_ns as f64 / 1e6, t.samples, t.energy_uj / 1e6
            );
        }
    }
}
