//! The HTTP transport's front door, with a real local authorization server
//! (`support/authz.rs`) and raw HTTP: `/health`, RFC 9728 metadata, the
//! `401` challenge, every kind of bad token refused, the three accepted
//! algorithms, OpenID discovery, the key cache's refresh bound and
//! rotation, and start-up refusals.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod support;

use serde_json::{Value, json};
use std::time::Duration;
use support::authz::{Authz, Discovery, Key, now};
use support::http::{HttpServer, env_for, resource};
use support::mock::Mock;

fn list(s: &HttpServer, token: &str) -> support::http::Reply {
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                     "params": {"_meta": support::meta()}});
    s.post_modern(Some(token), &msg)
}

fn server(authz: &Authz, mock: &Mock, extra: &[(&str, &str)]) -> HttpServer {
    let extra: Vec<(String, String)> = extra
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    HttpServer::start(
        |port| {
            let mut e = env_for(authz, mock, port);
            e.extend(extra.clone());
            e
        },
        &[],
    )
}

#[test]
fn health_and_metadata_need_no_token_and_no_issuer() {
    // An issuer that does not exist: health and metadata must not care.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_port = dead.local_addr().unwrap().port();
    drop(dead);
    let mock = Mock::start();
    let s = HttpServer::start(
        |port| {
            vec![
                (
                    "OA_OAUTH_ISSUER".into(),
                    format!("http://127.0.0.1:{dead_port}"),
                ),
                ("OA_OAUTH_RESOURCE".into(), resource(port)),
                ("OA_BASE_URL".into(), mock.base_url()),
                ("OA_CODE_EGRESS_AUTHORITY".into(), "none".into()),
                ("OA_WORKER_POOL".into(), "2".into()),
            ]
        },
        &[],
    );
    // The pre-started workers first (the pool's size), then no more.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while support::children(s.pid()).len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let workers = support::children(s.pid()).len();
    assert_eq!(workers, 2, "{}", s.log());
    for _ in 0..20 {
        let r = s.request("GET", "/health", &[], b"");
        assert_eq!(
            (r.status, r.json()),
            (200, json!({"status": "ok"})),
            "{}",
            s.log()
        );
    }
    assert_eq!(
        support::children(s.pid()).len(),
        workers,
        "health spawned workers"
    );
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let r = s.request("GET", path, &[], b"");
        assert_eq!(r.status, 200, "{path}");
        let m = r.json();
        assert_eq!(m["resource"], json!(resource(s.port)));
        assert_eq!(
            m["authorization_servers"],
            json!([format!("http://127.0.0.1:{dead_port}")])
        );
        assert_eq!(m["bearer_methods_supported"], json!(["header"]));
    }
    // No token: 401 with the metadata's address.
    let r = list(&s, "").clone();
    assert_eq!(r.status, 401);
    let r = s.post(
        None,
        &[],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    );
    assert_eq!(r.status, 401);
    let want = format!(
        "Bearer resource_metadata=\"http://127.0.0.1:{}/.well-known/oauth-protected-resource/mcp\"",
        s.port
    );
    assert_eq!(r.header("www-authenticate"), Some(want.as_str()));
    // A token while the issuer is down: 503, never accepted.
    let r = list(
        &s,
        "eyJhbGciOiJSUzI1NiIsImtpZCI6InJzYS1hIn0.eyJzdWIiOiJ4In0.c2ln",
    );
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(r.header("retry-after"), Some("5"));
}

