//! Command-line interface. Flag names are part of the product's contract; keep them.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use joular_user::energy::{EnergyOptions, SourceKind};
use joular_user::output::{ReportArgs, ReportFormat};
use joular_user::safe_write::{self, parse_output_mode, Modes};

use super::paths::{check_root, check_writable_fs};
pub use carbon::CarbonArgs;

mod carbon;

const ABOUT: &str = "Energy profiler for Java (and any process), built on eBPF: joules per \
method, thread, process and call path, with no Java agent.";

const LONG_ABOUT: &str = "Energy profiler for Java (and any process), built on eBPF: joules per \
method, thread, process and call path, with no Java agent and no JVM change.

Every CPU is sampled (kernel + user stacks, default 100 Hz) and the scheduler's on-CPU time is \
accounted per thread. Each cycle (default 1 s) the socket's energy (RAPL, or a labelled model) \
is split over threads by CPU share, then over methods and call paths by sample share.

Java stacks need no JVM flag: HotSpot's own tables name every frame and unwind compiled code \
(JDK 11 to 25). For exact inlined methods, run the JVM with -XX:+UnlockDiagnosticVMOptions \
-XX:+DebugNonSafepoints (as JFR and async-profiler advise).

Examples:
  sudo joular-ebpf --pid 4242 --duration 30
  sudo joular-ebpf record -- java -jar app.jar
  sudo joular-ebpf --all --duration 10 --json host.jsonl";

#[derive(Debug, Parser)]
#[command(name = "joular-ebpf", version, about = ABOUT, long_about = LONG_ABOUT)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub profile: ProfileArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start a command and profile it until it exits; exits with the command's exit code.
    ///
    /// Every process the command starts is profiled too, each with its own results. The first
    /// Ctrl-C or SIGTERM is passed on as SIGTERM; a second one, or 10 s later, kills the command
    /// and what it started.
    Record(RecordArgs),
    /// Whole-host daemon: profile every process, serve Prometheus metrics over HTTP and, with
    /// --profile-dir, write a host-wide energy profile (pprof, folded) per interval.
    #[command(after_help = "Examples:
  sudo joular-ebpf serve
  sudo joular-ebpf serve --listen 0.0.0.0:9464 --profile-dir /var/lib/joular-ebpf/profiles
  curl -s localhost:9464/metrics | grep joular_process_energy_joules_total")]
    Serve(ServeArgs),
    /// Re-render a saved result directory (table, SVG, pprof...) without profiling again.
    Report(joular_user::output::ReportArgs),
    /// Compare two runs, or two sets of repeated runs: per method and for the process, the
    /// change in energy and its uncertainty; flags only changes larger than it.
    Diff(super::diff::DiffArgs),
    /// Energy as a function of a parameter: run a command over a range of values (each run
    /// recorded), fit a model per method and for the process (linear, quadratic, exponential...)
    /// and rank the methods by their part of the growth.
    Sweep(super::sweep::SweepArgs),
    /// How much profiling disturbs the CPU's power state (jcarbon's calmness): compares two
    /// runs' CPU frequency distributions, or runs `-- CMD` observed only and profiled.
    Calmness(super::calmness::CalmnessArgs),
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// The command to run, after `--`: `joular-ebpf record -- java -jar app.jar`.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address of the Prometheus endpoint (`/metrics`).
    #[arg(long, default_value = "127.0.0.1:9464", value_name = "ADDR:PORT")]
    pub listen: std::net::SocketAddr,
    /// Methods exported per JVM (the top N by energy), so metric cardinality stays bounded.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub top_methods: usize,
    /// Seconds an exited process's series stay exported before folding into the exited total.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    pub retain_exited: u64,
    /// Also write a JoularJX result tree per process under --output, completed when the process
    /// exits (and at shutdown for those still running). Off by default: a daemon would grow it
    /// without bound.
    #[arg(long)]
    pub results: bool,
    /// Write each virtual machine's energy (QEMU/KVM, Firecracker, cloud-hypervisor processes)
    /// into DIR/<vm-name>/ every cycle, for its guest to read: Scaphandre's powercap tree
    /// (intel-rapl:0/energy_uj, read in the guest with --powercap-root DIR/<vm-name>) and
    /// JoularJX's power_w (--energy-source vm-power-file:DIR/<vm-name>/power_w). Share DIR into
    /// the guests read-only; --output-mode 0644 lets a guest's non-root user read it.
    #[arg(long, value_name = "DIR")]
    pub vm_energy_dir: Option<PathBuf>,
    /// Where the exported energy_uj wraps to 0 (tests shorten it to see a wrap).
    #[arg(long, default_value_t = joular_user::vm_export::DEFAULT_RANGE_UJ, value_name = "UJ", hide = true, requires = "vm_energy_dir")]
    pub vm_energy_range_uj: u64,
    #[command(flatten)]
    pub common: CommonArgs,
    // Last: its help heading would otherwise carry over to the flags after it.
    #[command(flatten)]
    pub profiles: ProfileExportArgs,
}

