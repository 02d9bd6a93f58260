//! One cycle's runtime and evolution files of every process charged in it, as owned data: built
//! on the session thread from the attributed cycle, then written there or, in serve mode, by the
//! result tree's writer thread (a slow disk then delays the files, not the cycle). A cycle not
//! written yet takes in the next one (`merge`): runtime files hold only the latest cycle, so a
//! disk that is behind writes each process's latest, less often.

use std::collections::HashMap;
use std::sync::Arc;

use super::cycle_devices::{CyclePaths, DeviceTreeRows, TreeRows};
use super::cycle_sums::{add, cycle_sums, methods_only, CycleSums};
use super::joularjx::{Kind, RunDir, RunDirRef};
use super::OutputError;
use crate::attribution::stacks::aggregate::{named, Scope};
use crate::attribution::stacks::methods::{is_method_name, join_frames, MethodFilter};
use crate::attribution::stacks::paths::{all_path, PathStyle};
use crate::attribution::stacks::{AttributedCycle, ProcessKey};

/// One process's files of one cycle.
#[derive(Debug)]
struct ProcessFiles {
    key: ProcessKey,
    pid: u32,
    dir: Arc<RunDirRef>,
    /// Its cycle's length (watts are per second of it) and end.
    duration_s: f64,
    end_epoch_s: u64,
    /// The CPU's rows (call trees when asked for).
    cpu: TreeRows,
    /// With `--devices network,disk`: each device's tree and `total/`.
    devices: Vec<DeviceTreeRows>,
}

/// Every process's files of one cycle (or, merged, each process's latest).
#[derive(Debug)]
pub struct CycleFiles {
    processes: HashMap<ProcessKey, ProcessFiles>,
    /// Append the evolution rows too.
    evolution: bool,
    /// Names the "app" scope's files.
    filter: MethodFilter,
}

/// What writing one cycle's files came to.
#[derive(Debug, Default)]
pub struct CycleWritten {
    /// Processes whose directory could not be reopened (moved away and replaced, or removed):
    /// their files stop, said once; the other processes' go on.
    pub lost: Vec<ProcessKey>,
    /// Files that could not be written (a full disk); each process's first.
    pub failed: Vec<OutputError>,
}

/// What to write of the cycle: per process charged in it whose directory `dir_of` gives, the
/// runtime files (methods, and call trees when `call_trees`) and, when `evolution`, the rows.
pub(super) fn cycle_files(
    cycle: &AttributedCycle,
    dir_of: impl Fn(ProcessKey) -> Option<Arc<RunDirRef>>,
    filter: &MethodFilter,
    call_trees: bool,
    evolution: bool,
) -> CycleFiles {
    let (duration_s, end_epoch_s) = (cycle.duration_s, cycle.end_epoch_ms / 1000);
    let mut processes = HashMap::new();
    let device_paths = CyclePaths::new(cycle);
    let mut sums = cycle_sums(cycle);
    // A process can move bytes in a cycle it was not on a CPU (writeback of its earlier writes).
    for pid in device_paths.pids() {
        sums.entry(pid).or_default();
    }
    for (pid, sums) in sums {
        let Some(process) = cycle.process(pid) else { continue };
        let Some(dir) = dir_of(process.key) else { continue };
        let CycleSums { all_methods, app_methods, all_trees, app_trees } = sums;
        // JoularJX files hold methods only; the rest is `unattributed` in summary.json.
        let all_methods = methods_only(named(all_methods, |m| m));
        let app_methods = methods_only(named(app_methods, |m| m));
        let trees = call_trees.then(|| {
            // Stacks that differ only in frames the tree leaves out share a row.
            let mut trees: HashMap<Arc<str>, (f64, u64)> = HashMap::new();
            for (energy_uj, samples, share) in all_trees.into_values() {
                if !is_method_name(&share.all_method) {
                    continue;
                }
                let path = all_path(&share.stack, share.kind, process.rules, PathStyle::CallTree);
                let tree: Arc<str> = Arc::from(join_frames(path.into_iter(), false));
                add(trees.entry(tree).or_default(), energy_uj, samples);
            }
            // A stack whose app method is not a method has that name as its app tree.
            (named(trees, |t| t), methods_only(named(app_trees, |t| t)))
        });
        let cpu = TreeRows { all_methods, app_methods, trees };
        let devices = device_paths.trees(pid, &cpu, process.rules);
        let files = ProcessFiles { key: process.key, pid, dir, duration_s, end_epoch_s, cpu, devices };
        processes.insert(process.key, files);
    }
    CycleFiles { processes, evolution, filter: filter.clone() }
}

