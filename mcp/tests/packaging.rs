//! The one-click bundle and the registry entry: `packaging/mcpb/manifest.json`
//! and `server.json` validated against their schemas (vendored in
//! `tests/schemas/`, pinned by sha256), `packaging/mcpb/build.sh` run on
//! this build's binaries, and the bundle installed and started as Claude
//! Desktop does (unzip, `${__dirname}` and `${user_config.api_key}`
//! substituted into `mcp_config`), serving an execute from inside its jail.
//!
//! Needs python3 with `jsonschema` (`OA_MCP_PYTHON`, as .ci/install-deps
//! installs) and the `oajail` binary (as tests/jail.rs).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod support;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;
use support::Server;
use support::mock::{Mock, TempDir};

const MCPB_SCHEMA_SHA: &str = "068557824c651d6d49b86ad132adeafe62ca788d918b3e1e2b224bf0f91320fd";
const SERVER_SCHEMA_SHA: &str = "058f5c14e1563de305c6b8e9038a1cf29dbdfca203f0ac85b2a118c9fa08ce44";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn schema(name: &str, sha: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/schemas")
        .join(name);
    let got = openagenda_mcp::log::hex(&Sha256::digest(std::fs::read(&path).unwrap()));
    assert_eq!(
        got, sha,
        "{name} changed: replace a schema deliberately, with its pin"
    );
    path
}

