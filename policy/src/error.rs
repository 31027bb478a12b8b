//! Errors (stub; owned by the policy work).

/// A policy could not be loaded or validated.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// Placeholder until the parser lands.
    #[error("{0}")]
    Invalid(String),
}
