//! Types shared between the eBPF programs and user space. Every type is `#[repr(C)]` with
//! explicit padding so both sides agree on the layout byte for byte.
#![no_std]

pub mod blob_cache;
pub mod epilogue;
pub mod poll;
pub mod prologue;
pub mod sampler_cost;
pub mod unwind;
pub mod words;

pub use poll::{PollEntry, MAX_POLL_ENTRIES};

/// Maps come in two copies (buffer 0 and 1). The kernel writes the buffer named by
/// `CONFIG[CONFIG_ACTIVE_BUFFER]`; user space flips it at a cycle's end and drains the other
/// one while the next cycle fills, so a drain always sees a complete cycle.
pub const BUFFERS: u32 = 2;

/// Indexes into the `CONFIG` array map.
/// `generation << 1 | buffer`: the buffer the kernel writes, and how many times user space
/// flipped it. One value, written at once, so a program never sees a new buffer with an
/// old generation (per-CPU caches of what a buffer holds are tagged with it).
pub const CONFIG_ACTIVE_BUFFER: u32 = 0;
/// 1 = profile every process (host mode), 0 = only TGIDs in `TARGETS`.
pub const CONFIG_ALL_PROCESSES: u32 = 1;
/// 1 = a process forked by a target becomes a target (`record`, `--follow-children`).
pub const CONFIG_FOLLOW_CHILDREN: u32 = 2;
/// The state of `TARGETS` and `JVMS`: whoever changes either (user space adding targets and
/// JVMs, the kernel following children and forgetting ended processes) stores a value never
/// stored before right after the change, `count << 16 | writer` (`writer`: the CPU, or
/// `TARGETS_WRITER_USER`). Plain stores suffice: whichever store lands last, the value differs
/// from every one before it. Per-CPU caches of `TARGETS` answers (`CpuState::targets`) and of
/// the last `JVMS` answer (the sampler's walk state) hold only answers read under the current
/// value.
pub const CONFIG_TARGETS_GEN: u32 = 3;
/// Where a process's start time is in the kernel's `task_struct`, from its BTF:
/// `group_leader`'s offset in the high 32 bits, `start_boottime`'s in the low ones (0: unknown,
/// every process then starts at tick 0 and only exit records tell incarnations of a PID apart).
pub const CONFIG_TASK_OFFSETS: u32 = 4;
/// Stored anew (like `CONFIG_TARGETS_GEN`, from the same per-CPU count) each time a profiled
/// process ends: a thread slot checked under an older value may belong to a process whose PID
/// has since been reused, and is checked again (`ThreadSlot::checked_gen`).
pub const CONFIG_EXITS_GEN: u32 = 5;
/// Which byte counters run (`--devices`): `DEVICES_NETWORK` | `DEVICES_DISK` (0: none; the
/// program is then not even attached).
pub const CONFIG_DEVICES: u32 = 6;
pub const DEVICES_NETWORK: u64 = 1;
pub const DEVICES_DISK: u64 = 2;
/// Where the byte counters find a socket's family and addresses, from the kernel's BTF (see
/// `SocketOffsets`; 0: unknown, every socket is then a device's).
pub const CONFIG_SOCKET_OFFSETS: u32 = 7;
/// The IPv6 address offsets of `struct sock_common` (see `SocketOffsets::v6_value`).
pub const CONFIG_SOCKET_V6_OFFSETS: u32 = 8;
/// Where the byte counters find a file descriptor's file and its mode (see `FileOffsets`; 0:
/// unknown, no byte is counted).
pub const CONFIG_FD_OFFSETS: u32 = 9;
pub const CONFIG_FILE_OFFSETS: u32 = 10;
/// Where the byte counters find a regular file's filesystem type and device
/// (`FileOffsets::super_value`; 0: unknown, every regular file's bytes count as the disk's, on
/// no known device).
pub const CONFIG_SUPER_OFFSETS: u32 = 11;
/// Where the byte counters find the interface a socket's route goes through (see
/// `NetDevOffsets`; 0: unknown, every socket's bytes are on no known interface).
pub const CONFIG_NET_DEV_OFFSETS: u32 = 12;
/// `NetDevOffsets::netns_value`: where a `struct net` keeps its namespace's inode number, and
/// the profiler's own network namespace's (an interface index means ours only there).
pub const CONFIG_NETNS: u32 = 13;
pub const CONFIG_LEN: u32 = 14;
/// `CONFIG_TARGETS_GEN`'s writer field for user space (above any CPU number).
pub const TARGETS_WRITER_USER: u64 = 0xffff;