/// Validates `doc` against `schema` with python's jsonschema (draft 7,
/// formats checked); returns the errors.
fn validate(schema: &Path, doc: &Path) -> Vec<String> {
    let python = std::env::var("OA_MCP_PYTHON").unwrap_or_else(|_| "python3".into());
    let code = "import json, sys, jsonschema\n\
                s = json.load(open(sys.argv[1])); d = json.load(open(sys.argv[2]))\n\
                v = jsonschema.Draft7Validator(s, format_checker=jsonschema.FormatChecker())\n\
                for e in v.iter_errors(d): print('/'.join(map(str, e.absolute_path)) + ': ' + e.message)\n";
    let out = Command::new(&python)
        .args(["-c", code])
        .arg(schema)
        .arg(doc)
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e} (install jsonschema as .ci/install-deps does)"));
    assert!(
        out.status.success(),
        "{python} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_manifest_and_server_json_are_valid_and_agree() {
    let manifest_path = root().join("packaging/mcpb/manifest.json");
    let server_path = root().join("server.json");
    let mcpb = schema("mcpb-manifest-v0.4.schema.json", MCPB_SCHEMA_SHA);
    let registry = schema("server.schema.json", SERVER_SCHEMA_SHA);
    assert_eq!(validate(&mcpb, &manifest_path), Vec::<String>::new());
    assert_eq!(validate(&registry, &server_path), Vec::<String>::new());
    // The validator is real: a broken document is refused.
    let dir = TempDir::new("bad-manifest");
    let bad = dir.0.join("m.json");
    let mut m = read_json(&manifest_path);
    m["server"]["type"] = json!("shell");
    m["surprise"] = json!(1);
    std::fs::write(&bad, m.to_string()).unwrap();
    assert_eq!(
        validate(&mcpb, &bad).len(),
        2,
        "{:?}",
        validate(&mcpb, &bad)
    );

    let m = read_json(&manifest_path);
    let s = read_json(&server_path);
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(m["version"], json!(version));
    assert_eq!(s["version"], json!(version));
    let config = &m["server"]["mcp_config"];
    assert_eq!(m["server"]["type"], json!("binary"));
    assert_eq!(
        config["command"],
        json!("${__dirname}/server/openagenda-mcp")
    );
    assert_eq!(
        config["args"],
        json!(["--jail"]),
        "the bundle always runs jailed"
    );
    assert_eq!(
        config["env"],
        json!({"OA_API_KEY": "${user_config.api_key}"})
    );
    assert_eq!(m["user_config"]["api_key"]["sensitive"], json!(true));
    assert_eq!(m["compatibility"]["platforms"], json!(["linux"]));
    let names: Vec<&str> = m["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["search_docs", "execute"]);
    let pkg = &s["packages"][0];
    assert_eq!(pkg["registryType"], json!("mcpb"));
    let id = pkg["identifier"].as_str().unwrap();
    assert!(
        id.starts_with("https://github.com/")
            && id.ends_with(&format!("/v{version}/openagenda.mcpb")),
        "{id}"
    );
    assert_eq!(pkg["packageArguments"][0]["value"], json!("--jail"));
    assert_eq!(pkg["environmentVariables"][0]["isSecret"], json!(true));
}

/// `${__dirname}` and `${user_config.NAME}` as the client substitutes them.
fn substitute(text: &str, dir: &Path, key: &str) -> String {
    text.replace("${__dirname}", &dir.display().to_string())
        .replace("${user_config.api_key}", key)
}

#[test]
fn the_bundle_builds_installs_and_serves_jailed() {
    let Some(oajail) = support::oajail_binary() else {
        return;
    };
    let bin_dir = Path::new(support::BIN).parent().unwrap();
    assert_eq!(oajail.parent(), Some(bin_dir));
    // Outside /tmp: the jail has a private one, and a client installs
    // bundles under the user's home.
    let bases = [bin_dir.to_path_buf(), PathBuf::from("/var/tmp")];
    let work = TempDir::new_in(&bases, "mcpb");
    let out = work.0.join("out");
    let build = Command::new("bash")
        .arg(root().join("packaging/mcpb/build.sh"))
        .arg("--bin-dir")
        .arg(bin_dir)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        build.status.success(),
        "{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let bundle = out.join("openagenda.mcpb");
    let sha = openagenda_mcp::log::hex(&Sha256::digest(std::fs::read(&bundle).unwrap()));
    let built = read_json(&out.join("server.json"));
    assert_eq!(built["packages"][0]["fileSha256"], json!(sha));
    let registry = schema("server.schema.json", SERVER_SCHEMA_SHA);
    assert_eq!(
        validate(&registry, &out.join("server.json")),
        Vec::<String>::new()
    );

    // Install: unzip as the client does.
    let installed = work.0.join("Claude Extensions/openagenda-mcp");
    let unzip = Command::new("python3")
        .args(["-c", "import sys, zipfile, os\nz = zipfile.ZipFile(sys.argv[1])\nfor i in z.infolist():\n    p = z.extract(i, sys.argv[2]); os.chmod(p, i.external_attr >> 16 & 0o777)\nprint(' '.join(sorted(z.namelist())))"])
        .arg(&bundle)
        .arg(&installed)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&unzip.stdout).trim(),
        "manifest.json server/oajail server/openagenda-mcp server/openagenda-mcp-worker"
    );
    let manifest = read_json(&installed.join("manifest.json"));
    let config = &manifest["server"]["mcp_config"];
    let key = "oa_sk_bundle_key";
    let command = substitute(config["command"].as_str().unwrap(), &installed, key);
    let args: Vec<String> = (config["args"].as_array().unwrap().iter())
        .map(|a| substitute(a.as_str().unwrap(), &installed, key))
        .collect();
    let ip = support::host_ip();
    let mock = Mock::start_on(ip);
    let ca = installed.join("mock-ca.pem");
    std::fs::copy(&mock.ca_path, &ca).unwrap();
    let home = TempDir::new("mcpb-home");
    let mut cmd = Command::new(command);
    cmd.args(&args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &home.0)
        .env("OA_BASE_URL", format!("https://{ip}:{}/v3", mock.port))
        .env("OA_EXTRA_CA_CERTS", &ca);
    for (k, v) in config["env"].as_object().unwrap() {
        cmd.env(k, substitute(v.as_str().unwrap(), &installed, key));
    }
    let mut s = Server::start_command(cmd);
    let r = s.execute("return (await oa.agendas.get({ path: { agendaUid: 8 } })).data.uid");
    assert_eq!(
        r["structuredContent"]["result"],
        json!(8),
        "{r}\n{}",
        s.stderr.lock().unwrap()
    );
    // Jailed, with the key swapped in by the bundled oajail's proxy.
    let log = s.stderr.lock().unwrap().clone();
    assert!(!log.contains("NOT bounded"), "{log}");
    support::assert_real_key(&mock.seen.lock().unwrap(), key);
}
