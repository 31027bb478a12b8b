//! Glue for a container-tier run (no namespaces): the run's private
//! directory, the proxy's listeners bound here in the container's network,
//! and the environment and trust bundle pointed at them.

use crate::Fail;
use anyhow::anyhow;
use oajail_jail::negotiate::{ContainerTier, Negotiation, Tier};
use oajail_jail::net::PROXY_PORT;
use oajail_jail::tmpdir::RunDir;
use std::net::TcpListener;
use std::path::PathBuf;

/// A container-tier run's own resources (removed when dropped).
pub struct Run {
    /// The run's private directory.
    dir: RunDir,
    /// What the spec is built with.
    pub tier: ContainerTier,
    /// The proxy's listeners, until the proxy takes them.
    listeners: Vec<TcpListener>,
}

/// The trust bundle's name in the run's read-only directory.
const BUNDLE: &str = "ca-bundle.pem";

/// The container tier's resources when `negotiated` is that tier.
pub fn prepare(negotiated: &Negotiation) -> Result<Option<Run>, Fail> {
    if negotiated.tier != Tier::Container {
        return Ok(None);
    }
    let dir = RunDir::create().map_err(|e| Fail::setup(anyhow!("tmpdir: {e}")))?;
    // Ports of the kernel's choosing: two runs in one container, or a
    // service on 3128, never collide. The jail is still told 3128: pid 1
    // connects that address to these.
    let listeners = oajail_jail::net::listen_on_loopback(0)
        .map_err(|e| Fail::setup(anyhow!("proxy-listener: {e}")))?;
    let proxy = listeners
        .iter()
        .map(TcpListener::local_addr)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Fail::setup(anyhow!("proxy-listener: {e}")))?;
    let tier = ContainerTier {
        tmpdir: dir.tmp(),
        readonly: dir.etc(),
        proxy,
        jail_port: PROXY_PORT,
    };
    Ok(Some(Run {
        dir,
        tier,
        listeners,
    }))
}

impl Run {
    /// Remove the directories runs killed before left (once the command
    /// runs: not on the start-up path).
    pub fn sweep(&self) {
        self.dir.sweep();
    }

    /// The listeners, for the proxy (once).
    pub fn take_listeners(&mut self) -> Vec<TcpListener> {
        std::mem::take(&mut self.listeners)
    }

    /// The value of `name` in the command's environment: `TMPDIR` is the
    /// run's directory, and the CA variables name the bundle there.
    pub fn env_value(&self, name: &str, value: &str) -> String {
        if name == "TMPDIR" {
            return self.dir.tmp().to_string_lossy().into_owned();
        }
        if value == oajail_jail::mount::trust::BUNDLE_PATH {
            return self.bundle_path().to_string_lossy().into_owned();
        }
        value.to_owned()
    }

    fn bundle_path(&self) -> PathBuf {
        self.dir.etc().join(BUNDLE)
    }

    /// Write the run's trust bundle where the command reads it.
    pub fn install_bundle(&self, pem: Option<&str>) -> Result<(), Fail> {
        let Some(pem) = pem else {
            return Ok(());
        };
        std::fs::write(self.bundle_path(), pem)
            .map_err(|e| Fail::setup(anyhow!("tmpdir: trust bundle: {e}")))
    }
}
