use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Errors of the fleet stage. Label reads have none: a process that vanished or a file we may not
/// read only leaves a label empty.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("profile directory {path}: {source}")]
    ProfileDir { path: PathBuf, source: io::Error },
    #[error("writing profile {path}: {source}")]
    ProfileWrite {
        path: PathBuf,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}
