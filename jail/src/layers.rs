//! The test-only layer switch (cargo feature `test-layers`).
//!
//! With the feature, `OAJAIL_TEST_DISABLE=<layer>[,<layer>]` (landlock,
//! seccomp, mounts, netns, caps, guard) turns layers off (the negotiation
//! lists what that leaves unheld and never refuses for it);
//! `OAJAIL_TEST_PRETEND_MISSING=<feature>` makes a probe report a kernel
//! feature as missing (`landlock`, `seccomp`, `user-notif`; `guard`: the
//! guard's filter install fails as on a kernel without user notification);
//! `OAJAIL_TEST_LANDLOCK_ABI=<n>` makes the probe report at most ABI n (the
//! ruleset then handles only that ABI's rights, which the kernel enforces
//! exactly as an ABI-n kernel would, `refer` included). So the security
//! suite can prove each layer matters and the tests can run the
//! negotiation of older kernels on this one. Without the feature (every
//! release build) the variables are ignored and these functions are
//! constant. The kernel probes that honour the switches are here too:
//! the negotiation (`crate::negotiate`) and `oajail doctor` read them.

/// The layers `OAJAIL_TEST_DISABLE` switches off (the negotiation applies
/// them; the caller prints a banner when non-empty).
pub fn test_disabled() -> Vec<String> {
    list("OAJAIL_TEST_DISABLE")
}

/// The Landlock ABI `OAJAIL_TEST_LANDLOCK_ABI` caps the probe at.
pub(crate) fn pretend_landlock_abi() -> Option<u8> {
    list("OAJAIL_TEST_LANDLOCK_ABI").first()?.parse().ok()
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

/// Landlock ABI, honouring the `test-layers` switches (pretend missing, or
/// an older ABI: see `layers`).
pub fn landlock_abi() -> Option<u8> {
    if crate::layers::pretend_missing("landlock") {
        return None;
    }
    let abi = u8::try_from(crate::sys::probe::landlock_abi()?).unwrap_or(u8::MAX);
    Some(crate::layers::pretend_landlock_abi().map_or(abi, |cap| abi.min(cap)))
}

/// Whether seccomp user notification with `SECCOMP_IOCTL_NOTIF_ADDFD`
/// (the guard's hand-over of opened files) is available, honouring the
/// `test-layers` pretend switch.
pub fn user_notif_available() -> bool {
    !crate::layers::pretend_missing("user-notif") && crate::sys::probe::user_notif_addfd_available()
}

/// Whether seccomp filters work, honouring the `test-layers` pretend switch.
pub fn seccomp_available() -> bool {
    !crate::layers::pretend_missing("seccomp") && crate::sys::probe::seccomp_filter_available()
}
