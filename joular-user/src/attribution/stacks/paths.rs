//! Which frames each output shows of a stack, root first.
//!
//! The raw profile and the JSON keep every frame. In a JVM the other outputs show Java call
//! trees, as JoularJX and async-profiler do:
//! - JoularJX call-tree CSVs hold the Java frames only (`java.lang.Thread.run;com.acme.W.loop`);
//! - flame graphs, folded stacks and pprof start at the thread's first Java frame and keep what
//!   runs above it (native leaves, stubs, the kernel): below it is only the JVM's entry into Java
//!   (`thread_native_entry`, `JavaCalls::call_helper`, the call stub...).
//!
//! A JVM stack with no Java frame is rooted at its thread's bucket (`[GC]`, `[JIT compiler]`...)
//! in graphs, without the generic thread start, and is that bucket alone in call trees.
//! `--native-frames` (`StackRules::native_frames`) shows every frame in all of them; stacks of
//! other processes always show every frame.

use super::methods::{
    all_method, app_method, bucket_frame, is_bucket, is_java_like, is_method_name, MethodFilter, StackRules,
};
use super::thread_kind::ThreadKind;
use crate::model::{Frame, FrameKind, TRUNCATED_ROOT_PREFIX};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathStyle {
    /// JoularJX call trees.
    CallTree,
    /// Flame graphs, folded stacks, pprof.
    Graph,
}

/// Root frames every thread starts with, cut from graphs of stacks with no Java frame
/// (`[unknown]` is libc's `start_thread` unwound without frame pointers).
const THREAD_START: [&str; 11] = [
    "[unknown]",
    "clone",
    "clone3",
    "__clone",
    "__clone3",
    "start_thread",
    "thread_native_entry(Thread*)",
    "Thread::call_run()",
    "JavaThread::thread_main_inner()",
    "JavaThread::run()",
    "ThreadJavaMain",
];

/// The "all" view of `stack`.
pub fn all_path(stack: &[Frame], thread: ThreadKind, rules: StackRules, style: PathStyle) -> Vec<&Frame> {
    if stack.is_empty() || is_bucket(stack) {
        return vec![bucket_frame(&all_method(stack, thread, rules))];
    }
    if rules.native_frames || !rules.jvm {
        return stack.iter().collect();
    }
    // A cut stack's root says so in every view, below where the view starts.
    let cut_root = stack.first().filter(|f| f.kind == FrameKind::Native && f.short.starts_with(TRUNCATED_ROOT_PREFIX));
    match (stack.iter().position(is_java_like), style) {
        (Some(first), PathStyle::CallTree) => {
            // Frames nobody could name are not methods: a JoularJX tree leaves them out.
            let named: Vec<&Frame> =
                stack[first..].iter().filter(|f| f.kind.is_java() && is_method_name(&f.short)).collect();
            let java = match named.is_empty() {
                true => stack[first..].iter().filter(|f| is_java_like(f)).collect(),
                false => named,
            };
            cut_root.into_iter().chain(java).collect()
        }
        (Some(first), PathStyle::Graph) => cut_root.into_iter().chain(&stack[first..]).collect(),
        (None, PathStyle::CallTree) => vec![bucket_frame(thread.bucket())],
        (None, PathStyle::Graph) => {
            let start = stack.iter().take(stack.len() - 1).take_while(|f| THREAD_START.contains(&&*f.short)).count();
            std::iter::once(bucket_frame(thread.bucket())).chain(&stack[start..]).collect()
        }
    }
}

