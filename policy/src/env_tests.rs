use super::*;
use std::os::unix::ffi::OsStringExt;

fn inherited(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
    pairs
        .iter()
        .map(|(n, v)| (OsString::from(n), OsString::from(v)))
        .collect()
}

fn proxy() -> ProxyEnv {
    ProxyEnv {
        url: "http://127.0.0.1:3128".into(),
        ssh_helper: vec!["/usr/local/bin/oajail".into(), "ssh-proxy-helper".into()],
    }
}

fn run(
    env: &[(OsString, OsString)],
    policy: &Policy,
    keep: &[String],
    proxy: Option<&ProxyEnv>,
) -> EnvPlan {
    plan(&EnvInputs {
        inherited: env,
        policy,
        extra_keep: keep,
        policy_sha256: "abc123",
        proxy,
    })
}

fn value<'a>(plan: &'a EnvPlan, name: &str) -> Option<&'a str> {
    plan.set
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn secrets_and_sockets_are_dropped_and_the_rest_passes_in_order() {
    let env = inherited(&[
        ("PATH", "/usr/bin"),
        ("HOME", "/home/u"),
        ("GITHUB_TOKEN", "ghp_x"),
        ("OPENAI_API_KEY", "sk"),
        ("AWS_REGION", "eu-west-1"),
        ("SSH_AUTH_SOCK", "/run/user/1000/ssh"),
        ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus"),
        ("GIT_AUTHOR_NAME", "A"),
        ("PWD", "/work"),
        ("MYSQL_PWD", "pw"),
        ("LANG", "C.UTF-8"),
        ("DATABASE_URL", "postgres://u:p@db/x"),
        ("NPM_CONFIG__AUTH", "x"),
        ("TERM", "xterm"),
    ]);
    let policy = Policy::builtin_default();
    let plan = run(&env, &policy, &[], None);
    let passed: Vec<&str> = plan.set.iter().map(|(n, _)| n.as_str()).take(6).collect();
    assert_eq!(
        passed,
        ["PATH", "HOME", "GIT_AUTHOR_NAME", "PWD", "LANG", "TERM"]
    );
    assert_eq!(
        plan.dropped,
        [
            "AWS_REGION",
            "DATABASE_URL",
            "DBUS_SESSION_BUS_ADDRESS",
            "GITHUB_TOKEN",
            "MYSQL_PWD",
            "NPM_CONFIG__AUTH",
            "OPENAI_API_KEY",
            "SSH_AUTH_SOCK"
        ]
    );
}

#[test]
fn oajail_variables_are_set_after_the_inherited_ones() {
    let env = inherited(&[
        ("PATH", "/bin"),
        ("TMPDIR", "/home/u/tmp"),
        ("OAJAIL_POLICY_SHA256", "forged"),
    ]);
    let policy = Policy::builtin_default();
    let plan = run(&env, &policy, &[], None);
    assert_eq!(
        plan.set,
        vec![
            ("PATH".to_owned(), "/bin".to_owned()),
            ("SANDBOX_RUNTIME".to_owned(), "1".to_owned()),
            ("OAJAIL".to_owned(), "1".to_owned()),
            ("OAJAIL_POLICY_SHA256".to_owned(), "abc123".to_owned()),
            ("TMPDIR".to_owned(), "/tmp".to_owned()),
        ]
    );
    assert_eq!(plan.replaced, ["OAJAIL_POLICY_SHA256", "TMPDIR"]);
    assert!(plan.dropped.is_empty());
}

