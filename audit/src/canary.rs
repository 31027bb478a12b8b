//! Run-unique canary secrets and the fake `$HOME` / workspace they live in.
//!
//! Every canary is `OAJ-CANARY-<token>-<slug>` where `<token>` is fresh
//! random hex per lab, so a canary seen anywhere can only have come from
//! this run. The probe only looks for the `OAJ-CANARY-` prefix and never
//! prints what it found.

use std::fs;
use std::io::Read;
use std::path::Path;

/// Secret files in the fake home: (path relative to `$HOME`, slug).
pub const HOME_SECRETS: &[(&str, &str)] = &[
    (".ssh/id_ed25519", "ssh-key"),
    (".ssh/id_rsa", "ssh-rsa"),
    (".aws/credentials", "aws"),
    (".config/gh/hosts.yml", "gh"),
    (".docker/config.json", "docker"),
    (".kube/config", "kube"),
    (".netrc", "netrc"),
    (".git-credentials", "git-credentials"),
    (".npmrc", "npmrc"),
    (".pypirc", "pypirc"),
    (".cargo/credentials.toml", "cargo"),
    (
        ".config/gcloud/application_default_credentials.json",
        "gcloud",
    ),
    (".azure/accessTokens.json", "azure"),
    (".vault-token", "vault"),
    (".terraform.d/credentials.tfrc.json", "terraform"),
    (".codex/auth.json", "codex"),
    (".claude/.credentials.json", "claude"),
    (".gnupg/private-keys-v1.d/k.key", "gnupg"),
    (".password-store/bank.gpg", "pass"),
    (".local/share/keyrings/login.keyring", "keyring"),
    (".mozilla/firefox/p.default/cookies.sqlite", "cookies"),
    (".bash_history", "bash-history"),
    (".zsh_history", "zsh-history"),
    (".python_history", "python-history"),
    ("projects/other/.env", "other-env"),
];

/// Ordinary dotfiles in the fake home (persistence targets, no secret inside).
pub const HOME_DOTFILES: &[&str] = &[
    ".bashrc",
    ".profile",
    ".zshrc",
    ".gitconfig",
    ".ssh/config",
    ".ssh/authorized_keys",
    ".config/fish/config.fish",
    ".config/systemd/user/.keep",
    ".config/autostart/.keep",
    ".local/bin/.keep",
    ".cargo/config.toml",
];

/// Secret-bearing environment variable names given a canary value in every run.
pub const SECRET_ENV: &[&str] = &[
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "NPM_TOKEN",
    "DATABASE_PASSWORD",
    "CI_JOB_TOKEN",
    "SLACK_BOT_TOKEN",
    "STRIPE_SECRET_KEY",
    "VAULT_TOKEN",
    "MY_SERVICE_PASSWORD",
    "DEPLOY_KEY",
];

/// Credentials under plain names, recognised only by their value (and a
/// `_PW` name), given a canary in every run: `{}` in the template is the
/// canary. A connection string's password is as much a secret as a
/// `*_PASSWORD` variable (`oajail audit` runs them under the user's
/// policy, through `G1-secret-env`).
pub const SECRET_ENV_VALUES: &[(&str, &str)] = &[
    (
        "APP_DB",
        "postgresql://db:5432/app?sslmode=require&password={}",
    ),
    (
        "STORAGE_CONN",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={};EndpointSuffix=core.windows.net",
    ),
    (
        "SQL_CONN",
        "Server=tcp:db,1433;Database=app;User ID=app;Password={};",
    ),
    ("PG_CONN", "host=db dbname=app user=app password={}"),
    (
        "JDBC_CONN",
        "jdbc:sqlserver://db:1433;databaseName=app;user=sa;pwd={}",
    ),
    (
        "BLOB_URL",
        "https://acct.blob.core.windows.net/c/x?sv=2022-11-02&sp=r&sig={}",
    ),
    ("DB_PW", "{}"),
];

/// A fresh random token (hex), from the kernel's CSPRNG.
pub fn token() -> String {
    let mut b = [0u8; 8];
    let ok = fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
    if ok.is_err() {
        // Still unique enough per process and time for a test run.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        b = (t as u64 ^ u64::from(std::process::id())).to_le_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The canary text for `slug` in run `token`.
pub fn canary(token: &str, slug: &str) -> String {
    format!("OAJ-CANARY-{token}-{slug}")
}

/// Write `text` to `path`, creating parents.
pub fn plant(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(p) = path.parent() {
        fs::create_dir_all(p)?;
    }
    fs::write(path, text)
}

/// Build the fake home under `home` with every secret and dotfile.
pub fn build_home(home: &Path, token: &str) -> std::io::Result<()> {
    for (rel, slug) in HOME_SECRETS {
        plant(
            &home.join(rel),
            &format!("secret={}\n", canary(token, slug)),
        )?;
    }
    for rel in HOME_DOTFILES {
        plant(&home.join(rel), "# harmless dotfile\n")?;
    }
    Ok(())
}

/// Build the workspace: a git repository with existing hooks and config, a
/// nested repository, and ordinary files.
pub fn build_workspace(ws: &Path) -> std::io::Result<()> {
    plant(&ws.join("README.md"), "workspace\n")?;
    plant(&ws.join("src/main.rs"), "fn main() {}\n")?;
    plant(&ws.join(".git/HEAD"), "ref: refs/heads/main\n")?;
    plant(
        &ws.join(".git/config"),
        "[core]\n\trepositoryformatversion = 0\n",
    )?;
    plant(&ws.join(".git/hooks/pre-commit.sample"), "#!/bin/sh\n")?;
    plant(
        &ws.join(".git/hooks/post-merge"),
        "#!/bin/sh\n# the user's own hook\n",
    )?;
    plant(&ws.join("vendor/lib/.git/HEAD"), "ref: refs/heads/main\n")?;
    plant(&ws.join("vendor/lib/.git/config"), "[core]\n")?;
    plant(&ws.join(".vscode/settings.json"), "{}\n")?;
    plant(&ws.join("tmp/.keep"), "")?;
    Ok(())
}
