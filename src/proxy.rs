//! Glue to the egress proxy: serve the listeners the jail bound in its netns.

use crate::plans::Plans;
use std::net::TcpListener;
use std::path::PathBuf;

/// The running proxy (or, until the proxy crate lands, the held listeners).
pub struct Running {
    _listeners: Vec<TcpListener>,
}

/// Start the proxy on `listeners`.
pub fn start(
    plans: &Plans,
    log_json: Option<PathBuf>,
    listeners: Vec<TcpListener>,
) -> anyhow::Result<Running> {
    let _ = (&plans.egress, log_json);
    Ok(Running {
        _listeners: listeners,
    })
}

impl Running {
    /// Stop serving and print the denial summary on stderr.
    pub fn finish(self) {}
}

/// `oajail ssh-proxy HOST PORT` (ssh ProxyCommand inside the jail).
pub fn ssh_helper(host: &str, port: u16) -> Result<i32, crate::Fail> {
    let _ = (host, port);
    Err(crate::Fail::setup(anyhow::anyhow!(
        "ssh-proxy: the proxy is not available in this build"
    )))
}
