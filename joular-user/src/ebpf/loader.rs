//! Loads the embedded object, attaches the sampler on every online CPU and the scheduler
//! programs, and keeps typed handles to every map.

use std::path::{Path, PathBuf};

use aya::{
    maps::{Array, HashMap, MapData, PerCpuArray, StackTraceMap},
    programs::{
        perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent},
        PerfEvent, RawTracePoint, TracePoint,
    },
    Ebpf, EbpfLoader,
};
use joular_ebpf::sampler_cost::{SAMPLER_TIMING_SYMBOL, SAMPLE_NS_BUCKETS};
use joular_ebpf::{
    CpuState, DeviceKey, ExitValue, JavaStack, JvmConfig, SampleKey, SampleLog, ThreadCpuKey, ThreadCpuValue,
    CONFIG_ALL_PROCESSES, CONFIG_FOLLOW_CHILDREN, CONFIG_TARGETS_GEN, CONFIG_TASK_OFFSETS, MAX_DEVICE_KEYS,
    MAX_JAVA_STACKS, MAX_SAMPLE_KEYS, MAX_STACKS, TARGETS_WRITER_USER,
};

use super::{
    kernel_names::KernelNames,
    preflight,
    sizing::{per_cycle_entries, stack_map_entries},
    task_fields::TaskFields,
    ProbeError,
};

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/joular-ebpf"));

#[derive(Debug, Clone)]
pub struct ProbeOptions {
    pub frequency_hz: u64,
    /// Cycle length: the per-cycle maps are sized for this many seconds of samples.
    pub interval_s: f64,
    /// Profile every process (host mode) instead of the TGIDs given to `add_target`.
    pub all_processes: bool,
    /// Also profile every process the targets fork, and theirs (`record`, `--follow-children`).
    pub follow_children: bool,
    /// Forward the kernel programs' aya-log debug messages to the `log` crate.
    pub ebpf_log: bool,
    /// Attach the scheduler programs (off: CPU time comes from /proc instead).
    pub scheduler: bool,
    /// `--devices`: the byte counters to load beside the sampler (none: not even loaded).
    pub devices: super::Devices,
    /// `--sampler-cost`: time the samples of profiled threads (`Probe::sampler_cost`).
    pub sampler_cost: bool,
    pub proc_root: PathBuf,
}

/// Which scheduler hook got attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedulerHook {
    RawTracepoint,
    ClassicTracepoint,
}

/// The typed maps of one buffer (see `joular_ebpf::BUFFERS`).
pub struct BufferMaps {
    pub counts: HashMap<MapData, SampleKey, u64>,
    pub stacks: StackTraceMap<MapData>,
    /// Stacks refused by `stacks` (a full hash bucket); their ids carry `STACK_ID_OVERFLOW`.
    pub stacks_overflow: StackTraceMap<MapData>,
    pub thread_cpu: HashMap<MapData, ThreadCpuKey, ThreadCpuValue>,
    pub exits: HashMap<MapData, u32, ExitValue>,
    /// Walked JVM stacks by hash (`SampleKey::java_stack_hash`).
    pub java_stacks: HashMap<MapData, u64, JavaStack>,
    /// Bytes per (thread, user stack, class) (None: no byte counter runs).
    pub device_bytes: Option<HashMap<MapData, DeviceKey, u64>>,
}

