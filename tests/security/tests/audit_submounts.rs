//! `oajail audit` on a host whose canary directories have mounts under
//! them: `/run` with `/run/user/<uid>` (every desktop session) or
//! `/run/netns` (`ip netns add`). In the lab's user namespace those mounts
//! are locked, the kernel refuses the directory as an overlay's lower
//! layer (`EINVAL`), and the audit used to stop ("cannot build the lab:
//! overlay /run with the policy's canaries: EINVAL").
//!
//! The test builds such a host in a private mount namespace of its own (the
//! machine's mounts are never touched): a tmpfs over `/mnt` with another
//! tmpfs mounted at `/mnt/sub`, then audits a policy that denies reading
//! `/mnt/oaj-audit-secret.key` and allows `/mnt/sub/oaj-nested.key` (its
//! canary read proves the lab shows it inside the submount), from a user
//! namespace below the one that made the mounts (as the lab of an
//! unprivileged user, or of root under a container's user namespace, is).

use oajail_security::lab::Tools;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const TOP: &str = "/mnt/oaj-audit-secret.key";
const NESTED: &str = "/mnt/sub/oaj-nested.key";

/// Short: the labs' unix sockets live under it (108 bytes at most).
fn scratch() -> PathBuf {
    let d = PathBuf::from(format!(
        "/var/tmp/oaj-sm-{}-{}",
        nix::unistd::getuid(),
        std::process::id()
    ));
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("create {}: {e}", d.display()));
    d
}

/// The command that makes the submounts, then runs `audit` one user
/// namespace further down: as root, `unshare --mount` then a user
/// namespace mapping root; unprivileged, a user namespace of its own for
/// the mounts, then one mapping the caller's uid back.
fn under_submounts(audit: &[String]) -> Command {
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    let mut outer = vec!["--mount", "--propagation", "private"];
    let inner = if uid.is_root() {
        vec!["--user".to_owned(), "--map-root-user".to_owned()]
    } else {
        outer.extend(["--user", "--map-root-user"]);
        vec![
            "--user".to_owned(),
            format!("--map-user={uid}"),
            format!("--map-group={gid}"),
        ]
    };
    let script = "mount -t tmpfs oaj-host /mnt && mkdir /mnt/sub && \
                  mount -t tmpfs oaj-sub /mnt/sub && echo host >/mnt/sub/host-file && \
                  exec unshare \"$@\"";
    let mut c = Command::new("unshare");
    c.args(&outer).args(["--", "sh", "-c", script, "sh"]);
    c.args(inner).arg("--").args(audit);
    c
}

#[test]
fn audits_canaries_in_a_directory_with_locked_submounts() {
    assert!(Path::new("/mnt").is_dir(), "/mnt is missing on this host");
    for p in [TOP, NESTED] {
        assert!(!Path::new(p).exists(), "{p} exists on this host already");
    }
    let tools = Tools::locate();
    let dir = scratch();
    let policy = dir.join("submounts.json");
    std::fs::write(
        &policy,
        format!(
            r#"{{"network": {{"allowedDomains": [], "deniedDomains": []}},
                "filesystem": {{"denyRead": ["~", "{TOP}"], "allowRead": ["{NESTED}"],
                "allowWrite": [], "denyWrite": []}}}}"#
        ),
    )
    .unwrap_or_else(|e| panic!("write policy: {e}"));
    let audit: Vec<String> = [
        tools.oajail.display().to_string(),
        "audit".into(),
        "-s".into(),
        policy.display().to_string(),
        "--only".into(),
        "A".into(),
        "--format".into(),
        "json".into(),
    ]
    .into();
    let out = under_submounts(&audit)
        .env("OAJAIL_PROBE_BIN", &tools.probe)
        .env("OAJAIL_LAB_BIN", &tools.lab)
        .env("OAJAIL_AUDIT_DIR", dir.join("l"))
        .current_dir(&dir)
        .output()
        .unwrap_or_else(|e| panic!("run unshare: {e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("cannot build the lab"), "{err}");
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}): {err}"));
    for (path, verdict) in [(TOP, "blocked"), (NESTED, "allowed")] {
        let id = format!("A2-secret-store:{path}");
        let f = (report["findings"].as_array())
            .and_then(|f| f.iter().find(|x| x["id"] == id.as_str()))
            .unwrap_or_else(|| panic!("no finding {id}: {report:#}"));
        assert_eq!(f["verdict"], verdict, "{f:#}");
    }
    let s = &report["summary"];
    assert_eq!(
        (s["escape"].as_u64(), s["inconclusive"].as_u64()),
        (Some(0), Some(0)),
        "{s:#}"
    );
    for p in [TOP, NESTED] {
        assert!(!Path::new(p).exists(), "the audit left {p} on the host");
    }
    // Every lab is gone, the overlays' work directories (mode 000) too.
    let left: Vec<_> = std::fs::read_dir(dir.join("l"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "the audit left labs behind: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
