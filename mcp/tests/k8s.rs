//! The Kubernetes example (`examples/kubernetes/openagenda-mcp/openagenda-mcp.yaml`) as far as
//! this machine allows without a cluster (the schema check is
//! `.ci/examples-check`'s):
//!
//! - the Deployment asks for what the server needs: the full jail's pod
//!   settings, probes on `/health` at the port the server listens on,
//!   resources, the client secret from a Secret, caller affinity;
//! - the container's very arguments and ConfigMap environment (issuer,
//!   resource and exchange pointed at the test's own, the port a free one)
//!   serve: the startup probe's request, then an authorized execute whose
//!   API call carries the caller's exchanged token;
//! - the same in a container of the CI image under rootful podman, with the
//!   pod's security settings (its seccomp profile, an unmasked /proc, uid
//!   1000, no capabilities, no new privileges): `.ci/k8s-mcp` runs it (it
//!   is `#[ignore]`d in the plain test run, which has no engine), naming
//!   the image in `OA_MCP_K8S_IMAGE`; asked for without it, it fails.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod support;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::authz::{Authz, Discovery, EXCHANGE_CLIENT};
use support::http::HttpServer;
use support::mock::{Mock, TempDir};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The manifest's documents, by kind.
fn docs() -> Vec<Value> {
    let text = std::fs::read_to_string(
        root().join("examples/kubernetes/openagenda-mcp/openagenda-mcp.yaml"),
    )
    .unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect()
}

fn kind<'a>(docs: &'a [Value], k: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == json!(k))
        .unwrap_or_else(|| panic!("no {k}"))
}

#[test]
fn the_deployment_asks_for_what_the_server_needs() {
    let docs = docs();
    let deploy = kind(&docs, "Deployment");
    let pod = &deploy["spec"]["template"]["spec"];
    assert_eq!(pod["hostUsers"], json!(false));
    assert_eq!(pod["securityContext"]["runAsNonRoot"], json!(true));
    assert_eq!(
        pod["securityContext"]["seccompProfile"],
        json!({"type": "Localhost", "localhostProfile": "profiles/oajail-seccomp.json"})
    );
    let c = &pod["containers"][0];
    assert_eq!(c["securityContext"]["procMount"], json!("Unmasked"));
    assert_eq!(
        c["securityContext"]["allowPrivilegeEscalation"],
        json!(false)
    );
    assert_eq!(c["securityContext"]["capabilities"]["drop"], json!(["ALL"]));
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        args,
        ["--jail", "--transport", "http", "--listen", "0.0.0.0:8080"]
    );
    assert_eq!(c["ports"][0]["containerPort"], json!(8080));
    for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
        assert_eq!(
            c[probe]["httpGet"],
            json!({"path": "/health", "port": "http"}),
            "{probe}"
        );
    }
    assert!(
        c["resources"]["requests"]["memory"].is_string()
            && c["resources"]["requests"]["cpu"].is_string()
    );
    // The pod's memory limit covers the jail's own bound for the
    // ConfigMap's limits, so a script meets its heap cap before the
    // kernel's OOM killer acts in the pod (and may take the server).
    let config = &kind(&docs, "ConfigMap")["data"];
    let setting =
        |k: &str, default: u64| config[k].as_str().map_or(default, |v| v.parse().unwrap());
    let defaults = openagenda_mcp::config::Limits::default();
    let limits = openagenda_mcp::config::Limits {
        memory_mb: setting("OA_SANDBOX_MEMORY_MB", defaults.memory_mb),
        max_concurrency: setting("OA_MAX_CONCURRENCY", defaults.max_concurrency as u64) as usize,
        pool_size: setting("OA_WORKER_POOL", defaults.pool_size as u64) as usize,
        ..defaults
    };
    let bound = limits.jail_bounds().address_space_bytes;
    let pod_limit = quantity(c["resources"]["limits"]["memory"].as_str().unwrap());
    assert!(
        pod_limit >= bound,
        "limits.memory {pod_limit} is below the jail's bound {bound}"
    );
    assert_eq!(
        c["env"][0]["valueFrom"]["secretKeyRef"]["key"],
        json!("token-exchange-client-secret"),
        "the client secret comes from a Secret, not the ConfigMap"
    );
    assert!(config.get("OA_TOKEN_EXCHANGE_CLIENT_SECRET").is_none());
    let service = kind(&docs, "Service");
    assert_eq!(service["spec"]["sessionAffinity"], json!("ClientIP"));
    assert_eq!(service["spec"]["ports"][0]["targetPort"], json!("http"));
}

