//! Secrets recognised by their value, whatever the variable's name: a token
//! under a plain name (`REPO_URL_HELPER=ghp_…`), a private key pasted into a
//! variable, a JWT. Names catch most secrets (`env.rs`); values catch the
//! ones whose names say nothing.
//!
//! Three rules, each about what makes a value a credential rather than a
//! list of values:
//! - a well-known, documented token format with enough fixed characters
//!   that an ordinary value (a path, a version, a word) does not match it:
//!   a prefix followed by at least [`MIN_BODY`] token characters, starting
//!   at a word boundary; a PEM private key; a JSON web token;
//! - an *assignment* whose key names a secret: `password=`, `Pwd=`,
//!   `AccountKey=`, `sig=`, `access_token=` in a query string or a
//!   connection string (ADO.NET, Azure, JDBC, ODBC, libpq `key=value`),
//!   whatever the variable is called. The key is judged by the same rule
//!   as a variable's name (`env::is_secret_name`), so a new connection
//!   string format needs no new entry;
//! - an `Authorization`-style scheme and its credentials (`Bearer …`,
//!   `Basic …`).

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
    if let Some(what) = secret_assignment(value) {
        return Some(what);
    }
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
    if has_auth_scheme(value) {
        return Some("http authorization credentials");
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

/// Where one assignment ends and the next begins in query strings
/// (`&`, `?`), connection strings (`;`), libpq and JVM option strings
/// (white space) and lists (`,`).
fn is_separator(c: char) -> bool {
    matches!(c, ';' | '&' | '?' | ',' | '#') || c.is_whitespace()
}

/// An assignment `key=value` with a non-empty value whose key names a
/// secret: what it is (a password or a key), or `None`.
fn secret_assignment(value: &str) -> Option<&'static str> {
    if value.contains("\":") && json_member(value) {
        return Some("password or key in a JSON member (\"key\": value)");
    }
    if !value.contains('=') {
        return None;
    }
    value.split(is_separator).find_map(|part| {
        let (key, val) = part.split_once('=')?;
        let val = val.trim_matches(|c| c == '\'' || c == '"');
        // `Password=;` (integrated security) and placeholders carry none.
        if val.is_empty() || val.starts_with(['$', '{', '<']) {
            return None;
        }
        secret_key(key).then_some("password or key in an assignment (key=value)")
    })
}

/// A JSON member `"key": value` whose key names a secret and whose value
/// is not empty (`SPRING_APPLICATION_JSON={"spring.datasource.password":
/// "…"}`, a service account's `"private_key"`): the same judge as a
/// `key=value` pair.
fn json_member(value: &str) -> bool {
    value.match_indices("\":").any(|(end, _)| {
        let Some(start) = value[..end].rfind('"') else {
            return false;
        };
        let rest = value[end + 2..].trim_start();
        let empty = rest.starts_with("\"\"") || rest.starts_with("null") || rest.is_empty();
        !empty && secret_key(&value[start + 1..end])
    })
}

/// Words of an assignment's key that name the secret value itself (the
/// key's words: upper-cased, split at `_`, `-`, `.`, spaces and camelCase
/// humps: `AccountKey` → `ACCOUNT KEY`). Not the words that name a kind
/// of setting (`AUTH`, `LOGIN`: `--jobserver-auth=`, `login=alice`).
const SECRET_KEY_WORDS: &[&str] = &["PASS", "PW", "PWD", "KEY", "KEYS", "SIG", "SIGNATURE"];

/// Substrings of an assignment's key that name a secret value.
const SECRET_KEY_SUBSTRINGS: &[&str] = &[
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "SECRET",
    "TOKEN",
    "CREDENTIAL",
    "APIKEY",
];

