//! Host mode and fleet: who each process is (`labels`), the Prometheus exporter (`metrics` accumulates
//! cycles, `exposition` writes the text format, `server` serves it), and the rotation of the periodic
//! profile files a continuous-profiling backend ingests (`rotate`).
//!
//! Consumes only `model::CycleReport`; never reaches back into collectors or the loader.

mod connections;
mod error;
pub mod exposition;
pub mod labels;
pub mod metrics;
pub mod rotate;
pub mod server;

pub use error::FleetError;
pub use labels::{ProcFs, ProcessLabels, ProcessTable};
pub use metrics::{MetricsRegistry, RegistryConfig};
pub use rotate::{ProfileFormat, ProfileRotator, Retention};
pub use server::{serve, MetricsServer};