pub struct Probe {
    pub config: Array<MapData, u64>,
    pub targets: HashMap<MapData, u32, u8>,
    /// JVMs whose stacks the sampler walks (see `set_jvm`).
    pub jvms: HashMap<MapData, u32, JvmConfig>,
    pub buffers: [BufferMaps; 2],
    /// Per CPU, index = buffer: samples logged without hashing (see `SampleLog`).
    pub sample_log: PerCpuArray<MapData, SampleLog>,
    /// Per CPU: its scheduler state, with its time and thread slots per buffer (see `CpuState`).
    pub cpu_state: PerCpuArray<MapData, CpuState>,
    pub drops: PerCpuArray<MapData, u64>,
    pub online_cpus: Vec<u32>,
    /// None when no scheduler program could be attached (or none was asked for): per-thread
    /// CPU time must then come from /proc.
    pub scheduler_hook: Option<SchedulerHook>,
    /// Whether the sampler walks the stacks of JVMs given to `set_jvm` (Linux 5.15+);
    /// otherwise every user stack comes from `bpf_get_stackid`.
    pub walks_jvms: bool,
    /// Names kernel addresses through the kernel's own symbol table (None on a kernel without
    /// `bpf_snprintf` or raw tracepoint test runs: /proc/kallsyms is read instead).
    pub kernel_names: Option<KernelNames>,
    /// Native unwind rows of walked JVMs (None: the sampler does not walk).
    pub unwind: Option<crate::unwind::kernel_maps::UnwindMaps>,
    /// Code the sampler met for the first time, for the symbol worker to take (None: the
    /// sampler does not walk, or the ring could not be mapped).
    pub code_reports: Option<super::CodeReports>,
    /// Whether the byte counters run (`--devices network,disk`, and the kernel took them).
    pub counts_bytes: bool,
    /// `--sampler-cost`: samples by the sampler's time on them (None: not timed).
    sample_ns: Option<PerCpuArray<MapData, u64>>,
    /// Changes made to `TARGETS` and `JVMS` from here (the count in `CONFIG_TARGETS_GEN`).
    targets_changes: u64,
    logger: Option<aya_log::EbpfLogger<&'static dyn log::Log>>,
    // Dropping the Ebpf detaches every program; it must outlive the map handles' use.
    _ebpf: Ebpf,
}

