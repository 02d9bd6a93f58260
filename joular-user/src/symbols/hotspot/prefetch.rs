//! A cycle's frames of one JVM, resolved in one job on the guarded read thread
//! ([`HotspotProcess::prefetch`]), into the cycle's caches the symbolizer then reads.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jvm_symbols::hotspot::PcRole;

use super::{Code, CodeOutcome, HotspotProcess};
use crate::symbols::intern::{FrameId, Interner};
use crate::target_read::stall_guard::{self, GuardedMemory, Stall};
use crate::urgency::urgent;

/// One frame of a cycle's batch ([`HotspotProcess::prefetch`]).
#[derive(Debug, Clone, Copy)]
pub enum Wanted {
    /// A pc; `looks_like_code` as for [`HotspotProcess::code`].
    Pc {
        pc: u64,
        looks_like_code: bool,
        role: PcRole,
    },
    Compiled {
        pc: u64,
        compile_id: u32,
        role: PcRole,
    },
    Interpreted {
        method: u64,
        bcp: u64,
    },
}

/// The most a cycle's batch of one JVM is waited for beyond the per-read deadline: its read
/// budget stops it well before (at most 150 ms a cycle); a batch past this is blocked.
pub(super) const MAX_BATCH_READ_TIME: Duration = Duration::from_secs(1);

impl HotspotProcess<GuardedMemory> {
    /// Resolves this cycle's frames of the JVM in one job on the guarded read thread (one hop
    /// for the cycle, not one per read: a hop costs a few microseconds of our CPU, and a busy
    /// JVM's cycle reads its memory hundreds of times), into the cycle's caches, where
    /// [`HotspotProcess::code`] and the others then find them. Returns the JVM and how many
    /// of the frames stayed unknown JIT code; or the stall, when the job blocked past its
    /// deadline (the per-read one plus the cycle's read budget): the JVM is then left with
    /// its thread, and read no more.
    pub fn prefetch(h: Box<Self>, interner: &mut Interner, wanted: Vec<Wanted>) -> Result<(Box<Self>, u64), Stall> {
        let deadline = stall_guard::hotspot_reads().deadline() + h.read_time.min(MAX_BATCH_READ_TIME);
        let resolve = move |h: &mut Self| {
            let mut scratch = Interner::default();
            let mut unknown = 0;
            for w in wanted {
                let outcome = match w {
                    Wanted::Pc { pc, looks_like_code, role } => h.code(&mut scratch, pc, looks_like_code, role).1,
                    Wanted::Compiled { pc, compile_id, role } => h.compiled(&mut scratch, pc, compile_id, role).1,
                    Wanted::Interpreted { method, bcp } => {
                        h.interpreted(&mut scratch, method, bcp);
                        CodeOutcome::default()
                    }
                };
                unknown += u64::from(outcome.unknown);
            }
            (scratch, unknown)
        };
        match Self::in_one_job(h, deadline, resolve)? {
            (mut h, Some((scratch, unknown))) => {
                h.adopt(&scratch, interner);
                Ok((h, unknown))
            }
            // Not run: its frames are read one by one.
            (h, None) => Ok((h, 0)),
        }
    }

    /// Between cycles, while the kernel has no walk configuration for this JVM: re-reads the
    /// code cache, where the interpreter and the call stub appear as the VM starts: in one job
    /// (a hop per read would cost more than the reads), [`urgent`]ly, as the JVM's first Java
    /// code waits on it.
    pub fn refresh_while_starting(h: Box<Self>) -> Result<Box<Self>, Stall> {
        if h.published.is_some() || h.stopped() {
            return Ok(h);
        }
        let deadline = stall_guard::hotspot_reads().deadline() + MAX_BATCH_READ_TIME;
        let (h, _) = Self::in_one_job(h, deadline, |h| urgent(|| h.guarded(|jvm| jvm.refresh_code_cache())))?;
        Ok(h)
    }

    /// At a cycle's start ([`Self::start_cycle`]), its reads ([`Self::refresh_at_cycle_start`])
    /// in one job: they are some twenty small reads, each a hop to the read thread and back
    /// when made from the worker (half the worker's wake-ups in a steady run). A job that could
    /// not run leaves them to be made one by one.
    pub fn refresh_in_job(h: Box<Self>) -> Result<(Box<Self>, ()), Stall> {
        if h.stopped() {
            return Ok((h, ()));
        }
        let deadline = stall_guard::hotspot_reads().deadline() + MAX_BATCH_READ_TIME;
        match Self::in_one_job(h, deadline, |h| h.refresh_at_cycle_start())? {
            (h, Some(())) => Ok((h, ())),
            (mut h, None) => {
                h.refresh_at_cycle_start();
                Ok((h, ()))
            }
        }
    }

    /// Runs `f` on the JVM in one job on the guarded read thread, within `deadline`. Returns
    /// the JVM with `f`'s result, or without it when the job could not run (other JVMs' reads
    /// are stuck, or no thread); or the stall, when the job blocked past its deadline: the JVM
    /// is then left with its thread, and read no more.
    pub(super) fn in_one_job<T: Send + 'static>(
        h: Box<Self>,
        deadline: Duration,
        f: impl FnOnce(&mut Self) -> T + Send + 'static,
    ) -> Result<(Box<Self>, Option<T>), Stall> {
        // Shared so that a job refused before it ran gives the JVM back.
        let slot = Arc::new(Mutex::new(Some(h)));
        let job_slot = Arc::clone(&slot);
        let run = stall_guard::hotspot_reads().run_within(deadline, move || {
            let mut h = job_slot.lock().unwrap_or_else(|e| e.into_inner()).take()?;
            let out = f(&mut h);
            Some((h, out))
        });
        match run {
            Ok(Some((h, out))) => Ok((h, Some(out))),
            Err(stall @ Stall::TimedOut { .. }) => Err(stall),
            other => match slot.lock().unwrap_or_else(|e| e.into_inner()).take() {
                Some(h) => Ok((h, None)),
                None => Err(other.err().unwrap_or(Stall::NoThread {
                    what: "HotSpot memory read",
                    reason: "the batch lost its JVM".into(),
                })),
            },
        }
    }

    /// Moves the cycle's caches, named in `scratch`, to `interner`'s ids.
    fn adopt(&mut self, scratch: &Interner, interner: &mut Interner) {
        let mut ids: HashMap<FrameId, FrameId> = HashMap::new();
        let mut move_id = |id: FrameId| *ids.entry(id).or_insert_with(|| interner.intern(scratch.frame_of(id)));
        for code in self.code.values_mut() {
            if let Code::Frames(frames) = code {
                *frames = frames.iter().map(|&id| move_id(id)).collect();
            }
        }
        for id in self.interpreted.values_mut() {
            *id = move_id(*id);
        }
    }
}
