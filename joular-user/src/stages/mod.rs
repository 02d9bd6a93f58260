//! The session's stages that read the machine, each with its reader passed in so tests and
//! benches drive them on recorded input: the cycle report (`/proc` under a root path), the
//! energy stage (an `EnergySource` and a `Topology`) and symbolization (a `StackNamer`). The
//! session only wires them: drain → `report` → `energy` → `symbolize` → the stack stage
//! (`attribution::stacks`) → the sinks (`output::Sink`).

pub mod energy;
pub mod report;
pub(crate) mod results;
pub mod symbolize;

pub use results::Results;
