//! Reads a target controls how long they take: its memory can be registered with userfaultfd and
//! its faults never served, its mapped file can sit on a FUSE filesystem whose daemon never
//! answers. `process_vm_readv`, `open` and `pread` then sleep until the target lets them go (in
//! an uninterruptible or killable sleep no signal of ours ends), and the symbols worker with them.
//!
//! A [`StallGuard`] runs such a read on a thread of its own and waits for it at most a deadline.
//! A read past its deadline fails ([`Stall::TimedOut`]); its thread is left behind, stuck in
//! the target's read, and a new one serves the next reads. A thread that is only waiting for a
//! CPU (runnable, on a loaded host), or whose reads go on completing (a cold disk), is given a
//! few more deadlines first. Threads left behind are bounded: while
//! the bound of them are stuck, reads of that kind are refused
//! ([`Stall::Refused`]). A stuck thread that the target lets go (it served the fault, or ended)
//! exits and frees its place.
//!
//! Each read hands owned data to the thread and gets owned data back: a thread left behind
//! holds nothing of the caller's.
//!
//! A hop costs a few microseconds of our CPU (two thread wake-ups), and a busy JVM's cycle reads
//! its memory hundreds to a thousand times: one hop per read took the profiler's CPU on a JIT-churning
//! JVM (`ClassChurn`, `--pid`, 20 s) from 0.19 s to 0.54 s. So a JVM's cycle of frames is one
//! batch ([`StallGuard::run_within`], `HotspotProcess::prefetch`) under a deadline scaled to its
//! read budget; [`GuardedMemory`] reads inside a batch go directly. Reads outside a batch (a
//! JVM's attach, the cycle's code-heap refresh, a frame the batch did not see) hop one by one.

use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, LazyLock, Mutex};
use std::thread;
use std::time::Duration;

use jvm_symbols::hotspot::{MemoryReader, ProcessMemory, ReadError};

use super::ByteSource;

/// Stack of a read thread: it copies bytes, parses a libjvm.so's dynamic symbols, and resolves a
/// JVM's cycle of frames through its tables (as the symbols worker would).
const READ_THREAD_STACK_BYTES: usize = 8 << 20;
/// One read of a JVM's memory takes microseconds; one that the target blocks never ends.
const HOTSPOT_READ_DEADLINE: Duration = Duration::from_millis(250);
/// One read of a mapped file (a 1 MiB chunk at most, or an open) on a busy disk.
const FILE_READ_DEADLINE: Duration = Duration::from_secs(1);
/// Threads left blocked in a target's reads, of each kind, before that kind is refused.
const MAX_STUCK_THREADS: usize = 4;
/// A read past its deadline whose thread is runnable (waiting for a CPU on a loaded host, not
/// blocked by the target), or has read more since the last deadline (a cold disk), is waited
/// for up to this many deadlines in all: a real JVM must not be dropped for the host's load, nor
/// on its first run for a page cache that does not hold its libjvm.so yet.
const RUNNABLE_DEADLINES: u32 = 8;

thread_local! {
    /// Set on a read thread: a [`GuardedMemory`] read there is already under a deadline (the
    /// job's), and reads directly.
    static ON_READ_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

static HOTSPOT_READS: LazyLock<Arc<StallGuard>> =
    LazyLock::new(|| Arc::new(StallGuard::new("HotSpot memory read", HOTSPOT_READ_DEADLINE, MAX_STUCK_THREADS)));
// A file read is a disk read on a cold cache: one that goes on reading is waited for. (A JVM's
// memory reads are many and tiny, outside a batch one hop each: the `io` file read per hop that
// tells progress would cost more than the read.)
static FILE_READS: LazyLock<Arc<StallGuard>> = LazyLock::new(|| {
    Arc::new(StallGuard::new("mapped file read", FILE_READ_DEADLINE, MAX_STUCK_THREADS).waiting_on_progress())
});

/// The guard of every read of a JVM's memory, for the run.
pub fn hotspot_reads() -> &'static Arc<StallGuard> {
    &HOTSPOT_READS
}

/// The guard of every open and read of a target's mapped file (native copies, libjvm.so).
pub fn file_reads() -> &'static Arc<StallGuard> {
    &FILE_READS
}

