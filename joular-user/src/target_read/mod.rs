//! Reading what a target controls: its mapped files and its memory. The bytes come through
//! reads at offsets (never a map a truncation could turn into SIGBUS), and a read that the target
//! can make block (userfaultfd memory, a file on FUSE) runs under a [`stall_guard::StallGuard`]
//! deadline. The symbolizer (`symbols/`) and the native unwind tables (`unwind/`) both read
//! targets through here.

mod byte_source;
mod chunked_read;
mod fuse;
pub mod stall_guard;

pub use byte_source::{ByteSource, MemoryImage};
pub use chunked_read::{ChunkedRead, CHUNK_BYTES};
pub use fuse::on_fuse;