/// The "app" view of `stack`: the frames the filter matches, or the sample's bucket.
pub fn app_path<'a>(
    stack: &'a [Frame],
    thread: ThreadKind,
    rules: StackRules,
    filter: &MethodFilter,
) -> Vec<&'a Frame> {
    let frames: Vec<&Frame> = stack.iter().filter(|f| filter.matches(f)).collect();
    if frames.is_empty() {
        vec![bucket_frame(&app_method(stack, thread, rules, filter))]
    } else {
        frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::stacks::methods::bucket_stack;
    use crate::attribution::stacks::methods::tests::{frame, java};
    use crate::attribution::stacks::methods::{join_frames, NO_APP_FRAME, NO_SAMPLES};
    use crate::model::FrameKind;

    const JVM: StackRules = StackRules { jvm: true, native_frames: false };

    fn native(name: &str) -> Frame {
        frame(name, FrameKind::Native)
    }

    /// A Java thread as HotSpot starts it, running `Worker.hash` that calls an intrinsic stub,
    /// then a syscall.
    fn worker_stack() -> Vec<Frame> {
        vec![
            native("[unknown]"),
            native("thread_native_entry(Thread*)"),
            native("Thread::call_run()"),
            native("JavaThread::thread_main_inner()"),
            native("JavaCalls::call_helper(JavaValue*  methodHandle const&  JavaCallArguments*  JavaThread*)"),
            frame("StubRoutines (1)", FrameKind::Stub),
            frame("java.lang.Thread.run", FrameKind::JavaInterpreted),
            java("com.acme.Worker.loop"),
            frame("com.acme.Worker.hash", FrameKind::JavaInlined),
            frame("StubRoutines (2)", FrameKind::Stub),
            native("writev"),
            frame("ksys_writev", FrameKind::Kernel),
        ]
    }

    fn joined(frames: Vec<&Frame>) -> String {
        join_frames(frames.into_iter(), false)
    }

    #[test]
    fn java_stacks_are_java_call_trees_and_graphs_start_at_the_first_java_frame() {
        let stack = worker_stack();
        let tree = all_path(&stack, ThreadKind::Application, JVM, PathStyle::CallTree);
        assert_eq!(joined(tree), "java.lang.Thread.run;com.acme.Worker.loop;com.acme.Worker.hash");
        let graph = all_path(&stack, ThreadKind::Application, JVM, PathStyle::Graph);
        assert_eq!(
            joined(graph),
            "java.lang.Thread.run;com.acme.Worker.loop;com.acme.Worker.hash;StubRoutines (2);writev;ksys_writev"
        );
        let everything = StackRules { native_frames: true, ..JVM };
        for style in [PathStyle::CallTree, PathStyle::Graph] {
            assert_eq!(all_path(&stack, ThreadKind::Application, everything, style).len(), stack.len());
        }
    }

    /// A cut stack keeps its `[truncated: <cause>]` root in graphs and call trees, below its
    /// first Java frame; one whose walk reached native code does not get one.
    #[test]
    fn a_cut_stack_keeps_its_truncation_root_in_every_view() {
        let cut = vec![native("[truncated: frame_pointer]"), java("Throughput.lambda$main$0"), java("Throughput.unit")];
        for style in [PathStyle::CallTree, PathStyle::Graph] {
            assert_eq!(
                joined(all_path(&cut, ThreadKind::Application, JVM, style)),
                "[truncated: frame_pointer];Throughput.lambda$main$0;Throughput.unit"
            );
        }
        let under_native =
            vec![native("[truncated: native_no_row]"), native("libfoo_spin"), java("Caller.run"), native("readlink")];
        assert_eq!(
            joined(all_path(&under_native, ThreadKind::Application, JVM, PathStyle::Graph)),
            "[truncated: native_no_row];Caller.run;readlink"
        );
        assert_eq!(
            joined(all_path(&under_native, ThreadKind::Application, JVM, PathStyle::CallTree)),
            "[truncated: native_no_row];Caller.run"
        );
        let whole = worker_stack();
        assert!(all_path(&whole, ThreadKind::Application, JVM, PathStyle::Graph)
            .iter()
            .all(|f| !f.short.starts_with(TRUNCATED_ROOT_PREFIX)));
    }

    #[test]
    fn perf_map_interpreter_frames_count_as_java() {
        let stack = vec![
            native("[unknown]"),
            native("JavaCalls::call_helper(...)"),
            frame("StubRoutines (1)", FrameKind::Stub),
            frame("Interpreter", FrameKind::Stub),
            frame("Interpreter", FrameKind::Stub),
            java("EnergyDemo.countPrimes"),
        ];
        let graph = all_path(&stack, ThreadKind::Application, JVM, PathStyle::Graph);
        assert_eq!(joined(graph), "Interpreter;Interpreter;EnergyDemo.countPrimes");
    }

    #[test]
    fn jvm_threads_without_java_frames_are_rooted_at_their_bucket() {
        let compiler = vec![
            native("[unknown]"),
            native("thread_native_entry(Thread*)"),
            native("Thread::call_run()"),
            native("JavaThread::thread_main_inner()"),
            native("CompileBroker::compiler_thread_loop()"),
            native("C2Compiler::compile_method(...)"),
        ];
        let kind = ThreadKind::JitCompiler;
        assert_eq!(
            joined(all_path(&compiler, kind, JVM, PathStyle::Graph)),
            "[JIT compiler];CompileBroker::compiler_thread_loop();C2Compiler::compile_method(...)"
        );
        assert_eq!(joined(all_path(&compiler, kind, JVM, PathStyle::CallTree)), "[JIT compiler]");
        // A stack that is all thread start keeps its last frame.
        let idle = vec![native("[unknown]"), native("start_thread")];
        assert_eq!(joined(all_path(&idle, ThreadKind::Gc, JVM, PathStyle::Graph)), "[GC];start_thread");
        // The sample-less energy of a GC thread is GC energy.
        let no_samples = bucket_stack(NO_SAMPLES);
        assert_eq!(joined(all_path(&no_samples, ThreadKind::Gc, JVM, PathStyle::Graph)), "[GC]");
        assert_eq!(joined(all_path(&no_samples, ThreadKind::Application, JVM, PathStyle::Graph)), NO_SAMPLES);
    }

    #[test]
    fn other_processes_keep_every_frame() {
        let stack = worker_stack();
        let c_program = StackRules::default();
        for style in [PathStyle::CallTree, PathStyle::Graph] {
            assert_eq!(all_path(&stack, ThreadKind::Application, c_program, style).len(), stack.len());
        }
    }

    #[test]
    fn app_paths_keep_the_filtered_frames_or_the_bucket() {
        let filter = MethodFilter::parse("com.acme");
        let stack = worker_stack();
        assert_eq!(
            joined(app_path(&stack, ThreadKind::Application, JVM, &filter)),
            "com.acme.Worker.loop;com.acme.Worker.hash"
        );
        let jdk = vec![java("java.lang.Thread.run"), java("java.util.HashMap.get")];
        assert_eq!(joined(app_path(&jdk, ThreadKind::Application, JVM, &filter)), NO_APP_FRAME);
        let gc = vec![native("G1ParTask::work(unsigned int)")];
        assert_eq!(joined(app_path(&gc, ThreadKind::Gc, JVM, &filter)), "[GC]");
    }
}
