//! JoularJX's method rules on a symbolized stack (root first, kernel frames on top).
//!
//! "all": in a JVM, the sample's method is its topmost Java frame, as JoularJX (which sees only
//! Java frames) and JFR count it: native code a Java method calls (an intrinsic, JNI, a syscall)
//! is that method's energy. A JVM sample with no Java frame at all goes to its thread's bucket
//! (`[JIT compiler]`, `[GC]`, `[JVM other]`, `[native]`, see `thread_kind`). In any other process
//! the method is the topmost user-space frame, so a syscall's energy goes to the code that made it.
//! "app": the frame nearest the top whose `Class.method` starts with a `--filter` prefix, so JDK
//! work is charged to the application method that called it.
//!
//! A process counts as a JVM once one of its stacks shows HotSpot (a Java or code-cache frame, or
//! one of HotSpot's thread entry points) or one of its threads has a HotSpot thread name. Frames
//! are the evidence that cannot be faked by naming a thread, and names cover the first cycles of
//! a JVM whose threads have not yet reached Java code.

use std::sync::{Arc, LazyLock};

use super::thread_kind::{self, ThreadKind};
use crate::model::{Frame, FrameKind, Stack};

/// Method name of a thread that had energy but no sample in a cycle.
pub const NO_SAMPLES: &str = "(no samples)";
/// Method name of samples whose stack could not be read (empty stack).
pub const NO_STACK: &str = "(no stack)";
/// "app" method name of samples with no frame matching the filter.
pub const NO_APP_FRAME: &str = "(no app frame)";
/// The frame HotSpot's perf map gives every interpreted method: a Java frame it cannot name.
pub const INTERPRETER: &str = "Interpreter";
/// The frame of a pc in the JIT's code that no live blob named (`symbols::hotspot`).
pub const UNKNOWN_JIT_CODE: &str = "[unknown JIT code]";
/// The frame of a native pc no symbol names.
pub const UNKNOWN: &str = "[unknown]";
/// Frames that stand for code nobody could name: counted with the degradations, never ranked
/// as methods.
pub const UNNAMED_CODE: [&str; 3] = [INTERPRETER, UNKNOWN_JIT_CODE, UNKNOWN];

/// Names that stand for energy no method of the program took: they are not methods.
pub const SYNTHETIC: [&str; 7] = [
    NO_SAMPLES,
    NO_STACK,
    NO_APP_FRAME,
    thread_kind::JIT_COMPILER,
    thread_kind::GC,
    thread_kind::JVM_OTHER,
    thread_kind::NATIVE,
];

/// HotSpot's thread entry points (native frames below every JVM thread's own code).
const HOTSPOT_ENTRIES: [&str; 6] =
    ["thread_native_entry(", "JavaMain", "ThreadJavaMain", "JNI_CreateJavaVM", "JavaCalls::", "JavaThread::"];

/// How one process's stacks read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StackRules {
    /// The process is a JVM: Java frames stand for methods.
    pub jvm: bool,
    /// Graphs and call trees keep every frame (`--native-frames`) instead of the Java view.
    pub native_frames: bool,
}

/// A one-frame stack standing for a bucket (`(no samples)`, `(no stack)`): it flows through
/// call trees, flame graphs and pprof like any stack, so totals agree across outputs.
pub fn bucket_stack(name: &str) -> Stack {
    Arc::from(vec![synthetic_frame(name)])
}

fn synthetic_frame(name: &str) -> Frame {
    let name: Arc<str> = Arc::from(name);
    Frame::new(FrameKind::Native, name.clone(), name, None)
}

static SYNTHETIC_FRAMES: LazyLock<Vec<Frame>> =
    LazyLock::new(|| SYNTHETIC.iter().map(|name| synthetic_frame(name)).collect());

/// The shared frame of a synthetic name, for paths that have no frame of their own.
pub fn bucket_frame(name: &str) -> &'static Frame {
    SYNTHETIC_FRAMES.iter().find(|f| &*f.short == name).unwrap_or_else(|| panic!("{name} is not a synthetic name"))
}

pub fn is_synthetic(name: &str) -> bool {
    SYNTHETIC.contains(&name)
}

/// A name JoularJX files may hold: a method (Java, or a native function outside JVMs), not a
/// bucket nor a frame that stands for code nobody could name (`Interpreter`, `[unknown JIT
/// code]`, `[unknown]`). What the others took is reported as `unattributed` instead.
pub fn is_method_name(name: &str) -> bool {
    !(is_synthetic(name) || name == INTERPRETER || (name.starts_with('[') && name.ends_with(']')))
}

