//! The symbol worker's side in the session: the kernel updates it asks for, and the lines it
//! prints at the end. The worker itself is a library stage (`stages::symbol_worker`).

pub use joular_user::stages::symbol_worker::{settle_within, CycleSamples, EarlyUpdates, SymbolReply, SymbolWorker};

use joular_user::ebpf::Probe;
use joular_user::stages::symbolize::SYMBOLS_FAILED;
use joular_user::symbols::{KernelUpdate, SymbolStats};
use joular_user::unwind::tables::TableStats;

/// Tells the kernel which processes are JVMs whose stacks it walks.
pub fn apply_kernel_updates(updates: Vec<KernelUpdate>, probe: &mut Probe) {
    for update in updates {
        match update {
            // This kernel's sampler does not walk: the JVM is named from bare pcs.
            KernelUpdate::WalkJvm { .. } if !probe.walks_jvms => {}
            KernelUpdate::WalkJvm { pid, config } => {
                if let Err(e) = probe.set_jvm(pid, *config) {
                    log::warn!("JVM {pid}: its Java frames are named from bare pcs only: {e}");
                }
            }
            KernelUpdate::ForgetJvm { pid } => {
                probe.remove_jvm(pid);
                if let Some(unwind) = probe.unwind.as_mut() {
                    unwind.forget_process(pid);
                }
            }
            KernelUpdate::NativeUnwind { pid, table } => {
                if let Some(Err(e)) = probe.unwind.as_mut().map(|u| u.set_process(pid, &table)) {
                    log::warn!("JVM {pid}: its native frames are stepped by frame pointers only: {e}");
                }
            }
        }
    }
}

/// The end-of-run line about how a JVM's stacks were unwound.
pub fn unwinder_line(pid: u32, u: &joular_user::model::JavaUnwinder) -> String {
    let how = match (u.unwinder.as_str(), &u.reason) {
        ("hotspot", _) => "the HotSpot unwinder (compiled frames stepped by their code blobs' frame sizes; the JIT code keeps no frame pointers)".to_owned(),
        (_, Some(reason)) => format!("frame pointers only, cut at compiled frames: the HotSpot unwinder cannot run ({reason})"),
        _ => "frame pointers (the JIT code keeps them)".to_owned(),
    };
    let mut line = format!(
        "JVM {pid}: Java stacks walked by {how}; {} walked stacks stepped a compiled frame by its frame size, {} by frame pointers only, {} cut",
        u.stacks_hotspot, u.stacks_frame_pointers, u.stacks_cut
    );
    if let Some(share) = u.inlining_approximate_share.filter(|&s| s > 0.0) {
        line.push_str(&format!(
            "; inlining at safepoint granularity: {:.1}% of its Java samples are in compiled code without an exact debug record \
             (-XX:-DebugNonSafepoints), so methods inlined there are charged to their callers; \
             run it with -XX:+UnlockDiagnosticVMOptions -XX:+DebugNonSafepoints to make them exact",
            share * 100.0
        ));
    }
    line
}

/// The end-of-run line about the native unwind rows built for walked processes, the largest
/// files first.
pub fn native_unwind_line(st: &TableStats) -> String {
    let files: Vec<String> = st
        .largest
        .iter()
        .map(|f| format!("{} {} rows = {} bytes in {:.1} ms", f.name, f.rows, f.bytes, f.build_us as f64 / 1e3))
        .collect();
    format!(
        "native unwind rows: {} file(s) built ({} from the cache), {} bytes in {:.1} ms in all, {} bytes held now, {} file(s) without rows; largest: {}",
        st.files_read,
        st.files_cached,
        st.built_bytes,
        st.build_us as f64 / 1e3,
        st.row_bytes,
        st.files_failed,
        files.join("; "),
    )
}

/// The end-of-run line about Java frames named through HotSpot's tables.
pub fn hotspot_line(st: &SymbolStats) -> String {
    format!(
        "Java frames: {} JVM(s) read through their HotSpot tables; {} methods and {} compiled methods read, \
         {} code-cache re-reads, {} JIT frames left unknown; of sampled compiled frames, {} freed before they were named \
         and {} named by their method only (freed before their pc was); {} interpreted frames unnamed; \
         {} methods reported by the sampler as it met them ({} named then); \
         misses: {} unreadable, {} stale, {} corrupt Method*s, {} unreadable code; \
         {} walked stacks ({} cut, {} truncated); caches ~{} KiB; symbolization {:.1} ms in all",
        st.hotspot_jvms,
        st.hotspot_methods_read,
        st.hotspot_nmethods_read,
        st.code_cache_refreshes,
        st.unknown_jit_frames,
        st.stale_compiled_frames,
        st.compiled_frames_named_by_method,
        st.unnamed_interpreted_frames,
        st.code_reports,
        st.code_reports_named,
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

/// The end-of-run warning when symbolization lost names to panics or to native files it could
/// not read, `None` when it did not.
pub fn degraded_line(st: &SymbolStats) -> Option<String> {
    let bad_files: u64 = st.native.files_bad.values().sum();
    if st.worker_panics == 0 && bad_files == 0 {
        return None;
    }
    let kinds: Vec<String> = st.native.files_bad.iter().map(|(k, n)| format!("{k}={n}")).collect();
    let examples = match st.native.bad_examples.is_empty() {
        true => String::new(),
        false => format!(" (e.g. {})", st.native.bad_examples.join("; ")),
    };
    Some(format!(
        "warning: symbolization degraded: {} panic(s) caught in the symbol worker, {} sample(s) written as {SYMBOLS_FAILED}; \
         {bad_files} native file version(s) left unnamed [{}]{examples}",
        st.worker_panics,
        st.samples_unsymbolized,
        kinds.join(", "),
    ))
}

/// `summary.json` `degraded` counts for what [`degraded_line`] says.
pub fn degraded_counts(st: &SymbolStats) -> Vec<(String, u64)> {
    let mut counts = vec![
        ("symbol_worker_panics".to_owned(), st.worker_panics),
        ("samples_unsymbolized".to_owned(), st.samples_unsymbolized),
    ];
    counts.extend(st.native.files_bad.iter().map(|(kind, &n)| (format!("native_files_{kind}"), n)));
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_degraded_line_counts_the_worker_panics() {
        let st = SymbolStats { worker_panics: 1, samples_unsymbolized: 3, ..Default::default() };
        assert!(degraded_line(&st).unwrap().contains("1 panic(s)"));
        assert_eq!(degraded_line(&SymbolStats::default()), None);
    }
}
