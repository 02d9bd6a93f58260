//! The profiling session: load, attach, drain every cycle, emit, and finish cleanly on
//! duration, Ctrl-C, SIGTERM, or when the target exits.

mod crosscheck;
mod emit;
mod exporter;
mod frequencies;
mod jsonl;
mod labels;
mod pace;
pub mod profiles;
mod retire;
mod stop;
mod summary;
mod symbolize;
pub mod target;
mod vm;

use std::time::Duration;

use anyhow::Context as _;
use joular_user::attribution::stacks::StackStage;
use joular_user::collect::Collector;
use joular_user::ebpf::{Probe, ProbeOptions, SchedulerHook};
use joular_user::output::{MethodFilter, ResultTree, ResultsConfig, RetiredTreeWriter, Sink, RETIRED_QUEUE_TREES};
use joular_user::stages::energy::EnergyStage;
use joular_user::stages::report::{base_report, epoch_ms};
use joular_user::symbols::SymbolizerOptions;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::time::Instant;

use crate::cli::args::{CommonArgs, CpuTimeSource, JavaSymbols};
use emit::{PendingCycle, Sinks};
use jsonl::JsonLines;
use symbolize::{CycleSamples, SymbolReply, SymbolWorker};
use target::Target;

/// How long a drained cycle may wait for its symbols before it is written without them (or
/// two cycles, if longer).
const MAX_SYMBOL_WAIT: Duration = Duration::from_secs(10);
/// At the end, how long the worker gets for the cycles still waiting.
const SHUTDOWN_SYMBOL_WAIT: Duration = Duration::from_secs(5);
/// At the end, how long serve's result writer gets for the ended processes still queued.
const RETIRED_WRITES_WAIT: Duration = Duration::from_secs(5);

/// `serve`: the Prometheus endpoint and its registry, the optional result tree and the
/// optional periodic profile files.
pub struct FleetOptions {
    pub listen: std::net::SocketAddr,
    pub top_methods: usize,
    pub retain_exited: Duration,
    pub results: bool,
    pub profiles: Option<profiles::ProfileOptions>,
    /// `--vm-energy-dir` and where its counters wrap.
    pub vm_energy: Option<(std::path::PathBuf, u64)>,
}

