//! `joular-ebpf report <result-dir>`: re-renders outputs from saved raw profiles.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::methods::MethodFilter;
use super::raw_profile::{read_raw_profile, RAW_PROFILE_FILE};
use super::render::{render_process, OutputFiles, RenderSet};
use super::table::top_methods_table;
use super::OutputError;

/// Arguments of the `report` subcommand.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// A `<pid>-<epochms>` result directory, or a `joularjx-result` directory holding several.
    pub result_dir: PathBuf,
    /// Directory for the rendered files (default: each profile's own directory).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// What to render, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "table,svg,pprof"
    )]
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
    /// Everything.
    All,
}

/// Runs the subcommand, printing the table to stdout.
pub fn report(args: &ReportArgs) -> Result<Vec<OutputFiles>, OutputError> {
    report_to(args, &mut std::io::stdout().lock())
}

/// `report` with the table written to `out`.
pub fn report_to(args: &ReportArgs, out: &mut dyn Write) -> Result<Vec<OutputFiles>, OutputError> {
    let paths = find_profiles(&args.result_dir)?;
    let override_filter = args.filter.as_deref().map(MethodFilter::parse);
    let has =
        |f: ReportFormat| args.format.contains(&f) || args.format.contains(&ReportFormat::All);
    let set = RenderSet {
        csv: has(ReportFormat::Csv),
        folded: has(ReportFormat::Folded),
        svg: has(ReportFormat::Svg),
        pprof: has(ReportFormat::Pprof),
        summary: has(ReportFormat::Summary),
        html: has(ReportFormat::Html),
    };
    let mut profiles = Vec::with_capacity(paths.len());
    let mut outputs = Vec::new();
    for path in &paths {
        let mut profile = read_raw_profile(path)?;
        if let Some(filter) = &override_filter {
            profile.summary.filters = filter.prefixes().to_vec();
        }
        profile.summary.native_frames |= args.native_frames;
        profile.complete();
        let profile_dir = path.parent().unwrap_or(Path::new("."));
        let dir = match &args.output {
            Some(output) if paths.len() > 1 => {
                output.join(profile_dir.file_name().unwrap_or_default())
            }
            Some(output) => output.clone(),
            None => profile_dir.to_owned(),
        };
        let filter = MethodFilter::new(profile.summary.filters.iter().cloned());
        if set.csv || set.folded || set.svg || set.pprof || set.summary || set.html {
            outputs.push(render_process(&dir, profile_dir, &profile, &filter, set)?);
        }
        profiles.push(profile);
    }
    if has(ReportFormat::Table) {
        let table = top_methods_table(&profiles, override_filter.as_ref(), args.top);
        out.write_all(table.as_bytes())
            .map_err(|e| OutputError::io(Path::new("<stdout>"), e))?;
    }
    Ok(outputs)
}

/// The raw profile in `dir`, or those one level below it (a `joularjx-result` directory).
fn find_profiles(dir: &Path) -> Result<Vec<PathBuf>, OutputError> {
    let direct = dir.join(RAW_PROFILE_FILE);
    if direct.is_file() {
        return Ok(vec![direct]);
    }
    let entries = std::fs::read_dir(dir).map_err(|e| OutputError::io(dir, e))?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path().join(RAW_PROFILE_FILE))
        .filter(|p| p.is_file())
        .collect();
    if found.is_empty() {
        return Err(OutputError::NoProfile(dir.to_owned()));
    }
    found.sort();
    Ok(found)
}
