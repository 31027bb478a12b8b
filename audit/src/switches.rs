//! The security suite's switches for every jailed run of a lab, set in
//! its environment by the container matrix (`oajail-container-matrix`) to
//! run the suite's attacks in the tier a container gives. `oajail audit`
//! never sets them.
//!
//! - `OAJAIL_SECURITY_NESTED=1`: every settings file carries
//!   `"enableWeakerNestedSandbox": true`;
//! - `OAJAIL_SECURITY_ALLOW_DEGRADED=1`: every run is `--allow-degraded`;
//! - `OAJAIL_SECURITY_LAB=prepared` (`labspec::LabNetwork`): the lab runs
//!   in the network the caller prepared.

/// `OAJAIL_SECURITY_NESTED=1`: every settings file the suite writes
/// carries `"enableWeakerNestedSandbox": true`, the srt key with which a
/// user accepts the named losses of the tier a container allows.
pub const NESTED_ENV: &str = "OAJAIL_SECURITY_NESTED";

fn nested() -> bool {
    std::env::var(NESTED_ENV).is_ok_and(|v| v == "1")
}

/// `text` with `enableWeakerNestedSandbox: true` under [`NESTED_ENV`],
/// unchanged otherwise. A settings text that is not a JSON object cannot
/// carry the key: an error, never the text without it.
pub fn opt_in(text: &str) -> Result<String, String> {
    if !nested() {
        return Ok(text.to_owned());
    }
    let mut value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| format!("{NESTED_ENV}: the settings are not JSON ({e})"))?;
    let object = value
        .as_object_mut()
        .ok_or_else(|| format!("{NESTED_ENV}: the settings are not a JSON object"))?;
    object.insert(
        "enableWeakerNestedSandbox".into(),
        serde_json::Value::Bool(true),
    );
    serde_json::to_string_pretty(&value).map_err(|e| e.to_string())
}

/// `OAJAIL_SECURITY_ALLOW_DEGRADED=1`: every jailed run of the suite
/// accepts the rules no layer holds here (`--allow-degraded`), so that
/// the container matrix can judge what such a run holds against its banner.
pub const DEGRADED_ENV: &str = "OAJAIL_SECURITY_ALLOW_DEGRADED";

/// The oajail arguments [`DEGRADED_ENV`] adds to every jailed run.
pub fn extra_oajail_args() -> Vec<String> {
    if std::env::var(DEGRADED_ENV).is_ok_and(|v| v == "1") {
        vec!["--allow-degraded".to_owned()]
    } else {
        Vec::new()
    }
}

/// A run without a settings file (the built-in default) cannot carry the
/// key: an error under [`NESTED_ENV`].
pub fn no_file_allowed() -> Result<(), String> {
    if nested() {
        return Err(format!(
            "{NESTED_ENV}: a run of the built-in default policy cannot carry enableWeakerNestedSandbox"
        ));
    }
    Ok(())
}
