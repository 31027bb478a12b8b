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

/// A TLS mock of the API on this host's non-loopback address, the files the
/// jailed server reads, and the policy printed for that configuration.
struct Lab {
    oajail: std::path::PathBuf,
    mock: Mock,
    base: String,
    _dir: TempDir,
    ca: std::path::PathBuf,
    home: TempDir,
    policy: std::path::PathBuf,
}

impl Lab {
    /// `None` when there is no oajail binary (refused under
    /// `OAJAIL_TEST_STRICT`, as in CI).
    fn new() -> Option<Self> {
        // No oajail binary in this build (the package was tested alone).
        let oajail = support::oajail_binary()?;
        // Loopback is exempted from the proxy (NO_PROXY) and closed by the
        // jail, so the mock listens on this host's own non-loopback address,
        // which the policy admits deliberately as an IP entry.
        let ip = support::host_ip();
        let mock = Mock::start_on(ip);
        let base = format!("https://{ip}:{}/v3", mock.port);
        // The jail has a private /tmp: keep our files next to the binary
        // (the policy lets the server read it), or, when that is not
        // writable (the unprivileged CI run), in this user's home or
        // /var/tmp.
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
        // The CA bundle is one of the files the server reads, so it is in
        // the policy: print it with the same configuration the server runs
        // with. The proxy terminates the API host's TLS and verifies the
        // mock with that same CA (`tlsTerminate.extraCaCertPaths`).
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
        assert_eq!(
            policy_json["network"]["tlsTerminate"]["extraCaCertPaths"],
            json!([std::fs::canonicalize(&ca).unwrap()])
        );
        Some(Self {
            oajail,
            mock,
            base,
            _dir: dir,
            ca,
            home,
            policy,
        })
    }

    /// oajail enforcing the printed policy around the server (`args`,
    /// `envs` added to the server's environment).
    fn jailed(&self, args: &[&str], envs: &[(&str, &str)]) -> Server {
        let mut cmd = Command::new(&self.oajail);
        cmd.arg("-s")
            .arg(&self.policy)
            .arg("--")
            .arg(support::BIN)
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", self.home.0.as_path())
            .env("OA_BASE_URL", &self.base)
            .env("OA_API_KEY", KEY)
            .env("OA_SANDBOX_TIMEOUT_MS", "2000");
        for (k, v) in envs {
            cmd.env(k, v);
        }
        Server::start_command(cmd)
    }
}

#[test]
fn execute_through_oajail_and_its_proxy() {
    let Some(lab) = Lab::new() else { return };
    let mut s = lab.jailed(&[], &[("OA_EXTRA_CA_CERTS", lab.ca.to_str().unwrap())]);
    let r = s.execute(
        "const a = await oa.agendas.events.list({ path: { agendaUid: 3 } });\n\
         const b = await oa.agendas.get({ path: { agendaUid: 3 } });\n\
         return [a.error, b.error, a.data && a.data.data.length, b.data && b.data.uid];",
    );
    assert_eq!(
        r["structuredContent"]["result"],
        json!([null, null, 2, 3]),
        "{r}\n{}",
        s.stderr.lock().unwrap()
    );
    let seen = lab.mock.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    support::assert_real_key(&seen, KEY);
    // Inside the jail the key is a per-run stand-in; only the proxy swaps
    // the real one in (asserted above by what the mock saw).
    let inside = jailed_key_values();
    assert!(
        !inside.is_empty(),
        "no jailed process with OA_API_KEY found"
    );
    for v in &inside {
        assert!(
            v.len() == 46 && v.starts_with("oajail_masked_") && v != KEY,
            "OA_API_KEY inside the jail: {v:?}"
        );
    }
    // Hostile code still gets its codes inside the jail.
    assert_eq!(error_code(&s.execute("while(true){}")), "timeout");
    assert_eq!(
        error_code(&s.execute("new Array(2**32-1).join()")),
        "timeout"
    );
    // A path parameter carrying a slash leaves the server as one encoded
    // segment (`3%2Fevents`): the proxy refuses it on the governed API host
    // rather than let the upstream decode it into another path.
    let r = s.execute(
        "const a = await oa.agendas.get({ path: { agendaUid: '3/events' } });\n\
         return [a.error && a.error.status, a.error && String(a.error.body)];",
    );
    let result = &r["structuredContent"]["result"];
    assert_eq!(result[0], json!(403), "{r}");
    assert!(
        result[1]
            .as_str()
            .unwrap_or("")
            .contains("oajail.httpRules"),
        "{r}"
    );
    assert_eq!(
        lab.mock.seen.lock().unwrap().len(),
        2,
        "nothing new upstream"
    );
    let log = s.stderr_with("oajail: proxy refused");
    assert!(
        !log.contains("egress is NOT bounded"),
        "the server did not see its wrapper:\n{log}"
    );
    assert!(log.contains("oajail: proxy refused"), "live line: {log}");
}

