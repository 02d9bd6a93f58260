//! Every map has a fixed size; the double-buffered ones come as `_0`/`_1` pairs selected by
//! `CONFIG[CONFIG_ACTIVE_BUFFER]` (see `joular_ebpf::BUFFERS`). The per-CPU state types the maps
//! hold, and `count_drop` that every program uses, live here too, so no program module imports another
//! to reach them.

use aya_ebpf::{
    macros::map,
    maps::{Array, HashMap, LruHashMap, PerCpuArray, RingBuf, StackTrace},
};
use joular_ebpf::sampler_cost::SAMPLE_NS_BUCKETS;
use joular_ebpf::{
    blob_cache::BlobCache, epilogue::EPILOGUE_WINDOW_BYTES, prologue::PROLOGUE_WINDOW_BYTES, CodeReport, CpuState,
    DeviceKey, ExitValue, JavaStack, JvmConfig, KsymNames, SampleKey, SampleLog, ThreadCpuKey, ThreadCpuValue,
    BLOB_WINDOW_WORDS, BUFFERS, CODE_REPORT_RING_BYTES, CONFIG_LEN, DROP_KINDS, MAX_DEVICE_KEYS, MAX_JAVA_STACKS,
    MAX_JVMS, MAX_REPORTED, MAX_SAMPLE_KEYS, MAX_STACKS, MAX_TARGETS, MAX_THREAD_CPU,
};

/// Index = `CONFIG_*`. 64-bit values: `CONFIG_TARGETS_GEN` is a 64-bit generation (see
/// `follow::targets_changed`).
#[map]
pub static CONFIG: Array<u64> = Array::with_max_entries(CONFIG_LEN, 0);

/// TGIDs to profile when not in host mode (value unused).
#[map]
pub static TARGETS: HashMap<u32, u8> = HashMap::with_max_entries(MAX_TARGETS, 0);

#[map]
pub static COUNTS_0: HashMap<SampleKey, u64> = HashMap::with_max_entries(MAX_SAMPLE_KEYS, 0);
#[map]
pub static COUNTS_1: HashMap<SampleKey, u64> = HashMap::with_max_entries(MAX_SAMPLE_KEYS, 0);

/// Per CPU, index = buffer: the samples logged without hashing (see `SampleLog`).
#[map]
pub static SAMPLE_LOG: PerCpuArray<SampleLog> = PerCpuArray::with_max_entries(BUFFERS, 0);

#[map]
pub static STACKS_0: StackTrace = StackTrace::with_max_entries(MAX_STACKS, 0);
#[map]
pub static STACKS_1: StackTrace = StackTrace::with_max_entries(MAX_STACKS, 0);

/// Second chance for a stack whose bucket in `STACKS_*` another stack holds (a stack map keeps
/// one stack per hash bucket and refuses the next): the kernel hashes the same way, but only
/// colliding stacks come here, so two rarely meet again. Small main maps thus lose fewer stacks
/// than one big map did, in a fraction of the memory (see `STACK_ID_OVERFLOW`).
#[map]
pub static STACKS_OVERFLOW_0: StackTrace = StackTrace::with_max_entries(MAX_STACKS, 0);
#[map]
pub static STACKS_OVERFLOW_1: StackTrace = StackTrace::with_max_entries(MAX_STACKS, 0);

#[map]
pub static THREAD_CPU_0: HashMap<ThreadCpuKey, ThreadCpuValue> = HashMap::with_max_entries(MAX_THREAD_CPU, 0);
#[map]
pub static THREAD_CPU_1: HashMap<ThreadCpuKey, ThreadCpuValue> = HashMap::with_max_entries(MAX_THREAD_CPU, 0);

#[map]
pub static EXITS_0: HashMap<u32, ExitValue> = HashMap::with_max_entries(MAX_THREAD_CPU, 0);
#[map]
pub static EXITS_1: HashMap<u32, ExitValue> = HashMap::with_max_entries(MAX_THREAD_CPU, 0);

/// Each CPU's accounting state and its time per buffer (see `CpuState`).
#[map]
pub static CPU_STATE: PerCpuArray<CpuState> = PerCpuArray::with_max_entries(1, 0);

/// Cumulative loss counters, index = `DROP_*`.
#[map]
pub static DROPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(DROP_KINDS, 0);

