//! Environment plan (stub; owned by the policy work).