/// Sample-count hash map entries per buffer.
pub const MAX_SAMPLE_KEYS: u32 = 32 * 1024;
/// Stack-trace map entries per buffer, as declared; the loader sizes the maps for the run
/// (`STACKS_*` and their `STACKS_OVERFLOW_*`, see joular-user's `ebpf/sizing.rs`).
pub const MAX_STACKS: u32 = 32 * 1024;
/// Set in a stack id that lives in `STACKS_OVERFLOW_*`: a stack whose hash bucket in
/// `STACKS_*` held another stack (stack ids are below the map size, far under this bit).
pub const STACK_ID_OVERFLOW: i32 = 1 << 30;
/// On-CPU (tid, cpu) entries per buffer.
pub const MAX_THREAD_CPU: u32 = 32 * 1024;
pub const MAX_TARGETS: u32 = 4096;
/// Frames the kernel keeps per stack (the kernel's own limit is 127).
pub const MAX_STACK_DEPTH: usize = 127;

/// Causes of loss, as indexes into the per-CPU `DROPS` array. Each is a count of events lost
/// (or degraded) since load; user space reports per-cycle deltas under `DROP_NAMES`.
pub const DROP_SAMPLES_MAP_FULL: u32 = 0;
pub const DROP_USTACK_COLLISION: u32 = 1;
pub const DROP_USTACK_FAILED: u32 = 2;
pub const DROP_KSTACK_COLLISION: u32 = 3;
pub const DROP_KSTACK_FAILED: u32 = 4;
pub const DROP_THREAD_CPU_MAP_FULL: u32 = 5;
pub const DROP_EXITS_MAP_FULL: u32 = 6;
/// A child of a target that could not be followed (`TARGETS` full).
pub const DROP_TARGETS_MAP_FULL: u32 = 7;
/// A walked JVM stack that did not fit in `JAVA_STACKS_*` (the sample is kept, without its
/// user stack).
pub const DROP_JAVA_STACK_MAP_FULL: u32 = 8;
/// A walked JVM stack whose hash names a different stored stack (the sample is kept,
/// without its user stack).
pub const DROP_JAVA_STACK_COLLISION: u32 = 9;
/// A JVM stack walk stopped at a frame it could not read (the frames before it are kept;
/// the stack is flagged `JAVA_STACK_CUT`).
pub const DROP_JAVA_WALK_READ_FAILED: u32 = 10;
/// A JVM stack deeper than `MAX_JAVA_FRAMES` (the innermost frames are kept; the stack is
/// flagged `JAVA_STACK_TRUNCATED`).
pub const DROP_JAVA_WALK_TRUNCATED: u32 = 11;
/// A JVM stack walk (HotSpot unwinder) stopped at a code-cache pc that no live code blob
/// holds (freed code, a heap the published bounds miss, or a segment map too deep).
pub const DROP_JAVA_WALK_NO_BLOB: u32 = 12;
/// A JVM stack walk stopped at a leaf interrupted before its frame was set up (a compiled
/// method's or a stub's prologue): its callers are not where the frame size says.
pub const DROP_JAVA_WALK_PROLOGUE: u32 = 13;
/// A JVM stack walk stopped at a return address that no call instruction precedes (a
/// frame stepped through garbage): the frame is dropped, never named.
pub const DROP_JAVA_WALK_BAD_RETURN: u32 = 14;
/// A native pc in a file whose unwind rows give no rule for it (a gap or a rule too complex
/// to keep): the walk stops there, flagged `JAVA_STACK_CUT`.
pub const DROP_NATIVE_NO_ROW: u32 = 15;
/// A native pc of a walked process whose unwind table is not loaded yet: stepped by its frame
/// pointer, as before rows existed.
pub const DROP_NATIVE_NO_TABLE: u32 = 16;
/// A native pc in none of the mappings of its process's unwind table (anonymous code, a file
/// without call-frame information or over the limit, or a step through garbage): the walk
/// stops there, flagged `JAVA_STACK_CUT`.
pub const DROP_NATIVE_UNMAPPED: u32 = 17;
/// Code the sampler met for the first time that it could not report to user space
/// (`NEW_CODE` full): it is reported again when next met; until then, if the JVM exits or the
/// nmethod is freed before the cycle is named, its frames may stay unnamed.
pub const DROP_CODE_REPORT_LOST: u32 = 18;
/// A byte count found `DEVICE_BYTES_*` full: those bytes are lost (`--devices`).
pub const DROP_DEVICE_BYTES_MAP_FULL: u32 = 19;
pub const DROP_KINDS: u32 = 20;
pub const DROP_NAMES: [&str; DROP_KINDS as usize] = [
    "samples_map_full",
    "user_stack_collision",
    "user_stack_failed",
    "kernel_stack_collision",
    "kernel_stack_failed",
    "thread_cpu_map_full",
    "exits_map_full",
    "targets_map_full",
    "java_stack_map_full",
    "java_stack_collision",
    "java_walk_read_failed",
    "java_walk_truncated",
    "java_walk_no_blob",
    "java_walk_prologue",
    "java_walk_bad_return",
    "native_no_row",
    "native_no_table",
    "native_unmapped",
    "code_report_lost",
    "device_bytes_map_full",
];