/// Runs a session to its end; returns the process exit code.
pub async fn run(mut target: Target, common: &CommonArgs, fleet: Option<FleetOptions>) -> anyhow::Result<i32> {
    keep_large_allocations_mapped();
    // Bind first: a taken port is reported before anything is loaded.
    let exporter = match &fleet {
        Some(f) => Some(exporter::Exporter::start(f, &common.proc_root)?),
        None => None,
    };
    let opts = ProbeOptions {
        frequency_hz: common.frequency,
        interval_s: common.interval,
        all_processes: matches!(target, Target::All),
        follow_children: target.follows_children(),
        ebpf_log: common.ebpf_log,
        scheduler: common.cpu_time == CpuTimeSource::Ebpf,
        devices: common.devices,
        sampler_cost: common.sampler_cost,
        proc_root: common.proc_root.clone(),
    };
    // Energy first: a bad --sysfs-root or --tdp is reported before anything is loaded.
    let (mut energy, why) = EnergyStage::open(&common.energy_options())?;
    errln!("joular-ebpf: {why}");
    let mut probe = Probe::load(&opts)?;
    for pid in target.pids() {
        probe.add_target(pid).with_context(|| format!("adding PID {pid} to the kernel filter"))?;
    }
    if target.follows_children() {
        // The kernel follows the forks made from now on; what the targets started before is
        // in /proc. A process forked by one of those between the scan and its adding is
        // missed, so the scan runs until it finds nothing new (a handful of rounds at most).
        let mut added: std::collections::HashSet<u32> = target.pids().into_iter().collect();
        for _ in 0..4 {
            let roots: Vec<u32> = added.iter().copied().collect();
            let new: Vec<u32> = joular_user::procstat::descendants(&common.proc_root, &roots)
                .into_iter()
                .filter(|pid| !added.contains(pid))
                .collect();
            if new.is_empty() {
                break;
            }
            for pid in new {
                // A full TARGETS map leaves that process out; the run goes on with the others.
                if probe.add_target(pid).is_ok() {
                    added.insert(pid);
                }
            }
        }
    }
    // The targets' HotSpot tables are read now, so their stacks are walked from the first cycle.
    let interval = Duration::from_secs_f64(common.interval);
    let options = SymbolizerOptions {
        proc_root: common.proc_root.clone(),
        max_symbol_bytes: common.max_symbol_mb << 20,
        hotspot: common.java_symbols == JavaSymbols::Hotspot,
        kernel_names: probe.kernel_names.clone(),
        unwind_cache: (!common.no_unwind_cache).then(|| common.unwind_cache.clone()),
        ..Default::default()
    };
    let reports = probe.code_reports.take();
    let (mut symbols, walk) = SymbolWorker::start(options, symbolize::settle_within(interval), target.pids(), reports)?;
    symbolize::apply_kernel_updates(walk, &mut probe);
    let mut early = symbols.take_early();
    let mut collector = Collector::new(common.proc_root.clone());
    if let Target::Pids { pids, starts, .. } = &target {
        for (&pid, &start) in pids.iter().zip(starts) {
            collector.expect_process(pid, start);
        }
    }
    // The kernel has counted CPU time since `Probe::load`, and reading the targets' HotSpot and
    // unwind tables (hundreds of thousands of rows for a libjvm) takes a good part of a second:
    // that time belongs to no cycle. Without this flip the first cycle's threads had it on top
    // of their second (a busy thread 1.6 s of CPU in a 1 s cycle).
    let setup = collector.flip(&mut probe)?;
    drop(collector.read(&mut probe, setup)?);
    // Cycle boundaries count from the first cycle's start.
    let start = Instant::now();
    // Loading took a while; the first cycle's energy must start where its CPU time starts.
    energy.read_at_flip(0)?;
    // The device models' counters start where the first cycle starts, too.
    let mut device_models =
        common.devices.any().then(|| joular_user::device_models::DeviceModels::start(common.device_models()));
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
    let json = common.json.as_deref().map(|p| JsonLines::create(p, common.modes())).transpose()?;
    errln!(
        "joular-ebpf: profiling {} at {} Hz, {} s cycles (CPU time from {}{}); Ctrl-C to stop",
        describe(&target),
        common.frequency,
        common.interval,
        match probe.scheduler_hook {
            Some(SchedulerHook::RawTracepoint) => "raw_tp/sched_switch",
            Some(SchedulerHook::ClassicTracepoint) => "tracepoint sched/sched_switch",
            None => "/proc jiffies",
        },
        if probe.counts_bytes {
            format!("; bytes per call path from {}", joular_user::ebpf::DEVICES_HOOK)
        } else {
            String::new()
        },
    );

    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigchld = signal(SignalKind::child())?;
    let mut stopper = stop::Stopper::default();
    let mut leader_names = target::LeaderNames::default();
    let deadline = common.duration.map(|d| start + Duration::from_secs_f64(d));
    let serve = fleet.as_ref();
    let (frequency_reader, cpu_frequencies) = frequencies::open(common, serve.is_some());
    let results = ResultsConfig {
        results_root: common.output.clone(),
        // A daemon writes the tree only when asked, process by process as they end.
        write_files: serve.is_none_or(|f| f.results),
        filter: MethodFilter::parse(&common.filter),
        start_epoch_ms: epoch_ms(),
        energy_source: energy.source_label().to_string(),
        estimated: energy.estimated(),
        energy_detail: energy.detail(),
        // Checked before anything was loaded; read again here (the file is the user's own).
        carbon: common.carbon.carbon().map_err(anyhow::Error::msg)?,
        report_stacks: json.is_some(),
        // A daemon would grow evolution files without bound.
        evolution: !common.no_evolution && fleet.is_none(),
        runtime_call_trees: common.runtime_call_trees,
        top_n: common.top,
        native_frames: common.native_frames,
        html: common.html || serve.is_some_and(|f| f.results),
        modes: common.modes(),
        cpu_frequencies,
    };
    let stage = StackStage::new(results.stack_config());
    let mut tree = ResultTree::new(results).with_context(|| format!("--output {}", common.output.display()))?;
    if serve.is_some() {
        let writer = RetiredTreeWriter::spawn(RETIRED_QUEUE_TREES).context("starting the result writer thread")?;
        tree = tree.write_retired_in_background(writer);
    }
    let mut labeler = matches!(target, Target::All)
        .then(|| labels::Labeler::new(joular_user::fleet::ProcFs::new(common.proc_root.clone())));
    let mut vm_export = match serve.and_then(|f| f.vm_energy.as_ref()) {
        Some((dir, range_uj)) => Some(vm::VmExport::open(dir, *range_uj, common, &energy, exporter.as_ref())?),
        None => None,
    };
    let mut outputs: Vec<Box<dyn Sink>> = vec![Box::new(tree)];
    if let Some(exporter) = exporter {
        exporter.set_energy_source(energy.source_label(), &energy.detail());
        outputs.push(Box::new(exporter));
    }
    if let Some(p) = serve.and_then(|f| f.profiles.as_ref()) {
        outputs.push(Box::new(profiles::ProfileExport::new(
            p,
            energy.source_label(),
            energy.estimated(),
            &energy.detail(),
            epoch_ms(),
        )?));
    }
    if let Some(json) = json {
        outputs.push(Box::new(json));
    }
    if frequency_reader.is_some() {
        outputs.push(Box::new(frequencies::sink(common)?));
    }
    let mut sinks = Sinks::new(stage, outputs, serve.is_some());
    sinks.devices = probe.counts_bytes;
    // A daemon logs a cycle line a minute unless --verbose.
    let cycle_line_every = if serve.is_some() && !common.verbose { 60 } else { 1 };
    let mut cycles_drained = 0u64;
    let mut next_tick = start + interval;
    let mut stop_reason = None;
    let mut pacer = pace::ReplyPacer::default();
    pace::punctual();
    // Each pass drains one cycle; replies of the symbol worker are written as they come, unless
    // writing one would delay the next flip (then just after it).
    while stop_reason.is_none() {
        let wake = deadline.map_or(next_tick, |d| d.min(next_tick));
        let signals = (&mut sigint, &mut sigterm, &mut sigchld);
        match wait_for(wake, stopper.kill_at(), signals, &mut symbols, &mut early).await {
            Wake::Tick => {}
            Wake::Symbols(mut reply) => {
                symbolize::apply_kernel_updates(std::mem::take(&mut reply.kernel_updates), &mut probe);
                pacer.on_reply(*reply, wake, &mut sinks)?;
                continue;
            }
            Wake::KernelUpdates(updates) => {
                symbolize::apply_kernel_updates(updates, &mut probe);
                continue;
            }
            Wake::SymbolsGone => {
                pacer.write_deferred(&mut sinks)?;
                errln!("joular-ebpf: warning: the symbol worker stopped; cycles are written without symbols");
                sinks.write_all_late()?;
                continue;
            }
            Wake::Signal(why) => match stopper.on_signal(&mut target, &probe, why) {
                Some(reason) => stop_reason = Some(reason),
                None => continue,
            },
            Wake::Grace => stop_reason = Some(stopper.on_grace_expired(&mut target, &probe)),
            // Only `record`'s command is our child: stop as soon as it ends.
            Wake::Child if target.ended(&common.proc_root) => stop_reason = Some("target exited"),
            Wake::Child => continue,
        }
        // Decided before the flip, so the last flip reads everything up to the stop.
        if stop_reason.is_some() {
            // A signal, the grace period or the command's end already decided.
        } else if deadline.is_some_and(|d| Instant::now() >= d) {
            stop_reason = Some("duration reached");
        } else if target.ended(&common.proc_root) {
            stop_reason = Some("target exited");
        }
        next_tick = next_boundary(start, interval, Instant::now());
        let span = collector.flip(&mut probe)?;
        if let Some(e) = energy.read_at_flip_or_skip(span.1 - span.0) {
            if energy.failed_reads == 1 || energy.failed_reads.is_power_of_two() {
                errln!(
                    "joular-ebpf: warning: energy not read this cycle ({} cycles so far), counted as 0: {e:#}",
                    energy.failed_reads
                );
            }
        }
        let cpu_frequencies = frequency_reader.as_ref().map(|r| r.read()).unwrap_or_default();
        let device_readings =
            device_models.as_mut().map(|m| m.read((span.1 - span.0) as f64 / 1e9)).unwrap_or_default();
        let mut raw = collector.read(&mut probe, span)?;
        if let Some(p) = procfs_time.as_mut() {
            p.replace_cpu_time(&mut raw)?;
        }
        let mut report = base_report(cycles_drained, &raw, &common.proc_root);
        report.cpu_frequencies = cpu_frequencies;
        cycles_drained += 1;
        let (_, model_failed) = energy.attribute(&raw.cpus, &raw.thread_cpu, raw.end_ns - raw.start_ns, &mut report);
        if let Some(e) = model_failed {
            errln!("joular-ebpf: warning: energy model failed this cycle, counted as 0: {e:#}");
        }
        if let Some(l) = labeler.as_mut() {
            l.fill(&mut report, &raw.exits, &raw.starts);
        } else {
            leader_names.fill(&mut report, &common.proc_root, &raw.starts, &raw.exits);
        }
        if let Some(c) = crosscheck.as_mut() {
            c.fill(&mut report)?;
        }
        if let Some(v) = vm_export.as_mut() {
            v.on_cycle(&report, &raw.starts, &raw.exits);
        }
        if report.cycle.is_multiple_of(cycle_line_every) {
            print_cycle_line(&report, energy.estimated(), common.verbose);
        }
        symbols.submit(CycleSamples {
            cycle: report.cycle,
            samples: std::mem::take(&mut raw.samples),
            devices: std::mem::take(&mut raw.devices),
            ended: raw.exits.iter().filter(|e| e.process_ended).map(|e| e.pid).collect(),
        });
        sinks.hold(PendingCycle { report, exits: raw.exits, drained_at: std::time::Instant::now(), device_readings });
        pacer.write_deferred(&mut sinks)?;
        if let Some(cycle) = sinks.write_overdue(MAX_SYMBOL_WAIT.max(2 * interval))? {
            symbols.abandon_through(cycle);
        }
    }
    pace::relaxed();
    // The worker's answers for the last cycles, or (past the wait) the cycles without them.
    pacer.write_deferred(&mut sinks)?;
    let give_up = Instant::now() + SHUTDOWN_SYMBOL_WAIT;
    while sinks.pending() > 0 && symbols.alive() {
        tokio::select! {
            reply = symbols.recv() => match reply {
                Some(reply) => sinks.on_reply(reply)?,
                None => break,
            },
            _ = tokio::time::sleep_until(give_up) => break,
        }
    }
    sinks.write_all_late()?;
    sinks.finish_background(RETIRED_WRITES_WAIT);
    errln!("joular-ebpf: stopping ({})", stop_reason.unwrap_or_default());
    match probe.sampler_cost() {
        Some(Ok(cost)) => errln!("joular-ebpf: {}", cost.summary()),
        Some(Err(e)) => errln!("joular-ebpf: warning: --sampler-cost: {e}"),
        None => {}
    }
    if energy.failed_reads > 0 {
        errln!("joular-ebpf: warning: energy could not be read in {} cycle(s); they count 0 J", energy.failed_reads);
    }
    print_symbol_line(&sinks);
    let st = &sinks.symbol_stats;
    for (cause, count) in [
        ("energy_read_failures", energy.failed_reads),
        ("jit_addresses_missing_from_perf_map", st.jit_misses),
        ("perf_map_dump_failures", st.perf_map_dump_failures),
        ("perf_map_job_panics", st.perf_map_job_panics),
        ("perf_map_malformed_lines", st.perf_map_bad_lines),
        ("perf_map_entries_over_budget", st.perf_map_entries_not_indexed_total),
        ("cut_java_stacks", st.cut_java_stacks),
        ("compiled_frames_freed_before_named", st.stale_compiled_frames),
        ("compiled_frames_named_by_method_only", st.compiled_frames_named_by_method),
        ("unresolved_frames", st.unresolved_frames),
        ("cycles_written_before_symbols", sinks.cycles_written_late),
        ("jvms_with_unreadable_hotspot_tables", st.jvms_unreadable),
        ("jvms_backed_off_for_read_budget", st.jvms_backed_off),
        ("hotspot_reader_panics", st.hotspot_panics),
        ("jvms_with_blocked_reads", st.jvms_blocked),
        ("target_reads_blocked", st.target_reads_blocked),
        ("target_reads_refused_while_blocked", st.target_reads_refused),
    ] {
        sinks.stage.add_degraded(cause, count);
    }
    for (cause, count) in symbolize::degraded_counts(&sinks.symbol_stats) {
        sinks.stage.add_degraded(&cause, count);
    }
    // Written before anything is printed: the terminal may be gone (`| head`), the results not.
    let finished = sinks.finish(common.top);
    out!("{}", sinks.summary.render(common.top, energy.source_label(), energy.estimated(), &energy.detail()));
    sinks.print_failed(&finished);
    outln!("\n{}", finished.table);
    for out in &finished.outputs {
        outln!("results: {}", out.dir.display());
        for f in out.files.iter().filter(|f| f.extension().is_some_and(|e| e == "svg")) {
            outln!("flame graph: {}", f.display());
        }
        for f in out.files.iter().filter(|f| f.extension().is_some_and(|e| e == "html")) {
            outln!("report: {}", f.display());
        }
    }

    Ok(match &mut target {
        Target::Command(child) => stopper.end_command(child, &probe, &mut sigint, &mut sigterm).await,
        _ => 0,
    })
}

