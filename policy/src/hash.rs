//! Canonical JSON and sha256 (stub; owned by the policy work — keep these signatures).
use crate::Policy;

impl Policy {
    /// Canonical JSON text of the policy (the input of [`Policy::sha256`]).
    pub fn canonical_json(&self) -> String {
        unimplemented!("canonical json")
    }

    /// Lower-case hex sha256 of [`Policy::canonical_json`].
    pub fn sha256(&self) -> String {
        unimplemented!("policy hash")
    }
}
