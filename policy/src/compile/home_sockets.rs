//! Unix sockets in the home directory that reach host services.
//!
//! With `network.allowAllUnixSockets` the command may create `AF_UNIX`
//! sockets, so every socket file it can see is a door: Docker Desktop,
//! colima, lima, Rancher Desktop, OrbStack and podman machine sockets give
//! root on the host (or its VM), gpg-agent signs and decrypts, ssh
//! ControlMaster sockets reuse open ssh sessions, password-manager agents
//! hand out keys. `/run` (the user's runtime directory, the system's
//! docker and D-Bus sockets) is masked for every jail already; these live
//! under `~`, which a policy often leaves readable. Every socket (or fifo)
//! found directly in the directories below is masked with an empty file,
//! unless the policy's `allowWrite` names that socket itself: connecting
//! needs write permission, so naming it there is how a user allows one.

use super::{FileKind, FsView};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Directories (relative to the home directory; `*` is one directory level
/// of any name) whose sockets are masked. `""` is the home directory itself
/// (`~/.bitwarden-ssh-agent.sock`).
pub const SOCKET_DIRS: &[&str] = &[
    "",
    ".docker/run",
    ".docker/desktop",
    ".colima",
    ".colima/*",
    ".lima/*/sock",
    ".rd",
    ".orbstack/run",
    ".local/share/containers/podman/machine",
    ".local/share/containers/podman/machine/*",
    ".gnupg",
    ".ssh",
    ".ssh/sockets",
    ".ssh/cm",
    ".ssh/control",
    ".1password",
    ".local/share/keyrings",
];

/// Sockets to mask under `home`, minus those `allow_write` names.
pub(crate) fn sockets(
    fs: &dyn FsView,
    home: &Path,
    allow_write: &BTreeSet<PathBuf>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for pattern in SOCKET_DIRS {
        for dir in expand(fs, home, pattern) {
            for (name, kind) in fs.read_dir(&dir).unwrap_or_default() {
                let path = dir.join(name);
                if kind == FileKind::Other && !allow_write.contains(&path) {
                    out.push(path);
                }
            }
        }
    }
    out
}

/// The existing directories `pattern` names under `home` (symlinks are not
/// followed: a link out of the home is not the home's socket directory).
fn expand(fs: &dyn FsView, home: &Path, pattern: &str) -> Vec<PathBuf> {
    let mut dirs = vec![home.to_path_buf()];
    for part in pattern.split('/').filter(|p| !p.is_empty()) {
        let mut next = Vec::new();
        for dir in &dirs {
            if part == "*" {
                let entries = fs.read_dir(dir).unwrap_or_default();
                next.extend(
                    entries
                        .into_iter()
                        .filter(|(_, k)| *k == FileKind::Dir)
                        .map(|(n, _)| dir.join(n)),
                );
            } else if fs.kind(&dir.join(part)) == Some(FileKind::Dir) {
                next.push(dir.join(part));
            }
        }
        dirs = next;
    }
    dirs
}
