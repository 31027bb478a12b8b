//! Whose authority an execute's API calls carry.
//!
//! On stdio: the server's `OA_API_KEY` (or none), the same for every call.
//! Over HTTP there is no server key (a shared key would let every caller
//! act as the server): with `OA_TOKEN_EXCHANGE_URL` each execute carries a
//! token exchanged for its caller ([`crate::oauth::exchange`]), without it
//! the API calls carry no `Authorization` (an API with public reads).

use crate::audit::{Credential, Who};
use crate::executor::ExecError;
use crate::oauth::exchange::Exchanger;
use std::sync::Arc;

/// The authority of one server.
#[derive(Clone, Debug)]
pub enum Access {
    /// The API client's own key (its fingerprint), or none.
    ServerKey(Credential),
    /// A token exchanged per caller.
    Exchange(Arc<Exchanger>),
}

/// What one execute calls the API with.
pub struct Grant {
    /// A token replacing the API client's key for this execute.
    pub token: Option<String>,
    /// What the audit record says.
    pub credential: Credential,
}

impl Access {
    /// The credential for one execute of `who`.
    pub async fn grant(&self, who: &Who) -> Result<Grant, ExecError> {
        match self {
            Self::ServerKey(c) => Ok(Grant {
                token: None,
                credential: c.clone(),
            }),
            Self::Exchange(ex) => {
                let Some(caller) = &who.caller else {
                    return Err(ExecError::new(
                        "token_exchange_failed",
                        "token exchange needs a verified caller (HTTP transport with OAuth)",
                    ));
                };
                match ex.token_for(caller).await {
                    Ok(t) => Ok(Grant {
                        token: Some(t.value().to_owned()),
                        credential: Credential::Exchanged(t.fingerprint()),
                    }),
                    Err(f) => {
                        crate::log::line(
                            "warning",
                            &format!("execute of {}: {}", caller.sub, f.message),
                        );
                        let mut e = ExecError::new("token_exchange_failed", f.message);
                        e.retryable = f.retryable;
                        Err(e)
                    }
                }
            }
        }
    }
}