/// JVM processes whose user stacks the sampler walks itself (`JVMS` entries).
pub const MAX_JVMS: u32 = 1024;
/// Frames a walked JVM stack keeps, innermost first.
pub const MAX_JAVA_FRAMES: usize = 128;
/// Walked stacks per buffer. A cycle holds at most one entry per distinct stack, and at
/// 100 Hz a 64-CPU host takes 6,400 samples a second.
pub const MAX_JAVA_STACKS: u32 = 8192;

/// Code heaps a `JvmConfig` describes (HotSpot has at most three: non-nmethods, profiled,
/// non-profiled; one without `-XX:+SegmentedCodeCache`).
pub const MAX_CODE_HEAPS: usize = 4;
/// Words read at a code heap block's start: its `HeapBlock` header and the `CodeBlob`
/// fields the HotSpot unwinder needs (`BlobLayout` offsets all fall in this window).
pub const BLOB_WINDOW_WORDS: usize = 16;
/// Segment-map hops the kernel takes back to a block's start: each hop covers up to 254
/// segments (of 128 bytes on x86_64), so 16 hops reach 500 KiB into a blob.
pub const MAX_SEGMAP_HOPS: u32 = 16;

/// `JvmConfig::unwind`: how compiled frames are stepped. `JVM_UNWIND_FP`: by their frame
/// pointer (the JVM runs with `-XX:+PreserveFramePointer`). `JVM_UNWIND_HOTSPOT`: by the
/// frame size of the code blob that holds the pc, found through the code heap's segment map.
pub const JVM_UNWIND_FP: u32 = 0;
pub const JVM_UNWIND_HOTSPOT: u32 = 1;

/// One code heap: `[low, high)` of its committed code and its segment map (one byte per
/// segment of `1 << log2_segment_bytes` bytes; see `jvm_symbols::hotspot::codecache`).
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CodeHeapConfig {
    pub low: u64,
    pub high: u64,
    pub segmap: u64,
    pub log2_segment_bytes: u32,
    pub _pad: u32,
}

/// Where the unwinder finds a blob's fields, in bytes from the start of its code heap
/// block (the `HeapBlock` header, then the `CodeBlob`), from the JVM's own tables. Every
/// field lies inside `BLOB_WINDOW_WORDS` words and inside one aligned word.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct BlobLayout {
    /// `HeapBlock::Header::_used` (1 byte).
    pub used: u32,
    /// `sizeof(HeapBlock)`: where the blob starts.
    pub blob: u32,
    /// `CodeBlob::_size` (4 bytes), `_frame_size` (4 bytes, in words),
    /// `_frame_complete_offset` (`frame_complete_bytes` wide, signed), the code start
    /// (`code_begin_bytes` wide), `_name` (a pointer).
    pub size: u32,
    pub frame_size: u32,
    pub frame_complete: u32,
    pub code_begin: u32,
    pub name: u32,
    /// `nmethod::_compile_id` (4 bytes), from the blob start (past the window).
    pub compile_id: u32,
    /// `nmethod::_method` (`CompiledMethod::_method` before JDK 23; a `Method*`), from the
    /// blob start (past the window).
    pub method: u32,
    /// 8: the code start is the pointer `CodeBlob::_code_begin` (JDK 9 to 22); 4: it is
    /// `CodeBlob::_code_offset`, in bytes from the blob (JDK 23+).
    pub code_begin_bytes: u32,
    /// 4 (an int, JDK 9 to 22) or 2 (an int16_t, JDK 23+).
    pub frame_complete_bytes: u32,
    pub _pad: u32,
}

