//! Compilation to plain-data plans (stub; owned by the jail work).
//!
//! Will define `HostFacts`, `FsView` and `CompiledPolicy`.

/// Facts about the host the plans are compiled for (stub).
pub struct HostFacts;
/// Read-only view of the filesystem used while compiling (stub).
pub trait FsView {}
/// Compiled plans (stub).
pub struct CompiledPolicy;