impl Probe {
    pub fn load(opts: &ProbeOptions) -> Result<Self, ProbeError> {
        preflight::check_privileges(preflight::effective_caps(&opts.proc_root)?)?;
        if OBJECT.is_empty() {
            return Err(ProbeError::StubObject);
        }
        preflight::raise_memlock();
        preflight::ensure_tracefs()?;
        let online_cpus =
            aya::util::online_cpus().map_err(|(what, e)| ProbeError::Io(format!("reading online CPUs ({what})"), e))?;
        let log_level: u8 = if opts.ebpf_log { aya_log::Level::Debug as u8 } else { 0 };
        let sampler_timing = u8::from(opts.sampler_cost);
        let sample_keys = per_cycle_entries(opts.frequency_hz, online_cpus.len(), opts.interval_s, MAX_SAMPLE_KEYS);
        let java_stacks = per_cycle_entries(opts.frequency_hz, online_cpus.len(), opts.interval_s, MAX_JAVA_STACKS);
        // The loader parses the kernel's BTF itself (for relocations); nothing here needs
        // another copy (the scheduler hook is a raw tracepoint).
        let mut loader = EbpfLoader::new();
        loader.override_global(aya_log::LEVEL, &log_level, false);
        loader.override_global(SAMPLER_TIMING_SYMBOL, &sampler_timing, true);
        for name in ["COUNTS_0", "COUNTS_1"] {
            loader.map_max_entries(name, sample_keys);
        }
        let (stacks, stacks_overflow) =
            stack_map_entries(opts.frequency_hz, online_cpus.len(), opts.interval_s, MAX_STACKS);
        for name in ["STACKS_0", "STACKS_1"] {
            loader.map_max_entries(name, stacks);
        }
        for name in ["STACKS_OVERFLOW_0", "STACKS_OVERFLOW_1"] {
            loader.map_max_entries(name, stacks_overflow);
        }
        for name in ["JAVA_STACKS_0", "JAVA_STACKS_1"] {
            loader.map_max_entries(name, java_stacks);
        }
        // Without byte counters their maps take no memory to speak of.
        for name in ["DEVICE_BYTES_0", "DEVICE_BYTES_1"] {
            loader.map_max_entries(name, if opts.devices.any() { MAX_DEVICE_KEYS } else { 1 });
        }
        let mut ebpf = loader.load(OBJECT)?;
        let logger = if opts.ebpf_log {
            match aya_log::EbpfLogger::init(&mut ebpf) {
                Ok(l) => Some(l),
                Err(e) => {
                    log::warn!("eBPF logging unavailable: {e}");
                    None
                }
            }
        } else {
            None
        };

        let mut config: Array<MapData, u64> = take(&mut ebpf, "CONFIG")?;
        config.set(CONFIG_ALL_PROCESSES, u64::from(opts.all_processes), 0).map_err(|e| ProbeError::Map("CONFIG", e))?;
        // Without them every process starts at tick 0: incarnations of a PID are then told apart
        // only by exit records, not within the cycle of a reuse.
        match TaskFields::from_sys(Path::new("/sys")) {
            Ok(fields) => config.set(CONFIG_TASK_OFFSETS, fields.config_value(), 0).map_err(|e| ProbeError::Map("CONFIG", e))?,
            Err(e) => log::warn!("process start times unavailable to the kernel programs ({e}): a PID reused within a cycle may mix two processes' samples"),
        }
        if opts.follow_children {
            config.set(CONFIG_FOLLOW_CHILDREN, 1, 0).map_err(|e| ProbeError::Map("CONFIG", e))?;
            attach_fork(&mut ebpf)?;
        }

        // The sampler is verified before anything counts: its verification takes ~50 ms (the
        // Java and native walks; ~0.8 s before their parts were global functions), and what
        // the scheduler hook counted meanwhile had no samples and went to no cycle (the session
        // drops what precedes its first cycle).
        let (sampler, walks_jvms) = load_sampler(&mut ebpf)?;
        let scheduler_hook = if opts.scheduler {
            match attach_scheduler(&mut ebpf) {
                Ok(hook) => Some(hook),
                Err(e) => {
                    log::warn!("scheduler accounting unavailable ({e}); CPU time comes from /proc jiffies");
                    None
                }
            }
        } else {
            None
        };
        attach_exit(&mut ebpf)?;
        attach_sampler(&mut ebpf, sampler, &online_cpus, opts.frequency_hz)?;
        let counting = opts.devices.any() && opts.devices.attach(&mut ebpf, &mut config);
        let kernel_names = match KernelNames::load(&mut ebpf) {
            Ok(names) => Some(names),
            Err(e) => {
                log::debug!("kernel frames will be named through /proc/kallsyms: {e}");
                None
            }
        };

        Ok(Self {
            config,
            targets: take(&mut ebpf, "TARGETS")?,
            jvms: take(&mut ebpf, "JVMS")?,
            buffers: [buffer_maps(&mut ebpf, 0, counting)?, buffer_maps(&mut ebpf, 1, counting)?],
            sample_log: take(&mut ebpf, "SAMPLE_LOG")?,
            cpu_state: take(&mut ebpf, "CPU_STATE")?,
            drops: take(&mut ebpf, "DROPS")?,
            online_cpus,
            scheduler_hook,
            walks_jvms,
            kernel_names,
            unwind: match (
                ebpf.take_map("UNWIND_ROWS"),
                take(&mut ebpf, "UNWIND_PROCS"),
                take(&mut ebpf, "UNWIND_GENERATION"),
            ) {
                (Some(aya::maps::Map::Array(rows)), Ok(procs), Ok(generation)) if walks_jvms => {
                    match crate::unwind::rows_mmap::RowsMmap::new(rows) {
                        Ok(rows) => Some(crate::unwind::kernel_maps::UnwindMaps::new(rows, procs, generation)),
                        Err(e) => {
                            log::warn!("native frames are stepped by frame pointers only: UNWIND_ROWS: {e}");
                            None
                        }
                    }
                }
                _ => None,
            },
            code_reports: match ebpf.take_map("NEW_CODE").map(aya::maps::RingBuf::try_from) {
                Some(Ok(ring)) if walks_jvms => Some(super::CodeReports::new(ring)),
                Some(Err(e)) if walks_jvms => {
                    log::warn!(
                        "compiled frames whose code is freed before their cycle is named stay unnamed: NEW_CODE: {e}"
                    );
                    None
                }
                _ => None,
            },
            counts_bytes: counting,
            sample_ns: if opts.sampler_cost { Some(take(&mut ebpf, "SAMPLE_NS")?) } else { None },
            targets_changes: 0,
            logger,
            _ebpf: ebpf,
        })
    }

    /// Starts profiling a process (all its threads, present and future).
    pub fn add_target(&mut self, tgid: u32) -> Result<(), ProbeError> {
        self.targets.insert(tgid, 1, 0).map_err(|e| ProbeError::Map("TARGETS", e))?;
        self.lookups_changed()
    }

