//! One profiled HotSpot JVM: its perf map, its code cache (anonymous executable
//! mappings), and the job that refreshes them.
//!
//! Everything that can block runs on a job thread of the JVM's own, at most one at a time,
//! each step with its own deadline: asking the JVM for its flags and for a new map over the
//! attach protocol (a JVM that never answers costs its own job the attach timeout), and
//! reading the map (a huge or stalled file costs it the load timeout). The symbolizer only
//! starts jobs ([`JvmState::start`]) and takes their results ([`JvmState::collect`]), so one
//! slow JVM never holds back another, nor the cycle.

use std::fs::File;
use std::io::{BufReader, Read as _};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::mpsc::{self, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jvm_symbols::{
    attach, discover, dump_perf_map, flag_from_vm_flags, Error, FlagState, JvmInfo, Limits, LoadedMap, Mapping,
    MemoryPool, PerfMapFile, Reservation,
};

/// A dump that timed out (a listener that never answers) is retried after this much, then
/// twice as long each time, up to `MAX_DUMP_BACKOFF`.
const MAX_DUMP_BACKOFF: Duration = Duration::from_secs(60);
/// What even a tiny map is allowed: the index grows in steps of a few KiB.
const MIN_MAP_DEMAND_BYTES: u64 = 64 << 10;

/// What the jobs of every JVM may do.
#[derive(Clone)]
pub struct JobSettings {
    /// Bounds each attach exchange; `None`: never attach, only read maps others write.
    pub attach_timeout: Option<Duration>,
    pub min_dump_interval: Duration,
    /// Bounds reading one map.
    pub load_timeout: Duration,
    /// What every map load pays from.
    pub pool: Arc<MemoryPool>,
}

pub struct JvmState {
    pub info: JvmInfo,
    pub map: PerfMapFile,
    code_cache: Vec<Mapping>,
    /// Set when a sampled address fell in the code cache but not in the map.
    pub needs_dump: bool,
    /// A cycle's stacks wait for this JVM's job (it was just discovered, or missed).
    pub awaited: bool,
    last_dump: Option<Instant>,
    /// Wait after a dump that timed out before the next.
    dump_backoff: Duration,
    /// Set after an error that retrying cannot fix (attach disabled, no SIGQUIT handler).
    dump_impossible: bool,
    /// A job was started (the first one asks for the flags if they are still unknown).
    started: bool,
    /// The next load reads the file even if unchanged (more memory is allowed now).
    reread: bool,
    /// Size of the map file last read (kept when its index is dropped).
    map_file_bytes: Option<u64>,
    /// The job's outcome, or the message of the panic that ended it.
    job: Option<mpsc::Receiver<Result<Outcome, String>>>,
    /// A job panicked: the perf-map path of this JVM is bad, and no job is started again (a
    /// target's map or attach reply that makes a reader panic would do it every time).
    job_panicked: bool,
    dump_error_logged: bool,
    map_refusal_logged: bool,
    partial_logged: bool,
    pub java_stacks: u64,
    pub cut_stacks: u64,
}

/// What one collected job did, for the statistics and the frame cache.
#[derive(Debug, Default)]
pub struct Refresh {
    pub dumped: bool,
    pub dump_failed: bool,
    /// A new version of the map was loaded (or the old one dropped): cached JIT frames are stale.
    pub reloaded: bool,
    /// `VM.flags` told whether the JVM keeps frame pointers.
    pub flags_learned: bool,
    /// Well-formed lines of the new map left out for lack of memory.
    pub not_indexed: u64,
    /// The job panicked; the JVM gets no job again.
    pub panicked: bool,
}

/// What a job was asked to do.
struct Plan {
    flags: bool,
    dump: bool,
    reread: bool,
    cap_bytes: u64,
}

/// What a job did.
struct Outcome {
    flags: Option<jvm_symbols::Result<FlagState>>,
    dump: Option<jvm_symbols::Result<()>>,
    code_cache: Option<Vec<Mapping>>,
    map: jvm_symbols::Result<Option<LoadedMap>>,
}

impl JvmState {
    /// `Ok(None)` when `pid` is not a HotSpot JVM. Reads only /proc (and the JDK's `release`,
    /// with a bound); the attach protocol waits for the first job.
    pub fn discover(proc_root: &Path, pid: u32) -> jvm_symbols::Result<Option<Self>> {
        let Some(info) = discover(proc_root, pid)? else {
            return Ok(None);
        };
        let map = PerfMapFile::for_jvm(&info.proc_dir, info.nspid, info.identity(), Limits::default());
        let code_cache = read_code_cache(&info.proc_dir);
        Ok(Some(JvmState {
            info,
            map,
            code_cache,
            needs_dump: true,
            awaited: true,
            last_dump: None,
            dump_backoff: Duration::ZERO,
            dump_impossible: false,
            started: false,
            reread: false,
            map_file_bytes: None,
            job: None,
            job_panicked: false,
            dump_error_logged: false,
            map_refusal_logged: false,
            partial_logged: false,
            java_stacks: 0,
            cut_stacks: 0,
        }))
    }

    /// Whether `addr` lies in anonymous executable memory (JIT code the map may miss).
    pub fn in_code_cache(&self, addr: u64) -> bool {
        self.code_cache.iter().any(|m| m.contains(addr))
    }

    /// A dump was started at or after `at`.
    pub fn dumped_since(&self, at: Instant) -> bool {
        self.last_dump.is_some_and(|d| d >= at)
    }

    pub fn in_flight(&self) -> bool {
        self.job.is_some()
    }

    /// Whether any job was started for this JVM yet.
    pub fn ever_started(&self) -> bool {
        self.started
    }

    /// A dump is asked for and allowed now.
    pub fn dump_due(&self, settings: &JobSettings) -> bool {
        settings.attach_timeout.is_some()
            && self.needs_dump
            && !self.dump_impossible
            && self.last_dump.is_none_or(|at| at.elapsed() >= settings.min_dump_interval.max(self.dump_backoff))
    }

    /// The memory this JVM's map would take whole, with room to grow: the index itself takes at
    /// most about its file's size (16 bytes an entry and its name, against 40 bytes of addresses
    /// and the name on a HotSpot line), and while it is read, vectors growing by half and the
    /// names' hash table take as much again. `None` before the file was first read.
    pub fn map_demand_bytes(&self) -> Option<u64> {
        let file_bytes = self.map_file_bytes?;
        Some(2 * file_bytes + MIN_MAP_DEMAND_BYTES)
    }

    /// Fits the map to `cap_bytes`, this JVM's share of the budget now: a map over it is
    /// dropped (to be read again within the cap); a partial one is read again when it could
    /// now get a quarter more memory than it was allowed (its share grew, or others made room).
    /// True when the map was dropped.
    pub fn fit_map(&mut self, settings: &JobSettings, cap_bytes: u64) -> bool {
        let index = self.map.index();
        if index.bytes() > cap_bytes {
            self.map.forget();
            return true;
        }
        if index.not_indexed() > 0 {
            let room = settings.pool.limit_bytes().saturating_sub(settings.pool.used_bytes());
            let allowed_now = cap_bytes.min(room + index.bytes());
            self.reread |= allowed_now > index.peak_bytes().saturating_add(index.peak_bytes() / 4);
        }
        false
    }

    /// Starts a job unless one is in flight: flags if still unknown, a dump if due, and a
    /// reload of the map if it changed, within `cap_bytes`. A reload that could not fit beside
    /// the current map drops it first (it is about to be replaced).
    pub fn start(&mut self, settings: &JobSettings, cap_bytes: u64) {
        if self.job.is_some() || self.job_panicked {
            return;
        }
        let first = !std::mem::replace(&mut self.started, true);
        let plan = Plan {
            flags: first && settings.attach_timeout.is_some() && self.info.preserve_frame_pointer == FlagState::Unknown,
            dump: self.dump_due(settings),
            reread: std::mem::take(&mut self.reread),
            cap_bytes,
        };
        if plan.dump {
            self.needs_dump = false;
            self.last_dump = Some(Instant::now());
        }
        let pool = &settings.pool;
        let room = pool.limit_bytes().saturating_sub(pool.used_bytes());
        if (plan.dump || plan.reread) && room < cap_bytes {
            self.map.forget();
        }
        let (info, source, settings) = (self.info.clone(), self.map.source().clone(), settings.clone());
        let known = if plan.reread { None } else { self.map.fingerprint() };
        let pid = info.pid;
        let spawned = spawn_job(pid, move || {
            let timeout = settings.attach_timeout.unwrap_or_default();
            let flags = plan.flags.then(|| {
                attach::jcmd(&info, "VM.flags", timeout).map(|out| flag_from_vm_flags(&out, "PreserveFramePointer"))
            });
            let dump = plan.dump.then(|| dump_perf_map(&info, timeout));
            let code_cache = matches!(dump, Some(Ok(()))).then(|| read_code_cache(&info.proc_dir));
            let reservation = Reservation::new(settings.pool, plan.cap_bytes);
            let map = source.load(known, reservation, Some(settings.load_timeout));
            Outcome { flags, dump, code_cache, map }
        });
        match spawned {
            Ok(rx) => self.job = Some(rx),
            Err(e) => log::warn!("JVM {}: cannot start a symbol job: {e}", self.info.pid),
        }
    }

    /// Takes the result of the job in flight, if it has finished.
    pub fn collect(&mut self, min_dump_interval: Duration) -> Option<Refresh> {
        let outcome = match self.job.as_ref()?.try_recv() {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(message)) => {
                self.job = None;
                self.job_panicked = true;
                log::warn!(
                    "JVM {}: its perf-map job panicked ({message}); its perf map is used no more, and the end \
                     of the run counts it (perf_map_job_panics)",
                    self.info.pid
                );
                return Some(Refresh { panicked: true, ..Refresh::default() });
            }
            Err(TryRecvError::Empty) => return None,
            Err(TryRecvError::Disconnected) => {
                self.job = None;
                log::warn!("JVM {}: a symbol job ended without a result", self.info.pid);
                return None;
            }
        };
        self.job = None;
        let mut report = Refresh::default();
        if let Some(Ok(flag)) = outcome.flags {
            self.info.preserve_frame_pointer = flag;
            report.flags_learned = flag != FlagState::Unknown;
        }
        match outcome.dump {
            Some(Ok(())) => {
                log::debug!("JVM {}: perf map dumped", self.info.pid);
                report.dumped = true;
                self.dump_backoff = Duration::ZERO;
            }
            Some(Err(e)) => {
                report.dump_failed = true;
                self.dump_impossible = matches!(e, Error::AttachDisabled { .. } | Error::SigquitNotCaught { .. });
                if matches!(e, Error::Timeout { .. } | Error::ListenerTimeout { .. }) {
                    self.dump_backoff =
                        (self.dump_backoff * 2).clamp(min_dump_interval.max(Duration::from_secs(1)), MAX_DUMP_BACKOFF);
                }
                if !std::mem::replace(&mut self.dump_error_logged, true) {
                    log::warn!("{e}");
                }
            }
            None => {}
        }
        if let Some(code_cache) = outcome.code_cache {
            self.code_cache = code_cache;
        }
        match outcome.map {
            Ok(Some(loaded)) => {
                report.not_indexed = loaded.index.not_indexed();
                if report.not_indexed > 0 && !std::mem::replace(&mut self.partial_logged, true) {
                    log::warn!(
                        "JVM {}: perf map {} ({} MB) is over this JVM's share of --max-symbol-mb ({} MB): \
                         {} entries indexed, {} left out (their frames show as [unknown JIT code])",
                        self.info.pid,
                        self.map.path().display(),
                        loaded.fingerprint.size_bytes >> 20,
                        loaded.index.cap_bytes() >> 20,
                        loaded.index.len(),
                        report.not_indexed
                    );
                }
                self.map_file_bytes = Some(loaded.fingerprint.size_bytes);
                self.map.install(loaded);
                report.reloaded = true;
            }
            Ok(None) => {}
            // A planted or oversized map is worth saying, once per JVM; a missing one is not.
            Err(
                e @ (Error::Refused { .. }
                | Error::TooLarge { .. }
                | Error::AsTarget { .. }
                | Error::ReadTimeout { .. }),
            ) => {
                if !std::mem::replace(&mut self.map_refusal_logged, true) {
                    log::warn!("JVM {}: not reading its perf map: {e}", self.info.pid);
                }
            }
            Err(e) => log::debug!("JVM {}: {e}", self.info.pid),
        }
        Some(report)
    }
}

