//! One profiled HotSpot JVM: its perf map, its code cache (anonymous executable
//! mappings), and when the map was last dumped.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;
use std::time::{Duration, Instant};

use jvm_symbols::{
    attach, discover, dump_perf_map, flag_from_vm_flags, Error, FlagState, JvmInfo, Limits, Mapping, PerfMapFile,
};

pub struct JvmState {
    pub info: JvmInfo,
    pub map: PerfMapFile,
    code_cache: Vec<Mapping>,
    /// Set when a sampled address fell in the code cache but not in the map.
    pub needs_dump: bool,
    last_dump: Option<Instant>,
    /// Set after an error that retrying cannot fix (attach disabled, no SIGQUIT handler).
    dump_impossible: bool,
    dump_error_logged: bool,
    map_refusal_logged: bool,
    pub java_stacks: u64,
    pub cut_stacks: u64,
}

/// What one [`JvmState::refresh`] did, for the statistics and the frame cache.
#[derive(Debug, Default)]
pub struct Refresh {
    pub dumped: bool,
    pub dump_failed: bool,
    /// A new version of the map was loaded: cached JIT frames are stale.
    pub reloaded: bool,
}

impl JvmState {
    /// `Ok(None)` when `pid` is not a HotSpot JVM.
    pub fn discover(proc_root: &Path, pid: u32, attach_timeout: Option<Duration>) -> jvm_symbols::Result<Option<Self>> {
        let Some(mut info) = discover(proc_root, pid)? else {
            return Ok(None);
        };
        // The command line can hide the flag (argfiles, -XX:Flags=); VM.flags cannot.
        if let (Some(timeout), FlagState::Unknown) = (attach_timeout, info.preserve_frame_pointer) {
            if let Ok(flags) = attach::jcmd(&info, "VM.flags", timeout) {
                info.preserve_frame_pointer = flag_from_vm_flags(&flags, "PreserveFramePointer");
            }
        }
        let map = PerfMapFile::for_jvm(&info.proc_dir, info.nspid, info.identity(), Limits::default());
        let mut state = JvmState {
            info,
            map,
            code_cache: Vec::new(),
            needs_dump: true,
            last_dump: None,
            dump_impossible: false,
            dump_error_logged: false,
            map_refusal_logged: false,
            java_stacks: 0,
            cut_stacks: 0,
        };
        state.reread_code_cache();
        Ok(Some(state))
    }

    /// Whether `addr` lies in anonymous executable memory (JIT code the map may miss).
    pub fn in_code_cache(&self, addr: u64) -> bool {
        self.code_cache.iter().any(|m| m.contains(addr))
    }

    /// The code cache is reserved once at startup, but re-read with each dump in case a
    /// segment was added.
    fn reread_code_cache(&mut self) {
        let path = self.info.proc_dir.join("maps");
        if let Ok(file) = File::open(&path) {
            self.code_cache = jvm_symbols::parse_maps(BufReader::new(file.take(jvm_symbols::maps::MAX_MAPS_BYTES)))
                .into_iter()
                .filter(Mapping::is_anonymous_code)
                .collect();
        }
    }

    /// Dumps the map if it is due (asked for, at most once per `min_interval`), then
    /// reloads it if the file changed. Without `attach_timeout` it only reloads (another
    /// tool may write the map).
    pub fn refresh(&mut self, attach_timeout: Option<Duration>, min_interval: Duration) -> Refresh {
        let mut report = Refresh::default();
        let due = self.needs_dump
            && !self.dump_impossible
            && self.last_dump.is_none_or(|at| at.elapsed() >= min_interval);
        if let (Some(timeout), true) = (attach_timeout, due) {
            self.last_dump = Some(Instant::now());
            self.needs_dump = false;
            match dump_perf_map(&self.info, timeout) {
                Ok(()) => {
                    log::debug!("JVM {}: perf map dumped", self.info.pid);
                    report.dumped = true;
                    self.reread_code_cache();
                }
                Err(e) => {
                    report.dump_failed = true;
                    self.dump_impossible =
                        matches!(e, Error::AttachDisabled { .. } | Error::SigquitNotCaught { .. });
                    if !self.dump_error_logged {
                        log::warn!("{e}");
                        self.dump_error_logged = true;
                    }
                }
            }
        }
        report.reloaded = match self.map.refresh() {
            Ok(reloaded) => reloaded,
            // A planted or oversized map is worth saying, once per JVM; a missing one is not.
            Err(e @ (Error::Refused { .. } | Error::TooLarge { .. } | Error::AsTarget { .. })) => {
                if !std::mem::replace(&mut self.map_refusal_logged, true) {
                    log::warn!("JVM {}: not reading its perf map: {e}", self.info.pid);
                }
                false
            }
            Err(e) => {
                log::debug!("JVM {}: {e}", self.info.pid);
                false
            }
        };
        report
    }
}