/// What the sampler needs to walk one JVM's stacks, published by user space (keyed by
/// tgid in `JVMS`) once it has read the JVM's HotSpot tables. Code bounds are `[start, end)`.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct JvmConfig {
    /// The template interpreter's code: a frame whose pc is here is an interpreted frame.
    pub interpreter_start: u64,
    pub interpreter_end: u64,
    /// The code cache (all code heaps): a pc here is JIT code or a stub.
    pub code_start: u64,
    pub code_end: u64,
    /// Where an interpreted frame keeps its `Method*` and bcp, in 8-byte words from fp
    /// (x86_64 JDK 9+: -3 and -8). Both must lie in `INTERPRETER_WINDOW_WORDS`.
    pub method_slot: i32,
    pub bcp_slot: i32,
    /// Where it keeps its caller's sp before arguments were pushed (-1), the sp a
    /// compiled caller's frame size is counted from.
    pub sender_sp_slot: i32,
    /// `JVM_UNWIND_*`.
    pub unwind: u32,
    /// Heaps in use in `heaps` (the HotSpot unwinder only).
    pub heap_count: u32,
    pub _pad: u32,
    pub heaps: [CodeHeapConfig; MAX_CODE_HEAPS],
    pub blob: BlobLayout,
    /// `StubRoutines::_call_stub_return_address` (0: unknown): a caller frame with this pc is
    /// an entry frame, stepped by its frame pointer with no lookup and no call check.
    pub call_stub_return: u64,
    /// The loop-poll handler blobs' entries, before their frames say where they return
    /// (`jvm_symbols::hotspot::poll_blobs`; `start` 0: none).
    pub poll_entries: [PollEntry; MAX_POLL_ENTRIES],
}

impl JvmConfig {
    /// Whether `pc` is in the template interpreter's code.
    #[inline(always)]
    pub fn in_interpreter(&self, pc: u64) -> bool {
        pc >= self.interpreter_start && pc < self.interpreter_end
    }
}

/// An interpreted frame's slots are read in one window of this many words below fp, plus
/// the saved fp and return address above it.
pub const INTERPRETER_WINDOW_WORDS: i32 = 8;

/// One frame of a walked stack: two words, so frames of new kinds can carry more without
/// changing the format. The kind is in the top byte of `aux` (`FRAME_*`), the rest is
/// kind-specific:
/// - `FRAME_NATIVE`: `addr` = pc outside the code cache (aux otherwise 0);
/// - `FRAME_CODE`: `addr` = pc in the code cache (JIT code or a stub); when
///   `FRAME_CODE_COMPILE_ID` is set, the low 32 bits are the `nmethod::_compile_id` the
///   unwinder read from the blob (user space names the frame only if the blob at that pc
///   still has it: freed and reused code is never misnamed);
/// - `FRAME_INTERPRETED`: `addr` = `Method*`, low bits = bcp.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct JavaFrame {
    pub addr: u64,
    pub aux: u64,
}

pub const FRAME_KIND_SHIFT: u32 = 56;
pub const FRAME_VALUE_MASK: u64 = (1 << FRAME_KIND_SHIFT) - 1;
pub const FRAME_NATIVE: u64 = 0;
pub const FRAME_CODE: u64 = 1;
pub const FRAME_INTERPRETED: u64 = 2;
pub const FRAME_CODE_COMPILE_ID: u64 = 1 << 32;

/// The walk stopped at `MAX_JAVA_FRAMES` with more frames below.
pub const JAVA_STACK_TRUNCATED: u32 = 1;
/// The walk stopped before the thread's first frame: a read failed, or a frame pointer
/// was not above the previous one (code without frame pointers).
pub const JAVA_STACK_CUT: u32 = 2;
/// The HotSpot unwinder stepped at least one compiled frame by its code blob's frame size.
pub const JAVA_STACK_HOTSPOT: u32 = 4;
/// A cut stack's cause, in `JavaStack::flags` bits 16..24: the `DROP_*` counted for the cut,
/// or `CUT_CAUSE_FRAME_POINTER`.
pub const JAVA_STACK_CAUSE_SHIFT: u32 = 16;
pub const JAVA_STACK_CAUSE_MASK: u32 = 0xff;
/// A frame pointer that is no frame's (0 below sp, unaligned, too far): code that keeps none.
pub const CUT_CAUSE_FRAME_POINTER: u32 = 0xff;