/// `Interpreter`, `[unknown JIT code]` or `[unknown]`: code, but no method.
pub fn is_unnamed_code(name: &str) -> bool {
    UNNAMED_CODE.contains(&name)
}

pub fn is_bucket(stack: &[Frame]) -> bool {
    matches!(stack, [only] if only.short.as_ref() == NO_SAMPLES || only.short.as_ref() == NO_STACK)
}

/// A frame that stands for a Java method: a named one, or the `Interpreter` blob of the
/// perf-map path (a Java method it cannot name).
pub fn is_java_like(frame: &Frame) -> bool {
    frame.kind.is_java() || (frame.kind == FrameKind::Stub && &*frame.short == INTERPRETER)
}

/// The stack shows HotSpot: Java or code-cache frames, or a HotSpot thread entry point.
pub fn shows_jvm(stack: &[Frame]) -> bool {
    stack.iter().any(|f| {
        f.kind.is_java()
            || f.kind == FrameKind::Stub
            || (f.kind == FrameKind::Native && HOTSPOT_ENTRIES.iter().any(|e| f.short.starts_with(e)))
    })
}

/// `--filter` prefixes (JoularJX `filter-method-names`: comma-separated, `startsWith`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MethodFilter {
    prefixes: Vec<String>,
}

impl MethodFilter {
    /// Parses `com.acme,org.foo`; blanks are ignored, so `""` is the empty filter.
    pub fn parse(list: &str) -> Self {
        Self::new(list.split(',').map(str::to_owned))
    }

    pub fn new(prefixes: impl IntoIterator<Item = String>) -> Self {
        let prefixes = prefixes.into_iter().map(|p| p.trim().to_owned()).filter(|p| !p.is_empty()).collect();
        Self { prefixes }
    }

    pub fn prefixes(&self) -> &[String] {
        &self.prefixes
    }

    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }

    /// Kernel frames never match: a prefix is a Java package, and a kernel symbol that
    /// happens to share it is not application code.
    pub fn matches(&self, frame: &Frame) -> bool {
        frame.kind != FrameKind::Kernel && self.prefixes.iter().any(|p| frame.short.starts_with(p.as_str()))
    }
}

/// The topmost user frame, else the top kernel frame.
pub fn top_user_frame(stack: &[Frame]) -> Arc<str> {
    stack
        .iter()
        .rev()
        .find(|f| f.kind != FrameKind::Kernel)
        .or_else(|| stack.last())
        .map(|f| f.short.clone())
        .unwrap_or_else(|| Arc::from(NO_STACK))
}

/// The "all" method of a sample of a thread of kind `thread`.
pub fn all_method(stack: &[Frame], thread: ThreadKind, rules: StackRules) -> Arc<str> {
    if rules.jvm {
        if let Some(frame) = stack.iter().rev().find(|f| is_java_like(f)) {
            return frame.short.clone();
        }
        // Whatever a JVM thread of its own did without Java code is that thread's kind of work,
        // even when its stack could not be read.
        if thread.is_jvm_internal() || !(stack.is_empty() || is_bucket(stack)) {
            return Arc::from(thread.bucket());
        }
    }
    if is_bucket(stack) {
        return stack[0].short.clone();
    }
    top_user_frame(stack)
}

/// The "app" method of a sample: the filtered frame nearest the top; else the "all" bucket
/// when the sample has one (no Java frame, no stack, no samples), else `(no app frame)`.
pub fn app_method(stack: &[Frame], thread: ThreadKind, rules: StackRules, filter: &MethodFilter) -> Arc<str> {
    if let Some(frame) = stack.iter().rev().find(|f| filter.matches(f)) {
        return frame.short.clone();
    }
    let all = all_method(stack, thread, rules);
    if is_synthetic(&all) {
        all
    } else {
        Arc::from(NO_APP_FRAME)
    }
}

/// `;`-joins short names; `annotate` adds inferno's Java-palette suffixes (`_[j]` JIT,
/// `_[i]` inlined, `_[k]` kernel).
pub fn join_frames<'a>(frames: impl Iterator<Item = &'a Frame>, annotate: bool) -> String {
    let mut tree = String::new();
    for frame in frames {
        if !tree.is_empty() {
            tree.push(';');
        }
        push_frame_name(&mut tree, &frame.short);
        if annotate {
            tree.push_str(match frame.kind {
                FrameKind::JavaJit => "_[j]",
                FrameKind::JavaInlined => "_[i]",
                FrameKind::Kernel => "_[k]",
                FrameKind::JavaInterpreted | FrameKind::Stub | FrameKind::Native => "",
            });
        }
    }
    tree
}

