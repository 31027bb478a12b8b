//! A Kubernetes Pod manifest of the checkout (`examples/kubernetes/`), read
//! for what decides the jail's tier in its container: `hostUsers`,
//! `procMount` and `seccompProfile` (the container's, else the pod's).
//! The matrix runs those very files under runc ([`crate::runc`]), so an
//! example that stops giving the tier its README promises fails CI.
//! Other fields (`runAsUser`, `capabilities`, `allowPrivilegeEscalation`)
//! do not change which tier the jail gets: every cell runs as container
//! root and as uid 1000 whatever the manifest says.

use anyhow::{Context, Result, bail};
use serde_yaml_ng::Value;
use std::path::{Path, PathBuf};

/// The pod's settings that decide the tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    /// `hostUsers: false`: a user namespace, container root a high host uid.
    pub user_namespace: bool,
    /// `procMount: Unmasked`: no masked or read-only `/proc` paths.
    pub proc_unmasked: bool,
    /// `seccompProfile`: `None` is `RuntimeDefault` (containerd's own
    /// profile); a `Localhost` profile is the file of that name in
    /// `examples/containers/` (the kubelet reads it from its seccomp root).
    pub localhost_profile: Option<PathBuf>,
}

fn seccomp(ctx: &Value) -> Option<&Value> {
    ctx.get("seccompProfile")
}

/// Read the first container of the Pod in `path` (a stream of documents:
/// the Pod and, say, its ConfigMap); `host_users` overrides the
/// manifest's `hostUsers`.
pub fn read(path: &Path, host_users: Option<bool>) -> Result<Pod> {
    use serde::Deserialize;
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let doc = Value::deserialize(doc).with_context(|| format!("parse {}", path.display()))?;
        if doc.get("kind").and_then(Value::as_str) == Some("Pod") {
            return parse(&doc, host_users).with_context(|| path.display().to_string());
        }
    }
    bail!("{}: no Pod", path.display())
}

fn parse(doc: &Value, host_users: Option<bool>) -> Result<Pod> {
    if doc.get("kind").and_then(Value::as_str) != Some("Pod") {
        bail!("not a Pod");
    }
    let spec = doc.get("spec").context("no spec")?;
    let container = (spec.get("containers"))
        .and_then(|c| c.get(0))
        .context("no container")?;
    let ctx = container.get("securityContext");
    let profile = (ctx.and_then(seccomp))
        .or_else(|| spec.get("securityContext").and_then(seccomp))
        .context("no seccompProfile (the kubelet's default is Unconfined; name one)")?;
    let localhost_profile = match profile.get("type").and_then(Value::as_str) {
        Some("RuntimeDefault") => None,
        Some("Localhost") => {
            let file = (profile.get("localhostProfile"))
                .and_then(Value::as_str)
                .context("Localhost without localhostProfile")?;
            let name = Path::new(file).file_name().context("localhostProfile")?;
            Some(crate::checkout().join("examples/containers").join(name))
        }
        other => {
            bail!("seccompProfile type {other:?}: the matrix runs RuntimeDefault and Localhost")
        }
    };
    let manifest_users = spec
        .get("hostUsers")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    Ok(Pod {
        user_namespace: !host_users.unwrap_or(manifest_users),
        proc_unmasked: ctx.and_then(|c| c.get("procMount")).and_then(Value::as_str)
            == Some("Unmasked"),
        localhost_profile,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_fields_that_decide_the_tier() {
        let doc: Value = serde_yaml_ng::from_str(
            "kind: Pod\nspec:\n  hostUsers: false\n  securityContext:\n    seccompProfile:\n      type: Localhost\n      localhostProfile: profiles/p.json\n  containers:\n  - name: a\n    securityContext:\n      procMount: Unmasked\n",
        )
        .unwrap();
        let pod = parse(&doc, None).unwrap();
        assert!(pod.user_namespace && pod.proc_unmasked);
        assert!(
            pod.localhost_profile
                .unwrap()
                .ends_with("examples/containers/p.json")
        );
        let doc: Value = serde_yaml_ng::from_str(
            "kind: Pod\nspec:\n  containers:\n  - name: a\n    securityContext:\n      seccompProfile:\n        type: RuntimeDefault\n",
        )
        .unwrap();
        let pod = parse(&doc, Some(false)).unwrap();
        assert_eq!(
            (pod.user_namespace, pod.proc_unmasked, pod.localhost_profile),
            (true, false, None)
        );
        let doc: Value =
            serde_yaml_ng::from_str("kind: Pod\nspec:\n  containers:\n  - name: a\n").unwrap();
        assert!(
            parse(&doc, None).is_err(),
            "no seccompProfile is Unconfined: refused"
        );
    }
}
