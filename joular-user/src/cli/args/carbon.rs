//! `--carbon-intensity`, `--carbon-intensity-file` and `--pue`: checked (and the file read and
//! parsed) before anything is loaded, like every other flag.

use std::io::Read;
use std::path::PathBuf;

use clap::Args;
use joular_user::carbon::{Carbon, Intensity, IntensityTimeline};

/// Above any grid (coal is about 1,000 gCO2e/kWh): a larger value is a unit mistake (kg, lb).
const MAX_G_PER_KWH: f64 = 5_000.0;
/// PUE is 1 with no overhead; the worst data centres measured are near 3.
const MAX_PUE: f64 = 3.0;
/// An intensity file larger than this is not a grid export (a year of 5-minute rows is ~10 MB).
const MAX_FILE_BYTES: u64 = 64 << 20;

/// Carbon of the energy measured: no intensity, no carbon figure.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Carbon")]
pub struct CarbonArgs {
    /// Grid carbon intensity in gCO2e/kWh: every output adds grams of CO2e (operational only).
    #[arg(long, value_name = "G_PER_KWH", conflicts_with = "carbon_intensity_file")]
    pub carbon_intensity: Option<f64>,
    /// CSV of timestamped intensities (an Electricity Maps export, or `time,intensity` rows in
    /// UTC), interpolated at each cycle.
    #[arg(long, value_name = "CSV")]
    pub carbon_intensity_file: Option<PathBuf>,
    /// Power usage effectiveness of the data centre, multiplying the energy (default 1).
    #[arg(long, value_name = "F")]
    pub pue: Option<f64>,
}

impl CarbonArgs {
    /// The run's carbon settings, or `None` when no intensity was given; a message naming the
    /// flag and the fix otherwise.
    pub fn carbon(&self) -> Result<Option<Carbon>, String> {
        if let Some(pue) = self.pue {
            if !(1.0..=MAX_PUE).contains(&pue) {
                return Err(format!("--pue must be between 1 and {MAX_PUE} (got {pue}): 1 means no overhead, a typical data centre is 1.1 to 1.6"));
            }
        }
        let intensity = match (self.carbon_intensity, &self.carbon_intensity_file) {
            (Some(g_per_kwh), _) => {
                if !(g_per_kwh > 0.0 && g_per_kwh <= MAX_G_PER_KWH) {
                    return Err(format!("--carbon-intensity must be above 0 and at most {MAX_G_PER_KWH} gCO2e/kWh (got {g_per_kwh}): pass your grid's intensity, e.g. --carbon-intensity 300"));
                }
                Intensity::Constant { g_per_kwh }
            }
            (None, Some(path)) => {
                Intensity::Timeline { file: path.display().to_string(), timeline: read_timeline(path)? }
            }
            (None, None) if self.pue.is_some() => {
                return Err(
                    "--pue only scales carbon figures: give --carbon-intensity or --carbon-intensity-file with it"
                        .into(),
                )
            }
            (None, None) => return Ok(None),
        };
        Ok(Some(Carbon { intensity, pue: self.pue.unwrap_or(1.0) }))
    }
}

fn read_timeline(path: &PathBuf) -> Result<IntensityTimeline, String> {
    let flag = "--carbon-intensity-file";
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("{flag} {shown}: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("{flag} {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{flag} {shown} is not a regular file: pass a CSV file"));
    }
    let mut text = String::new();
    file.take(MAX_FILE_BYTES + 1).read_to_string(&mut text).map_err(|e| format!("{flag} {shown}: {e}"))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("{flag} {shown} is over {} MB: pass only the period of the run", MAX_FILE_BYTES >> 20));
    }
    IntensityTimeline::parse(&text).map_err(|e| format!("{flag} {shown}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(intensity: Option<f64>, file: Option<PathBuf>, pue: Option<f64>) -> CarbonArgs {
        CarbonArgs { carbon_intensity: intensity, carbon_intensity_file: file, pue }
    }

    #[test]
    fn no_intensity_means_no_carbon_and_pue_alone_is_refused() {
        assert_eq!(args(None, None, None).carbon(), Ok(None));
        assert!(args(None, None, Some(1.2)).carbon().unwrap_err().contains("--carbon-intensity"));
    }

    #[test]
    fn constant_intensity_and_pue_are_checked() {
        let carbon = args(Some(250.0), None, Some(1.2)).carbon().unwrap().unwrap();
        assert_eq!((carbon.g_per_kwh(0), carbon.pue), (250.0, 1.2));
        for bad in [0.0, -1.0, f64::NAN, 9_000.0] {
            assert!(args(Some(bad), None, None).carbon().unwrap_err().contains("--carbon-intensity must"), "{bad}");
        }
        for bad in [0.5, 4.0, f64::NAN] {
            assert!(args(Some(100.0), None, Some(bad)).carbon().unwrap_err().contains("--pue must"), "{bad}");
        }
    }

    #[test]
    fn an_intensity_file_is_read_and_its_mistakes_name_the_flag() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("grid.csv");
        std::fs::write(&good, "time,intensity\n0,100\n3600,200\n").unwrap();
        let carbon = args(None, Some(good), None).carbon().unwrap().unwrap();
        assert_eq!(carbon.g_per_kwh(1_800_000), 150.0);
        let bad = dir.path().join("bad.csv");
        std::fs::write(&bad, "time,intensity\nnoon,100\n").unwrap();
        let err = args(None, Some(bad), None).carbon().unwrap_err();
        assert!(err.contains("--carbon-intensity-file") && err.contains("line 2"), "{err}");
        let err = args(None, Some(dir.path().to_owned()), None).carbon().unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
        let err = args(None, Some(dir.path().join("missing.csv")), None).carbon().unwrap_err();
        assert!(err.contains("--carbon-intensity-file"), "{err}");
    }
}