/// glibc's malloc gives a freed block back to the system only if it was mmapped, and raises its
/// mmap threshold each time such a block is freed (up to 32 MiB): after one perf-map index is
/// freed, the next ones would come from the heap, where freeing them leaves the RSS behind. A
/// fixed threshold keeps every large block mmapped, so the RSS follows what symbols hold.
fn keep_large_allocations_mapped() {
    #[cfg(target_env = "gnu")]
    // SAFETY: sets one allocator tunable; no allocation is in flight on another thread yet.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// What ended a wait of the session loop.
enum Wake {
    Tick,
    Signal(&'static str),
    /// The grace period `record`'s command was given after the first signal is over.
    Grace,
    /// SIGCHLD: `record`'s command may have ended.
    Child,
    /// The symbol worker answered for a cycle.
    Symbols(Box<SymbolReply>),
    /// The symbol worker found a JVM walkable between cycles.
    KernelUpdates(Vec<joular_user::symbols::KernelUpdate>),
    SymbolsGone,
}

async fn wait_for(
    tick: Instant,
    kill_at: Option<Instant>,
    (sigint, sigterm, sigchld): (&mut Signal, &mut Signal, &mut Signal),
    symbols: &mut SymbolWorker,
    early: &mut symbolize::EarlyUpdates,
) -> Wake {
    let listening = symbols.alive();
    tokio::select! {
        _ = tokio::time::sleep_until(tick) => Wake::Tick,
        _ = sigint.recv() => Wake::Signal("interrupted"),
        _ = sigterm.recv() => Wake::Signal("terminated"),
        _ = tokio::time::sleep_until(kill_at.unwrap_or(tick)), if kill_at.is_some() => Wake::Grace,
        _ = sigchld.recv() => Wake::Child,
        reply = symbols.recv(), if listening => reply.map_or(Wake::SymbolsGone, |r| Wake::Symbols(Box::new(r))),
        updates = early.recv() => Wake::KernelUpdates(updates),
    }
}

/// The first cycle boundary (`start + k·interval`) after `now`. A cycle that ran late (a slow
/// disk, a stopped process) ends at the next boundary instead of starting a burst of short
/// catch-up cycles.
fn next_boundary(start: Instant, interval: Duration, now: Instant) -> Instant {
    let elapsed = now.saturating_duration_since(start).as_nanos();
    let step = interval.as_nanos().max(1);
    let k = elapsed / step + 1;
    start + Duration::from_nanos(u64::try_from(k * step).unwrap_or(u64::MAX))
}

/// The end-of-run line about symbols, when there is anything to say.
fn print_symbol_line(sinks: &Sinks) {
    let st = &sinks.symbol_stats;
    if let Some(line) = symbolize::degraded_line(st) {
        errln!("joular-ebpf: {line}");
    }
    if st.hotspot_jvms > 0 {
        errln!("joular-ebpf: {}", symbolize::hotspot_line(st));
    }
    for (pid, u) in &st.unwinders {
        errln!("joular-ebpf: {}", symbolize::unwinder_line(*pid, u));
    }
    if st.native_unwind.files_read > 0 {
        errln!("joular-ebpf: {}", symbolize::native_unwind_line(&st.native_unwind));
    }
    if st.perf_map_bad_lines > 0
        || st.perf_map_dump_failures > 0
        || st.jit_misses > 0
        || st.perf_map_entries_not_indexed_total > 0
    {
        errln!(
            "joular-ebpf: symbols: {} JVM(s), {} perf-map entries, {} malformed perf-map lines skipped, {} dumps ({} failed), {} JIT addresses missing from the map",
            st.jvms, st.perf_map_entries, st.perf_map_bad_lines, st.perf_map_dumps, st.perf_map_dump_failures, st.jit_misses
        );
    }
    if st.perf_map_entries_not_indexed_total > 0 || st.perf_map_drops_for_budget > 0 {
        errln!(
            "joular-ebpf: warning: symbol memory budget (--max-symbol-mb {}): {} perf-map entries left out over the run ({} in the maps held at the end), {} map(s) dropped to make room; {} MB in use",
            st.symbol_budget_bytes >> 20,
            st.perf_map_entries_not_indexed_total,
            st.perf_map_entries_not_indexed,
            st.perf_map_drops_for_budget,
            st.symbol_bytes >> 20
        );
    }
    if st.settle_timeouts > 0 || sinks.cycles_written_late > 0 {
        errln!(
            "joular-ebpf: symbols: {} cycle(s) written before a JVM's perf map was refreshed, {} written before their stacks were symbolized",
            st.settle_timeouts, sinks.cycles_written_late
        );
    }
}

fn describe(target: &Target) -> String {
    match target {
        Target::Pids { pids, follow_children, .. } => format!(
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
    let socket_uj = r.socket_energy_uj();
    let target_uj = r.process_energy_uj();
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
                t.pid,
                t.tid,
                t.comm,
                t.on_cpu_ns as f64 / 1e6,
                t.samples,
                t.energy_uj / 1e6
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_tick_moves_to_the_next_boundary_without_catching_up() {
        let start = Instant::now();
        let second = Duration::from_secs(1);
        let at = |ms: u64| start + Duration::from_millis(ms);
        assert_eq!(next_boundary(start, second, at(1_000)), at(2_000), "on time");
        assert_eq!(next_boundary(start, second, at(1_003)), at(2_000));
        assert_eq!(next_boundary(start, second, at(6_400)), at(7_000), "5.4 s late: one cycle to the next boundary");
        assert_eq!(next_boundary(start, second, start), at(1_000));
        assert_eq!(next_boundary(start, Duration::from_millis(250), at(1_100)), at(1_250));
    }
}