/// Most methods exported per JVM: beyond it the series are no longer a bounded set.
const MAX_TOP_METHODS: usize = 1_000;

impl ServeArgs {
    /// Every flag of `serve`, before anything is bound or loaded.
    pub fn validate(&self) -> Result<(), String> {
        self.common.validate_for(self.results)?;
        if let Some(dir) = &self.vm_energy_dir {
            safe_write::check_dir("--vm-energy-dir", dir)?;
            check_writable_fs("--vm-energy-dir", dir)?;
        }
        if self.vm_energy_range_uj == 0 {
            return Err("--vm-energy-range-uj must be above 0".into());
        }
        if self.top_methods > MAX_TOP_METHODS {
            return Err(format!(
                "--top-methods must be at most {MAX_TOP_METHODS} (got {}): it bounds the metrics' cardinality",
                self.top_methods
            ));
        }
        if self.retain_exited as f64 > MAX_DURATION_S {
            return Err(format!(
                "--retain-exited must be at most {MAX_DURATION_S} s (30 days; got {})",
                self.retain_exited
            ));
        }
        self.profiles.validate(self.common.interval)
    }
}

/// Periodic profile files for a continuous-profiling backend (serve mode).
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Profile export")]
pub struct ProfileExportArgs {
    /// Write one host-wide energy profile per interval into DIR, as `<end_epoch_ms>-<host>.pprof.gz`
    /// (pprof, samples labelled pid, comm, container_id) and `<end_epoch_ms>-<host>.folded`. Files
    /// appear atomically; Pyroscope and Parca ingest the pprof (see docs/deployment.md).
    #[arg(long, value_name = "DIR")]
    pub profile_dir: Option<PathBuf>,
    /// Length of one profile interval, in seconds.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS", requires = "profile_dir")]
    pub profile_interval: f64,
    /// Formats written each interval (comma-separated).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "pprof,folded",
        value_name = "FORMATS",
        requires = "profile_dir"
    )]
    pub profile_format: Vec<ProfileFormatArg>,
    /// Newest intervals kept per format; older files are removed.
    #[arg(long, default_value_t = 60, value_name = "N", requires = "profile_dir")]
    pub profile_keep: usize,
    /// Megabytes all of this host's profile files may take; the oldest go first.
    #[arg(long, default_value_t = 256, value_name = "MB", requires = "profile_dir")]
    pub profile_max_mb: u64,
    /// Host name in file names and profiles (default: the kernel's host name). In a Kubernetes
    /// pod pass the node name (`--host-name=$(NODE_NAME)`).
    #[arg(long, value_name = "NAME")]
    pub host_name: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProfileFormatArg {
    Pprof,
    Folded,
}

impl ProfileFormatArg {
    pub fn format(self) -> joular_user::fleet::ProfileFormat {
        match self {
            ProfileFormatArg::Pprof => joular_user::fleet::ProfileFormat::Pprof,
            ProfileFormatArg::Folded => joular_user::fleet::ProfileFormat::Folded,
        }
    }
}

