//! What a JVM thread does, told from its name (and, for the VM Thread, its stack), so that a
//! sample with no Java frame can still be charged to something a user understands: the JIT
//! compiler, the garbage collector, the JVM's own housekeeping, or native code.
//!
//! HotSpot names its threads itself, and the kernel keeps the first 15 bytes (`comm`). The names
//! below were read from `/proc/<pid>/task/*/comm` of JDK 17 under G1, Parallel, Serial, ZGC and
//! Shenandoah, and from HotSpot's sources for JDK 11 (`ParGC Thread#`, `G1 Young RemSet Sampling`)
//! and 21 (generational ZGC's `ZWorkerYoung#`, `ZWorkerOld#`, `ZDriverMajor`, `ZDriverMinor`):
//!
//! | kind | comm (prefix) |
//! |---|---|
//! | JIT compiler | `C1 CompilerThre`, `C2 CompilerThre`, `JVMCI` (Graal), `Sweeper thread` (code-cache sweeper, JDK ≤ 19) |
//! | GC | `GC Thread#` (G1/Parallel workers), `ParGC Thread#` (JDK 11 Parallel), `G1 ` (`G1 Main Marker`, `G1 Conc#`, `G1 Refine#`, `G1 Service`, `G1 Young RemSet`), `Z` + `Driver`/`Director`/`Stat`/`Uncommitter`/`Unmapper`/`Worker`, `RuntimeWorker#` (ZGC), `Shenandoah `, `CMS ` (JDK 11) |
//! | JVM other | `VM Thread`, `VM Periodic Tas`, `Service Thread`, `Monitor Deflati`, `Notification Th`, `Signal Dispatch`, `Attach Listener`, `Reference Handl`, `Finalizer`, `Common-Cleaner`, `JFR ` |
//! | application | anything else (the `java` main thread, pools, the application's own threads) |
//!
//! The VM Thread also runs the collector's safepoint operations, and with Serial GC the whole
//! collection: its samples under a `VM_*` operation of a collector (`VM_GenCollectForAllocation`,
//! `VM_G1CollectFull`, `VM_ZMarkStart`, `VM_ShenandoahInitMark`...) are GC.
//!
//! A thread name is the profiled process's to choose; the worst a misleading one does is put that
//! process's own energy in another of its buckets.

use serde::{Deserialize, Serialize};

use crate::model::Frame;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadKind {
    /// A thread that runs the application's code (Java or native).
    #[default]
    Application,
    JitCompiler,
    Gc,
    /// The JVM's other own threads: safepoints, signals, reference processing, JFR...
    JvmOther,
}

/// Method-table name of samples with no Java frame, per thread kind.
pub const JIT_COMPILER: &str = "[JIT compiler]";
pub const GC: &str = "[GC]";
pub const JVM_OTHER: &str = "[JVM other]";
/// Application threads' samples without any Java frame: JNI code on a thread the application
/// started natively, JVM start-up and shutdown on the main thread, or a stack whose Java part
/// could not be unwound.
pub const NATIVE: &str = "[native]";

const JIT_PREFIXES: [&str; 4] = ["C1 Compiler", "C2 Compiler", "JVMCI", "Sweeper thread"];
const GC_PREFIXES: [&str; 13] = [
    "GC Thread#",
    "ParGC Thread#",
    "G1 ",
    "ZDriver",
    "ZDirector",
    "ZStat",
    "ZUncommitter",
    "ZUnmapper",
    "ZWorker",
    "RuntimeWorker#",
    "Shenandoah ",
    "CMS ",
    "GC task thread#",
];
const JVM_OTHER_PREFIXES: [&str; 11] = [
    "VM Thread",
    "VM Periodic Tas",
    "Service Thread",
    "Monitor Deflati",
    "Notification Th",
    "Signal Dispatch",
    "Attach Listener",
    "Reference Handl",
    "Finalizer",
    "Common-Cleaner",
    "JFR ",
];
/// `VM_<operation>` names of the collectors' safepoint operations, after the `VM_` prefix.
const GC_VM_OPERATIONS: [&str; 5] = ["Gen", "G1", "Parallel", "Z", "Shenandoah"];

impl ThreadKind {
    /// `comm` is the thread's name as the kernel reports it; `stack` one of its samples.
    pub fn classify(comm: &str, stack: &[Frame]) -> Self {
        let has = |prefixes: &[&str]| prefixes.iter().any(|p| comm.starts_with(p));
        if has(&JIT_PREFIXES) {
            ThreadKind::JitCompiler
        } else if has(&GC_PREFIXES) || (comm == "VM Thread" && stack.iter().any(is_gc_operation)) {
            ThreadKind::Gc
        } else if has(&JVM_OTHER_PREFIXES) {
            ThreadKind::JvmOther
        } else {
            ThreadKind::Application
        }
    }

