//! Carbon: operational emissions of the energy attributed, in grams of CO₂-equivalent,
//! `g = kWh · intensity · PUE` per cycle (the Green Software Foundation's SCI operational term,
//! as CodeCarbon and Cloud Carbon Footprint compute it). The grid's intensity comes from the
//! user (`--carbon-intensity`, or a timestamped `--carbon-intensity-file` interpolated per
//! cycle); there is no default, so no figure is shown without one. Embodied emissions (making
//! the hardware) are out of scope.
//!
//! Pure: the file is read and checked once before the run ([`IntensityTimeline::parse`]); the
//! stack stage asks [`Carbon::g_per_uj`] for each cycle.

mod intensity_file;

use std::fmt;

pub use intensity_file::{IntensityTimeline, ParseError};

/// µJ in a kWh: 3.6e6 J.
const UJ_PER_KWH: f64 = 3.6e12;

/// Where the grid's intensity comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Intensity {
    /// `--carbon-intensity G_PER_KWH`.
    Constant { g_per_kwh: f64 },
    /// `--carbon-intensity-file CSV`, interpolated at each cycle's middle.
    Timeline { file: String, timeline: IntensityTimeline },
}

/// The run's carbon settings: intensity and PUE.
#[derive(Debug, Clone, PartialEq)]
pub struct Carbon {
    pub intensity: Intensity,
    /// `--pue`: the data centre's power usage effectiveness (1 = no overhead).
    pub pue: f64,
}

impl Carbon {
    /// The grid intensity at `epoch_ms`, g/kWh.
    pub fn g_per_kwh(&self, epoch_ms: u64) -> f64 {
        match &self.intensity {
            Intensity::Constant { g_per_kwh } => *g_per_kwh,
            Intensity::Timeline { timeline, .. } => timeline.at(epoch_ms),
        }
    }

    /// Grams per µJ of a cycle whose middle is `epoch_ms`: intensity · PUE / µJ per kWh.
    pub fn g_per_uj(&self, epoch_ms: u64) -> f64 {
        self.g_per_kwh(epoch_ms) * self.pue / UJ_PER_KWH
    }
}

impl fmt::Display for Carbon {
    /// What every output says of the figures: `300 gCO2e/kWh, PUE 1.2` or
    /// `gCO2e/kWh from grid.csv (48 points, 2026-11-27T00:00:00Z to ...), PUE 1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.intensity {
            Intensity::Constant { g_per_kwh } => write!(f, "{g_per_kwh} gCO2e/kWh (--carbon-intensity)")?,
            Intensity::Timeline { file, timeline } => {
                write!(f, "gCO2e/kWh from {file} ({timeline}, interpolated per cycle)")?
            }
        }
        write!(f, ", PUE {}; operational emissions only, embodied emissions not included", self.pue)
    }
}

/// The intensity and PUE used over a run, as written into `summary.json`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CarbonSummary {
    /// Grams of CO₂e of the process's energy.
    pub grams: f64,
    /// Grams of CO₂e of the machine's energy (every socket) over the same cycles.
    pub host_grams: f64,
    /// Mean intensity over the run, weighted by the machine's energy, g/kWh.
    pub mean_g_per_kwh: f64,
    pub pue: f64,
    /// How the intensity was given (`Carbon`'s description).
    pub intensity: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grams_are_kwh_times_intensity_times_pue() {
        let carbon = Carbon { intensity: Intensity::Constant { g_per_kwh: 400.0 }, pue: 1.5 };
        // 3.6 MJ is 1 kWh: 400 g at PUE 1, 600 g at 1.5.
        let grams = 3.6e12 * carbon.g_per_uj(0);
        assert!((grams - 600.0).abs() < 1e-9, "{grams}");
        let text = carbon.to_string();
        assert!(text.contains("400 gCO2e/kWh") && text.contains("PUE 1.5") && text.contains("embodied"), "{text}");
    }
}
