//! Issue 27, "safe where the list ends", through the real `oajail` binary
//! (run as root and as the unprivileged test user): one test per part.
//!
//! - the built-in secret stores stay unreadable under a settings file that
//!   omits them, and `allowRead` opts one back in;
//! - credentials found by their value in the environment, whatever the
//!   variable is called;
//! - `oajail.httpRules` decided on the decoded path, against real
//!   upstreams on loopback that decode `%XX` and strip `;` parameters;
//! - `policy check` (and a run) warn about entries that cannot work and
//!   about writable places a host tool later runs;
//! - shared memory bounded when no cgroup holds the jail's memory.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::*;

/// A scratch directory under /var/tmp (the jail's /tmp is private), made
/// readable by everyone, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        use std::os::unix::fs::PermissionsExt;
        let dir = PathBuf::from(format!(
            "/var/tmp/oajail-it-defaults-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("home/ws")).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        Scratch(dir)
    }

    fn home(&self) -> PathBuf {
        self.0.join("home")
    }

    /// Write `text` at `rel` under the home, making its parents.
    fn plant(&self, rel: &str, text: &str) {
        let path = self.home().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// A settings file with this `filesystem` object.
    fn settings(&self, name: &str, filesystem: &str) -> PathBuf {
        let path = self.0.join(name);
        let text = format!(
            r#"{{"network":{{"allowedDomains":[],"deniedDomains":[]}},"filesystem":{filesystem}}}"#
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    /// `oajail -s SETTINGS ARGS…` with HOME the scratch home, run from
    /// its `ws` directory.
    fn oajail(&self, settings: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(OAJAIL);
        cmd.arg("-s")
            .arg(settings)
            .args(args)
            .env("HOME", self.home())
            .env_remove("OAJAIL_SETTINGS")
            .env_remove("XDG_CONFIG_HOME")
            .current_dir(self.home().join("ws"));
        cmd
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Credential stores the built-in list holds (paths under the home).
const STORES: &[&str] = &[
    ".aws/credentials",
    ".config/gh/hosts.yml",
    ".git-credentials",
    ".docker/config.json",
    ".kube/config",
    ".bash_history",
    ".local/share/keyrings/login.keyring",
];

/// `cat` every store in one jailed shell: one `READ <rel>` or `NO <rel>`
/// line each.
fn read_stores(s: &Scratch, settings: &Path) -> String {
    let script: String = STORES
        .iter()
        .map(|r| {
            format!(
                "if cat \"$HOME/{r}\" >/dev/null 2>&1; then echo READ {r}; else echo NO {r}; fi; "
            )
        })
        .collect();
    ok(s.oajail(settings, &["-c", &script]).output().unwrap())
}

#[test]
fn secret_stores_stay_denied_under_a_settings_file_that_omits_them() {
    let s = Scratch::new("stores");
    for rel in STORES {
        s.plant(rel, "secret\n");
    }
    s.plant(".config/gh/config.yml", "editor: vim\n");
    let bare = s.settings(
        "bare.json",
        r#"{"denyRead":[],"allowWrite":["."],"denyWrite":[]}"#,
    );
    let out = read_stores(&s, &bare);
    for rel in STORES {
        assert!(out.contains(&format!("NO {rel}")), "{rel} readable:\n{out}");
    }
    // `allowRead` opts one store back in (named exactly), and one file
    // inside another (the rest of that store stays denied).
    let opted = s.settings(
        "opted.json",
        r#"{"denyRead":[],"allowRead":["~/.aws","~/.config/gh/config.yml"],"allowWrite":["."],"denyWrite":[]}"#,
    );
    let out = read_stores(&s, &opted);
    assert!(out.contains("READ .aws/credentials"), "{out}");
    for rel in STORES.iter().filter(|r| !r.starts_with(".aws/")) {
        assert!(out.contains(&format!("NO {rel}")), "{rel} readable:\n{out}");
    }
    let gh = ok(s
        .oajail(
            &opted,
            &[
                "--",
                "cat",
                &s.home().join(".config/gh/config.yml").display().to_string(),
            ],
        )
        .output()
        .unwrap());
    assert_eq!(gh, "editor: vim\n");
    // `explain` says which entries the file gave and which are built in.
    let text = ok(s.oajail(&opted, &["explain"]).output().unwrap());
    assert!(
        text.contains("~/.git-credentials  (built-in: git credential-store passwords and tokens)"),
        "{text}"
    );
    assert!(!text.contains("~/.aws  (built-in"), "{text}");
}

#[test]
fn credentials_are_scrubbed_by_value_whatever_the_name() {
    let secret = format!("c4n4ry{}", std::process::id());
    let vars = [
        (
            "APP_DB",
            format!("postgresql://db:5432/app?password={secret}"),
        ),
        (
            "STORAGE",
            format!("DefaultEndpointsProtocol=https;AccountName=a;AccountKey={secret}=="),
        ),
        (
            "SQLSERVER",
            format!("Server=tcp:db,1433;Database=app;User ID=app;Password={secret};"),
        ),
        ("JDBC", format!("jdbc:sqlserver://db;user=sa;pwd={secret}")),
        (
            "PGCONN",
            format!("host=db dbname=app user=app password={secret}"),
        ),
        (
            "UPSTREAM",
            format!("https://me:{secret}@mirror.test/simple"),
        ),
        (
            "SESSION",
            format!("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIx{secret}.c2lnbmF0dXJlMTIz"),
        ),
        (
            "DEPLOY",
            format!(
                "-----BEGIN OPENSSH PRIVATE KEY-----\n{secret}\n-----END OPENSSH PRIVATE KEY-----"
            ),
        ),
        ("DB_PW", secret.clone()),
        ("LDAP_PASSWD", secret.clone()),
        ("SMTP_PASS", secret.clone()),
    ];
    let mut cmd = oajail("envval", &["--", "env"]);
    for (k, v) in &vars {
        cmd.env(k, v);
    }
    cmd.env("EDITOR", "vim")
        .env("DOCS_URL", "https://example.test/docs?page=2&q=password")
        .env("MIRROR_URL", "https://mirror.test/simple");
    let env = ok(cmd.output().unwrap());
    assert!(
        !env.contains(&secret),
        "a credential reached the jail:\n{env}"
    );
    for (k, _) in &vars {
        assert!(!env.contains(&format!("{k}=")), "{k} passed:\n{env}");
    }
    for kept in [
        "EDITOR=vim",
        "DOCS_URL=https://example.test/docs?page=2&q=password",
        "MIRROR_URL=https://mirror.test/simple",
    ] {
        assert!(env.lines().any(|l| l == kept), "{kept} missing:\n{env}");
    }
    // `explain` says why, by rule.
    let o = oajail("envval-x", &["explain", "--json"])
        .env("STORAGE", &vars[1].1)
        .output()
        .unwrap();
    let text = ok(o);
    assert!(
        text.contains("STORAGE: the value holds a password or key in an assignment"),
        "{text}"
    );
}

/// The attacks on `oajail.httpRules`: (name, the upstreams that read it
/// as what the rules deny, curl arguments with `U` for the upstream's base
/// URL). Each names `/v3/me/…` (denied) or a method the rules do not allow
/// to a server that reads it so.
const PATH_ATTACKS: &[(&str, &[&str], &str)] = &[
    ("encoded", BOTH, "'U/v3/%6de/keys'"),
    ("double-encoded", DECODER, "'U/v3/%256de/keys'"),
    ("upper-case", DECODER, "'U/v3/ME/keys'"),
    ("parameter", PARAMS, "'U/v3/me;x/keys'"),
    ("dot-parameter", PARAMS, "'U/v3/x/..;/me/keys'"),
    ("encoded-dots", BOTH, "'U/v3/x/%2e%2e/me/keys'"),
    (
        "override-header",
        BOTH,
        "-H 'X-HTTP-Method-Override: DELETE' 'U/v3/events'",
    ),
    ("override-param", BOTH, "'U/v3/events?_method=DELETE'"),
];
const BOTH: &[&str] = &["decoder", "params"];
const DECODER: &[&str] = &["decoder"];
const PARAMS: &[&str] = &["params"];

/// Allowed requests that must still reach both upstreams.
const PATH_ALLOWED: &[(&str, &[&str], &str)] = &[
    ("get", BOTH, "'U/v3/events'"),
    ("post", BOTH, "-X POST -d x=1 'U/v3/events'"),
];

/// Every case against its upstreams: one `CASE <server>-<name> <status>`
/// line each (curl's `%{http_code}`), through the jail's proxy or straight.
fn path_script(ports: (u16, u16), proxy: bool) -> String {
    let via = if proxy {
        "--noproxy '' -x \"$HTTP_PROXY\""
    } else {
        "--noproxy '*'"
    };
    let mut script = String::new();
    for (server, port) in [("decoder", ports.0), ("params", ports.1)] {
        let cases = PATH_ATTACKS.iter().chain(PATH_ALLOWED);
        for (name, _, args) in cases.filter(|(_, on, _)| on.contains(&server)) {
            let args = args.replace("U/", &format!("http://127.0.0.1:{port}/"));
            script.push_str(&format!(
                "printf 'CASE {server}-{name} '; curl -s --path-as-is --max-time 10 {via} -o /dev/null -w '%{{http_code}}\\n' {args}\n"
            ));
        }
    }
    script
}

/// Requests an upstream acted on as something the rules deny.
fn reached_denied(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("-> DELETE") || l.ends_with(" /v3/me/keys"))
        .collect()
}

/// Cases run against one upstream.
fn cases_on(list: &[(&str, &[&str], &str)]) -> usize {
    list.iter().map(|(_, on, _)| on.len()).sum()
}

/// Settings allowing `127.0.0.1:<port>` for each port, with `rules`
/// (`(method, path)`) allowed and `/v3/me/**` denied on each.
fn rules_settings(dir: &Path, ports: &[u16]) -> PathBuf {
    let mut allow = Vec::new();
    let mut deny = Vec::new();
    for p in ports {
        allow.push(format!("\"GET http://127.0.0.1:{p}/v3/**\""));
        allow.push(format!("\"POST http://127.0.0.1:{p}/v3/events\""));
        deny.push(format!("\"* http://127.0.0.1:{p}/v3/me/**\""));
    }
    let domains: Vec<String> = ports.iter().map(|p| format!("\"127.0.0.1:{p}\"")).collect();
    let path = dir.join("rules.json");
    std::fs::write(
        &path,
        format!(
            r#"{{"network":{{"allowedDomains":[{}],"deniedDomains":[]}},
                "filesystem":{{"denyRead":[],"allowWrite":[],"denyWrite":[]}},
                "oajail":{{"httpRules":{{"allow":[{}],"deny":[{}]}}}}}}"#,
            domains.join(","),
            allow.join(","),
            deny.join(",")
        ),
    )
    .unwrap();
    path
}

#[test]
fn http_rules_decide_on_the_decoded_path_against_real_upstreams() {
    let s = Scratch::new("paths");
    let log = s.0.join("upstream.log");
    std::fs::write(&log, "").unwrap();
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/path_upstreams.py"
    );
    let (mut server, line) = spawn_and_read_line(
        Command::new(PYTHON)
            .args([fixture, log.to_str().unwrap()])
            .stderr(std::process::Stdio::null()),
    );
    let ports: Vec<u16> = line
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    let (a, b) = (ports[0], ports[1]);
    // Control: straight to the upstreams, every attack reaches what the
    // rules deny (so the jailed run below can fail).
    let control = Command::new("sh")
        .args(["-c", &path_script((a, b), false)])
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        reached_denied(&text).len(),
        cases_on(PATH_ATTACKS),
        "control:\n{text}\n{}",
        out(&control)
    );
    std::fs::write(&log, "").unwrap();
    let settings = rules_settings(&s.0, &[a, b]);
    let o = s
        .oajail(&settings, &["-c", &path_script((a, b), true)])
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let (stdout, stderr) = (out(&o), err(&o));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        reached_denied(&text).is_empty(),
        "an attack reached the upstream:\n{text}"
    );
    for (list, status) in [(PATH_ATTACKS, 403), (PATH_ALLOWED, 200)] {
        for (name, on, _) in list {
            for server in *on {
                let line = format!("CASE {server}-{name} {status}");
                assert!(
                    stdout.lines().any(|l| l == line),
                    "{line} missing:\n{stdout}\n{stderr}"
                );
            }
        }
    }
    assert_eq!(text.lines().count(), cases_on(PATH_ALLOWED), "{text}");
    for why in [
        "oajail.httpRules: a ; parameter in the path",
        "oajail.httpRules: double encoding (%25) in the path",
        "oajail.httpRules: a dot segment in the decoded path",
        "oajail.httpRules.deny",
        "x-http-method-override asks for DELETE",
        "_method asks for DELETE",
    ] {
        assert!(
            stderr.contains(why),
            "no refusal line naming {why:?}:\n{stderr}"
        );
    }
}