/// Whether an assignment's key names a secret value ([`SECRET_KEY_WORDS`],
/// a word ending in `KEY`, or [`SECRET_KEY_SUBSTRINGS`]).
fn secret_key(key: &str) -> bool {
    let key = key.trim_start_matches(['-', '.']);
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_-. ".contains(c);
    if key.is_empty() || !key.chars().all(allowed) {
        return false;
    }
    let mut words = String::new();
    let mut prev_lower = false;
    for c in key.chars() {
        if c.is_ascii_uppercase() && prev_lower {
            words.push('_');
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        words.push(if c.is_ascii_alphanumeric() {
            c.to_ascii_uppercase()
        } else {
            '_'
        });
    }
    SECRET_KEY_SUBSTRINGS.iter().any(|s| words.contains(s))
        || words
            .split('_')
            .any(|w| SECRET_KEY_WORDS.contains(&w) || (w.len() > 3 && w.ends_with("KEY")))
}

/// `Bearer <token>` or `Basic <base64>` (an `Authorization` header value
/// put in a variable, or a curl option string holding one).
fn has_auth_scheme(value: &str) -> bool {
    let words: Vec<&str> = value.split_whitespace().collect();
    words.windows(2).any(|w| {
        let scheme = w[0].trim_start_matches(['"', '\'']);
        let cred = w[1].trim_end_matches(['"', '\'']);
        matches!(scheme, "Bearer" | "Basic" | "bearer" | "basic")
            && cred.len() >= MIN_BODY
            && cred.bytes().all(|b| token_char(b) || b"+/=.~".contains(&b))
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
    fn passwords_and_keys_in_assignments_are_found() {
        for v in [
            // Query strings.
            "postgresql://db.internal:5432/app?sslmode=require&password=hunter2",
            "https://api.test/v1?api_key=0123456789",
            "https://acct.blob.core.windows.net/c?sv=2022-11-02&sp=r&sig=abcDEF%3D",
            "https://b.s3.amazonaws.com/o?X-Amz-Signature=deadbeef",
            "jdbc:postgresql://db/app?user=app&password=s3cr3t",
            // Connection strings.
            "Server=tcp:db.test,1433;Database=app;User ID=app;Password=s3cr3t;",
            "Driver={ODBC Driver 18};Server=db;UID=app;PWD=s3cr3t",
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=bWFkZS11cA==;EndpointSuffix=core.windows.net",
            "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=abc=",
            "jdbc:sqlserver://db:1433;databaseName=app;user=sa;password=s3cr3t",
            "host=db port=5432 dbname=app user=app password='s3 cr3t'",
            // JVM options.
            "-Dhttps.proxyHost=p -Dhttps.proxyPassword=s3cr3t",
            // Authorization headers.
            "Authorization: Bearer abcdefghijklmnop0123",
            "-H 'Authorization: Basic dXNlcjpwYXNzd29yZDEyMw=='",
            "pwd=x",
            r#"{"spring.datasource.url":"jdbc:x","spring.datasource.password":"s3cr3t"}"#,
            r#"{"type": "service_account", "private_key": "-----BEGIN"}"#,
        ] {
            assert!(secret_in_value(v).is_some(), "{v}");
        }
    }

    #[test]
    fn assignments_without_a_secret_pass() {
        for v in [
            "postgresql://db.internal:5432/app?sslmode=require",
            "Server=db;Database=app;Integrated Security=true;Password=;",
            "rs=0:di=01;34:ln=01;36:mh=00:pi=40;33:so=01;35",
            "-Dfile.encoding=UTF-8 -Xmx2g",
            "https://example.test/search?q=password&page=2",
            "password=$DB_PASSWORD",
            "--bind=ctrl-k:kill-line --height=40%",
            "-j4 --jobserver-auth=fifo:/tmp/GMfifo1",
            "login=alice",
            r#"{"spring.datasource.url":"jdbc:x","spring.datasource.password":""}"#,
            r#"{"name": "app", "keywords": ["a"]}"#,
            "Basic auth is configured elsewhere",
        ] {
            assert_eq!(secret_in_value(v), None, "{v}");
        }
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
