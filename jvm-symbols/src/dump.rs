//! Asking a JVM to (re)write its perf map over the attach protocol. There is no fallback that
//! runs a program: a `jcmd` found in the target's file system is the target's code, and the
//! profiler never executes it.

use std::time::Duration;

use crate::attach;
use crate::discovery::JvmInfo;
use crate::error::Result;

const PERF_MAP_COMMAND: &str = "Compiler.perfmap";

/// Makes the JVM write `/tmp/perf-<nspid>.map` (in its own file system). Returns once
/// the file is complete: HotSpot answers only after writing it.
pub fn dump_perf_map(jvm: &JvmInfo, timeout: Duration) -> Result<()> {
    attach::jcmd(jvm, PERF_MAP_COMMAND, timeout).map(drop)
}
