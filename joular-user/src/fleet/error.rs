use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Errors of the fleet stage. Label reads have none: a process that vanished or a file we may not
/// read only leaves a label empty.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("--listen {addr}: cannot listen there: {source}: choose a free port, on an address of this host")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("profile directory {path}: {source}")]
    ProfileDir { path: PathBuf, source: io::Error },
    #[error("writing profile {path}: {source}")]
    ProfileWrite { path: PathBuf, source: Box<dyn std::error::Error + Send + Sync> },
}
