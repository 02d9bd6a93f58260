//! The JoularJX result tree, so existing JoularJX readers work unchanged:
//!
//! ```text
//! joularjx-result/<pid>-<start epoch ms>/{all,app}/
//!   total/methods/joularJX-<pid>-{all,filtered}-methods-energy.csv       name,joules
//!   total/calltrees/joularJX-<pid>-{all,filtered}-call-trees-energy.csv  a;b;c,joules
//!   runtime/methods/joularJX-<pid>-{all,filtered}-methods-power.csv      name,watts (last cycle)
//!   runtime/calltrees/joularJX-<pid>-{all,filtered}-call-trees-power.csv a;b;c,watts (last cycle)
//!   evolution/joularJX-<pid>-<method>-evolution.csv                      unix seconds,watts
//!   carbon/methods/joularJX-<pid>-{all,filtered}-methods-carbon.csv      name,grams CO2e
//!   carbon/calltrees/joularJX-<pid>-{all,filtered}-call-trees-carbon.csv a;b;c,grams CO2e
//! ```
//!
//! `carbon/` (beside `total/`, same rows) is written only when the run was given a carbon
//! intensity. With `--devices network,disk`, `network/`, `disk/` and `total/` (CPU + devices)
//! sit beside `all/` and `app/`, each a tree with these directories and file names
//! (`device_tree.rs`, `cycle_devices.rs`); the files above are the CPU's either way.
//!
//! Rows are JoularJX's `%s,%.4f`. Runtime files are rewritten each cycle, as JoularJX does
//! with `overwrite-runtime-data=true`: a per-cycle file would grow the tree without bound.

use std::collections::VecDeque;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use super::OutputError;
use crate::attribution::stacks::aggregate::{NamedTotal, Scope};
use crate::safe_write::{DirId, OutDir};

/// Name of the directory that holds one `<pid>-<epochms>` directory per process.
pub const RESULT_DIR_NAME: &str = "joularjx-result";

/// Longest method part of an evolution file name: file names stop at 255 bytes.
const MAX_FILE_METHOD_BYTES: usize = 200;

#[derive(Debug, Clone, Copy)]
pub enum Period {
    Runtime,
    Total,
    /// Run totals in grams of CO₂e.
    Carbon,
}

#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Methods,
    CallTrees,
}

/// JoularJX's `%.4f` for joules and watts.
const JOULARJX_DECIMALS: usize = 4;
/// Grams of CO₂e to the microgram: a method's grams are often below a milligram.
const CARBON_DECIMALS: usize = 9;

const SUBDIRS: [&str; 5] = ["runtime/methods", "runtime/calltrees", "total/methods", "total/calltrees", "evolution"];

/// Run directories held open between writes: at most this many, the most recently written. A
/// held directory is written into wherever it is moved (the descriptor follows it, as before
/// descriptors were bounded); one not held is reopened by name for each write.
pub const HELD_RUN_DIRS: usize = 64;

/// The descriptors of the run directories written most recently, at most `capacity` of them: a
/// host run sees thousands of processes, and a descriptor held on each ran out after about 1,000.
#[derive(Debug)]
pub struct HeldRunDirs {
    capacity: usize,
    /// Least recently written first.
    lru: Mutex<VecDeque<Weak<Mutex<Option<OutDir>>>>>,
}

impl HeldRunDirs {
    pub fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self { capacity, lru: Mutex::new(VecDeque::new()) })
    }

    /// `slot` was just written: it goes last, and the least recently written slots past the
    /// capacity (or all, at capacity 0) give their descriptor back. Slots of retired processes
    /// (dropped) leave the list here too.
    fn touch(&self, slot: &Arc<Mutex<Option<OutDir>>>) {
        let mut lru = self.lru.lock().unwrap_or_else(|e| e.into_inner());
        let me = Arc::downgrade(slot);
        lru.retain(|w| w.strong_count() > 0 && !w.ptr_eq(&me));
        lru.push_back(me);
        while lru.len() > self.capacity {
            if let Some(evicted) = lru.pop_front().and_then(|w| w.upgrade()) {
                *evicted.lock().unwrap_or_else(|e| e.into_inner()) = None;
            }
        }
    }
}