/// A user stack walked by the sampler, stored once per cycle under the 64-bit hash of its
/// frames below the leaf: the samples of a hot loop, which differ only in their leaf pc or
/// bcp, share one stored stack. Each sample's own leaf is in its `SampleKey`; the stored
/// `frames[0]` is the leaf of whichever sample stored the stack first.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct JavaStack {
    /// Frames used in `frames` (the leaf slot included), innermost first.
    pub len: u32,
    /// `JAVA_STACK_*` bits.
    pub flags: u32,
    pub frames: [JavaFrame; MAX_JAVA_FRAMES],
}

/// `CodeReport::kind`: an nmethod (`compile_id`, its `method`), met in a compiled frame.
pub const REPORT_NMETHOD: u32 = 1;
/// `CodeReport::kind`: a `Method*` met in an interpreted frame.
pub const REPORT_METHOD: u32 = 2;
/// `CodeReport::kind`: a pc (in `method`) met in a blob that is no nmethod: a stub, adapter or
/// vtable chunk (HotSpot never frees those; named once, their pcs are named after the JVM
/// exits).
pub const REPORT_STUB: u32 = 3;
/// Reports remembered as sent (`REPORTED`, an LRU map): a method met again is not reported
/// again while it is there.
pub const MAX_REPORTED: u32 = 32 * 1024;
/// Bytes of the `NEW_CODE` ring buffer: 2,048 reports of 32 bytes (each with its 8-byte
/// header) between two reads of user space, which reads it every few tens of milliseconds.
pub const CODE_REPORT_RING_BYTES: u32 = 64 * 1024;

/// Code of a walked JVM the sampler met for the first time, sent to user space as it meets it
/// (`NEW_CODE`): what names the frame later, read while the JVM still has it. A compiled frame
/// carries its pc and compile id, an interpreted one its `Method*`; by the end of the cycle the
/// nmethod may be freed (the JIT replaces and deoptimizes code all through a JVM's start) or the
/// JVM gone (its last cycle), and neither can be read any more. The nmethod's `Method*`
/// outlives it, and user space names both kinds from here within milliseconds of the sample.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CodeReport {
    /// Which JVM: its `JvmConfig::interpreter_start` (a JVM that reuses a pid has another).
    pub jvm: u64,
    /// The `Method*` (`REPORT_STUB`: the pc).
    pub method: u64,
    pub tgid: u32,
    /// `REPORT_*`.
    pub kind: u32,
    /// `REPORT_NMETHOD`: the nmethod's compile id (0 otherwise).
    pub compile_id: u32,
    pub _pad: u32,
}

/// A process's start time as `/proc/<pid>/stat` field 22 gives it (`starttime`, clock ticks
/// since boot, `USER_HZ` = 100): with the PID, the process's identity (a recycled PID has
/// another start).
pub const NS_PER_START_TICK: u64 = 10_000_000;

/// Key of the in-kernel sample aggregation: one count per distinct
/// (thread, cpu, user stack, kernel stack, thread name). A stack id below 0 means "no stack".
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct SampleKey {
    pub tgid: u32,
    pub tid: u32,
    pub cpu: u32,
    pub user_stack_id: i32,
    pub kernel_stack_id: i32,
    /// The process's start tick (see `NS_PER_START_TICK`).
    pub start_ticks: u32,
    /// Hash of the walked user stack in `JAVA_STACKS_*` (threads of JVMs in `JVMS`); 0
    /// when the user stack is `user_stack_id`'s instead.
    pub java_stack_hash: u64,
    /// The walked stack's leaf frame (the stored stack's own `frames[0]` is another
    /// sample's).
    pub java_leaf: JavaFrame,
    /// The thread's name when it was sampled: a thread that renames itself, or ends before
    /// user space reads its name, is reported as it was when it ran.
    pub comm: [u8; 16],
}

/// Samples each CPU can log per buffer in `SAMPLE_LOG` before the sampler falls back to
/// the `COUNTS_*` hash maps (a per-CPU value is at most 32 KiB: 500 keys of 64 bytes).
pub const SAMPLE_LOG_SLOTS: usize = 500;