/// Why a guarded read did not complete.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Stall {
    #[error("{what} took over {deadline_ms} ms (blocked by the target; its thread is left behind)")]
    TimedOut { what: &'static str, deadline_ms: u128 },
    #[error("{what}s are refused: {stuck} earlier ones are still blocked by their targets")]
    Refused { what: &'static str, stuck: usize },
    #[error("{what}: no thread to read with: {reason}")]
    NoThread { what: &'static str, reason: String },
}

type Job = Box<dyn FnOnce() -> Box<dyn Any + Send> + Send>;
type Outcome = thread::Result<Box<dyn Any + Send>>;

/// The thread reads are handed to, while it is not stuck.
struct ReadThread {
    jobs: Sender<Job>,
    outcomes: Receiver<Outcome>,
    /// Its kernel thread id (0 until it has started).
    tid: Arc<AtomicI32>,
    /// Set when the thread is left behind: it frees its place in `stuck` when it ends.
    left_behind: Arc<AtomicBool>,
}

/// Runs reads of one kind with a deadline each (see the module documentation).
pub struct StallGuard {
    what: &'static str,
    deadline: Duration,
    max_stuck: usize,
    /// Threads left behind that have not ended yet.
    stuck: Arc<AtomicUsize>,
    thread: Mutex<Option<ReadThread>>,
    timed_out: AtomicU64,
    refused: AtomicU64,
    /// Whether a read whose thread goes on reading is waited for ([`Self::waiting_on_progress`]).
    progress: bool,
}

impl StallGuard {
    /// `what` names the reads in messages ("HotSpot memory read").
    pub fn new(what: &'static str, deadline: Duration, max_stuck: usize) -> Self {
        Self {
            what,
            deadline,
            max_stuck,
            stuck: Arc::new(AtomicUsize::new(0)),
            thread: Mutex::new(None),
            timed_out: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            progress: false,
        }
    }

    /// A read past its deadline whose thread has read more since the read began (a cold
    /// disk) is waited for as a runnable one is: each read then costs a look at its thread's
    /// `io` counters.
    pub fn waiting_on_progress(mut self) -> Self {
        self.progress = true;
        self
    }

    /// How long one read may take.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Threads left behind and still blocked.
    pub fn stuck(&self) -> usize {
        self.stuck.load(Ordering::Relaxed)
    }

    /// Reads that ran past their deadline, over the run.
    pub fn timed_out(&self) -> u64 {
        self.timed_out.load(Ordering::Relaxed)
    }

    /// Reads refused because too many threads were stuck, over the run.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Runs `read` on the read thread and waits for it at most the deadline. A panic in `read`
    /// is resumed here, as if it had run on this thread.
    pub fn run<T: Send + 'static>(&self, read: impl FnOnce() -> T + Send + 'static) -> Result<T, Stall> {
        self.run_within(self.deadline, read)
    }

    /// [`StallGuard::run`] with a deadline of its own: for a batch of reads (a JVM's cycle of
    /// frames), one hop for all of them. [`GuardedMemory`] reads inside it go directly.
    pub fn run_within<T: Send + 'static>(
        &self,
        deadline: Duration,
        read: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Stall> {
        let mut slot = self.thread.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            let stuck = self.stuck();
            if stuck >= self.max_stuck {
                self.refused.fetch_add(1, Ordering::Relaxed);
                return Err(Stall::Refused { what: self.what, stuck });
            }
            *slot = Some(self.spawn()?);
        }
        let thread = slot.as_ref().expect("set above");
        let job: Job = Box::new(move || Box::new(read()) as Box<dyn Any + Send>);
        if thread.jobs.send(job).is_err() {
            *slot = None;
            return Err(Stall::NoThread { what: self.what, reason: "the read thread ended".into() });
        }
        let tid = || thread.tid.load(Ordering::Acquire);
        let bytes_read = |tid: i32| if self.progress { bytes_read(tid) } else { None };
        let mut read_so_far = bytes_read(tid());
        let mut outcome = thread.outcomes.recv_timeout(deadline);
        for _ in 1..RUNNABLE_DEADLINES {
            if !matches!(outcome, Err(RecvTimeoutError::Timeout)) {
                break;
            }
            let (was, now) = (read_so_far, bytes_read(tid()));
            read_so_far = now;
            let progressing = matches!((was, now), (Some(was), Some(now)) if now != was);
            if !progressing && !runnable(tid()) {
                break;
            }
            outcome = thread.outcomes.recv_timeout(deadline);
        }
        match outcome {
            Ok(Ok(value)) => Ok(*value.downcast::<T>().expect("the read's own type")),
            Ok(Err(panic)) => resume_unwind(panic),
            Err(RecvTimeoutError::Timeout) => {
                let thread = slot.take().expect("set above");
                // Counted before it is told, so that its end (which subtracts) cannot come first.
                self.stuck.fetch_add(1, Ordering::Relaxed);
                thread.left_behind.store(true, Ordering::Release);
                self.timed_out.fetch_add(1, Ordering::Relaxed);
                Err(Stall::TimedOut { what: self.what, deadline_ms: deadline.as_millis() })
            }
            Err(RecvTimeoutError::Disconnected) => {
                *slot = None;
                Err(Stall::NoThread { what: self.what, reason: "the read thread ended".into() })
            }
        }
    }

    fn spawn(&self) -> Result<ReadThread, Stall> {
        let (jobs, queued) = mpsc::channel::<Job>();
        let (done, outcomes) = mpsc::channel::<Outcome>();
        let left_behind = Arc::new(AtomicBool::new(false));
        let (left, stuck) = (Arc::clone(&left_behind), Arc::clone(&self.stuck));
        let tid = Arc::new(AtomicI32::new(NOT_STARTED));
        let my_tid = Arc::clone(&tid);
        thread::Builder::new()
            .name("guarded-read".into())
            .stack_size(READ_THREAD_STACK_BYTES)
            .spawn(move || {
                // SAFETY: gettid has no preconditions.
                my_tid.store(unsafe { libc::gettid() }, Ordering::Release);
                ON_READ_THREAD.with(|on| on.set(true));
                for job in queued {
                    // The caller may be gone (it gave up on this thread): then this ends.
                    if done.send(catch_unwind(AssertUnwindSafe(job))).is_err() {
                        break;
                    }
                }
                if left.load(Ordering::Acquire) {
                    stuck.fetch_sub(1, Ordering::Relaxed);
                }
            })
            .map_err(|e| Stall::NoThread { what: self.what, reason: e.to_string() })?;
        Ok(ReadThread { jobs, outcomes, tid, left_behind })
    }
}

