//! Whether the session records CPU frequencies (calmness), decided once at the start: the
//! reader when the machine has cpufreq, and what `summary.json` says either way.

use anyhow::Context as _;
use joular_user::calmness::{FrequencyReader, FREQUENCIES_FILE};
use joular_user::model::FrequencyRecording;
use joular_user::output::FrequencySink;
use joular_user::safe_write::OutDir;

use crate::cli::args::CommonArgs;

/// The reader (`None` without cpufreq, or for a daemon, whose trace would grow without bound)
/// and the run's `cpu_frequencies` note.
pub fn open(common: &CommonArgs, serve: bool) -> (Option<FrequencyReader>, FrequencyRecording) {
    if serve {
        let reason = "serve does not record CPU frequencies (the trace would grow without bound)".to_owned();
        return (None, FrequencyRecording { reason, ..Default::default() });
    }
    let sysfs = &common.energy.sysfs_root;
    match FrequencyReader::open(sysfs) {
        Some(reader) => {
            let recording = FrequencyRecording {
                available: true,
                cpus: reader.cpu_count(),
                file: Some(format!("../{FREQUENCIES_FILE}")),
                reason: String::new(),
            };
            (Some(reader), recording)
        }
        None => {
            let reason = format!(
                "this machine exposes no CPU frequency (no cpufreq in {}/devices/system/cpu/cpu*/cpufreq)",
                sysfs.display()
            );
            (None, FrequencyRecording { reason, ..Default::default() })
        }
    }
}

/// `frequencies.csv` in `--output`.
pub fn sink(common: &CommonArgs) -> anyhow::Result<FrequencySink> {
    let dir = OutDir::create_all(&common.output, common.modes())
        .with_context(|| format!("--output {}", common.output.display()))?;
    FrequencySink::create(&dir).with_context(|| format!("--output {}: {FREQUENCIES_FILE}", common.output.display()))
}