/// One CPU's samples of one buffer, appended in order: an append is a per-CPU array write,
/// where a `COUNTS_*` update hashes a 48-byte key and inserts into a shared map. User space
/// aggregates the log with the `COUNTS_*` entries. The kernel empties a log when it first
/// writes it with a new `CONFIG_ACTIVE_BUFFER` tag, so user space never clears it: a log
/// whose `tag` is not the drained buffer's holds an older cycle (already drained).
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct SampleLog {
    pub tag: u32,
    /// Entries used in `keys`.
    pub len: u32,
    pub keys: [SampleKey; SAMPLE_LOG_SLOTS],
}

/// Key of the on-CPU accounting map. A thread of a process whose PID was reused within the
/// cycle is another key (its process's start tick differs).
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct ThreadCpuKey {
    pub tid: u32,
    pub cpu: u32,
    pub start_ticks: u32,
    pub _pad: u32,
}

/// On-CPU time of one thread on one CPU in one buffer. `comm` is captured when the entry is
/// made, so threads that exit before user space reads /proc still have a name.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct ThreadCpuValue {
    pub on_cpu_ns: u64,
    pub tgid: u32,
    pub _pad: u32,
    pub comm: [u8; 16],
}

/// Thread slots each CPU has per buffer (`CpuState::threads`): pairs, a power of two of them.
pub const THREAD_SLOTS: usize = 32;
// One bit per slot in `CpuState::unchecked`.
const _: () = assert!(THREAD_SLOTS <= 32);
/// `TARGETS` answers each CPU keeps (`CpuState::targets`), a power of two.
pub const TARGET_CACHE: usize = 8;

/// A thread's on-CPU time on one CPU in one buffer, not yet added to `THREAD_CPU_*`. A CPU
/// charges a thread in one of the two slots at `2 * (tid % (THREAD_SLOTS / 2))` with a plain
/// add, and moves a thread's time to the hash map only when its slot is needed for another
/// thread (or its time would pass `u32::MAX` ns); user space adds the slots of the drained
/// buffer to its `THREAD_CPU_*` entries. 32 bytes: a context switch touches one.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadSlot {
    /// `tgid << 32 | tid`; 0 = empty.
    pub pid_tgid: u64,
    pub on_cpu_ns: u32,
    /// Its process's start tick, read when it took the slot and checked again when it next
    /// runs after any process ended (`CpuState::unchecked`): a thread of a new process with
    /// the same PID and TID never adds to a dead one's time.
    pub start_ticks: u32,
    /// The thread's name when it took the slot.
    pub comm: [u8; 16],
}

/// One CPU's time in one buffer. Written only by that CPU, which resets it and the buffer's
/// thread slots (like `SampleLog`) when it first writes them under a new `CONFIG_ACTIVE_BUFFER`
/// tag, so user space never clears them: with another `tag` than the drained buffer's, they
/// hold an older cycle, already drained.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub tag: u32,
    pub _pad: u32,
    pub busy_ns: u64,
    pub idle_ns: u64,
}

/// A per-CPU cache entry of `TARGETS`: whether `tgid` was in it when `CONFIG_TARGETS_GEN` was
/// `generation`.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default)]
pub struct TargetAnswer {
    pub generation: u64,
    pub tgid: u32,
    pub targeted: u32,
}

/// Per-CPU scheduler state (`CPU_STATE`): everything a context switch reads and writes, what
/// each switch touches first.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default)]
pub struct CpuState {
    /// When the running task's slice was last accounted.
    pub last_ns: u64,
    /// Index = buffer.
    pub times: [CpuTimes; BUFFERS as usize],
    /// Recent `TARGETS` answers, at `tgid % TARGET_CACHE`.
    pub targets: [TargetAnswer; TARGET_CACHE],
    /// Changes this CPU made to `TARGETS` and processes it saw end (the count in
    /// `CONFIG_TARGETS_GEN` and `CONFIG_EXITS_GEN`).
    pub targets_changes: u64,
    /// The `CONFIG_EXITS_GEN` value `unchecked` was last set under.
    pub exits_seen: u64,
    /// Index = buffer; bit i: slot i's start tick must be checked again before it adds time
    /// (a process ended since it was read, and the slot's PID may now name another process).
    pub unchecked: [u32; BUFFERS as usize],
    /// Index = buffer; valid under `times[buffer].tag`.
    pub threads: [[ThreadSlot; THREAD_SLOTS]; BUFFERS as usize],
}