/// The tid a read thread has until it runs its first instruction.
const NOT_STARTED: i32 = 0;

/// Whether our thread `tid` is running or waiting for a CPU (state `R` in its `stat`), as
/// opposed to asleep in a read the target holds.
fn runnable(tid: i32) -> bool {
    // Not started yet (its tid is set first thing): it is waiting for a CPU, as a thread spawned
    // on a loaded host can for longer than a deadline. The target has had no part in it yet.
    if tid == NOT_STARTED {
        return true;
    }
    let Ok(stat) = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")) else {
        return false;
    };
    // The state follows the command name, which ends at the last ')'.
    stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next()) == Some('R')
}

/// What our thread `tid` has read so far (the `rchar` and `read_bytes` of its `io`): a read
/// asleep on a cold disk (libjvm.so's symbol tables on a first run, megabytes of them) moves
/// them on between deadlines; one the target holds (a fault never served, a FUSE daemon that
/// never answers) does not. `None`: unreadable. A thread not started yet has read nothing.
fn bytes_read(tid: i32) -> Option<(u64, u64)> {
    if tid == NOT_STARTED {
        return Some((0, 0));
    }
    let io = std::fs::read_to_string(format!("/proc/self/task/{tid}/io")).ok()?;
    let field =
        |name: &str| io.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse::<u64>().ok());
    Some((field("rchar")?, field("read_bytes").unwrap_or(0)))
}

/// A live JVM's memory read through a [`StallGuard`]. After one of its reads ran past its deadline,
/// every further read of this JVM fails at once: [`GuardedMemory::take_new_stall`] says why.
pub struct GuardedMemory {
    pid: u32,
    guard: Arc<StallGuard>,
    /// The stall, and whether it was said.
    stall: Mutex<(Option<Stall>, bool)>,
}

