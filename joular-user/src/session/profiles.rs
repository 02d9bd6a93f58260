//! `serve --profile-dir`: every interval, the host-wide energy profile is written as pprof and
//! folded files through the rotator, then a new interval starts. A write that fails (disk full,
//! directory removed) is reported and counted; it never stops the daemon.

use std::path::PathBuf;

use joular_user::attribution::stacks::{AttributedCycle, RunEnd};
use joular_user::fleet::{ProfileFormat, ProfileRotator, Retention};
use joular_user::output::{IntervalProfile, OutputFiles, Sink, SinkError};
use joular_user::safe_write::Modes;

pub struct ProfileOptions {
    pub dir: PathBuf,
    pub modes: Modes,
    pub interval_s: f64,
    pub formats: Vec<ProfileFormat>,
    pub retention: Retention,
    pub host: String,
    /// `--native-frames`.
    pub native_frames: bool,
}

pub struct ProfileExport {
    rotator: ProfileRotator,
    profile: IntervalProfile,
    interval_s: f64,
    formats: Vec<ProfileFormat>,
    written: u64,
    failed: u64,
}

impl ProfileExport {
    pub fn new(
        opts: &ProfileOptions,
        energy_source: &str,
        estimated: bool,
        energy_detail: &str,
        now_epoch_ms: u64,
    ) -> anyhow::Result<Self> {
        let rotator = ProfileRotator::new(&opts.dir, &opts.host, opts.retention, opts.modes)?;
        errln!(
            "joular-ebpf: writing a {} s energy profile ({}) to {} (keeping {} intervals, {} MB at most)",
            opts.interval_s,
            opts.formats.iter().map(|f| f.extension()).collect::<Vec<_>>().join(", "),
            opts.dir.display(),
            opts.retention.keep_intervals,
            opts.retention.max_bytes >> 20
        );
        Ok(Self {
            rotator,
            profile: IntervalProfile::new(energy_source, estimated, &opts.host, now_epoch_ms, opts.native_frames)
                .with_energy_detail(energy_detail),
            interval_s: opts.interval_s,
            formats: opts.formats.clone(),
            written: 0,
            failed: 0,
        })
    }

    /// Writes the interval so far (if it has any cycle) and starts the next one.
    fn flush(&mut self, end_epoch_ms: u64) {
        if self.profile.duration_s() <= 0.0 {
            return;
        }
        for &format in &self.formats {
            let profile = &self.profile;
            let written = self.rotator.write(end_epoch_ms, format, |dir, name| match format {
                ProfileFormat::Pprof => profile.write_pprof(dir, name),
                ProfileFormat::Folded => profile.write_folded(dir, name),
            });
            match written {
                Ok(path) => {
                    if self.written == 0 {
                        errln!("joular-ebpf: first profile written: {}", path.display());
                    }
                    self.written += 1;
                }
                Err(e) => {
                    self.failed += 1;
                    errln!("joular-ebpf: warning: --profile-dir: profile not written ({} failures so far): {e}; the run goes on", self.failed);
                }
            }
        }
        self.profile.reset(end_epoch_ms);
    }
}

impl Sink for ProfileExport {
    /// Adds a cycle; closes the interval once it spans `interval_s` (monotonic cycle time, so a
    /// wall-clock jump neither shortens nor stretches one).
    fn on_cycle(&mut self, cycle: &AttributedCycle) -> Result<(), SinkError> {
        self.profile.on_cycle(cycle);
        // Half a millisecond of slack: cycle lengths are measured, not exact.
        if self.profile.duration_s() + 5e-4 >= self.interval_s {
            self.flush(cycle.report.end_epoch_ms);
        }
        Ok(())
    }

    /// The last, partial interval: a daemon stopped for an upgrade loses nothing.
    fn finish(&mut self, _run: &RunEnd) -> Vec<OutputFiles> {
        self.flush(joular_user::stages::report::epoch_ms());
        errln!("joular-ebpf: {} profile files written, {} failed", self.written, self.failed);
        Vec::new()
    }
}
