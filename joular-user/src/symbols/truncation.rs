//! The root frame a cut stack ends with, `[truncated: <cause>]`: a walk that stopped before
//! the thread's first frame says so in every output, instead of a stack silently shorter.

use joular_ebpf::{CUT_CAUSE_FRAME_POINTER, DROP_KINDS, DROP_NAMES};

use crate::model::{WalkedStack, TRUNCATED_ROOT_PREFIX};

/// The root of a JVM's stack walked by frame pointers (not by the sampler's JVM walk: its
/// HotSpot tables not read yet) whose outermost frame is Java code.
pub const FRAME_POINTER_CUT: &str = "[truncated: frame_pointer]";
/// The root of a walked stack whose outermost frame is Java code with no cut said by the walk.
pub const UNKNOWN_CUT: &str = "[truncated: unknown]";

/// The root frame's name for a walked stack that did not reach its thread's first frame.
pub fn truncation_root(walked: &WalkedStack) -> Option<String> {
    if walked.truncated {
        return Some(format!("{TRUNCATED_ROOT_PREFIX}depth]"));
    }
    if !walked.cut {
        return None;
    }
    let cause = match walked.cut_cause {
        CUT_CAUSE_FRAME_POINTER => "frame_pointer",
        c if c < DROP_KINDS => DROP_NAMES[c as usize].trim_start_matches("java_walk_"),
        _ => "unknown",
    };
    Some(format!("{TRUNCATED_ROOT_PREFIX}{cause}]"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use joular_ebpf::{DROP_JAVA_WALK_BAD_RETURN, DROP_NATIVE_NO_ROW};

    #[test]
    fn causes_are_named() {
        let stack = |truncated, cut, cut_cause| WalkedStack { truncated, cut, cut_cause, ..WalkedStack::default() };
        assert_eq!(truncation_root(&stack(false, false, 0)), None);
        assert_eq!(truncation_root(&stack(true, false, 0)).unwrap(), "[truncated: depth]");
        assert_eq!(truncation_root(&stack(false, true, DROP_JAVA_WALK_BAD_RETURN)).unwrap(), "[truncated: bad_return]");
        assert_eq!(truncation_root(&stack(false, true, DROP_NATIVE_NO_ROW)).unwrap(), "[truncated: native_no_row]");
        assert_eq!(
            truncation_root(&stack(false, true, CUT_CAUSE_FRAME_POINTER)).unwrap(),
            "[truncated: frame_pointer]"
        );
        assert_eq!(truncation_root(&stack(false, true, 200)).unwrap(), "[truncated: unknown]");
    }
}

#[cfg(test)]
mod prefix_tests {
    use super::*;

    #[test]
    fn the_fixed_roots_start_as_every_cut_root_does() {
        assert!(FRAME_POINTER_CUT.starts_with(TRUNCATED_ROOT_PREFIX) && UNKNOWN_CUT.starts_with(TRUNCATED_ROOT_PREFIX));
    }
}
