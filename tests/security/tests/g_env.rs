//! Family G: secrets in the environment. Every lab run gives oajail fifteen
//! secret-named variables holding canaries (see `canary::SECRET_ENV`), and
//! seven credentials under plain names recognised by their value
//! (`canary::SECRET_ENV_VALUES`).
mod common;
use common::*;

#[test]
fn blocks_secret_environment_variables() {
    expect_blocked("G1-secret-env", DENY_HOME, |_| argv!["env-scan"]);
}

/// G3: secrets whose names say little (`SSHPASS`, `SLACK_HOOK_URL`,
/// `SONAR_LOGIN`, `MNEMONIC`) and secrets recognised only by their value
/// under plain names: a `ghp_` token, a password in a URL, a PEM private
/// key. Each value holds a canary, so any of them in the jail's environment
/// is an escape.
#[test]
fn blocks_secrets_found_by_value_and_newer_names() {
    let id = "G3-secret-values";
    let mut lab = Lab::new(id);
    let c = |slug: &str| oajail_security::canary::canary(&lab.token, slug);
    let env = vec![
        ("SSHPASS".to_owned(), c("sshpass")),
        ("SLACK_HOOK_URL".to_owned(), c("slack-hook")),
        ("SONAR_LOGIN".to_owned(), c("sonar")),
        ("MNEMONIC".to_owned(), c("mnemonic")),
        (
            "REPO_HELPER".to_owned(),
            format!("ghp_0a1B2c3D4e5F6g7H8i9J{}", c("ghp")),
        ),
        (
            "DATABASE".to_owned(),
            format!("postgres://u:{}@db/x", c("url")),
        ),
        (
            "DEPLOY".to_owned(),
            format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n", c("pem")),
        ),
    ];
    let opts = RunOptions {
        env,
        ..RunOptions::default()
    };
    let run = lab.jailed(DENY_HOME, &["env-scan"], &opts);
    assert_blocked(&mut lab, id, &run);
}

/// G5: credentials in connection strings, query strings and option
/// strings under names that say nothing, beyond the lab's own
/// `SECRET_ENV_VALUES`: an ODBC `PWD=`, a JVM `-D…Password=`, an S3
/// presigned URL's signature, an `Authorization: Bearer` header value and
/// a service-bus `SharedAccessKey=`. Each holds a canary.
#[test]
fn blocks_credentials_found_by_value_in_connection_strings() {
    let id = "G5-credential-values";
    let mut lab = Lab::new(id);
    let c = |slug: &str| oajail_security::canary::canary(&lab.token, slug);
    let env = vec![
        (
            "ODBC".to_owned(),
            format!("Driver={{ODBC}};Server=db;UID=app;PWD={}", c("odbc")),
        ),
        (
            "JAVA_TOOL_OPTIONS".to_owned(),
            format!("-Dhttps.proxyHost=p -Dhttps.proxyPassword={}", c("jvm")),
        ),
        (
            "ARTIFACT".to_owned(),
            format!(
                "https://b.s3.amazonaws.com/o?X-Amz-Expires=60&X-Amz-Signature={}",
                c("s3")
            ),
        ),
        (
            "CURL_HEADER".to_owned(),
            format!("Authorization: Bearer {}", c("bearer")),
        ),
        (
            "BUS".to_owned(),
            format!(
                "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=R;SharedAccessKey={}",
                c("sb")
            ),
        ),
        ("LDAP_BIND_PW".to_owned(), c("ldap")),
    ];
    let opts = RunOptions {
        env,
        ..RunOptions::default()
    };
    let run = lab.jailed(DENY_HOME, &["env-scan"], &opts);
    assert_blocked(&mut lab, id, &run);
}

/// G4: ANTHROPIC_API_KEY (a canary in every lab run) is masked for
/// `allowed.test`: the jail must hold the per-run sentinel in its place,
/// and the canary must be in no environment the jail can read.
#[test]
fn blocks_the_real_value_of_a_masked_variable() {
    const MASK: &str = "attack-credentials-mask.json";
    for (id, probe) in [
        ("G4-masked-env", "env-scan"),
        ("G4-masked-proc-environ", "proc-environ-scan"),
    ] {
        let mut lab = Lab::new(id);
        let opts = RunOptions::default();
        let argv = vec![
            lab.tools.oajail.display().to_string(),
            "-s".into(),
            lab.policy(MASK),
            "-c".into(),
            "printenv ANTHROPIC_API_KEY | cut -c1-14".into(),
        ];
        let pre = lab.run(argv, &opts);
        assert_eq!(pre.stdout.trim(), "oajail_masked_", "{}", pre.stderr);
        let run = lab.jailed(MASK, &[probe], &opts);
        assert_blocked(&mut lab, id, &run);
    }
}