/// A thread that exited, recorded by sched_process_exit so user space can name it and knows
/// to forget it.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct ExitValue {
    pub tgid: u32,
    /// 1 when the whole process ended with this thread.
    pub group_dead: u32,
    pub exit_ns: u64,
    pub comm: [u8; 16],
    /// Its process's start tick: which process with this PID ended.
    pub start_ticks: u32,
    pub _pad: u32,
}

/// Kernel addresses `joular_ksym` names per run: the raw tracepoint test-run context holds
/// 12 `u64` arguments, the count and the addresses.
pub const KSYM_BATCH: usize = 11;
/// Longest name kept (NUL included); a longer one is cut, which `len` shows.
pub const KSYM_NAME_BYTES: usize = 128;

/// What one `joular_ksym` run wrote: for each address, the `%ps` text (the kernel's
/// `symbol [module]`, or `0x<address>` when no symbol covers it) and `bpf_snprintf`'s result
/// (the text's length with its NUL, or a negative error).
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct KsymNames {
    pub len: [i64; KSYM_BATCH],
    pub names: [[u8; KSYM_NAME_BYTES]; KSYM_BATCH],
}

/// Byte classes of `DeviceKey::class` (`--devices`): socket bytes through a network device or
/// over loopback/AF_UNIX (which cost CPU, not NIC, energy), sent and received, and bytes read
/// from and written to regular files (charged when the process makes the call: writeback later
/// writes them in a kernel thread, which no profiled thread is).
pub const CLASS_NET_DEVICE_TX: u32 = 0;
pub const CLASS_NET_DEVICE_RX: u32 = 1;
pub const CLASS_NET_LOCAL_TX: u32 = 2;
pub const CLASS_NET_LOCAL_RX: u32 = 3;
pub const CLASS_FILE_READ: u32 = 4;
pub const CLASS_FILE_WRITE: u32 = 5;
pub const DEVICE_CLASSES: u32 = 6;

/// Distinct (thread, call path, class) byte counts per cycle.
pub const MAX_DEVICE_KEYS: u32 = 16 * 1024;

/// Key of the byte counters: one sum of bytes per (thread, user stack, class, device). The
/// stack is the sampler's: a `bpf_get_stackid` id, or a walked JVM stack's hash and leaf (see
/// `SampleKey`).
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct DeviceKey {
    pub tgid: u32,
    pub tid: u32,
    pub start_ticks: u32,
    pub class: u32,
    pub user_stack_id: i32,
    /// A file's filesystem device (`super_block.s_dev`, the kernel's encoding: major << 20 |
    /// minor), so its bytes go to the disk that holds it; for a socket through a network
    /// device, the index of the interface its route goes through when that interface is in
    /// the profiler's network namespace; 0 when unknown.
    pub dev: u32,
    pub java_stack_hash: u64,
    pub java_leaf: JavaFrame,
}

/// Byte offsets the socket programs read, packed 16 bits each into `CONFIG_SOCKET_OFFSETS`
/// (`socket.sk`, `sock_common.skc_family`, `.skc_daddr`, `.skc_rcv_saddr`) and
/// `CONFIG_SOCKET_V6_OFFSETS` (`.skc_v6_daddr`, `.skc_v6_rcv_saddr`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct SocketOffsets {
    pub sk: u16,
    pub family: u16,
    pub daddr: u16,
    pub rcv_saddr: u16,
    pub v6_daddr: u16,
    pub v6_rcv_saddr: u16,
}

impl SocketOffsets {
    pub fn value(&self) -> u64 {
        u64::from(self.sk) << 48
            | u64::from(self.family) << 32
            | u64::from(self.daddr) << 16
            | u64::from(self.rcv_saddr)
    }

    pub fn v6_value(&self) -> u64 {
        u64::from(self.v6_daddr) << 16 | u64::from(self.v6_rcv_saddr)
    }

    pub fn from_values(value: u64, v6: u64) -> Self {
        Self {
            sk: (value >> 48) as u16,
            family: (value >> 32) as u16,
            daddr: (value >> 16) as u16,
            rcv_saddr: value as u16,
            v6_daddr: (v6 >> 16) as u16,
            v6_rcv_saddr: v6 as u16,
        }
    }
}