#[test]
fn policy_check_and_a_run_warn_about_entries_that_cannot_work_or_plant_what_tools_run() {
    let s = Scratch::new("check");
    s.plant(".bashrc", "# rc\n");
    s.plant(".cargo/config.toml", "");
    s.plant(".npm/_npx/.keep", "");
    let settings = s.settings(
        "writes.json",
        r#"{"denyRead":[],"allowWrite":[".","~/.cargo","~/.bashrc","~/.npm"],"denyWrite":[]}"#,
    );
    let want = [
        "filesystem.allowWrite: \"~/.bashrc\" has no effect: the guard always protects every .bashrc",
        "filesystem.allowWrite: \"~/.cargo\" has no effect: the guard always protects ~/.cargo (",
        "filesystem.allowWrite: \"~/.npm\" lets the command plant what a host tool runs later: ~/.npm/_npx (npx); ~/.npm/_cacache (npm)",
    ];
    let check = ok(s.oajail(&settings, &["policy", "check"]).output().unwrap());
    let warnings: Vec<&str> = check
        .lines()
        .filter(|l| l.starts_with("warning: "))
        .collect();
    assert_eq!(warnings.len(), want.len(), "{check}");
    for w in want {
        assert!(
            warnings
                .iter()
                .any(|l| l.starts_with(&format!("warning: {w}"))),
            "{w} missing:\n{check}"
        );
    }
    assert!(
        !check.contains("\"~/.npm\" has no effect") && !check.contains("\".\""),
        "{check}"
    );
    // A run says the same, once each, and goes on with the protection.
    let o = s
        .oajail(&settings, &["-c", "echo planted >> ~/.bashrc; echo rc=$?"])
        .output()
        .unwrap();
    let (stdout, stderr) = (out(&o), err(&o));
    assert_eq!(stdout.trim(), "rc=1", "{stderr}");
    for w in want {
        let line = format!("oajail: warning: {w}");
        assert_eq!(stderr.matches(&line).count(), 1, "{line}:\n{stderr}");
    }
    let rc = std::fs::read_to_string(s.home().join(".bashrc")).unwrap();
    assert_eq!(rc, "# rc\n");
}

