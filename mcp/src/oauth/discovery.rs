//! The issuer's metadata: where its keys are.
//!
//! Tried in order (the MCP authorization spec's order, for an issuer with
//! or without a path):
//! 1. RFC 8414: `/.well-known/oauth-authorization-server` inserted before
//!    the issuer's path;
//! 2. OpenID Connect discovery with the same insertion;
//! 3. OpenID Connect discovery appended to the issuer's path.
//!
//! The first document that answers 200 with JSON decides. Its `issuer`
//! must equal ours exactly (RFC 8414 3.3, OIDC Discovery 4.3): a document
//! naming another issuer is refused, not skipped. Its `jwks_uri` must be
//! `https` (or `http` on loopback, as the issuer may be).

use super::client::Client;

/// What the server needs from the metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metadata {
    /// The key set.
    pub jwks_uri: url::Url,
}

/// The metadata URLs to try for `issuer`, in order.
pub fn candidates(issuer: &url::Url) -> Vec<String> {
    let path = issuer.path().trim_end_matches('/');
    let origin = issuer.origin().ascii_serialization();
    let mut out = vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}/.well-known/openid-configuration{path}"),
    ];
    let appended = format!("{origin}{path}/.well-known/openid-configuration");
    if !out.contains(&appended) {
        out.push(appended);
    }
    out
}

/// Fetches and checks the metadata of `issuer` (named exactly `issuer_id`).
pub async fn discover(
    client: &Client,
    issuer: &url::Url,
    issuer_id: &str,
) -> Result<Metadata, String> {
    let mut tried = Vec::new();
    for url in candidates(issuer) {
        let reply = match client.get(&url).await {
            Ok(r) => r,
            Err(e) => {
                tried.push(e);
                continue;
            }
        };
        if reply.status != 200 || !reply.json.is_object() {
            tried.push(format!("{url}: HTTP {}", reply.status));
            continue;
        }
        return check(&reply.json, issuer_id, &url);
    }
    Err(format!(
        "no authorization server metadata for {issuer_id} ({})",
        tried.join("; ")
    ))
}

fn check(doc: &serde_json::Value, issuer_id: &str, url: &str) -> Result<Metadata, String> {
    let named = doc.get("issuer").and_then(|v| v.as_str()).unwrap_or("");
    if named != issuer_id {
        return Err(format!(
            "{url} names issuer {named:?}, not the configured {issuer_id:?}"
        ));
    }
    let jwks = doc
        .get("jwks_uri")
        .and_then(|v| v.as_str())
        .ok_or_else(|| format!("{url} has no jwks_uri"))?;
    let jwks_uri = super::secure_url("jwks_uri", jwks).map_err(|e| format!("{url}: {e}"))?;
    Ok(Metadata { jwks_uri })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn well_known_urls_follow_the_spec_order() {
        let with_path = url::Url::parse("https://as.example/tenant1").unwrap();
        assert_eq!(
            candidates(&with_path),
            vec![
                "https://as.example/.well-known/oauth-authorization-server/tenant1",
                "https://as.example/.well-known/openid-configuration/tenant1",
                "https://as.example/tenant1/.well-known/openid-configuration",
            ]
        );
        let bare = url::Url::parse("https://as.example").unwrap();
        assert_eq!(
            candidates(&bare),
            vec![
                "https://as.example/.well-known/oauth-authorization-server",
                "https://as.example/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn the_document_must_name_our_issuer() {
        let doc = json!({"issuer": "https://evil.example", "jwks_uri": "https://evil.example/k"});
        assert!(
            check(&doc, "https://as.example", "u")
                .unwrap_err()
                .contains("evil")
        );
        let doc = json!({"issuer": "https://as.example", "jwks_uri": "http://as.example/k"});
        assert!(check(&doc, "https://as.example", "u").is_err());
        let doc = json!({"issuer": "https://as.example", "jwks_uri": "https://as.example/k"});
        assert_eq!(
            check(&doc, "https://as.example", "u")
                .unwrap()
                .jwks_uri
                .as_str(),
            "https://as.example/k"
        );
    }
}
