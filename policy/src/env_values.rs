//! Secrets recognised by their value, whatever the variable's name: a token
//! under a plain name (`REPO_URL_HELPER=ghp_…`), a private key pasted into a
//! variable, a JWT. Names catch most secrets (`env.rs`); values catch the
//! ones whose names say nothing.
//!
//! Each rule is a well-known, documented token format with enough fixed
//! characters that an ordinary value (a path, a version, a word) does not
//! match it: a prefix followed by at least [`MIN_BODY`] token characters,
//! starting at a word boundary.

/// Token prefixes and what they are. The body after the prefix must be at
/// least [`MIN_BODY`] characters of `[A-Za-z0-9_-]`.
pub const TOKEN_PREFIXES: &[(&str, &str)] = &[
    ("ghp_", "github personal access token"),
    ("gho_", "github oauth token"),
    ("ghu_", "github user-to-server token"),
    ("ghs_", "github server-to-server token"),
    ("ghr_", "github refresh token"),
    ("github_pat_", "github fine-grained token"),
    ("glpat-", "gitlab personal access token"),
    ("xoxb-", "slack bot token"),
    ("xoxp-", "slack user token"),
    ("xoxa-", "slack app token"),
    ("xoxr-", "slack refresh token"),
    ("xoxs-", "slack session token"),
    ("xapp-", "slack app-level token"),
    ("AKIA", "aws access key id"),
    ("ASIA", "aws temporary access key id"),
    ("sk-", "openai/anthropic-style secret key"),
    ("sk_live_", "stripe secret key"),
    ("rk_live_", "stripe restricted key"),
    ("npm_", "npm access token"),
    ("pypi-", "pypi api token"),
    ("AIza", "google api key"),
    ("hf_", "hugging face token"),
    ("dop_v1_", "digitalocean token"),
    ("shpat_", "shopify access token"),
    ("SG.", "sendgrid api key"),
];

/// Characters a token body must have after its prefix.
pub const MIN_BODY: usize = 16;

/// What secret `value` holds, if it holds one recognisable by its form.
pub fn secret_in_value(value: &str) -> Option<&'static str> {
    // Every form below is longer (a token is a prefix and MIN_BODY more
    // characters, a JWT at least 26, a PEM header 22): most variables are
    // shorter and skip the scans.
    if value.len() <= MIN_BODY {
        return None;
    }
    if value.contains("-----BEGIN ") && value.contains("PRIVATE KEY") {
        return Some("pem private key");
    }
    if is_jwt(value) {
        return Some("json web token");
    }
    TOKEN_PREFIXES
        .iter()
        .find(|(prefix, _)| has_token(value, prefix))
        .map(|(_, what)| *what)
}

fn token_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

/// `prefix` at a word boundary, followed by at least [`MIN_BODY`] token
/// characters with a digit and a letter among them (random tokens have
/// both; `pypi-simple-index-mirror` has no digit).
fn has_token(value: &str, prefix: &str) -> bool {
    let bytes = value.as_bytes();
    value.match_indices(prefix).any(|(at, _)| {
        let boundary = at == 0 || !bytes[at - 1].is_ascii_alphanumeric();
        let body: Vec<u8> = bytes[at + prefix.len()..]
            .iter()
            .copied()
            .take_while(|c| token_char(*c) || *c == b'.')
            .collect();
        boundary
            && body.len() >= MIN_BODY
            && body.iter().any(u8::is_ascii_digit)
            && body.iter().any(u8::is_ascii_alphabetic)
    })
}

/// Three base64url parts separated by dots, the first a JSON header
/// (`eyJ` is `{"` encoded).
fn is_jwt(value: &str) -> bool {
    value.split_whitespace().any(|word| {
        let word = word.trim_start_matches("Bearer");
        let parts: Vec<&str> = word.split('.').collect();
        parts.len() == 3
            && parts[0].starts_with("eyJ")
            && parts[1].starts_with("eyJ")
            && parts
                .iter()
                .all(|p| p.len() >= 8 && p.bytes().all(token_char))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_tokens_are_found() {
        let body = "A1b2C3d4E5f6G7h8I9j0KlMn";
        for (prefix, what) in TOKEN_PREFIXES {
            let v = format!("{prefix}{body}");
            assert_eq!(secret_in_value(&v), Some(*what), "{v}");
            let v = format!("Authorization: token {prefix}{body}");
            assert_eq!(secret_in_value(&v), Some(*what), "{v}");
        }
        let pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----";
        assert_eq!(secret_in_value(pem), Some("pem private key"));
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        assert_eq!(secret_in_value(jwt), Some("json web token"));
    }

    #[test]
    fn ordinary_values_are_not_secrets() {
        for v in [
            "/usr/local/bin:/usr/bin",
            "sk-1",
            "task-runner-2",
            "en_US.UTF-8",
            "xterm-256color",
            "npm_config_cache",
            "hf_home",
            "ASIAN",
            "disk-SG.volume",
            "-----BEGIN CERTIFICATE-----",
            "1.2.3",
            "risk-assessment-for-the-whole-quarter",
            "pypi-simple-index-mirror-name",
        ] {
            assert_eq!(secret_in_value(v), None, "{v}");
        }
    }
}
