#[macro_use]
pub mod term;
pub mod args;
pub mod calmness;
pub mod diff;
pub mod errors;
pub mod paths;
pub mod report;
pub mod sweep;
