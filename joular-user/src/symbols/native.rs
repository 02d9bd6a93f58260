//! Native user-space addresses through blazesym (kernel ones: `kernel.rs`). Its own perf-map
//! reader is off: JIT code is resolved by jvm-symbols, which reads HotSpot's `0x` form and
//! applies the safety checks.

use blazesym::symbolize::source::{Process, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use blazesym::Pid;

/// blazesym keys its file cache by path, and a process's files go through
/// `/proc/<pid>/map_files/...` (right even inside containers), so every process adds paths
/// that are never evicted. The user-space symbolizer is rebuilt after this many processes
/// have ended, which bounds that growth in host mode at the cost of re-parsing the ELF files
/// still in use once.
const ENDED_PROCESSES_PER_REBUILD: u32 = 512;

pub struct NativeResolver {
    user: Symbolizer,
    ended_since_rebuild: u32,
}

fn symbolizer() -> Symbolizer {
    // Names are all we show: no source lines, no inlined-function chains.
    Symbolizer::builder()
        .enable_code_info(false)
        .enable_inlined_fns(false)
        .build()
}

impl NativeResolver {
    pub fn new() -> Self {
        NativeResolver {
            user: symbolizer(),
            ended_since_rebuild: 0,
        }
    }

    /// A process has ended: its cached paths are dead weight from now on.
    pub fn process_ended(&mut self) {
        self.ended_since_rebuild += 1;
        if self.ended_since_rebuild >= ENDED_PROCESSES_PER_REBUILD {
            self.user = symbolizer();
            self.ended_since_rebuild = 0;
        }
    }

    /// One name per address (`None` when unresolved), in input order.
    pub fn user(&self, pid: u32, addrs: &[u64]) -> Vec<Option<String>> {
        let mut process = Process::new(Pid::from(pid));
        process.perf_map = false;
        process.debug_syms = false;
        resolve(&self.user, &Source::Process(process), addrs)
    }
}

pub(super) fn resolve(symbolizer: &Symbolizer, source: &Source, addrs: &[u64]) -> Vec<Option<String>> {
    match symbolizer.symbolize(source, Input::AbsAddr(addrs)) {
        Ok(symbols) => symbols
            .into_iter()
            .map(|s| match s {
                Symbolized::Sym(sym) => Some(sym.name.into_owned()),
                Symbolized::Unknown(_) => None,
            })
            .collect(),
        Err(e) => {
            log::debug!("blazesym {source:?}: {e}");
            vec![None; addrs.len()]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn marker_function_for_native_lookup() -> u64 {
        std::hint::black_box(7)
    }

    #[test]
    fn user_symbols_still_resolve_after_the_cache_is_rebuilt() {
        let mut r = NativeResolver::new();
        let addr = marker_function_for_native_lookup as *const () as usize as u64;
        let pid = std::process::id();
        let name = |r: &NativeResolver| r.user(pid, &[addr])[0].clone().unwrap_or_default();
        assert!(name(&r).contains("marker_function_for_native_lookup"), "{}", name(&r));
        for _ in 0..ENDED_PROCESSES_PER_REBUILD {
            r.process_ended();
        }
        assert_eq!(r.ended_since_rebuild, 0, "rebuilt");
        assert!(name(&r).contains("marker_function_for_native_lookup"), "{}", name(&r));
    }
}
