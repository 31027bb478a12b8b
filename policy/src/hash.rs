//! Canonical JSON and sha256 (stub; owned by the policy work).