impl GuardedMemory {
    pub fn new(pid: u32, guard: Arc<StallGuard>) -> Self {
        Self { pid, guard, stall: Mutex::new((None, false)) }
    }

    /// Why this JVM's reads stopped, the first time it is asked after one of them stalled.
    pub fn take_new_stall(&self) -> Option<Stall> {
        let mut stall = self.stall.lock().unwrap_or_else(|e| e.into_inner());
        match stall.1 {
            true => None,
            false => {
                stall.1 = stall.0.is_some();
                stall.0.clone()
            }
        }
    }
}

impl MemoryReader for GuardedMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        let err = ReadError { addr, len: buf.len() };
        let mut stall = self.stall.lock().unwrap_or_else(|e| e.into_inner());
        if stall.0.is_some() {
            return Err(err);
        }
        let pid = self.pid;
        if ON_READ_THREAD.with(|on| on.get()) {
            return ProcessMemory { pid }.read(addr, buf);
        }
        let len = buf.len();
        let read = self.guard.run(move || {
            let mut bytes = vec![0u8; len];
            ProcessMemory { pid }.read(addr, &mut bytes).map(|()| bytes)
        });
        match read {
            Ok(Ok(bytes)) => {
                buf.copy_from_slice(&bytes);
                Ok(())
            }
            Ok(Err(e)) => Err(e),
            // This JVM's read blocked: it is read no more.
            Err(e @ Stall::TimedOut { .. }) => {
                stall.0 = Some(e);
                Err(err)
            }
            // Other JVMs' reads are stuck (the guard says so): this one may be read again later.
            Err(_) => Err(err),
        }
    }
}

/// A target's file (or memory image) read through a [`StallGuard`], one chunk per read, for
/// [`super::elf_copy`]. The source is shared with a thread left behind, never changed.
pub struct GuardedSource<S> {
    source: Arc<S>,
    guard: Arc<StallGuard>,
}

impl<S: ByteSource + Send + Sync + 'static> GuardedSource<S> {
    pub fn new(source: S, guard: Arc<StallGuard>) -> Self {
        Self { source: Arc::new(source), guard }
    }
}