/// JVMs whose user stacks the sampler walks itself (see `walk.rs`), by tgid.
#[map]
pub static JVMS: HashMap<u32, JvmConfig> = HashMap::with_max_entries(MAX_JVMS, 0);

/// Walked JVM stacks, by their 64-bit hash (`SampleKey::java_stack_hash`).
#[map]
pub static JAVA_STACKS_0: HashMap<u64, JavaStack> = HashMap::with_max_entries(MAX_JAVA_STACKS, 0);
#[map]
pub static JAVA_STACKS_1: HashMap<u64, JavaStack> = HashMap::with_max_entries(MAX_JAVA_STACKS, 0);

/// Who walks a JVM stack, the index of its per-CPU walk state (`WALK_STATE`, `JAVA_SCRATCH`,
/// `RECENT_STACKS`, `ROW_CACHE`): the sampler, or a byte counter (`devices.rs`). They need
/// apart states: the byte counters run in the thread's system call with interrupts on, so the
/// sampler's timer interrupt can walk in the middle of their walk, and one state would leave
/// the interrupted walk (and the caches) torn.
/// The ends of one byte-moving system call (`devices.rs`): each end's class (`NO_END` for an
/// end that counts nowhere) and filesystem device.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DeviceEnds {
    pub class: [u32; 2],
    pub dev: [u32; 2],
}

pub const NO_END: u32 = u32::MAX;

/// Per CPU: the ends of the system call being counted, kept in memory across its stack walk
/// (`devices.rs` says why).
#[map]
pub static DEVICE_ENDS: PerCpuArray<DeviceEnds> = PerCpuArray::with_max_entries(1, 0);

pub const WALKER_SAMPLER: u32 = 0;
pub const WALKER_DEVICES: u32 = 1;
pub const WALKERS: u32 = 2;

/// Per CPU and walker: stacks this CPU stored lately (see `walk.rs`).
#[map]
pub static RECENT_STACKS: PerCpuArray<RecentStacks> = PerCpuArray::with_max_entries(WALKERS, 0);

/// Per walker: where a stack is walked before it is stored (too big for the 512-byte eBPF stack).
#[map]
pub static JAVA_SCRATCH: PerCpuArray<JavaStack> = PerCpuArray::with_max_entries(WALKERS, 0);

/// Per walker: the JVM stack walk in progress on this CPU (see `walk.rs`).
#[map]
pub static WALK_STATE: PerCpuArray<WalkState> = PerCpuArray::with_max_entries(WALKERS, 0);

/// Code the sampler met for the first time, for user space to name while the JVM has it
/// (see `report.rs`).
#[map]
pub static NEW_CODE: RingBuf = RingBuf::with_byte_size(CODE_REPORT_RING_BYTES, 0);

/// Reports sent to `NEW_CODE` lately (value unused), so code met again is not sent again.
#[map]
pub static REPORTED: LruHashMap<CodeReport, u8> = LruHashMap::with_max_entries(MAX_REPORTED, 0);

/// Bytes per (thread, call path, class) of the cycle (`--devices`, see `devices.rs`).
#[map]
pub static DEVICE_BYTES_0: HashMap<DeviceKey, u64> = HashMap::with_max_entries(MAX_DEVICE_KEYS, 0);
#[map]
pub static DEVICE_BYTES_1: HashMap<DeviceKey, u64> = HashMap::with_max_entries(MAX_DEVICE_KEYS, 0);

/// `--sampler-cost`: samples of profiled threads by the sampler's time on them, index =
/// bucket (see `joular_ebpf::sampler_cost`); written only when user space turned the
/// timing on at load.
#[map]
pub static SAMPLE_NS: PerCpuArray<u64> = PerCpuArray::with_max_entries(SAMPLE_NS_BUCKETS, 0);

/// Where `joular_ksym` writes the names user space asked for (see `ksym.rs`).
#[map]
pub static KSYM_NAMES: Array<KsymNames> = Array::with_max_entries(1, 0);

/// Counts one loss of kind `kind` (a `DROP_*`) in `DROPS`.
#[inline(always)]
pub fn count_drop(kind: u32) {
    if let Some(n) = DROPS.get_ptr_mut(kind) {
        // SAFETY: per-CPU slot, only this CPU writes it.
        unsafe { *n += 1 };
    }
}

/// Recently stored stack hashes each CPU remembers (see `RecentStacks`).
pub const RECENT_STACK_SLOTS: usize = 64;