impl ProfileExportArgs {
    /// `interval_s`: the cycle length, the shortest a profile interval can be.
    pub fn validate(&self, interval_s: f64) -> Result<(), String> {
        check_seconds("--profile-interval", self.profile_interval, MAX_DURATION_S, "30 days")?;
        if self.profile_interval < interval_s {
            return Err(format!(
                "--profile-interval {} is shorter than one cycle (--interval {interval_s}): give at least {interval_s}",
                self.profile_interval
            ));
        }
        if self.profile_keep == 0 {
            return Err("--profile-keep must be at least 1".into());
        }
        if !(1..=MAX_STORE_MB).contains(&self.profile_max_mb) {
            return Err(format!(
                "--profile-max-mb must be between 1 and {MAX_STORE_MB} MB (got {})",
                self.profile_max_mb
            ));
        }
        if let Some(dir) = &self.profile_dir {
            safe_write::check_dir("--profile-dir", dir)?;
            check_writable_fs("--profile-dir", dir)?;
        }
        Ok(())
    }
}

/// `report`: where it writes (its `--output`, else the result directory itself) is checked like
/// `--output`; a table alone writes nothing.
pub fn validate_report(args: &ReportArgs) -> Result<(), String> {
    let dir = &args.result_dir;
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        _ => return Err(format!("report {}: no such directory: pass a result directory written by joular-ebpf (its --output, or one `<pid>-<epochms>` in it)", dir.display())),
    }
    let writes = args.format.iter().any(|f| *f != ReportFormat::Table);
    match &args.output {
        Some(output) if writes => {
            safe_write::check_dir("--output", output)?;
            check_writable_fs("--output", output)
        }
        None if writes => {
            let fix = "render it elsewhere with --output DIR";
            safe_write::check_dir_or("report", dir, fix)?;
            check_writable_fs("report", dir).map_err(|e| format!("{e}, or {fix}"))
        }
        _ => Ok(()),
    }
}

/// What to profile when no subcommand is given.
#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// Process(es) to profile: all their threads, present and future. Repeat or comma-separate.
    #[arg(short, long, value_delimiter = ',', conflicts_with = "all")]
    pub pid: Vec<u32>,
    /// Profile every process on the host.
    #[arg(short, long)]
    pub all: bool,
    /// Also profile the processes the --pid processes start, and theirs (`record` always does):
    /// those they started before the profiler (found in /proc) and those they start while it
    /// runs (followed by the kernel at fork). The run still ends when the --pid processes have
    /// exited.
    #[arg(long, requires = "pid")]
    pub follow_children: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

impl ProfileArgs {
    /// Every flag of a run without a subcommand, before anything is loaded.
    pub fn validate(&self) -> Result<(), String> {
        // clap's `requires` lets `--all --follow-children` through.
        if self.follow_children && self.pid.is_empty() {
            return Err("--follow-children needs --pid: --all already profiles every process, and `record` follows its command's".into());
        }
        self.common.validate()
    }
}

/// Longest `--duration`: beyond it a typo (`1e20`) is likelier than a plan.
const MAX_DURATION_S: f64 = 30.0 * 86_400.0;
/// Longest `--interval`: a cycle's counters must be read well before they could wrap.
const MAX_INTERVAL_S: f64 = 3_600.0;
/// Shortest `--interval`: a cycle's drain and /proc reads take tens of ms on a busy host, and
/// /proc jiffies tick every 4-10 ms.
const MIN_INTERVAL_S: f64 = 0.1;
/// Highest `--tdp` and `--idle-power`: above any socket made (a typo is likelier).
const MAX_SOCKET_W: f64 = 10_000.0;
/// Largest `--profile-max-mb` (1 TiB).
const MAX_STORE_MB: u64 = 1 << 20;

/// Below this a JVM's map hardly fits; above it (1 TiB) a typo is likelier than a plan.
const MIN_SYMBOL_MB: u64 = 8;
const MAX_SYMBOL_MB: u64 = 1 << 20;

/// `flag` holds a number of seconds in `(0, max_s]`.
fn check_seconds(flag: &str, value: f64, max_s: f64, max_text: &str) -> Result<(), String> {
    if !(value > 0.0 && value.is_finite()) {
        return Err(format!("{flag} must be a positive number of seconds (got {value})"));
    }
    if value > max_s {
        return Err(format!("{flag} must be at most {max_s} s ({max_text}; got {value})"));
    }
    Ok(())
}

