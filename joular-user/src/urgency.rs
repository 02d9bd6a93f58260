//! Scheduling for the short, bounded work a starting target waits on: finding a JVM launched
//! under `record` and reading its tables, so the kernel walks it from its first Java code. That
//! code runs tens of milliseconds after the tables become readable, and the reads take about
//! 15 ms of CPU; on a loaded host (a 2-CPU machine with a busy build beside the starting JVM)
//! a normal thread took 60-150 ms of wall time for them, and the JVM's first Java samples went
//! unwalked. At nice -20 the scheduler runs the thread ahead of normal ones when it wakes,
//! without starving them as a real-time policy could (this work reads memory a target controls).
//! Without CAP_SYS_NICE the thread stays as it was.

/// The nice value urgent work runs at.
const URGENT_NICE: libc::c_int = -20;

/// Runs `f` at [`URGENT_NICE`] on the calling thread, then gives the thread its nice value back
/// (also when `f` panics).
pub fn urgent<T>(f: impl FnOnce() -> T) -> T {
    let _restore = Urgent::begin();
    f()
}

/// The calling thread's nice value before it was made urgent.
struct Urgent {
    before: Option<libc::c_int>,
}

impl Urgent {
    fn begin() -> Self {
        // getpriority returns -1 both as a value and as an error: errno tells them apart.
        // SAFETY: errno is this thread's; getpriority has no preconditions.
        let before = unsafe {
            *libc::__errno_location() = 0;
            let nice = libc::getpriority(libc::PRIO_PROCESS, 0);
            (*libc::__errno_location() == 0).then_some(nice)
        };
        // On Linux, PRIO_PROCESS with who = 0 is the calling thread alone.
        // SAFETY: no preconditions; failing (no CAP_SYS_NICE) leaves the thread as it was.
        let raised = before.is_some_and(|nice| nice > URGENT_NICE)
            && unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, URGENT_NICE) } == 0;
        Urgent { before: before.filter(|_| raised) }
    }
}

impl Drop for Urgent {
    fn drop(&mut self) {
        if let Some(nice) = self.before {
            // SAFETY: as above; lowering priority needs no capability.
            unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nice() -> libc::c_int {
        // SAFETY: no preconditions.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
    }

    #[test]
    fn urgent_work_runs_raised_where_allowed_and_the_thread_gets_its_nice_value_back() {
        std::thread::spawn(|| {
            let before = nice();
            // Whether this process may raise a thread's priority (CAP_SYS_NICE), asked of another
            // thread.
            // SAFETY: no preconditions.
            let sys_nice = std::thread::spawn(|| unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, URGENT_NICE) } == 0)
                .join()
                .unwrap();
            let during = urgent(nice);
            assert_eq!(during, if sys_nice { URGENT_NICE } else { before });
            assert_eq!(nice(), before);
            let panicked = std::panic::catch_unwind(|| urgent(|| panic!("inside")));
            assert!(panicked.is_err());
            assert_eq!(nice(), before, "restored after a panic too");
        })
        .join()
        .unwrap();
    }
}
