//! Statistical checks get a second attempt; every other check gets one.
//!
//! A share measured from a few thousand samples of a real JVM (a method split, a share of
//! stacks that keep their callers, a bound on unnamed frames) moves between runs for reasons
//! outside the profiler: where the JIT put a loop, which core a burst of interrupts hit, what
//! else the machine ran. A bar set a few standard deviations out still fails now and then, and
//! a suite of thirty such bars fails most runs. So a statistical bar that is missed reruns the
//! whole measurement once, on a fresh JVM: a systematic fault (a wrong method, a lost caller
//! class, a bias) misses both attempts and fails the test; a one-in-fifty excursion fails both
//! one time in 2,500.
//!
//! Only misses reported through [`check`] are retried. An invariant (energy that does not add
//! up, a negative figure, a crash, a missing output) panics as usual and fails the test on
//! its first occurrence: a second attempt must never hide an intermittent fault.

use std::panic::{self, AssertUnwindSafe};

/// The panic payload of a missed statistical bar.
#[derive(Debug)]
pub struct StatisticalMiss(pub String);

/// Misses a statistical bar unless `ok`: the test's attempt ends here, and [`two_attempts`]
/// runs it once more.
#[track_caller]
pub fn check(ok: bool, message: impl FnOnce() -> String) {
    if !ok {
        let text = message();
        let at = std::panic::Location::caller();
        eprintln!("statistical bar missed at {at}: {text}");
        panic::panic_any(StatisticalMiss(format!("{at}: {text}")));
    }
}

/// Runs `attempt`; if it missed a statistical bar ([`check`]), runs it a second time, and a
/// second miss fails the test with both attempts' messages. Any other panic fails at once.
pub fn two_attempts(name: &str, attempt: impl Fn()) {
    let first = match panic::catch_unwind(AssertUnwindSafe(&attempt)) {
        Ok(()) => return,
        Err(payload) => match payload.downcast::<StatisticalMiss>() {
            Ok(miss) => miss.0,
            Err(other) => panic::resume_unwind(other),
        },
    };
    eprintln!("{name}: attempt 1 missed a statistical bar ({first}); measuring once more on a fresh run");
    match panic::catch_unwind(AssertUnwindSafe(&attempt)) {
        Ok(()) => eprintln!("{name}: attempt 2 met every bar"),
        Err(payload) => match payload.downcast::<StatisticalMiss>() {
            Ok(second) => panic!("{name}: both attempts missed a statistical bar\n  1: {first}\n  2: {}", second.0),
            Err(other) => panic::resume_unwind(other),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::any::Any;
    use std::cell::Cell;

    /// The panic payload `f` ends with.
    fn panic_of(f: impl FnOnce()) -> Box<dyn Any + Send> {
        panic::catch_unwind(AssertUnwindSafe(f)).expect_err("it should have panicked")
    }

    #[test]
    fn a_miss_then_a_pass_passes_after_two_attempts() {
        let runs = Cell::new(0);
        two_attempts("t", || {
            runs.set(runs.get() + 1);
            check(runs.get() > 1, || "first".into());
        });
        assert_eq!(runs.get(), 2);
    }

    #[test]
    fn two_misses_fail_with_both_messages() {
        let runs = Cell::new(0);
        let err = panic_of(|| {
            two_attempts("t", || {
                runs.set(runs.get() + 1);
                check(false, || format!("miss {}", runs.get()));
            })
        });
        let text = err.downcast::<String>().unwrap();
        assert!(text.contains("miss 1") && text.contains("miss 2"), "{text}");
        assert_eq!(runs.get(), 2);
    }

    #[test]
    fn an_invariant_panic_is_not_retried() {
        let runs = Cell::new(0);
        let err = panic_of(|| {
            two_attempts("t", || {
                runs.set(runs.get() + 1);
                panic!("energy does not add up");
            })
        });
        assert_eq!(*err.downcast::<&str>().unwrap(), "energy does not add up");
        assert_eq!(runs.get(), 1);
    }

    #[test]
    fn a_pass_runs_once() {
        let runs = Cell::new(0);
        two_attempts("t", || runs.set(runs.get() + 1));
        assert_eq!(runs.get(), 1);
    }
}
