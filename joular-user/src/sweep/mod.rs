//! `joular-ebpf sweep`: energy as a function of a parameter of the command. Runs the command
//! over the parameter's values with `record`, reads each run as `diff` does, fits a model per
//! method and for the process (`fit`), and ranks the methods by their part of the process's
//! growth.

pub mod analysis;
pub mod fit;
pub mod params;
