//! Per-process state, and discovery: whether a process is a JVM, whether its HotSpot tables
//! can be read, and whether it keeps frame pointers.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jvm_symbols::hotspot::HotspotError;
use jvm_symbols::FlagState;

use super::hotspot::HotspotProcess;
use super::intern::FrameId;
use super::jvm::JvmState;
use super::stats::{SymbolStats, MAX_UNREADABLE_REASONS};
use super::Symbolizer;
use crate::target_read::stall_guard::Stall;

/// Cycles a process is looked at again to see whether it became a JVM (`record` sees the
/// launcher before it loads libjvm), and a JVM's tables are tried again (they are filled
/// while the VM starts) before its perf map is used instead.
const DISCOVERY_ATTEMPTS: u32 = 10;

/// For this long after a process is first seen, its JVM is also looked for between cycles
/// ([`Symbolizer::poll_young`]): a JVM launched by `record` loads libjvm and runs its first
/// Java code well within the first cycle, which would otherwise go unwalked.
const YOUNG_FOR: Duration = Duration::from_secs(5);
/// How often a young process is looked at: /proc reads of a few hundred microseconds, or an
/// attempt at its tables (libjvm's symbols and a few table reads, a few milliseconds).
const YOUNG_POLL: Duration = Duration::from_millis(10);
/// Looks a young process gets at most (2 s worth), so tables that never become readable cost a
/// bounded amount.
const MAX_YOUNG_POLLS: u32 = 200;

/// How far a JVM's HotSpot tables got.
pub(super) enum Hotspot {
    Ready(Box<HotspotProcess>),
    /// Not readable yet: tried again after `wait_cycles` cycles, a wait that doubles with
    /// each attempt (tables that never become readable are not read every cycle).
    Pending {
        attempts_left: u32,
        wait_cycles: u32,
    },
    /// Not readable: the perf map names its JIT code.
    Unavailable,
    /// A cycle's reads of its memory blocked: its reader is left with the blocked thread, its
    /// Java frames stay unnamed (no attach, no perf map for a target that blocks us).
    Blocked,
}

pub(super) struct ProcessState {
    pub(super) jvm: Option<JvmState>,
    pub(super) hotspot: Hotspot,
    /// Cycles left to check whether a process that is not a JVM became one.
    pub(super) discovery_attempts_left: u32,
    /// When the symbolizer first saw it.
    pub(super) seen_at: Instant,
    /// Looks between cycles it may still get.
    young_polls_left: u32,
    /// A target named at the start (`record`'s command, `--pid`): looked for between cycles
    /// even before it is a JVM. Other processes only once they are.
    pub(super) watched: bool,
    /// Walked stacks of this process: (HotSpot-unwound, frame pointers only, cut).
    pub(super) walked: (u64, u64, u64),
    /// Walked samples with a Java frame, and those whose leaf is compiled Java code.
    pub(super) java_samples: (u64, u64),
    /// Frames from the perf map; cleared when the map is reloaded.
    pub(super) jit: HashMap<u64, FrameId>,
    pub(super) native: HashMap<u64, FrameId>,
}

impl ProcessState {
    /// Whether the kernel walks its stacks with a JVM configuration already, or never will.
    fn walked_by_kernel(&self) -> bool {
        match &self.hotspot {
            Hotspot::Ready(h) => h.published_unwind().is_some(),
            Hotspot::Pending { .. } => false,
            Hotspot::Unavailable => self.jvm.is_some() || self.discovery_attempts_left == 0 || !self.watched,
            Hotspot::Blocked => true,
        }
    }

    pub(super) fn hotspot(&mut self) -> Option<&mut HotspotProcess> {
        match &mut self.hotspot {
            Hotspot::Ready(h) => Some(h),
            _ => None,
        }
    }

    /// A JVM named through its perf map: its tables cannot be read (or `--java-symbols
    /// perf-map`), or not yet (then a map some other tool wrote is read, but none is dumped).
    /// A JVM named through its tables never attaches, dumps or loads a map.
    pub(super) fn uses_perf_map(&self) -> Option<&JvmState> {
        match self.hotspot {
            Hotspot::Ready(_) | Hotspot::Blocked => None,
            _ => self.jvm.as_ref(),
        }
    }

    /// Whether its perf map may be dumped over attach: only once its tables are known to be
    /// unreadable.
    pub(super) fn may_dump(&self) -> bool {
        matches!(self.hotspot, Hotspot::Unavailable)
    }
}

