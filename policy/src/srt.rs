//! srt settings JSON model (stub; owned by the policy work — keep these signatures).
use crate::{Policy, PolicyError};

/// A policy together with the warnings produced while loading it.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The validated policy.
    pub policy: Policy,
    /// One line per accepted-but-unimplemented key, and similar notes.
    pub warnings: Vec<String>,
}

impl Policy {
    /// Parse srt settings JSON (or oajail's canonical JSON); `origin` names the
    /// file in error messages.
    pub fn from_settings_json(_text: &str, _origin: &str) -> Result<Loaded, PolicyError> {
        Err(PolicyError::Invalid("not implemented".into()))
    }

    /// The built-in default policy used when no settings file exists.
    pub fn builtin_default() -> Policy {
        unimplemented!("default policy")
    }

    /// srt settings JSON for this policy (with an `"oajail"` object when needed).
    pub fn to_srt_json(&self) -> serde_json::Value {
        unimplemented!("srt output")
    }
}
