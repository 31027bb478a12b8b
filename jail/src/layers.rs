//! The test-only layer switch (cargo feature `test-layers`).
//!
//! With the feature, `OAJAIL_TEST_DISABLE=<layer>[,<layer>]` (landlock,
//! seccomp, mounts, netns, caps, guard) turns layers off and
//! `OAJAIL_TEST_PRETEND_MISSING=<layer>` makes a probe report a kernel
//! feature as missing (`guard`: the guard's filter install fails as on a
//! kernel without user notification), so the security suite can prove each
//! layer matters and the fail-closed paths work. Without the feature (every
//! release build) both variables are ignored and these functions are
//! constant.

use crate::spec::Layers;

/// Apply `OAJAIL_TEST_DISABLE` to `layers`; returns the names switched off
/// (the caller prints a banner when non-empty).
pub fn apply_test_disable(layers: &mut Layers) -> Vec<String> {
    let off = list("OAJAIL_TEST_DISABLE");
    for name in &off {
        match name.as_str() {
            "landlock" => layers.landlock = false,
            "seccomp" => layers.seccomp = false,
            "mounts" => layers.mounts = false,
            "netns" => layers.netns = false,
            "caps" => layers.caps = false,
            "guard" => layers.guard = false,
            _ => {}
        }
    }
    off
}

/// Whether the probe for `layer` should report it missing.
pub(crate) fn pretend_missing(layer: &str) -> bool {
    list("OAJAIL_TEST_PRETEND_MISSING")
        .iter()
        .any(|l| l == layer)
}

#[cfg(feature = "test-layers")]
fn list(var: &str) -> Vec<String> {
    std::env::var(var)
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

#[cfg(not(feature = "test-layers"))]
fn list(_var: &str) -> Vec<String> {
    Vec::new()
}