#[test]
fn proxy_variables_overwrite_inherited_ones() {
    let env = inherited(&[
        ("HTTPS_PROXY", "http://corp:8080"),
        ("no_proxy", "*.corp"),
        ("FTP_PROXY", "http://corp:2121"),
        ("GIT_SSH_COMMAND", "ssh -i key"),
    ]);
    let policy = Policy::builtin_default();
    let proxy = proxy();
    let plan = run(&env, &policy, &[], Some(&proxy));
    for name in PROXY_URL_NAMES {
        assert_eq!(value(&plan, name), Some("http://127.0.0.1:3128"), "{name}");
    }
    assert_eq!(value(&plan, "NO_PROXY"), Some("localhost,127.0.0.1,::1"));
    assert_eq!(value(&plan, "no_proxy"), Some("localhost,127.0.0.1,::1"));
    assert_eq!(value(&plan, "NODE_USE_ENV_PROXY"), Some("1"));
    assert_eq!(
        value(&plan, "GIT_SSH_COMMAND"),
        Some(
            "ssh -o ControlMaster=no -o ControlPath=none -o 'ProxyCommand=/usr/local/bin/oajail ssh-proxy-helper %h %p'"
        )
    );
    assert_eq!(
        plan.replaced,
        ["GIT_SSH_COMMAND", "HTTPS_PROXY", "no_proxy"]
    );
    assert_eq!(plan.dropped, ["FTP_PROXY"]);
    let names: Vec<&str> = plan.set.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.iter().filter(|n| **n == "HTTPS_PROXY").count(), 1);
}

#[test]
fn without_a_proxy_no_proxy_variables_are_set_and_inherited_ones_go() {
    let env = inherited(&[
        ("HTTP_PROXY", "http://corp:8080"),
        ("GIT_SSH_COMMAND", "ssh -i key"),
    ]);
    let policy = Policy::builtin_default();
    let plan = run(&env, &policy, &[], None);
    assert_eq!(value(&plan, "HTTP_PROXY"), None);
    assert_eq!(plan.dropped, ["HTTP_PROXY"]);
    // Without a proxy oajail does not own GIT_SSH_COMMAND; it passes.
    assert_eq!(value(&plan, "GIT_SSH_COMMAND"), Some("ssh -i key"));
}

#[test]
fn keep_lists_bring_variables_back_but_not_over_deny_or_owned_names() {
    let env = inherited(&[
        ("AWS_REGION", "eu"),
        ("AWS_PROFILE", "dev"),
        ("GH_TOKEN", "t"),
        ("SSH_AUTH_SOCK", "/s"),
        ("HTTP_PROXY", "http://corp"),
        ("VISIBLE", "x"),
    ]);
    let mut policy = Policy::builtin_default();
    policy.oajail.env_keep = vec!["AWS_*".into()];
    policy.oajail.env_deny = vec!["VISIBLE".into()];
    let extra = vec!["GH_TOKEN".to_owned(), "HTTP_PROXY".to_owned()];
    let proxy = proxy();
    let plan = run(&env, &policy, &extra, Some(&proxy));
    assert_eq!(value(&plan, "AWS_REGION"), Some("eu"));
    assert_eq!(value(&plan, "AWS_PROFILE"), Some("dev"));
    assert_eq!(value(&plan, "GH_TOKEN"), Some("t"));
    assert_eq!(value(&plan, "HTTP_PROXY"), Some("http://127.0.0.1:3128"));
    assert_eq!(plan.dropped, ["SSH_AUTH_SOCK", "VISIBLE"]);
}

#[test]
fn malformed_and_repeated_entries_are_dropped() {
    let mut env = inherited(&[("A", "1"), ("A", "2"), ("", "x"), ("B=C", "y")]);
    env.push((OsString::from_vec(vec![b'N', 0xff]), OsString::from("z")));
    env.push((OsString::from("V"), OsString::from_vec(vec![0xff])));
    let policy = Policy::builtin_default();
    let plan = run(&env, &policy, &[], None);
    assert_eq!(value(&plan, "A"), Some("1"));
    assert_eq!(plan.set.iter().filter(|(n, _)| n == "A").count(), 1);
    assert_eq!(plan.dropped, ["", "A", "B=C", "N\u{fffd}", "V"]);
}