#[derive(Debug, Args, Clone)]
pub struct CommonArgs {
    /// Stop after this many seconds (default: until Ctrl-C or the target exits).
    #[arg(short, long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Length of one monitoring cycle, in seconds.
    #[arg(short, long, default_value_t = 1.0, value_name = "SECONDS")]
    pub interval: f64,
    /// Sampling frequency per CPU, in Hz. Samples only split a thread's energy among its
    /// methods; the thread's own energy comes from scheduler time, so sampling bias cannot
    /// change thread totals.
    #[arg(short = 'F', long, default_value_t = 100, value_name = "HZ")]
    pub frequency: u64,
    /// Write one JSON object per cycle (JSON Lines) to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Print per-thread detail each cycle, including the eBPF vs /proc on-CPU cross-check.
    #[arg(short, long)]
    pub verbose: bool,
    /// Where per-thread CPU time comes from: the eBPF scheduler hook (ns, exact), or /proc
    /// jiffies (10 ms ticks; used automatically when the hook cannot be attached).
    #[arg(long, value_enum, default_value = "ebpf", value_name = "SOURCE")]
    pub cpu_time: CpuTimeSource,
    /// Devices measured, a comma list of `cpu`, `network`, `disk` (the CPU always is). With
    /// `network` and/or `disk`, the kernel counts each profiled thread's socket bytes (through a
    /// network device, or local: loopback and AF_UNIX) and regular-file bytes read and written,
    /// per call path, at the call that moves them; `--json` cycles and `summary.json` then
    /// carry them under `devices`. With `cpu` only, no byte counter is even loaded.
    #[arg(long, default_value = "cpu", value_name = "LIST", value_parser = joular_user::ebpf::Devices::parse)]
    pub devices: joular_user::ebpf::Devices,
    /// A network interface's model figures, IFACE=IDLE_W,W_PER_GBPS (repeatable): its idle
    /// watts and its watts per Gbit/s moved, instead of the defaults chosen by its PCI ids
    /// (docs/devices.md). Needs `network` in --devices.
    #[arg(long, value_name = "IFACE=IDLE_W,W_PER_GBPS", value_parser = joular_user::device_models::figures::parse_nic_power)]
    pub nic_power: Vec<joular_user::device_models::figures::UnitFigures>,
    /// A block device's model figures, DEV=IDLE_W,ACTIVE_W (repeatable), instead of its
    /// class's defaults (docs/devices.md); also makes it a unit when it is stacked on another
    /// (loop, dm-, md...), which are left out otherwise. Needs `disk` in --devices.
    #[arg(long, value_name = "DEV=IDLE_W,ACTIVE_W", value_parser = joular_user::device_models::figures::parse_disk_power)]
    pub disk_power: Vec<joular_user::device_models::figures::UnitFigures>,
    /// Forward the eBPF programs' debug log (aya-log) to stderr.
    #[arg(long)]
    pub ebpf_log: bool,
    /// Time the sampler on every sample of a profiled thread (one clock read more each) and
    /// print, at the end, its ns per sample: median, p90 and p99. `kernel.bpf_stats_enabled`
    /// gives a mean over every sample only.
    #[arg(long)]
    pub sampler_cost: bool,
    /// How Java frames are named: `hotspot` reads each JVM's own introspection tables (every
    /// frame: interpreted, inlined and compiled, with lines; no attach); `perf-map` only asks
    /// JVMs for a perf map over the attach protocol (compiled code only, JDK 16+), as is
    /// done anyway for a JVM whose tables cannot be read.
    #[arg(long, value_enum, default_value = "hotspot", value_name = "HOW")]
    pub java_symbols: JavaSymbols,
    /// Number of stacks and threads shown in the end summary.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub top: usize,
    /// Results directory: a JoularJX tree per process (`<pid>-<epochms>/{all,app}/...`), flame
    /// graphs, pprof, folded stacks, summary.json. Symlinks on the way are followed only when
    /// root or you own them.
    #[arg(short, long, default_value = "joularjx-result", value_name = "DIR")]
    pub output: PathBuf,
    /// Permissions of every file written (results, --json, --profile-dir), in octal, e.g. 0644;
    /// directories get `x` where `r` is (0755). Default: 0600 files and 0700 directories when
    /// running as root (results name every process profiled), the umask otherwise.
    #[arg(long, value_name = "MODE", value_parser = parse_output_mode)]
    pub output_mode: Option<u32>,
    /// Application packages/classes (comma-separated prefixes, e.g. `com.acme,org.foo`) for the
    /// "app" view: each sample is charged to the nearest frame from the top that matches, so
    /// JDK work an app method causes is charged to it.
    #[arg(long, value_name = "PREFIXES", default_value = "")]
    pub filter: String,
    /// Do not write per-method power over time (`evolution/`).
    #[arg(long)]
    pub no_evolution: bool,
    /// Also rewrite per-cycle call trees (`runtime/calltrees`), as JoularJX's
    /// save-call-trees-runtime-data does. Several MB per second on a busy JVM.
    #[arg(long)]
    pub runtime_call_trees: bool,
    /// Keep every frame of JVM stacks in flame graphs, folded stacks, pprof and call trees:
    /// HotSpot's thread start below the first Java frame, and the native frames call-tree
    /// CSVs leave out. Default: Java call trees, as JoularJX and async-profiler show them.
    #[arg(long)]
    pub native_frames: bool,
    /// Also write report.html per process: one self-contained page (tables, flame graph, power
    /// over time, per-thread energy, call trees). `serve --results` always writes it.
    #[arg(long)]
    pub html: bool,
    /// Memory all symbol data may take together, in MB: JVM perf maps (indexed compactly),
    /// interned frames and stacks, HotSpot readers' caches. Past it the largest perf maps are
    /// indexed in part, with a warning, and what was left out is counted.
    #[arg(long, default_value_t = 256, value_name = "MB")]
    pub max_symbol_mb: u64,
    /// Where native unwind rows are kept between runs. Built from each library's call-frame
    /// information, they cost some 40-100 ms of CPU for a libjvm, taken from the target when
    /// its threads fill the CPUs; kept, the next run reads them back. A file's rows are found by
    /// its device, inode, size, mtime and ctime. The directory is created 0700 and must be
    /// ours alone (otherwise it is not used, with a warning); it holds at most 64 MiB.
    #[arg(long, default_value = "/var/cache/joular-ebpf/unwind", value_name = "DIR")]
    pub unwind_cache: PathBuf,
    /// Build native unwind rows anew every run and keep nothing on disk.
    #[arg(long)]
    pub no_unwind_cache: bool,
    #[command(flatten)]
    pub energy: EnergyArgs,
    #[command(flatten)]
    pub carbon: CarbonArgs,
    /// Root of the /proc tree (for containers and tests).
    #[arg(long, default_value = "/proc", value_name = "DIR", hide = true)]
    pub proc_root: PathBuf,
}

