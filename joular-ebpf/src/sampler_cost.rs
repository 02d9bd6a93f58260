//! `--sampler-cost`: what the sampler and user space agree on to time each sample.

/// `--sampler-cost`: the sampler's time per sample of a profiled thread, in buckets of
/// `SAMPLE_NS_BUCKET_NS` (index = ns / bucket width; the last bucket holds everything from
/// its start on), counted per CPU in `SAMPLE_NS`. 25.6 us in all: on a 2-CPU VM the p99 was
/// 8-19 us, the median 1.6-12 us, by the VM's speed.
pub const SAMPLE_NS_BUCKETS: u32 = 256;
pub const SAMPLE_NS_BUCKET_NS: u64 = 100;
/// The symbol of the load-time switch that turns the timing on (`aya_ebpf::Global<u8>`, 0 by
/// default: the verifier then removes the timing as dead code, so it costs nothing when off).
pub const SAMPLER_TIMING_SYMBOL: &str = "JOULAR_SAMPLER_TIMING";
