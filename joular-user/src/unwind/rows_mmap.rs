//! `UNWIND_ROWS` mapped into our memory (the array is `BPF_F_MMAPABLE`): a file's rows are
//! written with one copy instead of one `bpf()` update per row. libjvm's 191,042 rows took
//! 456-678 ms of single updates (150-190 ms batched, `BPF_MAP_UPDATE_BATCH`) and take 0.1 ms
//! copied, so a JVM's native frames have their rows from its first walked cycle on.

use std::os::fd::{AsFd, AsRawFd};
use std::ptr::NonNull;

use aya::maps::{MapData, MapError};
use joular_ebpf::unwind::UnwindRow;

#[derive(Debug, thiserror::Error)]
pub enum RowsMmapError {
    #[error("reading the map's description: {0}")]
    Info(#[from] MapError),
    #[error("the map holds {0}-byte values, not rows")]
    ValueSize(u32),
    #[error("mapping it into memory: {0}")]
    Mmap(std::io::Error),
}

/// The array's values, shared with the kernel: a write is seen by the next sample.
pub struct RowsMmap {
    /// The map stays open while it is mapped (the mapping holds it too).
    _map: MapData,
    rows: NonNull<UnwindRow>,
    len: u32,
    len_bytes: usize,
}

// SAFETY: the mapping is owned by this value alone; `&mut self` orders our writes.
unsafe impl Send for RowsMmap {}

impl RowsMmap {
    pub fn new(map: MapData) -> Result<Self, RowsMmapError> {
        let info = map.info()?;
        if info.value_size() as usize != size_of::<UnwindRow>() {
            return Err(RowsMmapError::ValueSize(info.value_size()));
        }
        let len = info.max_entries();
        // An array's values are contiguous, each rounded up to 8 bytes (a row is 8).
        let len_bytes = (len as usize * size_of::<UnwindRow>()).next_multiple_of(page_bytes());
        // SAFETY: a new shared mapping of the map's descriptor, of the size the kernel gives
        // its values; nothing else maps over it.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.fd().as_fd().as_raw_fd(),
                0,
            )
        };
        if at == libc::MAP_FAILED {
            return Err(RowsMmapError::Mmap(std::io::Error::last_os_error()));
        }
        let rows = NonNull::new(at.cast::<UnwindRow>())
            .ok_or_else(|| RowsMmapError::Mmap(std::io::Error::other("mmap returned a null mapping")))?;
        Ok(RowsMmap { _map: map, rows, len, len_bytes })
    }

    /// Rows the array holds.
    pub fn capacity(&self) -> u32 {
        self.len
    }

    /// Writes `rows` at `first..first + rows.len()`; `false` (nothing written) when they do not
    /// fit.
    pub fn write(&mut self, first: u32, rows: &[UnwindRow]) -> bool {
        let fits = (first as usize).checked_add(rows.len()).is_some_and(|end| end <= self.len as usize);
        if fits {
            // SAFETY: in bounds (checked above) of our mapping, which the kernel only reads;
            // `UnwindRow` is plain integers.
            unsafe { std::ptr::copy_nonoverlapping(rows.as_ptr(), self.rows.as_ptr().add(first as usize), rows.len()) };
            // The table naming these rows is published after them (a `bpf()` call).
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        }
        fits
    }
}

impl Drop for RowsMmap {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.rows.as_ptr().cast(), self.len_bytes) };
    }
}

fn page_bytes() -> usize {
    // SAFETY: no arguments, no memory.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page).unwrap_or(4096).max(4096)
}