/// Where one process's `<pid>-<epochms>` directory is. Its descriptor is held while it is among
/// the [`HeldRunDirs`] most recently written; otherwise [`RunDirRef::open`] opens it for one
/// write, from the results root's descriptor, following nothing, and only while it is still the
/// directory created (see `OutDir::reopen_subdir`).
#[derive(Debug)]
pub struct RunDirRef {
    root: Arc<OutDir>,
    name: String,
    id: DirId,
    pid: u32,
    held: Arc<Mutex<Option<OutDir>>>,
    lru: Arc<HeldRunDirs>,
}

impl RunDirRef {
    /// Creates `<pid>-<start_epoch_ms>` and its tree in the `joularjx-result` directory.
    pub fn create(
        results_root: &Arc<OutDir>,
        held: &Arc<HeldRunDirs>,
        pid: u32,
        start_epoch_ms: u64,
    ) -> Result<Self, OutputError> {
        let name = format!("{pid}-{start_epoch_ms}");
        let path = results_root.join(&name);
        let dir = results_root.new_subdir(&name).map_err(|e| OutputError::io(&path, e))?;
        let id = dir.id().map_err(|e| OutputError::io(&path, e))?;
        let run = RunDir::create_at(dir, pid)?;
        let me = Self {
            root: Arc::clone(results_root),
            name,
            id,
            pid,
            held: Arc::new(Mutex::new(Some(run.dir))),
            lru: Arc::clone(held),
        };
        me.lru.touch(&me.held);
        Ok(me)
    }

    /// The directory, open until the [`RunDir`] is dropped.
    pub fn open(&self) -> Result<RunDir, OutputError> {
        let io_err = |e| OutputError::io(&self.root.join(&self.name), e);
        let dir = {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            match held.as_ref() {
                Some(dir) => dir.try_clone().map_err(io_err)?,
                None => {
                    let dir = self.root.reopen_subdir(&self.name, self.id).map_err(io_err)?;
                    *held = Some(dir.try_clone().map_err(io_err)?);
                    dir
                }
            }
        };
        self.lru.touch(&self.held);
        Ok(RunDir { dir, pid: self.pid })
    }
}

/// One process's `<pid>-<epochms>` directory, open: files go into the directory that was
/// opened, whatever happens to its name meanwhile.
#[derive(Debug)]
pub struct RunDir {
    dir: OutDir,
    pid: u32,
}

impl RunDir {
    /// The tree in `dir` itself (`report --output DIR`).
    pub fn create_at(dir: OutDir, pid: u32) -> Result<Self, OutputError> {
        for scope in ["all", "app"] {
            for sub in SUBDIRS {
                let rel = format!("{scope}/{sub}");
                dir.create_subdirs(&rel).map_err(|e| OutputError::io(&dir.join(&rel), e))?;
            }
        }
        Ok(Self { dir, pid })
    }

    /// The tree in `dir`'s subdirectory `name` (a device's, `cycle_devices.rs`): opened when
    /// it is there, else made with its tree (each cycle of a run writes into it; one open, not
    /// ten, for every cycle after the first).
    pub fn open_or_create_in(dir: &OutDir, name: &str, pid: u32) -> Result<Self, OutputError> {
        if let Ok(sub) = dir.open_subdir(name) {
            return Ok(Self { dir: sub, pid });
        }
        let sub = dir.create_subdirs(name).map_err(|e| OutputError::io(&dir.join(name), e))?;
        Self::create_at(sub, pid)
    }

    /// The tree in `dir`'s subdirectory `name` if it is there.
    pub fn open_in(dir: &OutDir, name: &str, pid: u32) -> Option<Self> {
        dir.open_subdir(name).ok().map(|sub| Self { dir: sub, pid })
    }

