//! Asking a JVM to (re)write its perf map: the attach client first, its `jcmd` second.

use std::time::Duration;

use crate::attach;
use crate::discovery::JvmInfo;
use crate::error::{Error, Result};
use crate::jcmd::run_jcmd;

const PERF_MAP_COMMAND: &str = "Compiler.perfmap";

/// How the map was produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpVia {
    Attach,
    Jcmd,
}

/// Makes the JVM write `/tmp/perf-<nspid>.map` (in its own file system). Returns once
/// the file is complete: HotSpot answers only after writing it.
pub fn dump_perf_map(jvm: &JvmInfo, timeout: Duration) -> Result<DumpVia> {
    let attach_error = match attach::jcmd(jvm, PERF_MAP_COMMAND, timeout) {
        Ok(_) => return Ok(DumpVia::Attach),
        // jcmd uses the same mechanism: no point in trying it.
        Err(e @ (Error::AttachDisabled { .. } | Error::SigquitNotCaught { .. })) => return Err(e),
        Err(e) => e,
    };
    log::debug!("attach to JVM {} failed ({attach_error}); trying its jcmd", jvm.pid);
    match run_jcmd(jvm, PERF_MAP_COMMAND, timeout) {
        Ok(_) => Ok(DumpVia::Jcmd),
        Err(jcmd_error) => Err(Error::DumpFailed {
            pid: jvm.pid,
            attach: Box::new(attach_error),
            jcmd: Box::new(jcmd_error),
        }),
    }
}
