//! The egress allowlist compiled for the proxy (stub; owned by the proxy work).
