//! Stack attribution (docs/architecture.md, eq. 10): each thread's energy split over its
//! sampled call paths by sample share, named by JoularJX's method rules (thread kinds, the
//! nearest Java frame, the `--filter` app view), and summed per stack, method, thread and
//! process over the run. Pure like the energy stage: stacks and joules in, an
//! `AttributedCycle` out, no file and no clock.

pub mod aggregate;
mod cycle;
pub mod device_run;
pub mod methods;
pub mod paths;
pub mod profile;
mod stage;
pub mod thread_kind;
mod thread_total;
pub mod timeline;

pub use cycle::{
    AttributedCycle, CycleCarbon, DeviceCharge, DevicePathShare, Energy, ProcessCycle, ProcessKey, StackShare,
    ThreadCharge,
};
pub use stage::{Retired, RunEnd, StackConfig, StackStage, ThreadStacks, FLAGGED_SOCKET_CYCLES};
