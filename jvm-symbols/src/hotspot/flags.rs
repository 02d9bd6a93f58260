//! A JVM flag's value from HotSpot's own flag table: `JVMFlag::flags` (`Flag::flags`
//! before JDK 11) points at an array of `JVMFlag::numFlags` entries of
//! `sizeof(JVMFlag)` bytes, each with its `_name` (a C string) and `_addr` (where the value
//! lives). Unlike the command line, this is what the JVM runs with: flags set by
//! `JAVA_TOOL_OPTIONS`, `@argfiles`, ergonomics or `jcmd VM.set_flag` included.

use super::layout::FlagsLayout;
use super::memory::{MemoryReader, ReadError};

/// More flags than any HotSpot has (JDK 21 has about 1,100, product and diagnostic).
const MAX_FLAGS: u64 = 8192;

/// The value of the boolean flag `name`, or `None` when the table has no such flag.
pub fn bool_flag(reader: &impl MemoryReader, l: &FlagsLayout, name: &str) -> Result<Option<bool>, ReadError> {
    let array = reader.read_u64(l.flags)?;
    let count = reader.read_u64(l.num_flags)?.min(MAX_FLAGS);
    let entries = reader.read_vec(array, (count * l.entry_size) as usize)?;
    let ptr = |entry: &[u8], offset: u64| -> Option<u64> {
        let o = usize::try_from(offset).ok()?;
        Some(u64::from_le_bytes(entry.get(o..o + 8)?.try_into().ok()?))
    };
    for entry in entries.chunks_exact(l.entry_size as usize) {
        let Some(name_at) = ptr(entry, l.name_offset).filter(|&p| p != 0) else {
            continue;
        };
        // A longer name fails the read (no NUL within the length): another flag.
        if reader.read_c_string(name_at, name.len()).ok().as_deref() != Some(name.as_bytes()) {
            continue;
        }
        let value_at = ptr(entry, l.addr_offset).ok_or(ReadError { addr: array, len: entries.len() })?;
        return Ok(Some(reader.read_u8(value_at)? != 0));
    }
    Ok(None)
}
