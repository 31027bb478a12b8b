//! The HTTP transport under `--jail`: the port is bound on the host and
//! handed to the jailed server as stdin, the issuer and the API are
//! reached through the jail's proxy (TLS terminated, the run's CA), and
//! the policy names the issuer's host beside the API's.
//!
//! Needs the `oajail` binary (as tests/jail.rs): `OA_MCP_OAJAIL`, else
//! `oajail` next to the server binary; missing under `OAJAIL_TEST_STRICT`
//! is a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod support;

use serde_json::{Value, json};
use std::process::Command;
use std::time::Duration;
use support::authz::{Authz, Discovery};
use support::http::HttpServer;
use support::mock::{Mock, TempDir};

/// The issuer and the API on this host's own address (the jail's loopback
/// is its own), one CA bundle for both, an empty home.
struct Lab {
    oajail: std::path::PathBuf,
    mock: Mock,
    authz: Authz,
    ip: std::net::Ipv4Addr,
    bundle: std::path::PathBuf,
    home: TempDir,
    _dir: TempDir,
}

impl Lab {
    fn new() -> Option<Self> {
        let oajail = support::oajail_binary()?;
        let ip = support::host_ip();
        let mock = Mock::start_on(ip);
        let authz = Authz::start_tls(Discovery::OAuth, ip);
        let bin_dir = std::path::Path::new(support::BIN)
            .parent()
            .unwrap()
            .to_path_buf();
        let mut bases = vec![bin_dir];
        bases.extend(std::env::var_os("HOME").map(std::path::PathBuf::from));
        bases.push("/var/tmp".into());
        let dir = TempDir::new_in(&bases, "http-jail");
        let bundle = dir.0.join("cas.pem");
        let mut pem = std::fs::read_to_string(&mock.ca_path).unwrap();
        pem.push_str(authz.ca_pem.as_deref().unwrap());
        std::fs::write(&bundle, pem).unwrap();
        Some(Self {
            oajail,
            mock,
            authz,
            ip,
            bundle,
            home: TempDir::new("http-jail-home"),
            _dir: dir,
        })
    }

    fn env(&self, port: u16) -> Vec<(String, String)> {
        vec![
            ("HOME".into(), self.home.0.display().to_string()),
            (
                "OA_BASE_URL".into(),
                format!("https://{}:{}/v3", self.ip, self.mock.port),
            ),
            (
                "OA_EXTRA_CA_CERTS".into(),
                self.bundle.display().to_string(),
            ),
            ("OA_OAUTH_ISSUER".into(), self.authz.issuer()),
            ("OA_OAUTH_RESOURCE".into(), support::http::resource(port)),
            ("OA_SANDBOX_TIMEOUT_MS".into(), "2000".into()),
            ("OA_OAJAIL".into(), self.oajail.display().to_string()),
        ]
    }

