//! Dropping every capability and checking that it worked.

use crate::error::Failure;
use caps::CapSet;

/// Clear the bounding, ambient, inheritable, effective and permitted sets,
/// then read the last three back and fail unless every one is empty.
///
/// The bounding and ambient sets are not read back, one `prctl` per
/// capability each (82 calls on pid 1's path to the command): clearing the
/// bounding set reads every capability and drops each one present, failing
/// on any drop the kernel refuses; and the kernel keeps the ambient set
/// inside both the permitted and the inheritable set, which are read back.
///
/// Bounding goes first: dropping from it needs CAP_SETPCAP in the effective
/// set, which the later steps remove. `bounding_optional` is for a degraded
/// run without a user namespace, where an unprivileged caller holds no
/// CAP_SETPCAP: the bounding set then stays as inherited, which no_new_privs
/// (set right after) makes harmless, since execve can no longer gain
/// capabilities from file capabilities or set-uid binaries.
pub(crate) fn drop_all(bounding_optional: bool) -> Result<(), Failure> {
    const ORDER: [CapSet; 5] = [
        CapSet::Bounding,
        CapSet::Ambient,
        CapSet::Inheritable,
        CapSet::Effective,
        CapSet::Permitted,
    ];
    let may_skip_bounding = bounding_optional
        && !caps::has_cap(None, CapSet::Effective, caps::Capability::CAP_SETPCAP).unwrap_or(false);
    let sets: Vec<CapSet> = ORDER
        .into_iter()
        .filter(|s| !(may_skip_bounding && matches!(s, CapSet::Bounding)))
        .collect();
    for set in &sets {
        caps::clear(None, *set).map_err(|e| fail("clear", *set, e))?;
    }
    let checked = [CapSet::Inheritable, CapSet::Effective, CapSet::Permitted];
    for set in &checked {
        let left =
            caps::read(None, *set).map_err(|e| Failure::msg(format!("read {set:?} set: {e}")))?;
        if !left.is_empty() {
            return Err(Failure::msg(format!(
                "{set:?} set not empty after drop: {left:?}"
            )));
        }
    }
    Ok(())
}

fn fail(what: &str, set: CapSet, e: caps::errors::CapsError) -> Failure {
    let name = format!("{set:?}").to_lowercase();
    Failure::msg(format!(
        "{what} {name} set: {}",
        crate::error::lower_first(&e.to_string())
    ))
}

/// Set no_new_privs (required by Landlock and seccomp without CAP_SYS_ADMIN,
/// and it keeps set-uid binaries from regaining privileges).
pub(crate) fn no_new_privs() -> Result<(), Failure> {
    nix::sys::prctl::set_no_new_privs()?;
    if nix::sys::prctl::get_no_new_privs()? {
        Ok(())
    } else {
        Err(Failure::msg("no_new_privs did not stick"))
    }
}
