//! Native user-space and kernel addresses through blazesym. Its own perf-map reader is
//! off: JIT code is resolved by jvm-symbols, which reads HotSpot's `0x` form and
//! applies the safety checks.

use blazesym::symbolize::source::{Kernel, Process, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use blazesym::{MaybeDefault, Pid};

pub struct NativeResolver {
    symbolizer: Symbolizer,
}

impl NativeResolver {
    pub fn new() -> Self {
        // Names are all we show: no source lines, no inlined-function chains.
        let symbolizer = Symbolizer::builder()
            .enable_code_info(false)
            .enable_inlined_fns(false)
            .build();
        NativeResolver { symbolizer }
    }

    /// One name per address (`None` when unresolved), in input order.
    pub fn user(&self, pid: u32, addrs: &[u64]) -> Vec<Option<String>> {
        let mut process = Process::new(Pid::from(pid));
        process.perf_map = false;
        process.debug_syms = false;
        self.resolve(&Source::Process(process), addrs)
    }

    pub fn kernel(&self, addrs: &[u64]) -> Vec<Option<String>> {
        let kernel = Kernel {
            // kallsyms is always there and covers modules; a vmlinux search costs disk reads.
            vmlinux: MaybeDefault::None,
            debug_syms: false,
            ..Kernel::default()
        };
        self.resolve(&Source::Kernel(kernel), addrs)
    }

    fn resolve(&self, source: &Source, addrs: &[u64]) -> Vec<Option<String>> {
        match self.symbolizer.symbolize(source, Input::AbsAddr(addrs)) {
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
}