impl CycleFiles {
    /// Processes with files in this cycle.
    pub fn processes(&self) -> u64 {
        self.processes.len() as u64
    }

    /// Takes in a later cycle: each process's files are its latest. Returns the processes whose
    /// earlier files were replaced before being written. Evolution rows are appended, never
    /// replaced: cycles that carry them are not merged (the caller writes them in turn).
    pub fn merge(&mut self, later: CycleFiles) -> u64 {
        debug_assert!(!self.evolution && !later.evolution, "evolution rows are never merged away");
        let mut replaced = 0;
        for (key, files) in later.processes {
            replaced += u64::from(self.processes.insert(key, files).is_some());
        }
        replaced
    }

    /// Takes out the files of one process (it ended: they go before its end-of-run files).
    pub fn take_process(&mut self, key: ProcessKey) -> Option<CycleFiles> {
        let files = self.processes.remove(&key)?;
        let (evolution, filter) = (self.evolution, self.filter.clone());
        Some(CycleFiles { processes: HashMap::from([(key, files)]), evolution, filter })
    }

    /// Writes every process's files; one process's failure stops only its own files.
    pub fn write(&self) -> CycleWritten {
        let mut written = CycleWritten::default();
        for process in self.processes.values() {
            match process.dir.open() {
                Ok(dir) => {
                    if let Err(e) = self.write_process(&dir, process) {
                        written.failed.push(e);
                    }
                }
                Err(e) => {
                    log::warn!("results of process {} are no longer written: {e}", process.pid);
                    written.lost.push(process.key);
                }
            }
        }
        written
    }

    /// The CPU's files, then each device tree's: a device tree that fails stops only itself.
    fn write_process(&self, dir: &RunDir, process: &ProcessFiles) -> Result<(), OutputError> {
        let cpu = self.write_rows(dir, process, &process.cpu);
        let mut first_failure = cpu.err();
        for tree in &process.devices {
            let opened = if tree.moved {
                RunDir::open_or_create_in(dir.out_dir(), tree.name, process.pid).map(Some)
            } else {
                Ok(RunDir::open_in(dir.out_dir(), tree.name, process.pid))
            };
            let rows = if tree.same_as_cpu { &process.cpu } else { &tree.rows };
            let written = opened.and_then(|opened| match opened {
                Some(opened) => self.write_rows(&opened, process, rows),
                None => Ok(()),
            });
            if let Err(e) = written {
                first_failure.get_or_insert(e);
            }
        }
        first_failure.map_or(Ok(()), Err)
    }

    fn write_rows(&self, dir: &RunDir, process: &ProcessFiles, rows: &TreeRows) -> Result<(), OutputError> {
        let (all, app, duration_s) = (Scope::All, Scope::App(&self.filter), process.duration_s);
        dir.write_runtime(all, Kind::Methods, &rows.all_methods, duration_s)?;
        dir.write_runtime(app, Kind::Methods, &rows.app_methods, duration_s)?;
        if let Some((all_trees, app_trees)) = &rows.trees {
            dir.write_runtime(all, Kind::CallTrees, all_trees, duration_s)?;
            dir.write_runtime(app, Kind::CallTrees, app_trees, duration_s)?;
        }
        if self.evolution {
            dir.append_evolution(all, &rows.all_methods, process.end_epoch_s, duration_s)?;
            dir.append_evolution(app, &rows.app_methods, process.end_epoch_s, duration_s)?;
        }
        Ok(())
    }
}
