//! Loading and attaching the kernel programs, and the handles user space drains them through.

#[cfg(test)]
mod blob_cache_rules;
mod code_reports;
mod device_fields;
mod devices;
#[cfg(test)]
mod epilogue_rules;
pub mod kernel_names;
mod loader;
#[cfg(test)]
mod poll_rules;
pub mod preflight;
#[cfg(test)]
mod prologue_rules;
mod sampler_cost;
mod sizing;
mod task_fields;

pub use code_reports::CodeReports;
pub use devices::{Devices, HOOK as DEVICES_HOOK};
pub use loader::{Probe, ProbeOptions, SchedulerHook};
pub use sampler_cost::SamplerCost;

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("{0}")]
    Preflight(String),
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    #[error("the embedded eBPF object is empty: this binary was built without bpf-linker; run `cargo xtask setup` and rebuild")]
    StubObject,
    #[error("loading the eBPF object: {0}")]
    Load(#[from] aya::EbpfError),
    #[error("eBPF program `{0}`: {1}")]
    Program(&'static str, #[source] aya::programs::ProgramError),
    #[error("eBPF map `{0}`: {1}")]
    Map(&'static str, #[source] aya::maps::MapError),
    #[error("eBPF map `{0}` is missing from the object")]
    MissingMap(&'static str),
    #[error("attaching the sampler to CPU {cpu}: {source}")]
    AttachSampler {
        cpu: u32,
        #[source]
        source: aya::programs::ProgramError,
    },
}