impl CommonArgs {
    /// Validates values clap cannot, with messages that say how to fix them.
    pub fn validate(&self) -> Result<(), String> {
        self.validate_for(true)
    }

    /// [`CommonArgs::validate`]; `--output` is checked only when the result tree is written
    /// (`serve` writes it only with `--results`).
    pub fn validate_for(&self, writes_tree: bool) -> Result<(), String> {
        check_seconds("--interval", self.interval, MAX_INTERVAL_S, "1 hour")?;
        if self.interval < MIN_INTERVAL_S {
            return Err(format!(
                "--interval must be at least {MIN_INTERVAL_S} s (got {}): shorter cycles cost more than they measure",
                self.interval
            ));
        }
        if let Some(d) = self.duration {
            check_seconds("--duration", d, MAX_DURATION_S, "30 days")?;
        }
        if self.frequency == 0 || self.frequency > 10_000 {
            return Err(format!("--frequency must be between 1 and 10000 Hz (got {})", self.frequency));
        }
        if !(MIN_SYMBOL_MB..=MAX_SYMBOL_MB).contains(&self.max_symbol_mb) {
            return Err(format!(
                "--max-symbol-mb must be between {MIN_SYMBOL_MB} and {MAX_SYMBOL_MB} MB (got {})",
                self.max_symbol_mb
            ));
        }
        // Checked before anything is loaded, with the rules the run itself applies when it
        // creates them (a path planted later is refused then, the same way).
        if writes_tree {
            safe_write::check_dir("--output", &self.output)?;
            check_writable_fs("--output", &self.output)?;
        }
        if let Some(json) = &self.json {
            safe_write::check_file("--json", json)?;
            check_writable_fs("--json", json)?;
        }
        check_root("--proc-root", &self.proc_root)?;
        self.carbon.carbon()?;
        self.energy.validate()?;
        joular_user::device_models::check(&self.device_models())
    }

