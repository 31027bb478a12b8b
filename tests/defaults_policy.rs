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

use support::*;

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
