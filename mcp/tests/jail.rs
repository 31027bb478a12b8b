//! End to end through a real oajail jail and its proxy: the policy printed by
//! `print-egress-policy` is what oajail enforces, the server's boot check
//! accepts the confinement, and `execute`'s API calls reach the (TLS) mock
//! only through the jail's proxy.
//!
//! Needs the `oajail` binary: `OA_MCP_OAJAIL`, else `oajail` next to the
//! server binary (a workspace build puts it there). Without one the test
//! fails under `OAJAIL_TEST_STRICT` (the CI) and returns otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod support;

use serde_json::{Value, json};
use std::process::{Command, Stdio};
use support::mock::{Mock, TempDir};
use support::{Server, error_code};

const KEY: &str = "oa_sk_jail_test_key";

#[test]
fn execute_through_oajail_and_its_proxy() {
    let Some(oajail) = oajail_binary() else {
        // No oajail binary in this build (the package was tested alone).
        assert!(
            std::env::var_os("OAJAIL_TEST_STRICT").is_none(),
            "OAJAIL_TEST_STRICT is set but there is no oajail binary: build the workspace or set OA_MCP_OAJAIL"
        );
        return;
    };
    // Loopback is exempted from the proxy (NO_PROXY) and closed by the jail,
    // so the mock listens on this host's own non-loopback address, which
    // the policy admits deliberately as an IP entry.
    let ip = support::host_ip();
    let mock = Mock::start_on(ip);
    let base = format!("https://{ip}:{}/v3", mock.port);
    // The jail has a private /tmp: keep our files next to the binary (the
    // policy lets the server read it), or, when that is not writable (the
    // unprivileged CI run), in this user's home or /var/tmp.
    let bin_dir = std::path::Path::new(support::BIN)
        .parent()
        .unwrap()
        .to_path_buf();
    let mut bases = vec![bin_dir];
    bases.extend(std::env::var_os("HOME").map(std::path::PathBuf::from));
    bases.push("/var/tmp".into());
    let dir = TempDir::new_in(&bases, "jail");
    let ca = dir.0.join("ca.pem");
    // HOME is denied to the server (`denyRead: ["~"]`): give it an empty one.
    let home = TempDir::new("jail-home");
    std::fs::copy(&mock.ca_path, &ca).unwrap();
    let policy = dir.0.join("policy.json");
    // The CA bundle is one of the files the server reads, so it is in the
    // policy: print it with the same configuration the server runs with.
    let out = support::command(
        &[
            ("OA_BASE_URL", &base),
            ("OA_EXTRA_CA_CERTS", ca.to_str().unwrap()),
        ],
        &["print-egress-policy", "--format", "srt"],
    )
    .stdin(Stdio::null())
    .output()
    .unwrap();
    assert!(out.status.success());
    std::fs::write(&policy, &out.stdout).unwrap();
    let policy_json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        policy_json["network"]["allowedDomains"],
        json!([ip.to_string()])
    );

    let mut cmd = Command::new(&oajail);
    cmd.arg("-s")
        .arg(&policy)
        .arg("--env-keep")
        .arg("OA_API_KEY")
        .arg("--")
        .arg(support::BIN)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home.0.as_path())
        .env("OA_BASE_URL", &base)
        .env("OA_EXTRA_CA_CERTS", &ca)
        .env("OA_API_KEY", KEY)
        .env("OA_SANDBOX_TIMEOUT_MS", "2000");
    let mut s = Server::start_command(cmd);
    let r = s.execute(
        "const a = await oa.agendas.events.list({ path: { agendaUid: 3 } });\n\
         const b = await oa.agendas.get({ path: { agendaUid: 3 } });\n\
         return [a.error, b.error, a.data && a.data.data.length, b.data && b.data.auth];",
    );
    assert_eq!(
        r["structuredContent"]["result"],
        json!([null, null, 2, true]),
        "{r}\n{}",
        s.stderr.lock().unwrap()
    );
    let seen = mock.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert!(
        seen.iter()
            .all(|x| x.authorization.as_deref() == Some(&format!("Bearer {KEY}")))
    );
    // Hostile code still gets its codes inside the jail.
    assert_eq!(error_code(&s.execute("while(true){}")), "timeout");
    assert_eq!(
        error_code(&s.execute("new Array(2**32-1).join()")),
        "timeout"
    );
    let log = s.stderr.lock().unwrap().clone();
    assert!(
        !log.contains("egress is NOT bounded"),
        "the server did not see its wrapper:\n{log}"
    );
}

fn oajail_binary() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("OA_MCP_OAJAIL") {
        return Some(p.into());
    }
    let sibling = std::path::Path::new(support::BIN).parent()?.join("oajail");
    sibling.is_file().then_some(sibling)
}