/// A Kubernetes memory quantity in bytes (the binary suffixes used here).
fn quantity(q: &str) -> u64 {
    let (n, unit) = q.split_at(q.find(|c: char| !c.is_ascii_digit()).unwrap_or(q.len()));
    let mult = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        other => panic!("unit {other} in {q}"),
    };
    n.parse::<u64>().unwrap() * mult
}

/// The container's arguments with the port replaced, and the ConfigMap's
/// environment with the issuer, resource and exchange pointed at the test's.
fn container(authz: &Authz, port: u16) -> (Vec<String>, Vec<(String, String)>) {
    let docs = docs();
    let c = &kind(&docs, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<String> = (c["args"].as_array().unwrap().iter())
        .map(|a| a.as_str().unwrap().replace(":8080", &format!(":{port}")))
        .collect();
    let mut env: Vec<(String, String)> =
        (kind(&docs, "ConfigMap")["data"].as_object().unwrap().iter())
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
            .collect();
    for (k, v) in &mut env {
        match k.as_str() {
            "OA_OAUTH_ISSUER" => *v = authz.issuer(),
            "OA_OAUTH_RESOURCE" => *v = support::http::resource(port),
            "OA_TOKEN_EXCHANGE_URL" => *v = format!("{}/token", authz.issuer()),
            "OA_TOKEN_EXCHANGE_CLIENT_ID" => *v = EXCHANGE_CLIENT.0.to_owned(),
            _ => {}
        }
    }
    env.push((
        "OA_TOKEN_EXCHANGE_CLIENT_SECRET".into(),
        EXCHANGE_CLIENT.1.into(),
    ));
    (args, env)
}

/// The issuer and the API on this host's own address (reachable from a
/// jail's proxy and from a host-network container), one CA bundle.
struct Lab {
    mock: Mock,
    authz: Authz,
    ip: std::net::Ipv4Addr,
    bundle: PathBuf,
    dir: TempDir,
}

impl Lab {
    fn new() -> Self {
        let ip = support::host_ip();
        let mock = Mock::start_on(ip);
        let authz = Authz::start_tls(Discovery::OAuth, ip);
        let dir = TempDir::new_in(&["/var/tmp".into()], "k8s");
        let bundle = dir.0.join("cas.pem");
        let mut pem = std::fs::read_to_string(&mock.ca_path).unwrap();
        pem.push_str(authz.ca_pem.as_deref().unwrap());
        std::fs::write(&bundle, pem).unwrap();
        // The container's uid 1000 reads it.
        use std::os::unix::fs::PermissionsExt;
        for (p, mode) in [(&dir.0, 0o755), (&bundle, 0o644)] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        Self {
            mock,
            authz,
            ip,
            bundle,
            dir,
        }
    }

    fn extra_env(&self) -> Vec<(String, String)> {
        vec![
            (
                "OA_BASE_URL".into(),
                format!("https://{}:{}/v3", self.ip, self.mock.port),
            ),
            (
                "OA_EXTRA_CA_CERTS".into(),
                self.bundle.display().to_string(),
            ),
        ]
    }

    /// The startup probe, then one authorized execute through the server.
    fn exercise(&self, s: &HttpServer) {
        let mut health = None;
        for _ in 0..120 {
            let r = support::http::try_get(s.port, "/health");
            if let Some(r) = r.filter(|r| r.status == 200) {
                health = Some(r);
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        let health = health.unwrap_or_else(|| panic!("no /health:\n{}", s.log()));
        assert_eq!(health.json(), json!({"status": "ok"}));
        let token = self
            .authz
            .token_for("alice", &support::http::resource(s.port));
        let code = "return (await oa.agendas.get({ path: { agendaUid: 6 } })).data.uid";
        let r = s.call_tool(&token, 1, "execute", json!({"code": code}));
        assert_eq!(
            r["result"]["structuredContent"]["result"],
            json!(6),
            "{r}\n{}",
            s.log()
        );
        let issued = self.authz.exchanges();
        let seen = self.mock.seen.lock().unwrap().clone();
        assert_eq!(
            seen.last().unwrap().authorization,
            Some(format!("Bearer {}", issued.last().unwrap().1))
        );
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn the_containers_arguments_serve_jailed() {
    let Some(oajail) = support::oajail_binary() else {
        return;
    };
    let lab = Lab::new();
    let port = free_port();
    let (args, env) = container(&lab.authz, port);
    let home = TempDir::new("k8s-home");
    let mut cmd = Command::new(support::BIN);
    cmd.args(&args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &home.0)
        .env("OA_OAJAIL", &oajail)
        .envs(env)
        .envs(lab.extra_env())
        .stdin(std::process::Stdio::null());
    let s = HttpServer::spawn(cmd, port);
    lab.exercise(&s);
    assert!(!s.log().contains("NOT bounded"), "{}", s.log());
}

#[test]
#[ignore = "needs the CI image in rootful podman: .ci/k8s-mcp runs it"]
fn the_image_runs_it_under_podman_with_the_pods_settings() {
    let image = std::env::var("OA_MCP_K8S_IMAGE")
        .ok()
        .filter(|i| !i.is_empty())
        .expect("OA_MCP_K8S_IMAGE names the image (.ci/k8s-mcp sets it)");
    // Asked for by name, it runs or fails: no oajail is a failure here.
    support::oajail_binary().expect("the oajail binary beside openagenda-mcp");
    let bin_dir = Path::new(support::BIN).parent().unwrap();
    let lab = Lab::new();
    let port = free_port();
    let (args, env) = container(&lab.authz, port);
    let profile = root().join("examples/containers/oajail-seccomp.json");
    let name = format!("oa-mcp-k8s-{}", std::process::id());
    let mut cmd = Command::new("podman");
    cmd.args([
        "run",
        "--rm",
        "--name",
        &name,
        "--network",
        "host",
        "--user",
        "1000:1000",
    ])
    // As root, podman raises the open-file and process limits it sets
    // (which needs CAP_SYS_RESOURCE): ask for values it may set; crun
    // refuses this machine's hybrid cgroup layout: runc (as the container
    // matrix finds).
    .args([
        "--ulimit",
        "nofile=8192:8192",
        "--ulimit",
        "nproc=8192:8192",
    ])
    .args(["--runtime", "runc"])
    .arg("--security-opt")
    .arg(format!("seccomp={}", profile.display()))
    .args([
        "--security-opt",
        "unmask=ALL",
        "--security-opt",
        "no-new-privileges",
        "--cap-drop",
        "ALL",
    ])
    .arg("-v")
    .arg(format!("{}:/opt/oajail/bin:ro", bin_dir.display()))
    .arg("-v")
    .arg(format!("{0}:{0}:ro", lab.dir.0.display()));
    for (k, v) in env.iter().chain(lab.extra_env().iter()) {
        cmd.arg("-e").arg(format!("{k}={v}"));
    }
    cmd.arg(&image)
        .arg("/opt/oajail/bin/openagenda-mcp")
        .args(&args);
    cmd.stdin(std::process::Stdio::null());
    let s = HttpServer::spawn(cmd, port);
    let guard = scopeguard(&name);
    lab.exercise(&s);
    drop(guard);
}

/// Removes the container however the test ends.
struct Stop(String);

impl Drop for Stop {
    fn drop(&mut self) {
        let _ = Command::new("podman")
            .args(["rm", "-f", "-t", "0", &self.0])
            .output();
    }
}

fn scopeguard(name: &str) -> Stop {
    Stop(name.to_owned())
}
