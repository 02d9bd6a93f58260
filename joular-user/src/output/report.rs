//! `joular-ebpf report <result-dir>`: re-renders outputs from saved raw profiles.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::jcarbon::{jcarbon_signals, JCARBON_FILE};
use super::raw_profile::{read_raw_profile, RAW_PROFILE_FILE};
use super::render::{render_process, OutputFiles, RenderSet};
use super::table::top_methods_table;
use super::OutputError;
use crate::attribution::stacks::methods::MethodFilter;
use crate::attribution::stacks::profile::ProcessProfile;
use crate::calmness::{load_run, FrequencyCycle, LoadError, FREQUENCIES_FILE};
use crate::safe_write::{parse_output_mode, Modes, OutDir};

/// Arguments of the `report` subcommand.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// A `<pid>-<epochms>` result directory, or a `joularjx-result` directory holding several.
    pub result_dir: PathBuf,
    /// Directory for the rendered files (default: each profile's own directory).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// What to render, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "table,svg,pprof")]
    pub format: Vec<ReportFormat>,
    /// Rows of the table.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Prefixes for the "app" view instead of the recorded `--filter` (`com.acme,org.foo`).
    #[arg(long)]
    pub filter: Option<String>,
    /// Keep every frame of JVM stacks in graphs and call trees (as the run's own
    /// `--native-frames`; the raw profile always holds them).
    #[arg(long)]
    pub native_frames: bool,
    /// Permissions of the files written, in octal (directories get `x` where `r` is); default
    /// 0600 files and 0700 directories as root, the umask otherwise.
    #[arg(long, value_name = "MODE", value_parser = parse_output_mode)]
    pub output_mode: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// Top methods by energy, printed.
    Table,
    /// JoularJX `total/` CSVs.
    Csv,
    /// Folded stacks in µJ.
    Folded,
    /// Flame graphs.
    Svg,
    /// pprof (gzip protobuf).
    Pprof,
    /// `summary.json` and the raw profile.
    Summary,
    /// `report.html`: one self-contained page with tables, the flame graph and charts.
    Html,
    /// `jcarbon.json`: the run as jcarbon's signals (process and thread energy, thread
    /// activity, CPU frequencies).
    Jcarbon,
    /// Everything.
    All,
}

/// The profiles a `report` renders, every one read and checked before anything is written:
/// a bad file is the user's input, refused as such, with nothing rendered.
pub struct LoadedReport {
    profiles: Vec<(OutDir, ProcessProfile)>,
    /// Each profile's run's CPU frequencies, read when `--format jcarbon` asks for them.
    frequencies: Vec<Vec<FrequencyCycle>>,
}

/// Finds and reads the raw profiles `args` names.
pub fn load_report(args: &ReportArgs) -> Result<LoadedReport, OutputError> {
    let modes = Modes::from_flag(args.output_mode);
    let override_filter = args.filter.as_deref().map(MethodFilter::parse);
    let mut profiles = Vec::new();
    let mut frequencies = Vec::new();
    let jcarbon = args.format.iter().any(|f| matches!(f, ReportFormat::Jcarbon | ReportFormat::All));
    for profile_dir in find_profiles(&args.result_dir, modes)? {
        if jcarbon {
            frequencies.push(run_frequencies(profile_dir.path())?);
        }
        let mut profile = read_raw_profile(&profile_dir, RAW_PROFILE_FILE)?;
        if let Some(filter) = &override_filter {
            profile.summary.filters = filter.prefixes().to_vec();
        }
        profile.summary.native_frames |= args.native_frames;
        profile.complete();
        profiles.push((profile_dir, profile));
    }
    Ok(LoadedReport { profiles, frequencies })
}

/// The frequencies of the run a profile belongs to: none where it recorded none, or where the
/// run's directory cannot be opened (a profile copied out of it); a trace that is there and
/// unreadable is bad input.
fn run_frequencies(profile_dir: &Path) -> Result<Vec<FrequencyCycle>, OutputError> {
    match load_run(profile_dir) {
        Ok(trace) => Ok(trace),
        Err(LoadError::NoFrequencies { .. } | LoadError::NotARun { .. }) => Ok(Vec::new()),
        Err(LoadError::Read { path, .. }) if !path.ends_with(FREQUENCIES_FILE) => Ok(Vec::new()),
        Err(LoadError::Read { path, source }) => Err(OutputError::Io { path, source }),
        Err(LoadError::Parse { path, reason }) => Err(OutputError::Format { path, reason }),
    }
}