/// Read-only mode is the wrapper's: a server that no longer honours it (here
/// started with `--allow-writes` and no boot check, standing in for a
/// compromised server process) under the read-only policy reads, but its
/// write and its read of a path outside the spec's read set are refused by
/// the proxy with 403, and never reach the API.
#[test]
fn the_wrapper_refuses_writes_and_other_paths_of_a_rogue_server() {
    let Some(lab) = Lab::new() else { return };
    // A spec that also has a GET outside the built-in read set; the file is
    // outside `~` so the jailed server can read it without a policy entry.
    let spec = TempDir::new_in(&["/var/tmp".into()], "rogue-spec");
    let spec_path = spec.0.join("rogue.yaml");
    std::fs::write(&spec_path, ROGUE_SPEC).unwrap();
    let mut s = lab.jailed(
        &["--allow-writes"],
        &[
            ("OA_CODE_EGRESS_AUTHORITY", "none"),
            ("OA_OPENAPI", spec_path.to_str().unwrap()),
            // The proxy's per-run CA: the bundle oajail gives the jail.
            ("OA_EXTRA_CA_CERTS", "/tmp/.oajail-trust/ca-bundle.pem"),
        ],
    );
    let r = s.execute(
        "const ok = await oa.events.list({ path: { agendaUid: 3 } });\n\
         const w = await oa.events.create({ path: { agendaUid: 3 }, body: { title: 'x' } });\n\
         const m = await oa.members.list({ path: { agendaUid: 3 } });\n\
         const st = (x) => x.error && x.error.status;\n\
         const why = (x) => x.error && String(x.error.body);\n\
         return [ok.error, st(w), why(w), st(m), why(m)];",
    );
    let result = &r["structuredContent"]["result"];
    let log = s.stderr.lock().unwrap().clone();
    assert_eq!(result[0], json!(null), "{r}\n{log}");
    assert_eq!(result[1], json!(403), "{r}\n{log}");
    assert!(
        result[2]
            .as_str()
            .unwrap_or("")
            .contains("oajail.httpRules.deny"),
        "the write names the deny rule: {r}"
    );
    assert_eq!(result[3], json!(403), "{r}\n{log}");
    assert!(
        result[4]
            .as_str()
            .unwrap_or("")
            .contains("no oajail.httpRules.allow entry matches"),
        "{r}"
    );
    let seen = lab.mock.seen.lock().unwrap().clone();
    let targets: Vec<_> = seen
        .iter()
        .map(|x| format!("{} {}", x.method, x.target))
        .collect();
    assert_eq!(
        targets,
        ["GET /v3/agendas/3/events"],
        "only the read reached the API"
    );
    // The live line is the supervisor's, on its own stderr: it may land a
    // moment after the reply.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut log = log;
    while !log.contains("oajail: proxy refused") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        log = s.stderr.lock().unwrap().clone();
    }
    assert!(log.contains("oajail: proxy refused"), "live lines: {log}");
}

/// The rogue server's spec: one read in the built-in read set, one write,
/// one GET outside the read set.
const ROGUE_SPEC: &str = "openapi: 3.0.3
info: {title: Rogue, version: '1'}
paths:
  /agendas/{agendaUid}/events:
    parameters:
      - {name: agendaUid, in: path, required: true, schema: {type: integer}}
    get: {operationId: events.list, responses: {'200': {description: ok}}}
    post:
      operationId: events.create
      requestBody: {content: {application/json: {schema: {type: object}}}}
      responses: {'200': {description: ok}}
  /agendas/{agendaUid}/members:
    parameters:
      - {name: agendaUid, in: path, required: true, schema: {type: integer}}
    get: {operationId: members.list, responses: {'200': {description: ok}}}
";

/// `OA_API_KEY` of every process in another pid namespace than this test
/// (the jailed servers of this binary's tests) whose environment is readable.
fn jailed_key_values() -> Vec<String> {
    let own = std::fs::read_link("/proc/self/ns/pid").unwrap();
    let mut values = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let dir = entry.path();
        if std::fs::read_link(dir.join("ns/pid")).is_ok_and(|ns| ns == own) {
            continue;
        }
        let Ok(env) = std::fs::read(dir.join("environ")) else {
            continue;
        };
        for var in env.split(|b| *b == 0) {
            if let Some(v) = var.strip_prefix(b"OA_API_KEY=") {
                values.push(String::from_utf8_lossy(v).into_owned());
            }
        }
    }
    values
}
