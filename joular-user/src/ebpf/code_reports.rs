//! The code of walked JVMs that the sampler met for the first time (`NEW_CODE`, see
//! `joular_ebpf::CodeReport`), read by the symbol worker every few tens of milliseconds so it
//! names that code while the JVM still has it.

use aya::maps::{MapData, RingBuf};
use joular_ebpf::CodeReport;

/// Reports taken per read at most: the ring holds 2,048; the rest wait for the next read.
const MAX_REPORTS_PER_READ: usize = 4096;

/// The reading end of `NEW_CODE`.
pub struct CodeReports {
    ring: RingBuf<MapData>,
}

// SAFETY: the ring's memory mapping belongs to the process, not to a thread; one thread at a time
// owns this reader (the session hands it to the symbol worker, which alone reads it).
unsafe impl Send for CodeReports {}

impl CodeReports {
    pub fn new(ring: RingBuf<MapData>) -> Self {
        Self { ring }
    }

    /// The reports the kernel sent since the last read, oldest first.
    pub fn take(&mut self) -> Vec<CodeReport> {
        let mut reports = Vec::new();
        while reports.len() < MAX_REPORTS_PER_READ {
            let Some(item) = self.ring.next() else { break };
            // Records the kernel wrote as a `CodeReport`; anything shorter is not one.
            if item.len() >= size_of::<CodeReport>() {
                // SAFETY: at least `size_of::<CodeReport>()` bytes, read unaligned; every bit
                // pattern is a valid `CodeReport` (plain integers).
                reports.push(unsafe { std::ptr::read_unaligned(item.as_ptr() as *const CodeReport) });
            }
        }
        reports
    }
}