fn write_jcarbon(
    dir: &OutDir,
    profile: &ProcessProfile,
    frequencies: &[FrequencyCycle],
) -> Result<PathBuf, OutputError> {
    let path = dir.join(JCARBON_FILE);
    let json =
        serde_json::to_vec_pretty(&jcarbon_signals(profile, frequencies)).map_err(|e| OutputError::json(&path, e))?;
    let mut file = dir.replace(JCARBON_FILE).map_err(|e| OutputError::io(&path, e))?;
    file.write_all(&json).and_then(|()| file.commit()).map_err(|e| OutputError::io(&path, e))?;
    Ok(path)
}

/// Renders what [`load_report`] read, printing the table to stdout.
pub fn report(args: &ReportArgs, loaded: LoadedReport) -> Result<Vec<OutputFiles>, OutputError> {
    render_report(args, loaded, &mut std::io::stdout().lock())
}

/// `report` from the arguments alone, with the table written to `out`.
pub fn report_to(args: &ReportArgs, out: &mut dyn Write) -> Result<Vec<OutputFiles>, OutputError> {
    render_report(args, load_report(args)?, out)
}

fn render_report(
    args: &ReportArgs,
    loaded: LoadedReport,
    out: &mut dyn Write,
) -> Result<Vec<OutputFiles>, OutputError> {
    let modes = Modes::from_flag(args.output_mode);
    let override_filter = args.filter.as_deref().map(MethodFilter::parse);
    let has = |f: ReportFormat| args.format.contains(&f) || args.format.contains(&ReportFormat::All);
    let set = RenderSet {
        csv: has(ReportFormat::Csv),
        folded: has(ReportFormat::Folded),
        svg: has(ReportFormat::Svg),
        pprof: has(ReportFormat::Pprof),
        summary: has(ReportFormat::Summary),
        html: has(ReportFormat::Html),
    };
    let jcarbon = has(ReportFormat::Jcarbon);
    let renders = set.csv || set.folded || set.svg || set.pprof || set.summary || set.html || jcarbon;
    let output = match &args.output {
        Some(output) if renders => Some(OutDir::create_all(output, modes).map_err(|e| OutputError::io(output, e))?),
        _ => None,
    };
    let several = loaded.profiles.len() > 1;
    let mut profiles = Vec::with_capacity(loaded.profiles.len());
    let mut outputs = Vec::new();
    let mut frequencies = loaded.frequencies.into_iter();
    for (profile_dir, profile) in loaded.profiles {
        let run_frequencies = frequencies.next().unwrap_or_default();
        let filter = MethodFilter::new(profile.summary.filters.iter().cloned());
        if renders {
            let opened = match &output {
                Some(output) if several => {
                    let name = profile_dir.path().file_name().unwrap_or_default().to_string_lossy();
                    output.subdir(&name).map_err(|e| OutputError::io(&output.join(&*name), e))
                }
                Some(output) => output.try_clone().map_err(|e| OutputError::io(output.path(), e)),
                None => profile_dir.try_clone().map_err(|e| OutputError::io(profile_dir.path(), e)),
            };
            // The profile's own directory holds its evolution files (for report.html's charts).
            let opened = opened?;
            let mut files = render_process(&opened, &profile_dir, &profile, &filter, set);
            // `report` writes nothing else: a file it could not write is its error.
            if let Some(failed) = files.failed.first() {
                return Err(OutputError::Format { path: failed.path.clone().into(), reason: failed.error.clone() });
            }
            if jcarbon {
                files.files.push(write_jcarbon(&opened, &profile, &run_frequencies)?);
            }
            outputs.push(files);
        }
        profiles.push(profile);
    }
    if has(ReportFormat::Table) {
        let table = top_methods_table(&profiles, override_filter.as_ref(), args.top);
        out.write_all(table.as_bytes()).map_err(|e| OutputError::io(Path::new("<stdout>"), e))?;
    }
    Ok(outputs)
}

/// The directory holding the raw profile (`dir` itself), or those one level below it that hold
/// one (a `joularjx-result` directory), sorted; symlinks are not followed below `dir`.
pub(crate) fn find_profiles(dir: &Path, modes: Modes) -> Result<Vec<OutDir>, OutputError> {
    let root = OutDir::open_to_read(dir, modes).map_err(|e| OutputError::io(dir, e))?;
    if root.has_file(RAW_PROFILE_FILE) {
        return Ok(vec![root]);
    }
    let mut names: Vec<String> = root
        .entries()
        .map_err(|e| OutputError::io(dir, e))?
        .into_iter()
        .filter(|e| !e.is_file)
        .filter_map(|e| e.name.into_string().ok())
        .collect();
    names.sort();
    let found: Vec<OutDir> = names
        .iter()
        .filter_map(|name| root.open_subdir(name).ok())
        .filter(|sub| sub.has_file(RAW_PROFILE_FILE))
        .collect();
    if found.is_empty() {
        return Err(OutputError::NoProfile(dir.to_owned()));
    }
    Ok(found)
}
