//! The symbol stage of a cycle: every sampled stack → a symbolized, interned `Stack`,
//! grouped per thread.

use std::collections::HashMap;
use std::sync::Arc;

use joular_user::collect::RawCycle;
use joular_user::ebpf::Probe;
use joular_user::model::{Stack, ThreadStack};
use joular_user::output::ThreadStacks;
use joular_user::symbols::{KernelUpdate, SymbolStats, Symbolizer, SymbolizerOptions};

pub struct SymbolStage {
    symbolizer: Symbolizer,
}

impl SymbolStage {
    pub fn new(opts: SymbolizerOptions) -> Self {
        Self { symbolizer: Symbolizer::new(opts) }
    }

    pub fn cycle(&mut self, raw: &RawCycle) -> Vec<ThreadStacks> {
        self.symbolizer.begin_cycle();
        // Interned stacks share one Arc, so the pointer identifies the stack.
        let mut by_thread: HashMap<(u32, u32), HashMap<*const [joular_user::model::Frame], (Stack, u64)>> = HashMap::new();
        for s in &raw.samples {
            let stack = match &s.walked {
                Some(walked) => self.symbolizer.symbolize_walked(s.pid, walked, &s.kernel),
                None => self.symbolizer.symbolize(s.pid, &s.user, &s.kernel),
            };
            let e = by_thread.entry((s.pid, s.tid)).or_default().entry(Arc::as_ptr(&stack)).or_insert((stack, 0));
            e.1 += s.count;
        }
        for exit in raw.exits.iter().filter(|e| e.process_ended) {
            self.symbolizer.forget_process(exit.pid);
        }
        let mut out: Vec<ThreadStacks> = by_thread
            .into_iter()
            .map(|((pid, tid), stacks)| {
                let mut stacks: Vec<ThreadStack> = stacks.into_values().map(|(stack, samples)| ThreadStack { stack, samples }).collect();
                stacks.sort_by(|a, b| b.samples.cmp(&a.samples));
                (pid, tid, stacks)
            })
            .collect();
        out.sort_by_key(|t| (t.0, t.1));
        out
    }

    pub fn stats(&self) -> SymbolStats {
        self.symbolizer.stats()
    }

    /// Looks at a target before its first sample, so a JVM is walked from the first cycle.
    pub fn watch(&mut self, pid: u32) {
        self.symbolizer.watch(pid);
    }

    /// Tells the kernel which processes are JVMs whose stacks it walks.
    pub fn update_kernel(&mut self, probe: &mut Probe) {
        for update in self.symbolizer.take_kernel_updates() {
            match update {
                // This kernel's sampler does not walk: the JVM is named from bare pcs.
                KernelUpdate::WalkJvm { .. } if !probe.walks_jvms => {}
                KernelUpdate::WalkJvm { pid, config } => {
                    if let Err(e) = probe.set_jvm(pid, config) {
                        log::warn!("JVM {pid}: its Java frames are named from bare pcs only: {e}");
                    }
                }
                KernelUpdate::ForgetJvm { pid } => probe.remove_jvm(pid),
            }
        }
    }
}

/// The end-of-run line about Java frames named through HotSpot's tables.
pub fn hotspot_line(st: &SymbolStats) -> String {
    format!(
        "Java frames: {} JVM(s) read through their HotSpot tables; {} methods and {} compiled methods read, \
         {} code-cache re-reads, {} JIT frames left unknown, {} interpreted frames unnamed; \
         misses: {} unreadable, {} stale, {} corrupt Method*s, {} unreadable code; \
         {} walked stacks ({} cut, {} truncated); caches ~{} KiB; symbolization {:.1} ms in all",
        st.hotspot_jvms,
        st.hotspot_methods_read,
        st.hotspot_nmethods_read,
        st.code_cache_refreshes,
        st.unknown_jit_frames,
        st.unnamed_interpreted_frames,
        st.method_unreadable,
        st.method_stale,
        st.method_corrupt,
        st.code_unreadable,
        st.walked_stacks,
        st.walked_stacks_cut,
        st.walked_stacks_truncated,
        st.hotspot_cache_bytes / 1024,
        st.symbolize_ns as f64 / 1e6,
    )
}