#[test]
fn bad_tokens_are_refused_and_each_accepted_algorithm_works() {
    let authz = Authz::start(Discovery::OAuth);
    let mock = Mock::start();
    let s = server(&authz, &mock, &[]);
    let aud = resource(s.port);
    for key in [Key::Rsa, Key::Ec, Key::Ed] {
        let r = list(&s, &authz.token(key, &aud, json!({})));
        assert_eq!(r.status, 200, "{key:?}: {r:?}\n{}", s.log());
        let tools: Vec<Value> = r.json()["result"]["tools"].as_array().unwrap().clone();
        assert_eq!(tools.len(), 2, "{key:?}");
    }
    let n = now();
    let hs256 = {
        let header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
        let claims = json!({"iss": authz.issuer(), "sub": "x", "aud": aud, "exp": n + 600});
        jsonwebtoken::encode(
            &header,
            &claims,
            &jsonwebtoken::EncodingKey::from_secret(b"k").unwrap(),
        )
        .unwrap()
    };
    // A token signed by the unpublished key but claiming a published kid.
    let forged = {
        let other = authz.token(Key::Rogue, &aud, json!({}));
        let sig = other.rsplit('.').next().unwrap().to_owned();
        let real = authz.token(Key::Rsa, &aud, json!({"sub": "mallory"}));
        let (msg, _) = real.rsplit_once('.').unwrap();
        format!("{msg}.{sig}")
    };
    let unsigned = {
        let t = authz.token(Key::Rsa, &aud, json!({}));
        let parts: Vec<&str> = t.split('.').collect();
        use base64::Engine;
        let none = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
        format!("{none}.{}.", parts[1])
    };
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "wrong audience",
            authz.token(Key::Rsa, "https://other.example/mcp", json!({})),
            "audience",
        ),
        (
            "wrong issuer",
            authz.token(Key::Rsa, &aud, json!({"iss": "http://127.0.0.1:1"})),
            "issuer",
        ),
        ("bad signature", forged, "signature"),
        (
            "unknown kid",
            authz.token(Key::Rogue, &aud, json!({})),
            "kid",
        ),
        (
            "expired",
            authz.token(Key::Ed, &aud, json!({"exp": n - 120})),
            "expired",
        ),
        (
            "not yet valid",
            authz.token(Key::Ec, &aud, json!({"nbf": n + 300})),
            "nbf",
        ),
        (
            "no sub",
            authz.token(Key::Rsa, &aud, json!({"sub": null})),
            "sub",
        ),
        (
            "no audience",
            authz.token(Key::Rsa, &aud, json!({"aud": null})),
            "aud",
        ),
        ("hmac", hs256, "not accepted"),
        ("alg none", unsigned, "JWS"),
        ("not a jwt", "opaque-token".into(), "JWS"),
    ];
    for (what, token, reason) in cases {
        let r = list(&s, &token);
        assert_eq!(r.status, 401, "{what}: {r:?}");
        let challenge = r.header("www-authenticate").unwrap_or_default().to_owned();
        assert!(
            challenge.contains("error=\"invalid_token\"")
                && challenge.contains("resource_metadata="),
            "{what}: {challenge}"
        );
        let body = r.json();
        assert!(
            body["error_description"].as_str().unwrap().contains(reason),
            "{what}: {body}"
        );
        assert!(
            !s.log().contains(&token),
            "{what}: the token reached the log"
        );
    }
    // The unknown kid made at most one refresh beyond the first fetch.
    assert!(
        authz.jwks_fetches() <= 2,
        "{} key set fetches",
        authz.jwks_fetches()
    );
}

#[test]
fn openid_discovery_is_the_fallback() {
    let authz = Authz::start(Discovery::Oidc);
    let mock = Mock::start();
    let s = server(&authz, &mock, &[]);
    let r = list(&s, &authz.token_for("bob", &resource(s.port)));
    assert_eq!(r.status, 200, "{r:?}\n{}", s.log());
}

#[test]
fn key_rotation_is_picked_up_with_a_bounded_refresh() {
    let authz = Authz::start(Discovery::OAuth);
    let mock = Mock::start();
    let s = server(&authz, &mock, &[("OA_OAUTH_JWKS_REFRESH_SECS", "2")]);
    let aud = resource(s.port);
    let first = authz.token(Key::Rsa, &aud, json!({}));
    for _ in 0..3 {
        // The later requests are answered from the verified-token cache.
        assert_eq!(list(&s, &first).status, 200);
    }
    assert_eq!(authz.jwks_fetches(), 1);
    // The issuer rotates to a key the server has never seen.
    authz.publish(&[Key::Rogue]);
    let fresh = authz.token(Key::Rogue, &aud, json!({}));
    // Right after a fetch: no new fetch, however many unknown kids come.
    for _ in 0..20 {
        assert_eq!(list(&s, &fresh).status, 401);
    }
    assert_eq!(authz.jwks_fetches(), 1, "refreshes must be bounded");
    std::thread::sleep(Duration::from_millis(2100));
    let r = list(&s, &fresh);
    assert_eq!(
        r.status,
        200,
        "the rotated key after the interval: {r:?}\n{}",
        s.log()
    );
    assert_eq!(authz.jwks_fetches(), 2);
    // The retired key is gone from the set the server holds: a token it
    // signed is refused, even the one verified and remembered before.
    assert_eq!(list(&s, &first).status, 401);
    assert_eq!(
        list(&s, &authz.token(Key::Rsa, &aud, json!({"jti": "other"}))).status,
        401
    );
}