    /// What `--devices`, `--nic-power` and `--disk-power` ask the device models for.
    pub fn device_models(&self) -> joular_user::device_models::ModelOptions {
        joular_user::device_models::ModelOptions {
            sysfs_root: self.energy.sysfs_root.clone(),
            network: self.devices.network,
            disk: self.devices.disk,
            nic_power: self.nic_power.clone(),
            disk_power: self.disk_power.clone(),
        }
    }

    /// Permissions of what the run writes.
    pub fn modes(&self) -> Modes {
        Modes::from_flag(self.output_mode)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum JavaSymbols {
    Hotspot,
    PerfMap,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CpuTimeSource {
    Ebpf,
    Procfs,
}

/// Where energy comes from.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Energy")]
pub struct EnergyArgs {
    /// Energy source: powercap, perf, msr, model, or vm-power-file:PATH (in a VM, the VM's
    /// watts its host writes to PATH, JoularJX's convention); default: the first that works of
    /// powercap, perf, msr, model.
    #[arg(long, value_parser = parse_energy_source, value_name = "SOURCE")]
    pub energy_source: Option<EnergySourceArg>,
    /// In a VM: read powercap from DIR, the host's export of this VM's energy (DIR holds
    /// intel-rapl:0/energy_uj, as `serve --vm-energy-dir` or Scaphandre writes it); the whole
    /// VM is then one socket. Implies --energy-source powercap.
    #[arg(long, value_name = "DIR")]
    pub powercap_root: Option<PathBuf>,
    /// Root of the sysfs tree read for powercap, the perf power PMU and CPU topology.
    #[arg(long, default_value = "/sys", value_name = "DIR")]
    pub sysfs_root: PathBuf,
    /// Root of the /dev tree read for MSRs (`<root>/cpu/N/msr`).
    #[arg(long, default_value = "/dev", value_name = "DIR", hide = true)]
    pub dev_root: PathBuf,
    /// TDP per socket in watts, for the model source (default: a table of known CPUs).
    #[arg(long, value_name = "WATTS")]
    pub tdp: Option<f64>,
    /// Idle power per socket in watts: the model's P_idle and the baseline of the dynamic view
    /// (default: the lowest socket power seen so far).
    #[arg(long, value_name = "WATTS")]
    pub idle_power: Option<f64>,
    /// Add DRAM energy to each socket's energy (where the source has a DRAM counter).
    #[arg(long)]
    pub dram: bool,
    /// Also report the platform (psys) counter, where one exists.
    #[arg(long)]
    pub psys: bool,
}

/// `--energy-source`: a source's name, or `vm-power-file:PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnergySourceArg {
    pub kind: SourceKind,
    /// The watts file of `vm-power-file:PATH`.
    pub power_file: Option<PathBuf>,
}

fn parse_energy_source(text: &str) -> Result<EnergySourceArg, String> {
    if let Some(path) = text.strip_prefix("vm-power-file:") {
        if path.is_empty() {
            return Err("vm-power-file needs the watts file's path: --energy-source vm-power-file:/mnt/host-energy/<vm-name>/power_w".into());
        }
        return Ok(EnergySourceArg { kind: SourceKind::VmPowerFile, power_file: Some(PathBuf::from(path)) });
    }
    if text == "vm-power-file" {
        return Err(
            "vm-power-file needs the watts file's path after a colon: --energy-source vm-power-file:PATH".into()
        );
    }
    let kind = <SourceKind as clap::ValueEnum>::from_str(text, false)
        .map_err(|_| format!("{text:?} is not a source: use one of powercap, perf, msr, model, vm-power-file:PATH"))?;
    Ok(EnergySourceArg { kind, power_file: None })
}

impl EnergyArgs {
    /// The source asked for: `--energy-source`, or powercap when only `--powercap-root` is given.
    fn source(&self) -> Option<SourceKind> {
        match (&self.energy_source, &self.powercap_root) {
            (Some(arg), _) => Some(arg.kind),
            (None, Some(_)) => Some(SourceKind::Powercap),
            (None, None) => None,
        }
    }

    /// Numbers in range, roots that exist, and no flag the chosen source would ignore.
    fn validate(&self) -> Result<(), String> {
        check_root("--sysfs-root", &self.sysfs_root)?;
        check_root("--dev-root", &self.dev_root)?;
        self.validate_vm()?;
        if let Some(tdp_w) = self.tdp {
            if !(tdp_w > 0.0 && tdp_w <= MAX_SOCKET_W) {
                return Err(format!("--tdp must be above 0 and at most {MAX_SOCKET_W} W per socket (got {tdp_w}): pass the CPU's rated TDP, e.g. --tdp 120"));
            }
            if let Some(kind) = self.source().filter(|k| *k != SourceKind::Model) {
                return Err(format!(
                    "--tdp only sets the model's power, and --energy-source {kind} measures it: drop one of them"
                ));
            }
        }
        if let Some(idle_w) = self.idle_power {
            if !(0.0..=MAX_SOCKET_W).contains(&idle_w) {
                return Err(format!("--idle-power must be between 0 and {MAX_SOCKET_W} W per socket (got {idle_w})"));
            }
            if self.tdp.is_some_and(|tdp_w| idle_w >= tdp_w) {
                return Err(format!(
                    "--idle-power {idle_w} W must be below --tdp {} W: a socket idles below its full-load power",
                    self.tdp.unwrap_or_default()
                ));
            }
        }
        Ok(())
    }

    /// A VM's energy from its host: an existing directory or file, and no flag asking for
    /// counters the host's figure does not have.
    fn validate_vm(&self) -> Result<(), String> {
        if let Some(root) = &self.powercap_root {
            if let Some(kind) = self.source().filter(|k| *k != SourceKind::Powercap) {
                return Err(format!(
                    "--powercap-root is read by the powercap source, and --energy-source {kind} was asked for: drop one of them"
                ));
            }
            if !root.is_dir() {
                return Err(format!(
                    "--powercap-root {}: no such directory: mount the host's export into the VM and pass its DIR/<vm-name> (the directory holding intel-rapl:0)",
                    root.display()
                ));
            }
        }
        if let Some(path) = self.energy_source.as_ref().and_then(|a| a.power_file.as_ref()) {
            if !path.is_file() {
                return Err(format!(
                    "--energy-source vm-power-file:{}: no such file: pass the file the host writes this VM's watts to (DIR/<vm-name>/power_w of `serve --vm-energy-dir DIR`)",
                    path.display()
                ));
            }
        }
        let whole_vm = self.powercap_root.is_some() || self.source() == Some(SourceKind::VmPowerFile);
        if whole_vm && (self.dram || self.psys) {
            let flag = if self.dram { "--dram" } else { "--psys" };
            return Err(format!(
                "{flag}: the host measures the VM as a whole, with no DRAM or platform counter: drop {flag}"
            ));
        }
        Ok(())
    }
}

impl CommonArgs {
    pub fn energy_options(&self) -> EnergyOptions {
        EnergyOptions {
            sysfs_root: self.energy.sysfs_root.clone(),
            proc_root: self.proc_root.clone(),
            dev_root: self.energy.dev_root.clone(),
            source: self.energy.source(),
            tdp_w: self.energy.tdp,
            idle_power_w: self.energy.idle_power,
            dram: self.energy.dram,
            psys: self.energy.psys,
            powercap_root: self.energy.powercap_root.clone(),
            vm_power_file: self.energy.energy_source.as_ref().and_then(|a| a.power_file.clone()),
        }
    }
}

#[cfg(test)]
mod tests;
