//! srt settings JSON model (stub; owned by the policy work).