    /// After a change to `TARGETS` or `JVMS`: the kernel's per-CPU copies of their answers
    /// go stale (see `CONFIG_TARGETS_GEN`).
    fn lookups_changed(&mut self) -> Result<(), ProbeError> {
        self.targets_changes += 1;
        let generation = self.targets_changes << 16 | TARGETS_WRITER_USER;
        self.config.set(CONFIG_TARGETS_GEN, generation, 0).map_err(|e| ProbeError::Map("CONFIG", e))
    }

    /// From the next sample on, the sampler walks the user stacks of `tgid`'s threads with
    /// `config` (a JVM whose HotSpot tables were read) instead of `bpf_get_stackid`.
    pub fn set_jvm(&mut self, tgid: u32, config: JvmConfig) -> Result<(), ProbeError> {
        self.jvms.insert(tgid, config, 0).map_err(|e| ProbeError::Map("JVMS", e))?;
        self.lookups_changed()
    }

    /// Back to `bpf_get_stackid` for `tgid` (the kernel also drops a JVM when it exits).
    pub fn remove_jvm(&mut self, tgid: u32) {
        if self.jvms.remove(&tgid).is_ok() {
            // If this store fails, a CPU that copied the config keeps walking the JVM with
            // it until the next change: the stacks stay walked, as they were before.
            let _ = self.lookups_changed();
        }
    }

    /// The processes profiled now: those given to `add_target` and, when following children,
    /// their descendants (the kernel removes each as it ends).
    pub fn targets(&self) -> Vec<u32> {
        self.targets.keys().filter_map(Result::ok).collect()
    }

    /// `--sampler-cost`: the samples of profiled threads so far by the sampler's time on them
    /// (None when the timing is off; an error when the map cannot be read).
    pub fn sampler_cost(&self) -> Option<Result<super::SamplerCost, ProbeError>> {
        let map = self.sample_ns.as_ref()?;
        let per_bucket: Result<Vec<_>, _> =
            (0..SAMPLE_NS_BUCKETS).map(|bucket| map.get(&bucket, 0).map(|cpus| cpus.to_vec())).collect();
        Some(per_bucket.map(super::SamplerCost::from_per_cpu).map_err(|e| ProbeError::Map("SAMPLE_NS", e)))
    }

    /// Forwards queued kernel log records (only with `ebpf_log`).
    pub fn flush_log(&mut self) {
        if let Some(l) = self.logger.as_mut() {
            l.flush();
        }
    }
}

