//! A run as `diff` compares it, read from what `record` or `--pid` wrote: the raw profile
//! (`profile.json`: method totals, call paths, the timeline of cycles) and the JoularJX
//! evolution files (each method's power per cycle), with methods keyed by stable name.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use jvm_symbols::stable_name;

use super::DiffError;
use crate::attribution::stacks::aggregate::{method_totals, path_groups, Scope};
use crate::attribution::stacks::methods::is_method_name;
use crate::attribution::stacks::paths::PathStyle;
use crate::attribution::stacks::profile::ProcessProfile;
use crate::output::{find_profiles, method_series, read_raw_profile, RAW_PROFILE_FILE};
use crate::safe_write::{Modes, OutDir};

/// One run: a `<pid>-<epochms>` directory, or a results directory holding the processes one
/// `record` wrote (their energies add up).
#[derive(Debug, Clone, Default)]
pub struct Run {
    pub path: PathBuf,
    /// The longest process's profiled time (the run's length for power).
    pub duration_s: f64,
    pub estimated: bool,
    pub total_uj: f64,
    /// "all" view methods (JoularJX's), by stable name.
    pub methods: HashMap<String, f64>,
    /// Per process of the run, its energy per timeline bucket (a cycle, or a few merged cycles
    /// in a long run); empty when the run kept no per-cycle method energy.
    pub strata: Vec<Stratum>,
    /// Call paths ("all" view, as the flame graphs draw them) by stable name, µJ.
    pub folded: HashMap<String, f64>,
}

#[derive(Debug, Clone, Default)]
pub struct Stratum {
    pub total_uj: Vec<f64>,
    pub methods: HashMap<String, Vec<f64>>,
}

impl Run {
    /// Every process found under `path` (see `report`), read and checked.
    pub fn read(path: &Path) -> Result<Run, DiffError> {
        let modes = Modes::from_flag(None);
        let read_error = |source| DiffError::Read { path: path.to_owned(), source };
        let mut run = Run { path: path.to_owned(), ..Run::default() };
        let mut per_cycle = true;
        for dir in find_profiles(path, modes).map_err(read_error)? {
            let profile = read_raw_profile(&dir, RAW_PROFILE_FILE).map_err(read_error)?;
            per_cycle &= run.add(&dir, &profile);
        }
        if !per_cycle {
            run.strata.clear();
        }
        Ok(run)
    }

    /// Adds one process; false when its per-cycle method energy is missing.
    pub fn add(&mut self, dir: &OutDir, profile: &ProcessProfile) -> bool {
        let summary = &profile.summary;
        let rules = profile.rules();
        self.duration_s = self.duration_s.max(summary.duration_s);
        self.estimated |= summary.estimated;
        self.total_uj += summary.energy_uj;
        let totals: Vec<_> =
            method_totals(&profile.stacks, Scope::All, rules).into_iter().filter(|t| is_method_name(&t.name)).collect();
        for t in &totals {
            *self.methods.entry(stable_name(&t.name).into_owned()).or_default() += t.energy_uj;
        }
        for group in path_groups(&profile.stacks, Scope::All, rules, PathStyle::Graph) {
            *self.folded.entry(stable_name(&group.tree(false)).into_owned()).or_default() += group.energy_uj;
        }
        // Each evolution row is a cycle's power; a bucket's energy is its mean power times
        // the seconds its cycles covered.
        let timeline = &profile.timeline;
        let names: Vec<&str> = totals.iter().map(|t| &*t.name).collect();
        let series = method_series(dir, summary.pid, timeline, &names);
        if timeline.covered_s.is_empty() || series.len() < names.len() {
            return false;
        }
        let mut stratum = Stratum { total_uj: timeline.energy_uj.clone(), methods: HashMap::new() };
        for s in series {
            let energies = s.values.iter().zip(&timeline.covered_s).map(|(w, secs)| w * secs * 1e6);
            let slot =
                stratum.methods.entry(stable_name(&s.name).into_owned()).or_insert_with(|| vec![0.0; energies.len()]);
            for (sum, e) in slot.iter_mut().zip(energies) {
                *sum += e;
            }
        }
        self.strata.push(stratum);
        true
    }

    /// Whether the run kept each cycle's method energy (the evolution files).
    pub fn has_cycles(&self) -> bool {
        !self.strata.is_empty()
    }
}