impl Symbolizer {
    pub(super) fn ensure_process(&mut self, pid: u32) {
        if self.processes.contains_key(&pid) {
            return;
        }
        let mut process = ProcessState {
            jvm: None,
            hotspot: Hotspot::Unavailable,
            discovery_attempts_left: DISCOVERY_ATTEMPTS,
            seen_at: Instant::now(),
            young_polls_left: MAX_YOUNG_POLLS,
            watched: false,
            walked: (0, 0, 0),
            java_samples: (0, 0),
            jit: HashMap::new(),
            native: HashMap::new(),
        };
        self.discover(pid, &mut process);
        self.processes.insert(pid, process);
        self.note_frame_pointers(pid);
    }

    /// A process that was not a JVM, or a JVM whose tables were not readable yet, is
    /// looked at again for a few cycles.
    pub(super) fn retry_discovery(&mut self, pid: u32) {
        let process = self.processes.get_mut(&pid).expect("known process");
        if process.jvm.is_none() && process.discovery_attempts_left > 0 {
            process.discovery_attempts_left -= 1;
            let mut process = self.processes.remove(&pid).expect("known process");
            self.discover(pid, &mut process);
            let found = process.jvm.is_some();
            self.processes.insert(pid, process);
            if found {
                self.note_frame_pointers(pid);
            }
        } else if let Hotspot::Pending { .. } = process.hotspot {
            Self::attach_hotspot(&self.opts.proc_root, pid, process, &mut self.stats, false);
        }
    }

    /// Between cycles: looks again at the processes seen less than [`YOUNG_FOR`] ago that are
    /// not walked yet (not a JVM yet, tables not readable yet, or no interpreter yet), so the
    /// kernel gets a JVM's walk configuration ([`Symbolizer::take_kernel_updates`]) within
    /// [`YOUNG_POLL`] of its tables becoming readable, not at the end of the cycle. These
    /// looks use none of the cycles' discovery attempts. Returns when to look again, `None`
    /// when no process is worth it any more.
    pub fn poll_young(&mut self) -> Option<Duration> {
        let young: Vec<u32> = self
            .processes
            .iter()
            .filter(|(_, p)| p.seen_at.elapsed() < YOUNG_FOR && p.young_polls_left > 0 && !p.walked_by_kernel())
            .map(|(&pid, _)| pid)
            .collect();
        for &pid in &young {
            let mut process = self.processes.remove(&pid).expect("known process");
            process.young_polls_left -= 1;
            match &mut process.hotspot {
                _ if process.jvm.is_none() => {
                    self.discover(pid, &mut process);
                    let found = process.jvm.is_some();
                    self.processes.insert(pid, process);
                    if found {
                        self.note_frame_pointers(pid);
                    }
                    continue;
                }
                Hotspot::Pending { .. } => {
                    Self::attach_hotspot(&self.opts.proc_root, pid, &mut process, &mut self.stats, true)
                }
                Hotspot::Ready(_) => {
                    self.processes.insert(pid, process);
                    self.hotspot_job(pid, |h| HotspotProcess::refresh_while_starting(h).map(|h| (h, ())));
                    continue;
                }
                Hotspot::Unavailable | Hotspot::Blocked => {}
            }
            self.processes.insert(pid, process);
        }
        (!young.is_empty()).then_some(YOUNG_POLL)
    }

    /// Runs `job` (one job on the guarded read thread, see [`HotspotProcess`]'s `*_in_job`) on
    /// the HotSpot reader of `pid`, if it has one ready. A job that blocks leaves the JVM
    /// blocked, said once with a warning: its Java frames are named no more.
    pub(super) fn hotspot_job<T>(
        &mut self,
        pid: u32,
        job: impl FnOnce(Box<HotspotProcess>) -> Result<(Box<HotspotProcess>, T), Stall>,
    ) -> Option<T> {
        let process = self.processes.get_mut(&pid)?;
        // Blocked while the job has it: a job that blocks leaves it so.
        let h = match std::mem::replace(&mut process.hotspot, Hotspot::Blocked) {
            Hotspot::Ready(h) => h,
            other => {
                process.hotspot = other;
                return None;
            }
        };
        match job(h) {
            Ok((h, out)) => {
                process.hotspot = Hotspot::Ready(h);
                Some(out)
            }
            Err(stall) => {
                self.stats.jvms_blocked += 1;
                log::warn!("JVM {pid}: a read of its memory blocked ({stall}); its Java frames are no longer named");
                None
            }
        }
    }

