//! Native unwinding for the kernel's stack walk: rows of call-frame information per executable
//! file ([`rows`], read from the file by [`elf_read`]), shared by every process mapping the
//! file, and each walked process's table of executable mappings ([`tables`]), which the
//! sampler searches for a native pc's row (`joular_ebpf::unwind`).

pub mod elf_read;
pub mod kernel_maps;
pub mod leaf_gaps;
pub mod row_cache;
pub mod rows;
pub mod rows_mmap;
pub mod tables;

#[cfg(test)]
mod step_rules;
#[cfg(test)]
mod tests;