/// What `fill_memory.py` printed for one kind: the MiB it got, and whether
/// the jail's bound (rather than the kernel's OOM kill) stopped it.
fn filled(text: &str, kind: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(&format!("{kind}: ")))?;
    let n = line
        .split_whitespace()
        .find_map(|w| w.parse::<u64>().ok())?;
    Some(n)
}

#[test]
fn shared_memory_is_bounded_without_a_memory_cgroup() {
    const LIMIT_MIB: u64 = 256;
    const ASK_MIB: u64 = 320;
    let s = Scratch::new("shm");
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/fill_memory.py");
    let script = |kind: &str| {
        format!(
            "python3 {fixture} {kind} {ASK_MIB} /dev/shm/fill; python3 {fixture} file {ASK_MIB} /tmp/fill"
        )
    };
    let kinds = ["memfd", "sysv"];
    // Control: without a limit each kind gets all it asks for.
    let free = s.settings(
        "free.json",
        r#"{"denyRead":[],"allowWrite":[],"denyWrite":[]}"#,
    );
    for kind in kinds {
        let text = ok(s
            .oajail(
                &free,
                &["-c", &format!("python3 {fixture} {kind} {ASK_MIB}")],
            )
            .output()
            .unwrap());
        assert_eq!(filled(&text, kind), Some(ASK_MIB), "control {kind}: {text}");
    }
    let limited = s.0.join("limited.json");
    std::fs::write(
        &limited,
        format!(
            r#"{{"network":{{"allowedDomains":[],"deniedDomains":[]}},
                "filesystem":{{"denyRead":[],"allowWrite":[],"denyWrite":[]}},
                "oajail":{{"limits":{{"addressSpaceBytes":{}}}}}}}"#,
            LIMIT_MIB << 20
        ),
    )
    .unwrap();
    let doctor = ok(s.oajail(&limited, &["doctor"]).output().unwrap());
    let cgroup = doctor.contains("memory and pids: bounded for the whole jail");
    let own = doctor.contains("memfd_create and shmget are refused (ENOSYS");
    assert!(cgroup != own, "doctor names one bound:\n{doctor}");
    for kind in kinds {
        let o = s
            .oajail(
                &limited,
                &["-c", &format!("python3 {fixture} {kind} {ASK_MIB}")],
            )
            .output()
            .unwrap();
        let text = out(&o);
        match filled(&text, kind) {
            // The jail's own bound: the call is refused outright.
            Some(0) if own => assert!(
                text.contains("Function not implemented") || text.contains("[Errno 38]"),
                "{text}"
            ),
            // A memory cgroup: the kernel stops it at the limit (ENOMEM or
            // the OOM killer, which prints nothing).
            Some(n) if cgroup => assert!(n <= LIMIT_MIB, "{kind}: {n} MiB:\n{text}"),
            None if cgroup => assert_eq!(o.status.code(), Some(137), "{kind}: {text}{}", err(&o)),
            other => panic!(
                "{kind}: {other:?} with doctor saying:\n{doctor}\n{text}{}",
                err(&o)
            ),
        }
    }
    // tmpfs files: /dev/shm and the default /tmp hold at most the limit.
    let o = s
        .oajail(&limited, &["-c", &script("file")])
        .output()
        .unwrap();
    let text = out(&o);
    for line in text.lines() {
        let n = filled(line, "file").unwrap_or(0);
        assert!(n <= LIMIT_MIB, "{line}");
    }
    if own {
        assert_eq!(text.matches("No space left on device").count(), 2, "{text}");
    }
}