    /// The JVM's own threads, as opposed to the application's.
    pub fn is_jvm_internal(self) -> bool {
        self != ThreadKind::Application
    }

    /// The bucket a sample of this thread goes to when it has no Java frame.
    pub fn bucket(self) -> &'static str {
        match self {
            ThreadKind::Application => NATIVE,
            ThreadKind::JitCompiler => JIT_COMPILER,
            ThreadKind::Gc => GC,
            ThreadKind::JvmOther => JVM_OTHER,
        }
    }
}

/// Every thread-kind bucket name.
pub const BUCKETS: [&str; 4] = [JIT_COMPILER, GC, JVM_OTHER, NATIVE];

fn is_gc_operation(frame: &Frame) -> bool {
    frame
        .short
        .strip_prefix("VM_")
        .is_some_and(|op| GC_VM_OPERATIONS.iter().any(|p| op.starts_with(p)) || op.contains("Collect"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::stacks::methods::tests::frame;
    use crate::model::FrameKind;

    #[test]
    fn hotspot_thread_names_are_classified() {
        // Every thread of a JDK 17 JVM under each collector, as /proc shows them (15 bytes).
        for (comm, kind) in [
            ("C1 CompilerThre", ThreadKind::JitCompiler),
            ("C2 CompilerThre", ThreadKind::JitCompiler),
            ("JVMCI CompilerT", ThreadKind::JitCompiler),
            ("Sweeper thread", ThreadKind::JitCompiler),
            ("GC Thread#0", ThreadKind::Gc),
            ("G1 Main Marker", ThreadKind::Gc),
            ("G1 Conc#0", ThreadKind::Gc),
            ("G1 Refine#0", ThreadKind::Gc),
            ("G1 Service", ThreadKind::Gc),
            ("ZDirector", ThreadKind::Gc),
            ("ZDriver", ThreadKind::Gc),
            ("ZStat", ThreadKind::Gc),
            ("ZUncommitter", ThreadKind::Gc),
            ("ZUnmapper", ThreadKind::Gc),
            ("ZWorker#0", ThreadKind::Gc),
            ("RuntimeWorker#1", ThreadKind::Gc),
            ("Shenandoah Cont", ThreadKind::Gc),
            ("Shenandoah GC T", ThreadKind::Gc),
            ("VM Thread", ThreadKind::JvmOther),
            ("VM Periodic Tas", ThreadKind::JvmOther),
            ("Service Thread", ThreadKind::JvmOther),
            ("Monitor Deflati", ThreadKind::JvmOther),
            ("Notification Th", ThreadKind::JvmOther),
            ("Signal Dispatch", ThreadKind::JvmOther),
            ("Reference Handl", ThreadKind::JvmOther),
            ("Finalizer", ThreadKind::JvmOther),
            ("Common-Cleaner", ThreadKind::JvmOther),
            ("java", ThreadKind::Application),
            ("ForkJoinPool.co", ThreadKind::Application),
            ("worker-3", ThreadKind::Application),
            ("", ThreadKind::Application),
        ] {
            assert_eq!(ThreadKind::classify(comm, &[]), kind, "{comm:?}");
        }
    }

    #[test]
    fn the_vm_thread_collecting_is_gc() {
        let serial_gc = [
            frame("VMThread::run()", FrameKind::Native),
            frame("VM_GenCollectForAllocation::doit()", FrameKind::Native),
            frame("DefNewGeneration::collect(bool  bool  unsigned long  bool)", FrameKind::Native),
        ];
        assert_eq!(ThreadKind::classify("VM Thread", &serial_gc), ThreadKind::Gc);
        let deopt = [frame("VMThread::run()", FrameKind::Native), frame("VM_Deoptimize::doit()", FrameKind::Native)];
        assert_eq!(ThreadKind::classify("VM Thread", &deopt), ThreadKind::JvmOther);
        // Only the VM Thread: an application frame named like an operation changes nothing.
        assert_eq!(ThreadKind::classify("worker", &serial_gc), ThreadKind::Application);
    }

    #[test]
    fn buckets_are_distinct_names() {
        let kinds = [ThreadKind::Application, ThreadKind::JitCompiler, ThreadKind::Gc, ThreadKind::JvmOther];
        let names: Vec<&str> = kinds.iter().map(|k| k.bucket()).collect();
        assert_eq!(names, [NATIVE, JIT_COMPILER, GC, JVM_OTHER]);
        assert!(kinds.iter().filter(|k| k.is_jvm_internal()).count() == 3);
    }
}