#[test]
fn start_up_refuses_http_without_oauth_or_with_a_shared_key() {
    let run = |envs: &[(&str, &str)]| {
        let out = support::command(envs, &["--transport", "http", "--listen", "127.0.0.1:0"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, err) = run(&[("OA_CODE_EGRESS_AUTHORITY", "none")]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("OA_OAUTH_ISSUER") && err.contains("OA_OAUTH_RESOURCE"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let oauth = [
        ("OA_CODE_EGRESS_AUTHORITY", "none"),
        ("OA_OAUTH_ISSUER", "https://as.example"),
        ("OA_OAUTH_RESOURCE", "https://mcp.example/mcp"),
    ];
    let mut with_key = oauth.to_vec();
    with_key.push(("OA_API_KEY", "oa_sk_shared"));
    let (code, err) = run(&with_key);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("config OA_API_KEY:") && !err.contains("oa_sk_shared"),
        "{err}"
    );
    let (code, err) = run(&[
        ("OA_CODE_EGRESS_AUTHORITY", "none"),
        ("OA_OAUTH_ISSUER", "http://as.example"),
        ("OA_OAUTH_RESOURCE", "https://mcp.example/mcp"),
    ]);
    assert_eq!(code, Some(2));
    assert!(err.contains("loopback"), "{err}");
    // OA_TRANSPORT is the variable form of --transport.
    let out = support::command(
        &[
            ("OA_TRANSPORT", "http"),
            ("OA_CODE_EGRESS_AUTHORITY", "none"),
        ],
        &[],
    )
    .stdin(std::process::Stdio::null())
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("OA_OAUTH_ISSUER"));
    // And an OAuth setting without --transport http is not ignored.
    let out = support::command(
        &[
            ("OA_OAUTH_ISSUER", "https://as.example"),
            ("OA_CODE_EGRESS_AUTHORITY", "none"),
        ],
        &[],
    )
    .stdin(std::process::Stdio::null())
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("only used with --transport http"));
}

#[test]
fn listen_on_an_address_with_oa_http_listen() {
    let authz = Authz::start(Discovery::OAuth);
    let mock = Mock::start();
    let mut cmd = support::command(
        &[
            ("OA_TRANSPORT", "http"),
            ("OA_HTTP_LISTEN", "127.0.0.1:0"),
            ("OA_OAUTH_ISSUER", &authz.issuer()),
            ("OA_OAUTH_RESOURCE", "https://mcp.example/mcp"),
            ("OA_BASE_URL", &mock.base_url()),
            ("OA_CODE_EGRESS_AUTHORITY", "none"),
        ],
        &[],
    );
    cmd.stdin(std::process::Stdio::null());
    let s = HttpServer::spawn(cmd, 0);
    assert!(
        s.wait_log("listening on http://127.0.0.1:", Duration::from_secs(20)),
        "{}",
        s.log()
    );
    let log = s.log();
    let port: u16 = log
        .split("listening on http://127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap();
    let r = support::http::request(port, "GET", "/health", &[], b"");
    assert_eq!(r.status, 200);
    // The resource's own path gets its metadata too, and a token for it works.
    let token = authz.token(Key::Ed, "https://mcp.example/mcp", json!({}));
    let auth = format!("Bearer {token}");
    let msg = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": support::meta()}});
    let r = support::http::request(
        port,
        "POST",
        "/mcp",
        &[
            ("authorization", &auth),
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
        ],
        msg.to_string().as_bytes(),
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["id"], json!(3));
}
