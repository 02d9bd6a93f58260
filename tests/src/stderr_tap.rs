//! The profiler's stderr, read as it comes: a test that starts processes for the profiler to see
//! waits for the line saying it profiles. Before that line the eBPF programs are still being
//! verified (about a second) and `serve` already answers on its port: what runs then is not
//! profiled, and a test that counted it would measure start-up, not the profiler.

use std::io::{BufRead, BufReader};
use std::process::{Child, Output};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// What the profiler prints when its first cycle starts.
const PROFILING: &str = "joular-ebpf: profiling ";

/// The stderr of a profiler, read on a thread of its own until the profiler exits.
pub struct StderrTap {
    reader: JoinHandle<Vec<u8>>,
}

impl StderrTap {
    /// Takes `child`'s stderr (piped) and waits at most `within` for the profiler to say it
    /// profiles; panics with what it printed otherwise.
    pub fn await_profiling(child: &mut Child, within: Duration) -> Self {
        let stderr = child.stderr.take().expect("stderr is piped");
        let (ready, profiling) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let mut reader = BufReader::new(stderr);
            let mut ready = Some(ready);
            loop {
                let from = bytes.len();
                match reader.read_until(b'\n', &mut bytes) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if bytes[from..].starts_with(PROFILING.as_bytes()) {
                    if let Some(ready) = ready.take() {
                        let _ = ready.send(());
                    }
                }
            }
            bytes
        });
        let tap = StderrTap { reader };
        if profiling.recv_timeout(within).is_err() {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = tap.reader.join().unwrap_or_default();
            panic!("joular-ebpf did not start profiling within {within:?}:\n{}", String::from_utf8_lossy(&stderr));
        }
        tap
    }

    /// `out` (of the child whose stderr this read) with that stderr.
    pub fn into_output(self, mut out: Output) -> Output {
        out.stderr = self.reader.join().unwrap_or_default();
        out
    }
}