#[test]
fn safe_directories_become_git_config_variables() {
    let mut policy = Policy::builtin_default();
    policy.process.git_safe_directories = vec!["/repo".into(), "/work/*".into()];
    let env = inherited(&[
        ("GIT_CONFIG_COUNT", "1"),
        ("GIT_CONFIG_KEY_0", "http.extraHeader"),
    ]);
    let plan = run(&env, &policy, &[], None);
    assert_eq!(plan.dropped, ["GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0"]);
    let git: Vec<(String, String)> = plan
        .set
        .iter()
        .filter(|(n, _)| n.starts_with("GIT_CONFIG"))
        .cloned()
        .collect();
    let expected = [
        ("GIT_CONFIG_COUNT", "2"),
        ("GIT_CONFIG_KEY_0", "safe.directory"),
        ("GIT_CONFIG_VALUE_0", "/repo"),
        ("GIT_CONFIG_KEY_1", "safe.directory"),
        ("GIT_CONFIG_VALUE_1", "/work/*"),
    ];
    assert_eq!(git, expected.map(|(n, v)| (n.to_owned(), v.to_owned())));
}

#[test]
fn kept_git_config_is_extended_not_clobbered() {
    let mut policy = Policy::builtin_default();
    policy.process.git_safe_directories = vec!["/repo".into()];
    let env = inherited(&[
        ("GIT_CONFIG_COUNT", "1"),
        ("GIT_CONFIG_KEY_0", "core.pager"),
        ("GIT_CONFIG_VALUE_0", "cat"),
    ]);
    let keep = vec!["GIT_CONFIG_*".to_owned()];
    let plan = run(&env, &policy, &keep, None);
    assert_eq!(value(&plan, "GIT_CONFIG_COUNT"), Some("2"));
    assert_eq!(value(&plan, "GIT_CONFIG_KEY_0"), Some("core.pager"));
    assert_eq!(value(&plan, "GIT_CONFIG_KEY_1"), Some("safe.directory"));
    assert_eq!(value(&plan, "GIT_CONFIG_VALUE_1"), Some("/repo"));
    assert_eq!(plan.replaced, ["GIT_CONFIG_COUNT"]);
}

#[test]
fn tmp_and_temp_follow_tmpdir_only_when_present() {
    let policy = Policy::builtin_default();
    let plan = run(&inherited(&[("TEMP", "/home/u/t")]), &policy, &[], None);
    assert_eq!(value(&plan, "TEMP"), Some("/tmp"));
    assert_eq!(value(&plan, "TMP"), None);
}

#[test]
fn secret_name_rules() {
    let secret = [
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_PROFILE",
        "PGPASSWORD",
        "DB_PASS",
        "MYSQL_PWD",
        "STRIPE_APIKEY",
        "SIGNING_KEY",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "X_AUTH",
        "SENTRY_DSN",
        "GITLAB_PAT",
        "SLACK_WEBHOOK_URL",
        "my_secret",
        "BW_SESSION",
        "OP_SESSION_abc",
        "SSH_PRIVKEY",
        "DB_PW",
        "LDAP_BIND_PW",
        "SMTP_PASS",
        "LDAPPASSWD",
        "REDIS_PASSWD",
    ];
    for name in secret {
        assert_eq!(
            drop_reason(name, "v"),
            Some(DropReason::SecretName),
            "{name}"
        );
    }
    let harmless = [
        "PATH",
        "PWD",
        "OLDPWD",
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "HOME",
        "LANG",
        "TERM",
        "EDITOR",
        "XDG_SESSION_ID",
        "KEYMAP",
        "HISTCONTROL",
        "PATHEXT",
        "COLORTERM",
        "SHLVL",
    ];
    for name in harmless {
        assert_eq!(drop_reason(name, "/usr/bin"), None, "{name}");
    }
}