fn take<T>(ebpf: &mut Ebpf, name: &'static str) -> Result<T, ProbeError>
where
    T: TryFrom<aya::maps::Map, Error = aya::maps::MapError>,
{
    let map = ebpf.take_map(name).ok_or(ProbeError::MissingMap(name))?;
    T::try_from(map).map_err(|e| ProbeError::Map(name, e))
}

/// `devices`: whether a byte counter runs (its map is taken then only).
fn buffer_maps(ebpf: &mut Ebpf, buffer: usize, devices: bool) -> Result<BufferMaps, ProbeError> {
    const NAMES: [[&str; 7]; 2] = [
        ["COUNTS_0", "STACKS_0", "STACKS_OVERFLOW_0", "THREAD_CPU_0", "EXITS_0", "JAVA_STACKS_0", "DEVICE_BYTES_0"],
        ["COUNTS_1", "STACKS_1", "STACKS_OVERFLOW_1", "THREAD_CPU_1", "EXITS_1", "JAVA_STACKS_1", "DEVICE_BYTES_1"],
    ];
    let [counts, stacks, stacks_overflow, thread_cpu, exits, java_stacks, device_bytes] = NAMES[buffer];
    Ok(BufferMaps {
        counts: take(ebpf, counts)?,
        stacks: take(ebpf, stacks)?,
        stacks_overflow: take(ebpf, stacks_overflow)?,
        thread_cpu: take(ebpf, thread_cpu)?,
        exits: take(ebpf, exits)?,
        java_stacks: take(ebpf, java_stacks)?,
        device_bytes: if devices { Some(take(ebpf, device_bytes)?) } else { None },
    })
}

fn attach_scheduler(ebpf: &mut Ebpf) -> Result<SchedulerHook, ProbeError> {
    let prog: &mut RawTracePoint = program(ebpf, "joular_switch_raw")?;
    match prog.load().and_then(|()| prog.attach("sched_switch").map(drop)) {
        Ok(()) => return Ok(SchedulerHook::RawTracepoint),
        Err(e) => log::warn!("raw_tp/sched_switch refused ({e}); using the classic tracepoint"),
    }
    let prog: &mut TracePoint = program(ebpf, "joular_switch_tp")?;
    prog.load().map_err(|e| ProbeError::Program("joular_switch_tp", e))?;
    prog.attach("sched", "sched_switch").map_err(|e| ProbeError::Program("joular_switch_tp", e))?;
    Ok(SchedulerHook::ClassicTracepoint)
}

fn attach_exit(ebpf: &mut Ebpf) -> Result<(), ProbeError> {
    let prog: &mut TracePoint = program(ebpf, "joular_exit")?;
    prog.load().map_err(|e| ProbeError::Program("joular_exit", e))?;
    prog.attach("sched", "sched_process_exit").map_err(|e| ProbeError::Program("joular_exit", e))?;
    Ok(())
}

fn attach_fork(ebpf: &mut Ebpf) -> Result<(), ProbeError> {
    let prog: &mut TracePoint = program(ebpf, "joular_fork")?;
    prog.load().map_err(|e| ProbeError::Program("joular_fork", e))?;
    prog.attach("task", "task_newtask").map_err(|e| ProbeError::Program("joular_fork", e))?;
    Ok(())
}

/// Loads (verifies) the JVM-walking sampler, or the `bpf_get_stackid`-only one on a kernel that
/// refuses it. Returns the program loaded and whether JVM stacks are walked.
fn load_sampler(ebpf: &mut Ebpf) -> Result<(&'static str, bool), ProbeError> {
    let walking: &mut PerfEvent = program(ebpf, "joular_sample")?;
    let started = std::time::Instant::now();
    match walking.load() {
        Ok(()) => {
            // What the kernel's verifier spent on the sampler, which the profiled program pays
            // in CPU while the profiler starts (`cargo xtask bench --from-start`); the
            // instruction count is the verifier's own, the same on every run of one kernel.
            let instructions = walking.info().ok().and_then(|info| info.verified_instruction_count());
            log::debug!(
                "joular_sample: verified in {:.0} ms, {} instructions processed",
                started.elapsed().as_secs_f64() * 1e3,
                instructions.map_or_else(|| "?".to_owned(), |n| n.to_string())
            );
            Ok(("joular_sample", true))
        }
        Err(e) => {
            log::debug!("joular_sample: {e}");
            log::warn!(
                "the kernel refused the JVM stack walker (it needs Linux 5.15+): JVM stacks are \
                 sampled with bpf_get_stackid, so interpreted frames show as `Interpreter`"
            );
            let prog: &mut PerfEvent = program(ebpf, "joular_sample_stackid")?;
            prog.load().map_err(|e| ProbeError::Program("joular_sample_stackid", e))?;
            Ok(("joular_sample_stackid", false))
        }
    }
}

/// Attaches the sampler `load_sampler` loaded to every CPU.
fn attach_sampler(ebpf: &mut Ebpf, name: &'static str, cpus: &[u32], frequency_hz: u64) -> Result<(), ProbeError> {
    let prog: &mut PerfEvent = program(ebpf, name)?;
    for &cpu in cpus {
        prog.attach(
            PerfEventConfig::Software(SoftwareEvent::CpuClock),
            PerfEventScope::AllProcessesOneCpu { cpu },
            SamplePolicy::Frequency(frequency_hz),
            false,
        )
        .map_err(|source| ProbeError::AttachSampler { cpu, source })?;
    }
    Ok(())
}

fn program<'a, T>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<&'a mut T, ProbeError>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = aya::programs::ProgramError>,
{
    let prog = ebpf.program_mut(name).ok_or(ProbeError::Program(name, aya::programs::ProgramError::NotLoaded))?;
    prog.try_into().map_err(|e| ProbeError::Program(name, e))
}
