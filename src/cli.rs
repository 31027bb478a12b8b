//! Command-line interface (clap). srt's flags where srt has them (`-s`, `-d`,
//! `-c`), oajail's own as long options.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;

/// Run a command in a jail built from an srt-compatible policy.
#[derive(Debug, Parser)]
#[command(name = "oajail", version, subcommand_precedence_over_arg = true)]
#[command(
    override_usage = "oajail [OPTIONS] (-c 'CMD' | -- CMD [ARGS]...)\n       oajail <COMMAND>"
)]
pub struct Cli {
    /// Options shared by every mode.
    #[command(flatten)]
    pub common: Common,
    /// Options of a jailed run.
    #[command(flatten)]
    pub run: RunArgs,
    /// Subcommand (policy, explain, doctor); without one, run the command.
    #[command(subcommand)]
    pub sub: Option<Sub>,
}

/// Options that select the policy.
#[derive(Debug, Args)]
pub struct Common {
    /// Settings file (srt format); default: $OAJAIL_SETTINGS, then
    /// ~/.srt-settings.json, then the built-in default policy.
    #[arg(short = 's', long = "settings", value_name = "FILE", global = true)]
    pub settings: Option<PathBuf>,
    /// Debug output on stderr (what oajail decided and why).
    #[arg(short = 'd', long = "debug", global = true)]
    pub debug: bool,
}

/// Options of a jailed run.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Kill the whole jail after SECS seconds (exit status 124); 0 means no
    /// timeout from the command line (as coreutils' timeout), the policy's
    /// `limits.wallSeconds` still applies.
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
    /// Keep this environment variable even if its name looks secret (repeatable).
    #[arg(long = "env-keep", value_name = "NAME")]
    pub env_keep: Vec<String>,
    /// Run even if some rules of the policy have no layer to hold them on
    /// this kernel, printing a banner naming them.
    #[arg(long)]
    pub allow_degraded: bool,
    /// Refuse to run unless every layer runs at the level the plan was
    /// written for (Landlock ABI 6 included), not only every rule held.
    #[arg(long, conflicts_with = "allow_degraded")]
    pub strict: bool,
    /// Append the proxy's decision log (JSON lines) to FILE.
    #[arg(long = "log-json", value_name = "FILE")]
    pub log_json: Option<PathBuf>,
    /// Run CMD with bash -c (bash from PATH, as srt does).
    #[arg(short = 'c', value_name = "CMD", conflicts_with = "command")]
    pub shell_command: Option<String>,
    /// The command and its arguments (after --).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

impl RunArgs {
    /// Refuse option values the settings file would refuse: every
    /// `--env-keep` must be a variable name or a `PREFIX*` (not `*`, not
    /// empty, no `=`).
    pub fn check(&self) -> Result<(), String> {
        self.env_keep
            .iter()
            .try_for_each(|k| oajail_policy::env::check_keep_name(k))
    }

    /// The wall-clock timeout asked on the command line; `--timeout 0` is none.
    pub fn timeout(&self) -> Option<u64> {
        self.timeout.filter(|&t| t > 0)
    }

    /// The first option given that only a jailed run uses, so that a
    /// subcommand does not silently ignore it.
    pub fn first_run_only_option(&self) -> Option<&'static str> {
        [
            (self.timeout.is_some(), "--timeout"),
            (!self.env_keep.is_empty(), "--env-keep"),
            (self.allow_degraded, "--allow-degraded"),
            (self.strict, "--strict"),
            (self.log_json.is_some(), "--log-json"),
        ]
        .into_iter()
        .find_map(|(given, name)| given.then_some(name))
    }
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Sub {
    /// Print, hash or check the effective policy.
    #[command(subcommand)]
    Policy(PolicyCmd),
    /// Print the compiled plans: mounts, Landlock, seccomp, limits, egress, environment.
    Explain {
        /// Machine-readable JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Report the kernel features oajail uses and what would be degraded.
    Doctor,
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), generated from these definitions.
    Man,
    /// ssh ProxyCommand helper: connect HOST PORT through the jail's proxy.
    #[command(hide = true)]
    SshProxy {
        /// Destination host.
        host: String,
        /// Destination port.
        port: u16,
    },
    /// Run the attack catalogue against the policy in a hermetic lab and
    /// report what it blocks, what it allows (and which entry allows it)
    /// and any escape.
    Audit(AuditArgs),
}

/// `oajail audit …` (see docs/audit.md).
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = AuditFormat::Text)]
    pub format: AuditFormat,
    /// Write the report to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Run only these families: letters (A-I, X) or names such as
    /// `secrets`, `persistence`, `exfiltration` (repeatable, comma-separated).
    #[arg(long, value_name = "FAMILY", num_args = 1.., value_delimiter = ',')]
    pub only: Vec<String>,
    /// Run the attacks as this user (needs root); default: the caller.
    #[arg(long = "as-user", value_name = "NAME")]
    pub as_user: Option<String>,
    /// Also fail (exit 1) on findings the policy allows: `allowed` counts
    /// secret reads and exfiltration, `any-allowed` every allowed finding.
    #[arg(long = "fail-on", value_enum, value_name = "WHAT")]
    pub fail_on: Option<FailOn>,
    /// Labs run at the same time (default: twice the CPUs, at most 8).
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// `container`: audit the jail as it runs where user namespaces are
    /// refused (Docker's defaults, Kubernetes RuntimeDefault): every lab
    /// takes them away from oajail, which then runs its container tier
    /// (the policy must accept it: enableWeakerNestedSandbox).
    #[arg(long, value_enum, value_name = "TIER")]
    pub tier: Option<AuditTier>,
}

/// `oajail audit --tier`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuditTier {
    /// User namespaces refused to the jail in every lab.
    Container,
}

/// `oajail audit --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuditFormat {
    /// A table for people.
    Text,
    /// Every finding as JSON.
    Json,
    /// JUnit XML: one testcase per attack.
    Junit,
    /// SARIF 2.1.0 for code-scanning UIs, pointing at the granting entry.
    Sarif,
}

/// `oajail audit --fail-on`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// Allowed secret reads and exfiltration.
    Allowed,
    /// Every allowed finding (persistence, egress, resources too).
    AnyAllowed,
}

/// `oajail policy …`.
#[derive(Debug, Subcommand)]
pub enum PolicyCmd {
    /// Print the effective policy.
    Print {
        /// srt settings JSON, or canonical JSON with `policySha256`.
        #[arg(long, value_enum, default_value_t = Format::Srt)]
        format: Format,
    },
    /// Print the policy's sha256 (the value of OAJAIL_POLICY_SHA256 in the jail).
    Hash,
    /// Validate the policy and list warnings.
    Check,
}

/// Output format of `policy print`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// srt settings JSON.
    Srt,
    /// Canonical JSON plus `policySha256`.
    Json,
}