impl<S: ByteSource + Send + Sync + 'static> ByteSource for GuardedSource<S> {
    fn read_bytes_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let (source, len) = (Arc::clone(&self.source), buf.len());
        let read = self.guard.run(move || {
            let mut bytes = vec![0u8; len];
            source.read_bytes_at(&mut bytes, offset).map(|n| {
                bytes.truncate(n);
                bytes
            })
        });
        let bytes = read.map_err(std::io::Error::other)??;
        buf[..bytes.len()].copy_from_slice(&bytes);
        Ok(bytes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::sync_channel;
    use std::time::Instant;

    const DEADLINE: Duration = Duration::from_millis(100);

    #[test]
    fn a_read_within_its_deadline_returns_its_value_and_a_panic_is_resumed_here() {
        // Generous: a panic's message and backtrace take time on a loaded machine.
        let guard = StallGuard::new("test read", Duration::from_secs(10), 2);
        assert_eq!(guard.run(|| 7), Ok(7));
        assert_eq!(guard.run(|| String::from("again, same thread")).unwrap(), "again, same thread");
        let panicked = catch_unwind(AssertUnwindSafe(|| guard.run(|| -> u8 { panic!("reader bug") })));
        assert!(panicked.is_err());
        assert_eq!(guard.run(|| 8), Ok(8), "the thread goes on after a panic");
        assert_eq!(guard.timed_out(), 0);
    }

    /// A read that waits until its sender is dropped, as a thread blocked by a target's fault
    /// waits until the target serves it or ends.
    fn blocked_read(guard: &StallGuard) -> (std::sync::mpsc::SyncSender<()>, Result<bool, Stall>) {
        let (release, wait) = sync_channel::<()>(0);
        let started = Instant::now();
        let r = guard.run(move || wait.recv().is_ok());
        assert!(started.elapsed() < DEADLINE * 5, "waited {:?}", started.elapsed());
        (release, r)
    }

    #[test]
    fn a_blocked_read_times_out_and_its_thread_is_left_behind_up_to_the_bound() {
        let guard = StallGuard::new("test read", DEADLINE, 2);
        let (first, r) = blocked_read(&guard);
        assert!(matches!(r, Err(Stall::TimedOut { .. })), "{r:?}");
        assert_eq!(guard.run(|| 1), Ok(1), "a new thread serves the next reads");
        let (second, r) = blocked_read(&guard);
        assert!(matches!(r, Err(Stall::TimedOut { .. })), "{r:?}");
        assert_eq!((guard.timed_out(), guard.stuck()), (2, 2));
        assert!(matches!(guard.run(|| 1), Err(Stall::Refused { stuck: 2, .. })), "at the bound");
        assert_eq!(guard.refused(), 1);
        // The targets let go: the threads end and free their places.
        drop((first, second));
        let started = Instant::now();
        while guard.stuck() > 0 {
            assert!(started.elapsed() < Duration::from_secs(5), "stuck threads never ended");
            thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(guard.run(|| 2), Ok(2), "room again");
    }

    /// A file whose reads never return, as on a FUSE filesystem whose daemon does not answer
    /// (until the test ends: then the thread left behind ends too).
    struct Blocking(Mutex<Receiver<()>>);

    impl ByteSource for Blocking {
        fn read_bytes_at(&self, _buf: &mut [u8], _offset: u64) -> std::io::Result<usize> {
            let _ = self.0.lock().unwrap().recv();
            Ok(0)
        }
    }

    #[test]
    fn a_file_copy_whose_read_blocks_fails_with_the_stall() {
        let (_release, wait) = mpsc::channel();
        let guard = Arc::new(StallGuard::new("mapped file read", DEADLINE, 1));
        let source = GuardedSource::new(Blocking(Mutex::new(wait)), Arc::clone(&guard));
        let started = Instant::now();
        let err = crate::symbols::elf_copy::copy_symbol_sections(&source, 1 << 20, 1 << 20).unwrap_err();
        assert!(started.elapsed() < DEADLINE * 5, "waited {:?}", started.elapsed());
        assert!(matches!(err.stall(), Some(Stall::TimedOut { .. })), "{err}");
        assert_eq!(guard.stuck(), 1);
    }

    #[test]
    fn a_read_that_is_busy_not_blocked_is_waited_for_past_its_deadline() {
        let guard = StallGuard::new("test read", DEADLINE, 1);
        // Running for three deadlines, never asleep: the host's load, not the target.
        let busy = guard.run(|| {
            let started = Instant::now();
            while started.elapsed() < DEADLINE * 3 {
                std::hint::spin_loop();
            }
            5
        });
        assert_eq!(busy, Ok(5));
        assert_eq!(guard.timed_out(), 0);
    }

    /// A read asleep most of the time but whose reads go on completing, as libjvm.so's symbol
    /// tables read from a cold disk on a JVM's first run: waited for past its deadline. One that
    /// read once and then sleeps with nothing more read (a target that served one read and holds
    /// the next) still times out.
    #[test]
    fn a_read_that_keeps_reading_is_waited_for_and_one_that_stops_is_not() {
        use std::os::unix::fs::FileExt;
        let file = tempfile::tempfile().unwrap();
        file.write_all_at(&[7u8; 4096], 0).unwrap();
        let file = Arc::new(file);
        let guard = StallGuard::new("test read", DEADLINE, 1).waiting_on_progress();
        let slow_disk = Arc::clone(&file);
        let read = guard.run(move || {
            let (started, mut reads) = (Instant::now(), 0u32);
            while started.elapsed() < DEADLINE * 3 {
                let mut page = [0u8; 4096];
                slow_disk.read_exact_at(&mut page, 0).unwrap();
                reads += 1;
                thread::sleep(DEADLINE / 10);
            }
            reads
        });
        assert!(matches!(read, Ok(n) if n >= 3), "{read:?}");
        assert_eq!(guard.timed_out(), 0);

        let (release, wait) = sync_channel::<()>(0);
        let stops = Arc::clone(&file);
        let started = Instant::now();
        let read = guard.run(move || {
            let mut page = [0u8; 4096];
            stops.read_exact_at(&mut page, 0).unwrap();
            wait.recv().is_ok()
        });
        assert!(matches!(read, Err(Stall::TimedOut { .. })), "{read:?}");
        assert!(started.elapsed() < DEADLINE * 5, "waited {:?}", started.elapsed());
        drop(release);
    }

    /// A batch (a JVM's cycle of frames) is one hop: its reads run directly on the read
    /// thread, under the batch's deadline. A read that hopped again from there would wait for
    /// its own thread and time out.
    /// A read thread that has not run yet (spawned on a loaded host) is waiting for a CPU,
    /// not blocked by a target: its read is waited for as a busy one is. CI once timed out
    /// the busy read above this way (the spawned thread first ran after the deadline).
    #[test]
    fn a_read_thread_not_started_yet_counts_as_runnable_and_a_sleeping_one_does_not() {
        assert!(runnable(NOT_STARTED));
        // SAFETY: gettid has no preconditions.
        assert!(runnable(unsafe { libc::gettid() }), "this thread, running");
        let (tx, rx) = mpsc::channel::<i32>();
        let (keep, wait) = sync_channel::<()>(0);
        let sleeper = thread::spawn(move || {
            // SAFETY: as above.
            tx.send(unsafe { libc::gettid() }).unwrap();
            let _ = wait.recv();
        });
        let tid = rx.recv().unwrap();
        let started = Instant::now();
        while runnable(tid) {
            assert!(started.elapsed() < Duration::from_secs(10), "the sleeping thread never slept");
            thread::sleep(Duration::from_millis(5));
        }
        drop(keep);
        sleeper.join().unwrap();
        assert!(!runnable(i32::MAX), "no such thread");
    }

    #[test]
    fn a_batch_reads_directly_on_the_read_thread_under_its_own_deadline() {
        static VALUE: u64 = 0x0123_4567_89ab_cdef;
        let addr = &VALUE as *const u64 as u64;
        let guard = Arc::new(StallGuard::new("HotSpot memory read", DEADLINE, 1));
        let me = GuardedMemory::new(std::process::id(), Arc::clone(&guard));
        let read = guard.run_within(DEADLINE * 2, move || (0..1000).map(|_| me.read_u64(addr)).collect::<Vec<_>>());
        let read = read.expect("within the batch's deadline");
        assert!(read.iter().all(|r| *r == Ok(VALUE)), "{:?}", read[0]);
        assert_eq!(guard.timed_out(), 0);
        // A batch that blocks fails at its own deadline, not the per-read one.
        let (release, wait) = sync_channel::<()>(0);
        let started = Instant::now();
        let r = guard.run_within(DEADLINE * 3, move || wait.recv().is_ok());
        assert!(started.elapsed() >= DEADLINE * 3, "gave up after {:?}", started.elapsed());
        assert_eq!(r, Err(Stall::TimedOut { what: "HotSpot memory read", deadline_ms: (DEADLINE * 3).as_millis() }));
        drop(release);
    }

    #[test]
    fn a_jvm_is_read_through_the_guard_and_a_refusal_does_not_mark_it() {
        let value = 0x1122_3344_5566_7788u64;
        let addr = &value as *const u64 as u64;
        let guard = Arc::new(StallGuard::new("HotSpot memory read", DEADLINE, 1));
        let me = GuardedMemory::new(std::process::id(), Arc::clone(&guard));
        assert_eq!(me.read_u64(addr), Ok(value));
        assert_eq!(me.take_new_stall(), None);
        // Another JVM's read stalls and fills the bound: reads of this one are refused while
        // that thread is stuck, and go on once it is released.
        let (release, r) = blocked_read(&guard);
        assert!(matches!(r, Err(Stall::TimedOut { .. })), "{r:?}");
        assert!(me.read_u64(addr).is_err(), "refused at the bound");
        assert_eq!(me.take_new_stall(), None, "a refusal says nothing about this JVM");
        drop(release);
        let started = Instant::now();
        while guard.stuck() > 0 {
            assert!(started.elapsed() < Duration::from_secs(5), "stuck thread never ended");
            thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(me.read_u64(addr), Ok(value));
    }
}
