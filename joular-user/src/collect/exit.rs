//! A thread that exited, as the kernel reported it: what the drain hands on and the
//! incarnations of a PID are told apart by.

/// A thread that exited during the cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadExit {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// The whole process ended with this thread.
    pub process_ended: bool,
}
