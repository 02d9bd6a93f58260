//! The session's stages, each with its reader passed in so tests and benches drive them on
//! recorded input: the cycle report (`/proc` under a root path), the energy stage (an
//! `EnergySource` and a `Topology`) and symbolization (a `StackNamer`, run on its own thread by
//! `symbol_worker`). The session only wires them: drain → `report` → `energy` → `symbolize` →
//! the stack stage (`attribution::stacks`), which builds each `AttributedCycle` once → the
//! sinks (`output::Sink`), which only read it. `Results` wires the stack stage to the result
//! tree alone, for a library user replaying recorded cycles.

pub mod energy;
pub mod report;
pub(crate) mod results;
pub mod symbol_worker;
pub mod symbolize;

pub use results::Results;