/// Fingerprints of the code each CPU reported lately (`WalkState::reported`, see `report.rs`).
pub const REPORTED_SLOTS: usize = 256;

/// Words of the sampled thread's stack one read brings in: the frames of the callers
/// below the Java code (libjvm, libc) are adjacent, so most of their steps are served from
/// the last read instead of a read of their own. 512 bytes: the reads are most of a walk's
/// cost, and 256 left libjvm's larger frames a read each (3.6 against 5.5-6.3 us/sample on
/// NativeUnwind; 1 KiB measured no better).
pub const STACK_WINDOW_WORDS: usize = 64;

/// Per CPU: (hash, tag) of stacks stored lately, by `hash % RECENT_STACK_SLOTS`.
#[repr(C)]
pub struct RecentStacks {
    pub slots: [[u64; 2]; RECENT_STACK_SLOTS],
}

/// What the walk needs of a blob.
#[derive(Copy, Clone)]
#[repr(C)]
pub struct BlobFacts {
    pub code_begin: u64,
    /// Frame size in words (0: the blob has none, as stubs).
    pub frame_words: u32,
    /// `_frame_complete_offset` (-1 as u32 for blobs that never set up a frame).
    pub complete: u32,
    pub nmethod: bool,
    pub compile_id: u32,
    /// How a leaf in this blob is stepped: one of `joular_ebpf::blob_cache::LEAF_*`.
    pub leaf_rule: u32,
}

/// Per CPU: the walk in progress (`bpf_loop` calls the step with no other state).
#[repr(C)]
pub struct WalkState {
    pub cfg: JvmConfig,
    pub pc: u64,
    pub sp: u64,
    pub fp: u64,
    /// r13 at the sample, for the leaf frame.
    pub live_bcp: u64,
    /// rax and r11 at the sample, for the leaf frame: where a HotSpot adapter keeps its
    /// return address and its caller's sp while it realigns the stack (`leaf::adapter_step`).
    pub leaf_rax: u64,
    pub leaf_r11: u64,
    /// r15 at the sample, for the leaf frame (`leaf::poll_entry_step`).
    pub leaf_r15: u64,
    /// The pc a signal interrupted, as the step out of its signal frame found it (0: none):
    /// where that frame was, not a return address.
    pub interrupted_pc: u64,
    pub hash: u64,
    pub len: u32,
    pub flags: u32,
    /// The JVM walked.
    pub tgid: u32,
    /// The last `JVMS` answer (see `load_jvm`): for `cfg_tgid`, read under
    /// `CONFIG_TARGETS_GEN` = `cfg_generation`; `cfg` holds its config when `cfg_is_jvm`.
    /// Next to the cursor, so a sample's first look at the state touches the line the walk
    /// uses anyway.
    pub cfg_is_jvm: u32,
    pub cfg_generation: u64,
    pub cfg_tgid: u32,
    /// Which walker's state this is (`WALKER_*`), for the maps the step reads by walker.
    pub walker: u32,
    /// The code heap block the current frame's pc is in, as read.
    pub blob: [u64; BLOB_WINDOW_WORDS],
    /// What `joular_blob_facts` read of that block's blob.
    pub facts: BlobFacts,
    /// `STACK_WINDOW_WORDS` of the thread's stack read at `stack_base` during this walk
    /// (0: none yet).
    pub stack_base: u64,
    pub stack: [u64; STACK_WINDOW_WORDS],
    /// The instruction bytes before a compiled leaf's frame-complete offset, when the leaf
    /// is in its prologue (see `joular_ebpf::prologue`).
    pub prologue: [u8; PROLOGUE_WINDOW_BYTES],
    /// The instruction bytes around an interrupted compiled leaf's pc, read to tell whether
    /// it is in its epilogue (see `joular_ebpf::epilogue`).
    pub epilogue: [u8; EPILOGUE_WINDOW_BYTES],
    /// Kept from sample to sample (see `joular_ebpf::blob_cache`).
    pub cache: BlobCache,
    /// Fingerprints of reports this CPU sent or found sent, by `fingerprint % REPORTED_SLOTS`
    /// (see `report.rs`): most frames meet code met moments before, at no map lookup.
    pub reported: [u64; REPORTED_SLOTS],
    /// The report being sent (see `report.rs`).
    pub report: CodeReport,
}