    /// A tree of run totals only (`{all,app}/total/`) in `dir`: a device's, or CPU + devices
    /// (`device_tree.rs`).
    pub fn create_totals_at(dir: OutDir, pid: u32) -> Result<Self, OutputError> {
        for scope in ["all", "app"] {
            for sub in ["total/methods", "total/calltrees"] {
                let rel = format!("{scope}/{sub}");
                dir.create_subdirs(&rel).map_err(|e| OutputError::io(&dir.join(&rel), e))?;
            }
        }
        Ok(Self { dir, pid })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn out_dir(&self) -> &OutDir {
        &self.dir
    }

    /// `(directory below the run directory, file name)` of a CSV.
    fn location(&self, scope: Scope, period: Period, kind: Kind) -> (String, String) {
        let (period_dir, suffix) = match period {
            Period::Runtime => ("runtime", "power"),
            Period::Total => ("total", "energy"),
            Period::Carbon => ("carbon", "carbon"),
        };
        let (kind_dir, kind_name) = match kind {
            Kind::Methods => ("methods", "methods"),
            Kind::CallTrees => ("calltrees", "call-trees"),
        };
        (
            format!("{}/{period_dir}/{kind_dir}", scope.dir()),
            format!("joularJX-{}-{}-{kind_name}-{suffix}.csv", self.pid, scope.file_infix()),
        )
    }

    pub fn file(&self, scope: Scope, period: Period, kind: Kind) -> PathBuf {
        let (dir, name) = self.location(scope, period, kind);
        self.path().join(dir).join(name)
    }

    fn evolution_name(&self, method: &str) -> String {
        evolution_name(self.pid, method)
    }

    #[cfg(test)]
    pub fn evolution_file(&self, scope: Scope, method: &str) -> PathBuf {
        self.path().join(scope.dir()).join("evolution").join(self.evolution_name(method))
    }

    fn subdir(&self, rel: &str) -> Result<OutDir, OutputError> {
        self.dir.open_subdir(rel).map_err(|e| OutputError::io(&self.path().join(rel), e))
    }

    /// Writes run totals in joules; rows are `(name, µJ)`.
    pub fn write_total<N: AsRef<str>>(
        &self,
        scope: Scope,
        kind: Kind,
        rows: impl IntoIterator<Item = (N, f64)>,
    ) -> Result<(), OutputError> {
        let (dir, name) = self.location(scope, Period::Total, kind);
        write_rows(&self.subdir(&dir)?, &name, rows, 1e-6, JOULARJX_DECIMALS)
    }

    /// Writes run totals in grams of CO₂e; rows are `(name, grams)`.
    pub fn write_carbon<N: AsRef<str>>(
        &self,
        scope: Scope,
        kind: Kind,
        rows: impl IntoIterator<Item = (N, f64)>,
    ) -> Result<(), OutputError> {
        let (dir, name) = self.location(scope, Period::Carbon, kind);
        // Made here, not with the others: a run without an intensity has no `carbon/`.
        self.dir.create_subdirs(&dir).map_err(|e| OutputError::io(&self.path().join(&dir), e))?;
        write_rows(&self.subdir(&dir)?, &name, rows, 1.0, CARBON_DECIMALS)
    }

    /// Replaces the runtime file with this cycle's power in watts; a reader polling it never
    /// sees a half-written one (the file is renamed into place).
    pub fn write_runtime(
        &self,
        scope: Scope,
        kind: Kind,
        totals: &[NamedTotal],
        duration_s: f64,
    ) -> Result<(), OutputError> {
        let (dir, name) = self.location(scope, Period::Runtime, kind);
        let dir = self.subdir(&dir)?;
        let path = dir.join(&name);
        // Rewritten every cycle: in place (see `OutDir::overwrite`), from one buffer.
        let (mut bytes, to_watts) = (Vec::new(), watts_per_uj(duration_s));
        for t in totals {
            write_row(&mut bytes, &t.name, t.energy_uj * to_watts, JOULARJX_DECIMALS)
                .map_err(|e| OutputError::io(&path, e))?;
        }
        dir.overwrite(&name, &bytes).map_err(|e| OutputError::io(&path, e))
    }

    /// Appends one `unix seconds,watts` row per method active in this cycle.
    pub fn append_evolution(
        &self,
        scope: Scope,
        methods: &[NamedTotal],
        end_epoch_s: u64,
        duration_s: f64,
    ) -> Result<(), OutputError> {
        let per_uj = watts_per_uj(duration_s);
        let dir = self.subdir(&format!("{}/evolution", scope.dir()))?;
        for method in methods {
            let name = self.evolution_name(&method.name);
            let path = dir.join(&name);
            let mut file = dir.append(&name).map_err(|e| OutputError::io(&path, e))?;
            // One write call per row keeps appends whole.
            file.write_all(format!("{end_epoch_s},{:.4}\n", method.energy_uj * per_uj).as_bytes())
                .map_err(|e| OutputError::io(&path, e))?;
        }
        Ok(())
    }
}

/// Where a `<pid>-<epochms>` directory keeps `method`'s power over time.
/// The evolution file of `method` (relative to its scope's `evolution/` directory).
pub fn evolution_name(pid: u32, method: &str) -> String {
    format!("joularJX-{pid}-{}-evolution.csv", file_safe(method))
}

fn watts_per_uj(duration_s: f64) -> f64 {
    if duration_s > 0.0 {
        1e-6 / duration_s
    } else {
        0.0
    }
}

fn write_rows<N: AsRef<str>>(
    dir: &OutDir,
    file_name: &str,
    rows: impl IntoIterator<Item = (N, f64)>,
    scale: f64,
    decimals: usize,
) -> Result<(), OutputError> {
    let path = &dir.join(file_name);
    let file = dir.replace(file_name).map_err(|e| OutputError::io(path, e))?;
    let mut out = BufWriter::new(file);
    for (name, energy_uj) in rows {
        write_row(&mut out, name.as_ref(), energy_uj * scale, decimals).map_err(|e| OutputError::io(path, e))?;
    }
    let file = out.into_inner().map_err(|e| OutputError::io(path, e.into_error()))?;
    file.commit().map_err(|e| OutputError::io(path, e))
}

/// JoularJX's `%s,%.4f` (carbon rows keep more decimals); a comma or newline in a name would
/// break the row.
fn write_row(out: &mut impl Write, name: &str, value: f64, decimals: usize) -> std::io::Result<()> {
    if name.contains([',', '\n', '\r']) {
        let clean: String = name.chars().map(|c| if matches!(c, ',' | '\n' | '\r') { ' ' } else { c }).collect();
        writeln!(out, "{clean},{value:.decimals$}")
    } else {
        writeln!(out, "{name},{value:.decimals$}")
    }
}

/// JoularJX replaces `<` and `>`; `/` and NUL cannot be in a file name at all.
fn file_safe(method: &str) -> String {
    let mut end = method.len().min(MAX_FILE_METHOD_BYTES);
    while !method.is_char_boundary(end) {
        end -= 1;
    }
    method[..end].chars().map(|c| if matches!(c, '<' | '>' | '/' | '\0') { '_' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::stacks::methods::MethodFilter;
    use crate::safe_write::Modes;
    use std::fs;

    fn root(tmp: &Path) -> Arc<OutDir> {
        Arc::new(OutDir::create_all(tmp, Modes::for_caller()).unwrap())
    }

    fn total(name: &str, energy_uj: f64) -> NamedTotal {
        NamedTotal { name: Arc::from(name), energy_uj, carbon_g: 0.0, samples: 1 }
    }

    #[test]
    fn file_names_follow_joularjx() {
        let tmp = tempfile::tempdir().unwrap();
        let dir =
            RunDirRef::create(&root(tmp.path()), &HeldRunDirs::new(1), 42, 1700000000000).unwrap().open().unwrap();
        let filter = MethodFilter::parse("com.acme");
        let rel = |p: PathBuf| p.strip_prefix(tmp.path()).unwrap().to_str().unwrap().to_owned();
        assert_eq!(
            rel(dir.file(Scope::All, Period::Total, Kind::Methods)),
            "42-1700000000000/all/total/methods/joularJX-42-all-methods-energy.csv"
        );
        assert_eq!(
            rel(dir.file(Scope::App(&filter), Period::Runtime, Kind::CallTrees)),
            "42-1700000000000/app/runtime/calltrees/joularJX-42-filtered-call-trees-power.csv"
        );
        assert_eq!(
            rel(dir.evolution_file(Scope::All, "com.acme.Foo.<init>")),
            "42-1700000000000/all/evolution/joularJX-42-com.acme.Foo._init_-evolution.csv"
        );
        assert!(tmp.path().join("42-1700000000000/app/evolution").is_dir());
    }

    #[test]
    fn totals_are_joules_runtime_and_evolution_are_watts() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RunDirRef::create(&root(tmp.path()), &HeldRunDirs::new(1), 7, 1).unwrap().open().unwrap();
        let rows = [total("com.acme.A.f", 2_500_000.0), total("x,y", 500_000.0)];
        dir.write_total(Scope::All, Kind::Methods, rows.iter().map(|t| (&*t.name, t.energy_uj))).unwrap();
        let text = fs::read_to_string(dir.file(Scope::All, Period::Total, Kind::Methods)).unwrap();
        assert_eq!(text, "com.acme.A.f,2.5000\nx y,0.5000\n");

        dir.write_runtime(Scope::All, Kind::Methods, &rows, 0.5).unwrap();
        dir.write_runtime(Scope::All, Kind::Methods, &rows[..1], 0.5).unwrap();
        let text = fs::read_to_string(dir.file(Scope::All, Period::Runtime, Kind::Methods)).unwrap();
        assert_eq!(text, "com.acme.A.f,5.0000\n");

        dir.append_evolution(Scope::All, &rows[..1], 100, 1.0).unwrap();
        dir.append_evolution(Scope::All, &rows[..1], 101, 2.0).unwrap();
        let text = fs::read_to_string(dir.evolution_file(Scope::All, "com.acme.A.f")).unwrap();
        assert_eq!(text, "100,2.5000\n101,1.2500\n");
    }

    #[test]
    fn a_run_directory_not_held_is_reopened_for_each_write_and_only_while_it_is_the_one_created() {
        let tmp = tempfile::tempdir().unwrap();
        let held = HeldRunDirs::new(0);
        let dir = RunDirRef::create(&root(tmp.path()), &held, 9, 1).unwrap();
        assert!(dir.held.lock().unwrap().is_none(), "capacity 0 holds nothing");
        let rows = [total("com.acme.A.f", 1_000_000.0)];
        dir.open().unwrap().write_runtime(Scope::All, Kind::Methods, &rows, 1.0).unwrap();
        let runtime = "9-1/all/runtime/methods/joularJX-9-all-methods-power.csv";
        assert_eq!(fs::read_to_string(tmp.path().join(runtime)).unwrap(), "com.acme.A.f,1.0000\n");
        // Moved away and replaced by another directory with the same tree: refused, never
        // written into; the moved one is left as it was.
        fs::rename(tmp.path().join("9-1"), tmp.path().join("moved")).unwrap();
        RunDirRef::create(&root(tmp.path()), &held, 9, 1).unwrap();
        let err = dir.open().unwrap_err().to_string();
        assert!(err.contains("9-1") && err.contains("no longer the directory created"), "{err}");
        assert!(!tmp.path().join(runtime).exists());
        assert!(tmp.path().join("moved/all/runtime/methods/joularJX-9-all-methods-power.csv").is_file());
    }

    #[test]
    fn only_the_most_recently_written_directories_are_held_and_a_held_one_is_followed_where_it_moves() {
        let tmp = tempfile::tempdir().unwrap();
        let root = root(tmp.path());
        let held = HeldRunDirs::new(2);
        let dirs: Vec<RunDirRef> = (1..=3).map(|pid| RunDirRef::create(&root, &held, pid, 1).unwrap()).collect();
        let is_held = |d: &RunDirRef| d.held.lock().unwrap().is_some();
        assert_eq!(dirs.iter().map(is_held).collect::<Vec<_>>(), [false, true, true], "the first was evicted");
        dirs[0].open().unwrap();
        assert_eq!(dirs.iter().map(is_held).collect::<Vec<_>>(), [true, false, true], "a write holds it again");
        // A held directory moved away and replaced: the write follows the descriptor.
        fs::rename(tmp.path().join("3-1"), tmp.path().join("moved")).unwrap();
        fs::create_dir(tmp.path().join("3-1")).unwrap();
        let rows = [total("com.acme.A.f", 1_000_000.0)];
        dirs[2].open().unwrap().write_runtime(Scope::All, Kind::Methods, &rows, 1.0).unwrap();
        assert!(tmp.path().join("moved/all/runtime/methods/joularJX-3-all-methods-power.csv").is_file());
        assert_eq!(fs::read_dir(tmp.path().join("3-1")).unwrap().count(), 0);
        // A dropped (retired) process leaves the list and frees its place.
        let [a, _b, c]: [RunDirRef; 3] = dirs.try_into().unwrap();
        drop(c);
        let d = RunDirRef::create(&root, &held, 4, 1).unwrap();
        assert!(is_held(&a) && is_held(&d));
    }

    #[test]
    fn long_method_names_are_cut_on_a_char_boundary() {
        let name = "é".repeat(150);
        let safe = file_safe(&name);
        assert!(safe.len() <= MAX_FILE_METHOD_BYTES && !safe.is_empty());
    }
}