    /// `openagenda-mcp --jail --transport http --listen 127.0.0.1:PORT`.
    fn serve(&self, extra: &[(String, String)]) -> HttpServer {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = probe.local_addr().unwrap().port();
        drop(probe);
        let mut cmd = Command::new(support::BIN);
        cmd.args(["--jail", "--transport", "http", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .envs(self.env(port))
            .envs(extra.iter().cloned())
            .stdin(std::process::Stdio::null());
        let s = HttpServer::spawn(cmd, port);
        assert!(
            s.wait_log("listening on", Duration::from_secs(60)),
            "the jailed server did not start:\n{}",
            s.log()
        );
        s
    }
}

#[test]
fn the_jailed_http_server_is_reached_and_reaches_out_only_through_the_proxy() {
    let Some(lab) = Lab::new() else { return };
    let s = lab.serve(&[]);
    let log = s.log();
    assert!(log.contains("listening on http://127.0.0.1:"), "{log}");
    assert_eq!(
        s.request("GET", "/health", &[], b"").json(),
        json!({"status": "ok"})
    );
    let token = lab
        .authz
        .token_for("alice", &support::http::resource(s.port));
    let r = s.call_tool(
        &token,
        1,
        "execute",
        json!({"code": "const a = await oa.agendas.events.list({ path: { agendaUid: 3 } });\n\
                        const b = await oa.agendas.get({ path: { agendaUid: 3 } });\n\
                        return [a.error, b.error, a.data && a.data.data.length, b.data && b.data.uid];"}),
    );
    assert_eq!(
        r["result"]["structuredContent"]["result"],
        json!([null, null, 2, 3]),
        "{r}\n{}",
        s.log()
    );
    assert_eq!(lab.mock.seen.lock().unwrap().len(), 2);
    // The keys came through the proxy from the issuer the policy names.
    assert!(lab.authz.jwks_fetches() >= 1);
    // The server inside is confined: its egress check passed.
    let log = s.log();
    assert!(!log.contains("NOT bounded"), "{log}");
    let audit = s.audits(1);
    assert_eq!(audit.len(), 1, "{}", s.log());
    assert_eq!(audit[0]["transport"], json!("http"));
    // A token for another resource is refused inside the jail as outside.
    let other = lab
        .authz
        .token_for("alice", "https://elsewhere.example/mcp");
    let msg = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": support::meta()}});
    assert_eq!(s.post_modern(Some(&other), &msg).status, 401);
}

#[test]
fn the_printed_policy_names_the_issuer_and_the_exchange_beside_the_api() {
    let out = support::command(
        &[
            ("OA_TRANSPORT", "http"),
            ("OA_OAUTH_ISSUER", "https://auth.example.com/tenant"),
            ("OA_OAUTH_RESOURCE", "https://mcp.example.com/mcp"),
            ("OA_OAUTH_JWKS_URL", "https://keys.example.com/jwks.json"),
            (
                "OA_TOKEN_EXCHANGE_URL",
                "https://auth.example.com/tenant/token",
            ),
            ("OA_TOKEN_EXCHANGE_CLIENT_ID", "openagenda-mcp"),
            ("OA_TOKEN_EXCHANGE_CLIENT_SECRET", "s3cret"),
        ],
        &["print-egress-policy"],
    )
    .stdin(std::process::Stdio::null())
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let policy: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        policy["network"]["allowedDomains"],
        json!(["api.openagenda.com", "auth.example.com", "keys.example.com"])
    );
    // The server's own OAuth requests have rules of their own: GETs on the
    // issuer's and the key set's origins, one POST to the exchange.
    let rules: Vec<&str> = policy["oajail"]["httpRules"]["allow"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .filter(|r| !r.contains("//api.openagenda.com/"))
        .collect();
    assert_eq!(
        rules,
        [
            "GET https://auth.example.com/**",
            "GET https://keys.example.com/**",
            "POST https://auth.example.com/tenant/token"
        ]
    );
    // The client secret is masked for the exchange's host; the API key is
    // not in the policy (HTTP never uses it); the non-secret settings whose
    // names look secret are kept.
    assert_eq!(
        policy["credentials"]["envVars"],
        json!([{"name": "OA_TOKEN_EXCHANGE_CLIENT_SECRET", "mode": "mask", "injectHosts": ["auth.example.com"]}])
    );
    assert_eq!(
        policy["oajail"]["envKeep"],
        json!([
            "OA_OAUTH_ISSUER",
            "OA_OAUTH_RESOURCE",
            "OA_OAUTH_JWKS_URL",
            "OA_TOKEN_EXCHANGE_URL",
            "OA_TOKEN_EXCHANGE_CLIENT_ID"
        ])
    );
    // Tokens the exchange issues reach the jail as stand-ins, swapped for
    // the API host only.
    assert_eq!(
        policy["oajail"]["issuedTokens"],
        json!([{"tokenUrl": "https://auth.example.com/tenant/token", "injectHosts": ["api.openagenda.com"]}])
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("s3cret"));
    // oajail loads it.
    let hash = support::command(
        &[
            ("OA_TRANSPORT", "http"),
            ("OA_OAUTH_ISSUER", "https://auth.example.com/tenant"),
            ("OA_OAUTH_RESOURCE", "https://mcp.example.com/mcp"),
            ("OA_OAUTH_JWKS_URL", "https://keys.example.com/jwks.json"),
            (
                "OA_TOKEN_EXCHANGE_URL",
                "https://auth.example.com/tenant/token",
            ),
            ("OA_TOKEN_EXCHANGE_CLIENT_ID", "openagenda-mcp"),
            ("OA_TOKEN_EXCHANGE_CLIENT_SECRET", "s3cret"),
        ],
        &["print-egress-policy", "--format", "json"],
    )
    .stdin(std::process::Stdio::null())
    .output()
    .unwrap();
    assert!(
        hash.status.success(),
        "{}",
        String::from_utf8_lossy(&hash.stderr)
    );
}

#[test]
fn exchanged_tokens_are_masked_by_the_wrapper() {
    let Some(lab) = Lab::new() else { return };
    let (id, secret) = support::authz::EXCHANGE_CLIENT;
    let s = lab.serve(&[
        (
            "OA_TOKEN_EXCHANGE_URL".into(),
            format!("{}/token", lab.authz.issuer()),
        ),
        ("OA_TOKEN_EXCHANGE_CLIENT_ID".into(), id.into()),
        ("OA_TOKEN_EXCHANGE_CLIENT_SECRET".into(), secret.into()),
    ]);
    let aud = support::http::resource(s.port);
    let code = "const b = await oa.agendas.get({ path: { agendaUid: 5 } }); return b.data.uid;";
    // One token per caller, as a client holds it (the exchange is cached
    // per caller token).
    let alice = lab.authz.token_for("alice", &aud);
    let bob = lab.authz.token_for("bob", &aud);
    for (i, token) in [&alice, &bob, &alice].into_iter().enumerate() {
        let r = s.call_tool(token, i as i64 + 1, "execute", json!({"code": code}));
        assert_eq!(
            r["result"]["structuredContent"]["result"],
            json!(5),
            "{r}\n{}",
            s.log()
        );
    }
    // The issuer saw the real client secret (the wrapper swapped it into
    // the Basic credentials) and issued one token per caller.
    let issued = lab.authz.exchanges();
    assert_eq!(
        issued.iter().map(|(s, _)| s.as_str()).collect::<Vec<_>>(),
        ["alice", "bob"]
    );
    // The API saw each caller's real exchanged token...
    let seen: Vec<String> = (lab.mock.seen.lock().unwrap().iter())
        .map(|x| x.authorization.clone().unwrap_or_default())
        .collect();
    let want: Vec<String> = [&issued[0].1, &issued[1].1, &issued[0].1]
        .iter()
        .map(|t| format!("Bearer {t}"))
        .collect();
    assert_eq!(seen, want);
    // ...while the jailed server only ever held stand-ins: its audit
    // records fingerprint what it sent, which is not the real token. (The
    // log is read by its own thread: wait for the third record.)
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while s.log().matches("\"audit\"").count() < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = s.log();
    let fingerprints: Vec<String> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| {
            v["audit"]["credential"]["fingerprint"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(fingerprints.len(), 3, "{log}");
    for (_, real) in &issued {
        assert!(
            !log.contains(real.as_str()),
            "a real token in the server's log"
        );
        let fp = openagenda_mcp::oauth::fingerprint(real);
        assert!(
            !fingerprints.contains(&fp),
            "the jailed server held the real token"
        );
    }
    assert_eq!(
        fingerprints[0], fingerprints[2],
        "alice's stand-in is reused"
    );
    assert_ne!(fingerprints[0], fingerprints[1]);
    // An API that echoes the credential in its body: the proxy puts the
    // stand-in back before the jail reads it, the server redacts that.
    let echo = "return (await oa.agendas.get({ path: { agendaUid: 401 } })).error";
    let r = s.call_tool(&alice, 9, "execute", json!({"code": echo}));
    let text = r.to_string();
    assert!(text.contains("bad credential"), "{text}");
    assert!(
        !text.contains(&issued[0].1),
        "the real exchanged token reached the script: {text}"
    );
    assert!(text.contains("[redacted]"), "{text}");
}
