//! End to end through the real jail: `oajail.httpRules` with TLS
//! termination. The proxy's CA comes from `tlsTerminate.caCertPath`/
//! `caKeyPath` (the jail does not install a per-run CA yet), the jailed curl
//! is given that CA's certificate, and the host-side HTTPS server (python's
//! `http.server` with its own CA, trusted by the proxy through
//! `extraCaCertPaths`) is admitted by an IP entry. Scratch files live under
//! /var/tmp: the jail's /tmp is private.
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
    let mut child = Command::new("python3")
        .args(["-c", script, dir.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let port = line.trim().parse().expect("server port");
    (Kill(child), port)
}

fn scratch() -> PathBuf {
    let dir = PathBuf::from(format!("/var/tmp/oajail-it-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("ok")).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

#[test]
fn http_rules_hold_in_the_jail_and_the_ca_key_stays_outside() {
    let dir = scratch();
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
         curl -s -o /dev/null --max-time 10 --noproxy '' -x $HTTPS_PROXY {url}/ok/hello.txt; echo \"untrusted $?\"\n\
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
