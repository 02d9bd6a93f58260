//! JoularJX's method rules on a symbolized stack (root first, kernel frames on top).
//!
//! "all": the sample's method is its topmost user-space frame (Java or native), so a
//! syscall's energy goes to the code that made it; kernel frames still show in call trees.
//! "app": the frame nearest the top whose `Class.method` starts with a `--filter` prefix, so
//! JDK work is charged to the application method that called it.

use std::sync::Arc;

use crate::model::{Frame, FrameKind, Stack};

/// Method name of a thread that had energy but no sample in a cycle.
pub const NO_SAMPLES: &str = "(no samples)";
/// Method name of samples whose stack could not be read (empty stack).
pub const NO_STACK: &str = "(no stack)";
/// "app" method name of samples with no frame matching the filter.
pub const NO_APP_FRAME: &str = "(no app frame)";

/// A one-frame stack standing for a bucket (`(no samples)`, `(no stack)`): it flows through
/// call trees, flame graphs and pprof like any stack, so totals agree across outputs.
pub fn bucket_stack(name: &str) -> Stack {
    let name: Arc<str> = Arc::from(name);
    Arc::from(vec![Frame {
        name: name.clone(),
        short: name,
        kind: FrameKind::Native,
        line: None,
    }])
}

pub fn is_bucket(stack: &[Frame]) -> bool {
    matches!(stack, [only] if only.short.as_ref() == NO_SAMPLES || only.short.as_ref() == NO_STACK)
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
        let prefixes = prefixes
            .into_iter()
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty())
            .collect();
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
        frame.kind != FrameKind::Kernel
            && self
                .prefixes
                .iter()
                .any(|p| frame.short.starts_with(p.as_str()))
    }
}

/// The "all" method of a sample: topmost user frame, else the top kernel frame.
pub fn all_method(stack: &[Frame]) -> Arc<str> {
    if stack.is_empty() {
        return Arc::from(NO_STACK);
    }
    stack
        .iter()
        .rev()
        .find(|f| f.kind != FrameKind::Kernel)
        .or_else(|| stack.last())
        .map(|f| f.short.clone())
        .unwrap_or_else(|| Arc::from(NO_STACK))
}

/// The "app" method of a sample: the filtered frame nearest the top, or a bucket name.
pub fn app_method(stack: &[Frame], filter: &MethodFilter) -> Arc<str> {
    if let Some(frame) = stack.iter().rev().find(|f| filter.matches(f)) {
        return frame.short.clone();
    }
    if stack.is_empty() {
        return Arc::from(NO_STACK);
    }
    if is_bucket(stack) {
        return stack[0].short.clone();
    }
    Arc::from(NO_APP_FRAME)
}

/// The "app" call tree (JoularJX `StackTraceFilter`): only the filtered frames, root first,
/// `;`-joined; a stack without any gets the same bucket name as its app method.
pub fn app_call_tree(stack: &[Frame], filter: &MethodFilter) -> String {
    let tree = join_frames(stack.iter().filter(|f| filter.matches(f)), false);
    if tree.is_empty() {
        app_method(stack, filter).to_string()
    } else {
        tree
    }
}

/// The "all" call tree: every frame's short name, root first, `;`-joined.
pub fn call_tree(stack: &[Frame]) -> String {
    if stack.is_empty() {
        return NO_STACK.to_owned();
    }
    join_frames(stack.iter(), false)
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
        Frame {
            name: Arc::from(format!("full {short}")),
            short: Arc::from(short),
            kind,
            line: None,
        }
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

    #[test]
    fn all_method_is_the_topmost_user_frame() {
        assert_eq!(&*all_method(&bigint_stack()), "write");
        let kernel_only = vec![
            frame("do_idle", FrameKind::Kernel),
            frame("schedule", FrameKind::Kernel),
        ];
        assert_eq!(&*all_method(&kernel_only), "schedule");
        assert_eq!(&*all_method(&[]), NO_STACK);
    }

    #[test]
    fn app_method_charges_jdk_work_to_the_calling_app_method() {
        let filter = MethodFilter::parse("com.acme, org.foo,");
        assert_eq!(filter.prefixes(), ["com.acme", "org.foo"]);
        assert_eq!(
            &*app_method(&bigint_stack(), &filter),
            "com.acme.App.compute"
        );
        let jdk_only = vec![java("java.lang.Thread.run"), java("java.util.HashMap.get")];
        assert_eq!(&*app_method(&jdk_only, &filter), NO_APP_FRAME);
        assert_eq!(&*app_method(&bucket_stack(NO_SAMPLES), &filter), NO_SAMPLES);
        assert_eq!(&*app_method(&[], &filter), NO_STACK);
    }

    #[test]
    fn kernel_frames_never_match_a_filter() {
        let filter = MethodFilter::parse("do_");
        let stack = vec![
            frame("do_work", FrameKind::Native),
            frame("do_syscall_64", FrameKind::Kernel),
        ];
        assert_eq!(&*app_method(&stack, &filter), "do_work");
    }

    #[test]
    fn call_trees_are_root_first_and_app_trees_keep_only_app_frames() {
        let filter = MethodFilter::parse("com.acme");
        assert_eq!(
            call_tree(&bigint_stack()),
            "start_thread;java.lang.Thread.run;com.acme.App.main;com.acme.App.compute;java.math.BigInteger.multiply;write;ksys_write"
        );
        assert_eq!(
            app_call_tree(&bigint_stack(), &filter),
            "com.acme.App.main;com.acme.App.compute"
        );
        assert_eq!(
            app_call_tree(&[java("java.lang.Object.wait")], &filter),
            NO_APP_FRAME
        );
    }

    #[test]
    fn annotated_trees_carry_the_java_palette_suffixes() {
        let filter = MethodFilter::parse("com.acme");
        let annotated = join_frames(bigint_stack().iter(), true);
        assert!(
            annotated.starts_with("start_thread;java.lang.Thread.run_[j];"),
            "{annotated}"
        );
        assert!(annotated.ends_with(";write;ksys_write_[k]"), "{annotated}");
        let app = join_frames(bigint_stack().iter().filter(|f| filter.matches(f)), true);
        assert_eq!(app, "com.acme.App.main_[j];com.acme.App.compute_[j]");
    }

    #[test]
    fn separators_inside_names_are_replaced() {
        let stack = vec![frame("std::map<int, int>::find;x", FrameKind::Native)];
        assert_eq!(call_tree(&stack), "std::map<int  int>::find:x");
    }

    #[test]
    fn a_name_starting_with_a_hash_cannot_comment_its_line_out() {
        let stack = vec![frame("#Evil.run", FrameKind::JavaJit), frame(" #x", FrameKind::Native)];
        assert_eq!(call_tree(&stack), "_#Evil.run;_ #x");
    }
}