/// The code cache is reserved once at startup, but re-read with each dump in case a segment
/// was added.
fn read_code_cache(proc_dir: &Path) -> Vec<Mapping> {
    match File::open(proc_dir.join("maps")) {
        Ok(file) => jvm_symbols::parse_maps(BufReader::new(file.take(jvm_symbols::MAX_MAPS_BYTES)))
            .into_iter()
            .filter(Mapping::is_anonymous_code)
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Runs `work` on a job thread of JVM `pid`'s own. A panic there (a reader tripped by what the
/// target wrote) ends the job with its message instead of an outcome.
fn spawn_job(
    pid: u32,
    work: impl FnOnce() -> Outcome + Send + 'static,
) -> std::io::Result<mpsc::Receiver<Result<Outcome, String>>> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new().name(format!("jvm-{pid}")).spawn(move || {
        let outcome = catch_unwind(AssertUnwindSafe(work)).map_err(|payload| super::panic_message(&*payload));
        // The JVM may be forgotten meanwhile: then nobody listens, and that is fine.
        let _ = tx.send(outcome);
    })?;
    Ok(rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake /proc with a JVM whose map is `map`.
    fn fake_jvm(dir: &Path, map: &str) -> JvmState {
        let pid = 4_190_001;
        let p = dir.join(pid.to_string());
        std::fs::create_dir_all(p.join("root/tmp")).unwrap();
        std::fs::write(p.join("maps"), "7f0000000000-7f0000100000 rwxp 00000000 00:00 0 \n7f1b24851000-7f1b255a4000 r-xp 00251000 fe:00 315160 /usr/lib/jvm/java-17/lib/server/libjvm.so\n").unwrap();
        let (uid, gid) = (nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw());
        std::fs::write(p.join("status"), format!("Uid:\t{uid}\t{uid}\t{uid}\t{uid}\nGid:\t{gid}\t{gid}\t{gid}\t{gid}\nNSpid:\t{pid}\t7\nSigCgt:\t0000000101005ccd\n")).unwrap();
        std::fs::write(p.join("cmdline"), b"java\0-XX:+PreserveFramePointer\0Main\0").unwrap();
        std::fs::write(p.join("root/tmp/perf-7.map"), map).unwrap();
        JvmState::discover(dir, pid).unwrap().expect("a JVM")
    }

    fn settings(pool: Arc<MemoryPool>) -> JobSettings {
        JobSettings {
            attach_timeout: None,
            min_dump_interval: Duration::from_secs(1),
            load_timeout: Duration::from_secs(10),
            pool,
        }
    }

    fn wait(jvm: &mut JvmState) -> Refresh {
        let t0 = Instant::now();
        loop {
            if let Some(r) = jvm.collect(Duration::from_secs(1)) {
                return r;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "job never finished");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn map_of(n: u64) -> String {
        (0..n).map(|i| format!("{:#x} 0x40 void com.acme.K.m{i}()\n", 0x7f00_0000_0000u64 + i * 0x40)).collect()
    }

    /// A job that panics (a reader tripped by what the target wrote) ends with a counted
    /// refresh, and the JVM gets no job again, which would panic the same way every cycle.
    #[test]
    fn a_panicking_job_is_caught_counted_once_and_never_restarted() {
        let dir = tempfile::tempdir().unwrap();
        let mut jvm = fake_jvm(dir.path(), &map_of(10));
        jvm.job = Some(spawn_job(jvm.info.pid, || panic!("a hostile map line")).unwrap());
        let r = wait(&mut jvm);
        assert!(r.panicked && !r.reloaded, "{r:?}");
        jvm.start(&settings(MemoryPool::new(u64::MAX)), u64::MAX);
        assert!(!jvm.in_flight(), "no job after a panic");
        assert!(jvm.collect(Duration::from_secs(1)).is_none(), "the panic is reported once");
    }

    #[test]
    fn a_job_loads_the_map_off_the_callers_thread_and_one_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let mut jvm = fake_jvm(dir.path(), &map_of(1000));
        let s = settings(MemoryPool::new(u64::MAX));
        assert!(jvm.in_code_cache(0x7f00_0000_0040) && !jvm.in_code_cache(0x1000));
        jvm.start(&s, u64::MAX);
        assert!(jvm.in_flight());
        jvm.start(&s, u64::MAX);
        let r = wait(&mut jvm);
        assert!(r.reloaded && !r.dumped && !r.flags_learned, "{r:?}");
        assert!(!jvm.in_flight());
        assert_eq!(jvm.map.index().lookup(0x7f00_0000_0041).unwrap().name, "void com.acme.K.m1()");
        jvm.start(&s, u64::MAX);
        assert!(!wait(&mut jvm).reloaded, "unchanged file: nothing reloaded");
    }

    /// Past its share, a map is read in part and the warning says so; when the share shrinks
    /// below what it holds it is dropped, and when it grows again it is read again.
    #[test]
    fn the_map_follows_its_share_of_the_budget() {
        let dir = tempfile::tempdir().unwrap();
        let mut jvm = fake_jvm(dir.path(), &map_of(20_000));
        let pool = MemoryPool::new(u64::MAX);
        let s = settings(Arc::clone(&pool));
        jvm.start(&s, 100_000);
        let r = wait(&mut jvm);
        assert!(r.reloaded && r.not_indexed > 0, "{r:?}");
        let partial = jvm.map.index().len();
        assert!(
            jvm.map.index().bytes() <= 100_000 && partial > 1000,
            "{} bytes, {partial} entries",
            jvm.map.index().bytes()
        );
        assert_eq!(pool.used_bytes(), jvm.map.index().bytes());
        let file_bytes = map_of(20_000).len() as u64;
        assert_eq!(jvm.map_demand_bytes(), Some(2 * file_bytes + MIN_MAP_DEMAND_BYTES));

        assert!(jvm.fit_map(&s, 50_000), "over a smaller share: dropped");
        assert_eq!(pool.used_bytes(), 0);
        let demand = jvm.map_demand_bytes().unwrap();
        assert!(!jvm.fit_map(&s, demand));
        jvm.start(&s, demand);
        let r = wait(&mut jvm);
        assert_eq!(
            (r.reloaded, r.not_indexed, jvm.map.index().len()),
            (true, 0, 20_000),
            "its demand is enough to read it whole"
        );
    }

    #[test]
    fn a_partial_map_is_read_again_when_its_share_grows() {
        let dir = tempfile::tempdir().unwrap();
        let mut jvm = fake_jvm(dir.path(), &map_of(20_000));
        let s = settings(MemoryPool::new(u64::MAX));
        jvm.start(&s, 100_000);
        wait(&mut jvm);
        assert!(!jvm.fit_map(&s, 110_000), "a little more: not worth reading again");
        jvm.start(&s, 110_000);
        assert!(!wait(&mut jvm).reloaded);
        assert!(!jvm.fit_map(&s, 4_000_000));
        jvm.start(&s, 4_000_000);
        let r = wait(&mut jvm);
        assert!(r.reloaded && r.not_indexed == 0, "{r:?}");
    }

    /// Cut short by a full pool, a map is read again once the others have made room.
    #[test]
    fn a_map_cut_short_by_others_is_read_again_when_they_made_room() {
        let dir = tempfile::tempdir().unwrap();
        let mut jvm = fake_jvm(dir.path(), &map_of(20_000));
        let pool = MemoryPool::new(1_000_000);
        let s = settings(Arc::clone(&pool));
        let mut other = Reservation::new(Arc::clone(&pool), u64::MAX);
        assert!(other.grow(950_000));
        jvm.start(&s, 500_000);
        wait(&mut jvm);
        assert!(jvm.map.index().not_indexed() > 0 && jvm.map.index().bytes() < 50_000);
        assert!(!jvm.fit_map(&s, 500_000));
        jvm.start(&s, 500_000);
        assert!(!wait(&mut jvm).reloaded, "the pool is still full: not read again");
        drop(other);
        assert!(!jvm.fit_map(&s, 500_000));
        jvm.start(&s, 500_000);
        let r = wait(&mut jvm);
        assert!(r.reloaded && jvm.map.index().bytes() > 200_000, "{r:?} {}", jvm.map.index().bytes());
    }
}