#[test]
fn urls_with_user_information_are_credentials() {
    assert_eq!(
        drop_reason("DATABASE_URL", "postgres://u:p@h/db"),
        Some(DropReason::CredentialUrl)
    );
    assert_eq!(
        drop_reason("REMOTE", "https://ghp_x@github.com/o/r"),
        Some(DropReason::CredentialUrl)
    );
    assert_eq!(drop_reason("HOMEPAGE", "https://example.com/a@b"), None);
    assert_eq!(drop_reason("MAIL", "user@example.com"), None);
}

#[test]
fn shell_quoting() {
    assert_eq!(shell_quote("/usr/bin/oajail"), "/usr/bin/oajail");
    assert_eq!(shell_quote("a b"), "'a b'");
    assert_eq!(shell_quote("it's"), r"'it'\''s'");
    assert_eq!(shell_quote(""), "''");
    assert_eq!(
        git_ssh_command(&["/opt/my tools/oajail".into(), "ssh-proxy-helper".into()]),
        r"ssh -o ControlMaster=no -o ControlPath=none -o 'ProxyCommand='\''/opt/my tools/oajail'\'' ssh-proxy-helper %h %p'"
    );
    assert!(git_ssh_command(&["/x%y".into()]).contains("/x%%y"));
}

#[test]
fn invalid_keep_entries_keep_nothing() {
    let env = inherited(&[("GH_TOKEN", "t"), ("AWS_KEY", "k")]);
    let policy = Policy::builtin_default();
    let keep = vec!["*".to_owned(), "GH-*".to_owned(), "".to_owned()];
    let plan = run(&env, &policy, &keep, None);
    assert_eq!(plan.dropped, ["AWS_KEY", "GH_TOKEN"]);
    assert!(check_keep_name("*").is_err());
    assert!(check_keep_name("AWS_*").is_ok());
    assert_eq!(
        check_keep_name("a b").unwrap_err(),
        "--env-keep \"a b\": not an environment variable name (letters, digits and _, optionally ending in *)"
    );
}

#[test]
fn names_the_review_found_are_secret() {
    for name in [
        "SSHPASS",
        "SLACK_HOOK_URL",
        "SONAR_LOGIN",
        "MNEMONIC",
        "WALLET_MNEMONIC",
    ] {
        assert_eq!(
            drop_reason(name, "v"),
            Some(DropReason::SecretName),
            "{name}"
        );
    }
}

#[test]
fn secrets_are_found_by_value_under_plain_names() {
    let token = "ghp_0123456789abcdefABCDEF0123456789abcd";
    assert_eq!(
        drop_reason("REPO_HELPER", token),
        Some(DropReason::SecretValue("github personal access token"))
    );
    let env = inherited(&[("REPO_HELPER", token), ("EDITOR", "vim")]);
    let plan = run(&env, &Policy::builtin_default(), &[], None);
    assert_eq!(plan.dropped, vec!["REPO_HELPER".to_string()]);
    assert_eq!(
        plan.why,
        vec![(
            "REPO_HELPER".to_string(),
            "the value holds a github personal access token".to_string()
        )]
    );
}

#[test]
fn credentials_are_found_by_value_whatever_the_name() {
    let env = inherited(&[
        ("EDITOR", "vim"),
        (
            "APP_DB",
            "postgresql://db:5432/app?sslmode=require&password=hunter2",
        ),
        (
            "STORAGE",
            "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=bWFkZQ==;",
        ),
        ("SQL", "Server=db;Database=app;User Id=app;Password=s3cr3t;"),
        ("PGCONN", "host=db dbname=app user=app password=s3cr3t"),
        ("UPSTREAM", "https://user:pw@mirror.test/simple"),
        ("HOMEPAGE", "https://example.test/docs?page=2"),
        ("MIRROR", "https://mirror.test/simple"),
    ]);
    let plan = run(&env, &Policy::builtin_default(), &[], None);
    assert_eq!(
        plan.dropped,
        ["APP_DB", "PGCONN", "SQL", "STORAGE", "UPSTREAM"]
    );
    for name in ["EDITOR", "HOMEPAGE", "MIRROR"] {
        assert!(value(&plan, name).is_some(), "{name}");
    }
}