/// Byte offsets the byte counters read to go from a socket to the interface of its cached
/// route, packed 16 bits each into `CONFIG_NET_DEV_OFFSETS` (`sock.sk_dst_cache`,
/// `dst_entry.dev`, `net_device.ifindex`, `net_device.nd_net`), and where `struct net` keeps its
/// inode number (`net.ns` + `ns_common.inum`), with the profiler's own namespace's inode number,
/// in `CONFIG_NETNS`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct NetDevOffsets {
    pub sk_dst_cache: u16,
    pub dst_dev: u16,
    pub ifindex: u16,
    pub nd_net: u16,
    pub net_inum: u16,
    /// The profiler's network namespace (`/proc/self/ns/net`'s inode number).
    pub own_netns: u32,
}

impl NetDevOffsets {
    pub fn value(&self) -> u64 {
        u64::from(self.sk_dst_cache) << 48
            | u64::from(self.dst_dev) << 32
            | u64::from(self.ifindex) << 16
            | u64::from(self.nd_net)
    }

    pub fn netns_value(&self) -> u64 {
        u64::from(self.own_netns) << 32 | u64::from(self.net_inum)
    }

    pub fn from_values(value: u64, netns: u64) -> Self {
        Self {
            sk_dst_cache: (value >> 48) as u16,
            dst_dev: (value >> 32) as u16,
            ifindex: (value >> 16) as u16,
            nd_net: value as u16,
            net_inum: netns as u16,
            own_netns: (netns >> 32) as u32,
        }
    }
}

/// Byte offsets the byte counters read to go from a file descriptor to its file, packed 16 bits
/// each into `CONFIG_FD_OFFSETS` (`task_struct.files`, `files_struct.fdt`, `fdtable.fd`,
/// `fdtable.max_fds`), `CONFIG_FILE_OFFSETS` (`file.f_inode`, `file.private_data`,
/// `inode.i_mode`) and `CONFIG_SUPER_OFFSETS` (`inode.i_sb`, `super_block.s_magic`,
/// `super_block.s_dev`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct FileOffsets {
    pub files: u16,
    pub fdt: u16,
    pub fd: u16,
    pub max_fds: u16,
    pub f_inode: u16,
    pub private_data: u16,
    pub i_mode: u16,
    pub i_sb: u16,
    pub s_magic: u16,
    pub s_dev: u16,
}

impl FileOffsets {
    pub fn fd_value(&self) -> u64 {
        u64::from(self.files) << 48 | u64::from(self.fdt) << 32 | u64::from(self.fd) << 16 | u64::from(self.max_fds)
    }

    pub fn file_value(&self) -> u64 {
        u64::from(self.f_inode) << 32 | u64::from(self.private_data) << 16 | u64::from(self.i_mode)
    }

    pub fn super_value(&self) -> u64 {
        u64::from(self.i_sb) << 32 | u64::from(self.s_magic) << 16 | u64::from(self.s_dev)
    }

    pub fn from_values(fd: u64, file: u64, sup: u64) -> Self {
        Self {
            files: (fd >> 48) as u16,
            fdt: (fd >> 32) as u16,
            fd: (fd >> 16) as u16,
            max_fds: fd as u16,
            f_inode: (file >> 32) as u16,
            private_data: (file >> 16) as u16,
            i_mode: file as u16,
            i_sb: (sup >> 32) as u16,
            s_magic: (sup >> 16) as u16,
            s_dev: sup as u16,
        }
    }
}

#[cfg(feature = "user")]
mod pod {
    unsafe impl aya::Pod for super::DeviceKey {}
    // SAFETY: all of these are #[repr(C)] plain data with no padding holes left implicit.
    unsafe impl aya::Pod for super::SampleKey {}
    unsafe impl aya::Pod for super::ThreadCpuKey {}
    unsafe impl aya::Pod for super::ThreadCpuValue {}
    unsafe impl aya::Pod for super::CpuState {}
    unsafe impl aya::Pod for super::CpuTimes {}
    unsafe impl aya::Pod for super::ThreadSlot {}
    unsafe impl aya::Pod for super::ExitValue {}
    unsafe impl aya::Pod for super::JvmConfig {}
    unsafe impl aya::Pod for super::CodeHeapConfig {}
    unsafe impl aya::Pod for super::BlobLayout {}
    unsafe impl aya::Pod for super::JavaFrame {}
    unsafe impl aya::Pod for super::JavaStack {}
    unsafe impl aya::Pod for super::SampleLog {}
    unsafe impl aya::Pod for super::KsymNames {}
    unsafe impl aya::Pod for super::CodeReport {}
}