/// Frame names go into `;`-separated paths and `name,value` rows: a `;` inside a name
/// (rare, some C++ templates) would split a frame, a `,` or newline would break a row. A name
/// starting with `#` (a JVM class name may) gets a `_` first: folded readers, inferno included,
/// take a line starting with `#` for a comment, so a stack rooted there would vanish.
pub fn push_frame_name(out: &mut String, name: &str) {
    if name.trim_start().starts_with('#') {
        out.push('_');
    }
    if name.contains([';', ',', '\n', '\r']) {
        out.extend(name.chars().map(|c| match c {
            ';' => ':',
            ',' => ' ',
            '\n' | '\r' => ' ',
            c => c,
        }));
    } else {
        out.push_str(name);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn frame(short: &str, kind: FrameKind) -> Frame {
        Frame { name: Arc::from(format!("full {short}")), short: Arc::from(short), kind, line: None, raw_name: None }
    }

    pub(crate) fn java(short: &str) -> Frame {
        frame(short, FrameKind::JavaJit)
    }

    /// Thread entry, app code, JDK work on top, then a syscall.
    fn bigint_stack() -> Vec<Frame> {
        vec![
            frame("start_thread", FrameKind::Native),
            java("java.lang.Thread.run"),
            java("com.acme.App.main"),
            java("com.acme.App.compute"),
            java("java.math.BigInteger.multiply"),
            frame("write", FrameKind::Native),
            frame("ksys_write", FrameKind::Kernel),
        ]
    }

    const JVM: StackRules = StackRules { jvm: true, native_frames: false };
    const OTHER: StackRules = StackRules { jvm: false, native_frames: false };
    const APP: ThreadKind = ThreadKind::Application;

    #[test]
    fn in_a_jvm_all_method_is_the_topmost_java_frame() {
        // The syscall and the JDK's native code are the calling Java method's energy.
        assert_eq!(&*all_method(&bigint_stack(), APP, JVM), "java.math.BigInteger.multiply");
        let intrinsic = vec![
            java("java.lang.Thread.run"),
            frame("java.math.BigInteger.oddModPow", FrameKind::JavaInlined),
            frame("StubRoutines (2)", FrameKind::Stub),
            frame("montgomery_multiply", FrameKind::Native),
        ];
        assert_eq!(&*all_method(&intrinsic, APP, JVM), "java.math.BigInteger.oddModPow");
        let interpreted = vec![
            frame("JavaCalls::call_helper", FrameKind::Native),
            frame("StubRoutines (1)", FrameKind::Stub),
            frame("com.acme.App.run", FrameKind::JavaInterpreted),
            frame("libc_read", FrameKind::Native),
        ];
        assert_eq!(&*all_method(&interpreted, APP, JVM), "com.acme.App.run");
        let perf_map = vec![
            frame("StubRoutines (1)", FrameKind::Stub),
            frame(INTERPRETER, FrameKind::Stub),
            frame("memcpy", FrameKind::Native),
        ];
        assert_eq!(&*all_method(&perf_map, APP, JVM), INTERPRETER);
    }

    #[test]
    fn jvm_samples_without_java_frames_go_to_their_thread_bucket() {
        let compile = vec![
            frame("thread_native_entry(Thread*)", FrameKind::Native),
            frame("C2Compiler::compile_method", FrameKind::Native),
            frame("clear_page_erms", FrameKind::Kernel),
        ];
        assert_eq!(&*all_method(&compile, ThreadKind::JitCompiler, JVM), "[JIT compiler]");
        assert_eq!(&*all_method(&compile, ThreadKind::Gc, JVM), "[GC]");
        assert_eq!(&*all_method(&compile, ThreadKind::JvmOther, JVM), "[JVM other]");
        assert_eq!(&*all_method(&compile, APP, JVM), "[native]");
        // Unreadable or sample-less: a JVM thread's bucket, an application thread's own name.
        for synthetic in [bucket_stack(NO_SAMPLES), bucket_stack(NO_STACK)] {
            assert_eq!(&*all_method(&synthetic, ThreadKind::Gc, JVM), "[GC]");
            assert_eq!(&*all_method(&synthetic, APP, JVM), &*synthetic[0].short);
        }
        assert_eq!(&*all_method(&[], ThreadKind::JitCompiler, JVM), "[JIT compiler]");
        assert_eq!(&*all_method(&[], APP, JVM), NO_STACK);
    }

    #[test]
    fn in_other_processes_all_method_is_the_topmost_user_frame() {
        assert_eq!(&*all_method(&bigint_stack(), APP, OTHER), "write");
        let kernel_only = vec![frame("do_idle", FrameKind::Kernel), frame("schedule", FrameKind::Kernel)];
        assert_eq!(&*all_method(&kernel_only, APP, OTHER), "schedule");
        assert_eq!(&*all_method(&[], APP, OTHER), NO_STACK);
        // A thread name alone changes nothing outside a JVM.
        assert_eq!(&*all_method(&bigint_stack(), ThreadKind::Gc, OTHER), "write");
        assert_eq!(&*top_user_frame(&bigint_stack()), "write");
    }

    #[test]
    fn hotspot_shows_in_its_frames() {
        assert!(shows_jvm(&bigint_stack()));
        assert!(shows_jvm(&[frame("thread_native_entry(Thread*)", FrameKind::Native)]));
        assert!(shows_jvm(&[frame("StubRoutines (1)", FrameKind::Stub)]));
        assert!(!shows_jvm(&[frame("main", FrameKind::Native), frame("write", FrameKind::Native)]));
        // A kernel symbol with a HotSpot-like name is not HotSpot.
        assert!(!shows_jvm(&[frame("JavaMain", FrameKind::Kernel)]));
    }

    #[test]
    fn app_method_charges_jdk_work_to_the_calling_app_method() {
        let filter = MethodFilter::parse("com.acme, org.foo,");
        assert_eq!(filter.prefixes(), ["com.acme", "org.foo"]);
        assert_eq!(&*app_method(&bigint_stack(), APP, JVM, &filter), "com.acme.App.compute");
        let jdk_only = vec![java("java.lang.Thread.run"), java("java.util.HashMap.get")];
        assert_eq!(&*app_method(&jdk_only, APP, JVM, &filter), NO_APP_FRAME);
        assert_eq!(&*app_method(&bucket_stack(NO_SAMPLES), APP, JVM, &filter), NO_SAMPLES);
        assert_eq!(&*app_method(&[], APP, JVM, &filter), NO_STACK);
        let gc = vec![frame("G1ParTask::work", FrameKind::Native)];
        assert_eq!(&*app_method(&gc, ThreadKind::Gc, JVM, &filter), "[GC]");
        assert_eq!(&*app_method(&gc, APP, OTHER, &filter), NO_APP_FRAME);
    }

    #[test]
    fn kernel_frames_never_match_a_filter() {
        let filter = MethodFilter::parse("do_");
        let stack = vec![frame("do_work", FrameKind::Native), frame("do_syscall_64", FrameKind::Kernel)];
        assert_eq!(&*app_method(&stack, APP, OTHER, &filter), "do_work");
    }

    #[test]
    fn placeholders_and_buckets_are_not_method_names() {
        for name in ["[GC]", "(no samples)", INTERPRETER, "[unknown JIT code]", "[unknown]"] {
            assert!(!is_method_name(name), "{name}");
        }
        for name in [INTERPRETER, "[unknown JIT code]", "[unknown]"] {
            assert!(is_unnamed_code(name), "{name}");
        }
        for name in ["[GC]", "[native]", "com.acme.App.main"] {
            assert!(!is_unnamed_code(name), "{name}");
        }
        for name in ["com.acme.App.main", "write", "std::vector<int>::push_back", "a[b]c"] {
            assert!(is_method_name(name), "{name}");
        }
    }

    #[test]
    fn every_synthetic_name_has_a_frame() {
        for name in SYNTHETIC {
            assert_eq!(&*bucket_frame(name).short, name);
            assert!(is_synthetic(name));
        }
        assert!(!is_synthetic("com.acme.App.main"));
    }

    #[test]
    fn annotated_trees_carry_the_java_palette_suffixes() {
        let filter = MethodFilter::parse("com.acme");
        let annotated = join_frames(bigint_stack().iter(), true);
        assert!(annotated.starts_with("start_thread;java.lang.Thread.run_[j];"), "{annotated}");
        assert!(annotated.ends_with(";write;ksys_write_[k]"), "{annotated}");
        let app = join_frames(bigint_stack().iter().filter(|f| filter.matches(f)), true);
        assert_eq!(app, "com.acme.App.main_[j];com.acme.App.compute_[j]");
    }

    #[test]
    fn separators_inside_names_are_replaced() {
        let stack = [frame("std::map<int, int>::find;x", FrameKind::Native)];
        assert_eq!(join_frames(stack.iter(), false), "std::map<int  int>::find:x");
    }

    #[test]
    fn a_name_starting_with_a_hash_cannot_comment_its_line_out() {
        let stack = [frame("#Evil.run", FrameKind::JavaJit), frame(" #x", FrameKind::Native)];
        assert_eq!(join_frames(stack.iter(), false), "_#Evil.run;_ #x");
    }
}