    /// A JVM found here is named through its HotSpot tables when they can be read; otherwise
    /// its first perf-map job (flags, dump, map) starts in `settle` (or the next `begin_cycle`),
    /// once every JVM of the cycle is known to share the budget.
    fn discover(&mut self, pid: u32, process: &mut ProcessState) {
        match JvmState::discover(&self.opts.proc_root, pid) {
            Ok(Some(mut jvm)) => {
                if self.opts.hotspot {
                    // No perf map is asked for while the HotSpot tables may still be read.
                    jvm.needs_dump = false;
                    process.hotspot = Hotspot::Pending { attempts_left: DISCOVERY_ATTEMPTS, wait_cycles: 0 };
                }
                process.jvm = Some(jvm);
                Self::attach_hotspot(&self.opts.proc_root, pid, process, &mut self.stats, true);
            }
            Ok(None) => {}
            Err(e) => log::debug!("process {pid}: {e}"),
        }
    }

    /// Reads the JVM's HotSpot tables; after the last failed attempt its perf map is used.
    /// `polled`: a look between cycles or at discovery, which neither waits nor uses an
    /// attempt when the tables are just not filled yet.
    fn attach_hotspot(
        proc_root: &std::path::Path,
        pid: u32,
        process: &mut ProcessState,
        stats: &mut SymbolStats,
        polled: bool,
    ) {
        let Hotspot::Pending { attempts_left, wait_cycles } = process.hotspot else {
            return;
        };
        let Some(jvm) = &mut process.jvm else {
            return;
        };
        if wait_cycles > 0 && !polled {
            process.hotspot = Hotspot::Pending { attempts_left, wait_cycles: wait_cycles - 1 };
            return;
        }
        let started = std::time::Instant::now();
        match HotspotProcess::attach(proc_root, pid) {
            Ok(h) => {
                log::debug!("JVM {pid}: named through its HotSpot tables (read in {:?})", started.elapsed());
                process.hotspot = Hotspot::Ready(Box::new(h));
                // A map read while the tables were pending has no use any more.
                jvm.map.forget();
            }
            // Not HotSpot, or one without the tables: retrying cannot help.
            Err(e) if attempts_left <= 1 || !e.may_pass() => {
                match e {
                    // Tables no HotSpot writes: a hostile or broken target, worth a warning.
                    HotspotError::Bound { .. }
                    | HotspotError::Panicked(_)
                    | HotspotError::TooLarge { .. }
                    | HotspotError::Blocked(_) => {
                        log::warn!("JVM {pid}: HotSpot tables unreadable ({e}); naming its JIT code from its perf map")
                    }
                    _ => log::info!(
                        "JVM {pid}: HotSpot tables not readable ({e}); naming its JIT code from its perf map"
                    ),
                }
                stats.jvms_unreadable += 1;
                stats.hotspot_panics += u64::from(matches!(e, HotspotError::Panicked(_)));
                stats.jvms_blocked += u64::from(matches!(e, HotspotError::Blocked(_)));
                if stats.jvms_unreadable_reasons.len() < MAX_UNREADABLE_REASONS {
                    stats.jvms_unreadable_reasons.push(format!("{pid}: {e}"));
                }
                process.hotspot = Hotspot::Unavailable;
                jvm.needs_dump = true;
            }
            Err(e) if polled => log::debug!("JVM {pid}: HotSpot tables not readable yet ({e})"),
            Err(e) => {
                log::debug!("JVM {pid}: HotSpot tables not readable yet ({e})");
                let tried = DISCOVERY_ATTEMPTS - attempts_left;
                process.hotspot =
                    Hotspot::Pending { attempts_left: attempts_left - 1, wait_cycles: (1 << tried.min(3)) - 1 };
            }
        }
    }

    /// Counts a JVM that runs without frame pointers, when that becomes known. Whether that
    /// needs a word to the user depends on the unwinder it gets (`take_kernel_updates`).
    pub(super) fn note_frame_pointers(&mut self, pid: u32) {
        let Some(jvm) = self.processes.get(&pid).and_then(|p| p.jvm.as_ref()) else {
            return;
        };
        if jvm.info.preserve_frame_pointer == FlagState::Off {
            self.stats.jvms_without_frame_pointers += 1;
        }
    }

    /// Says once that a JVM's Java stacks are cut at compiled frames, and why.
    pub(super) fn warn_frame_pointers(&mut self, pid: u32, reason: &str) {
        if !std::mem::replace(&mut self.frame_pointer_warned, true) {
            log::warn!(
                "JVM {pid} runs without frame pointers in JIT code and {reason}, so its Java stacks \
                 are cut at the first compiled method: restart it with -XX:+PreserveFramePointer"
            );
        }
    }
}
