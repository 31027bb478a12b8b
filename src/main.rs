//! oajail: thin glue between the policy, the jail and the proxy.
//!
//! Parses the command line, loads the policy (see `settings.rs`), and calls
//! into `oajail-policy` (compile), `oajail-jail` (run) and `oajail-proxy`
//! (egress). Every error ends as one line `oajail: <what>: <why>` on stderr
//! and a reserved exit status (`oajail_jail::exit_code`); otherwise the
//! command's own status passes through.

mod audit;
mod audit_format;
mod cli;
mod commands;
mod container;
mod doctor;
mod masked_files;
mod plans;
mod proxy;
mod run;
mod settings;

use clap::Parser;
use oajail_jail::exit_code;

/// An error together with the exit status it maps to.
#[derive(Debug)]
pub struct Fail {
    /// Exit status.
    pub code: i32,
    /// The error, printed as `oajail: {err:#}`.
    pub err: anyhow::Error,
}

impl Fail {
    /// A usage or policy error (exit status 2).
    pub fn usage(err: anyhow::Error) -> Self {
        Fail {
            code: exit_code::USAGE,
            err,
        }
    }

    /// A setup error (exit status 125).
    pub fn setup(err: anyhow::Error) -> Self {
        Fail {
            code: exit_code::SETUP_FAILED,
            err,
        }
    }
}

impl From<oajail_jail::JailError> for Fail {
    fn from(e: oajail_jail::JailError) -> Self {
        Fail {
            code: e.exit_code(),
            err: e.into(),
        }
    }
}

fn main() {
    let cli = cli::Cli::parse();
    let code = match dispatch(cli) {
        Ok(code) => code,
        Err(fail) => {
            eprintln!("oajail: {:#}", fail.err);
            fail.code
        }
    };
    std::process::exit(code)
}

fn dispatch(cli: cli::Cli) -> Result<i32, Fail> {
    let has_command = cli.run.shell_command.is_some() || !cli.run.command.is_empty();
    if cli.sub.is_some() && has_command {
        return Err(Fail::usage(anyhow::anyhow!(
            "a subcommand takes no command to run"
        )));
    }
    if let Some(option) = cli.sub.as_ref().and(cli.run.first_run_only_option()) {
        return Err(Fail::usage(anyhow::anyhow!(
            "{option} applies only to a jailed run, not to a subcommand"
        )));
    }
    match cli.sub {
        None => run::run(&cli.common, cli.run),
        Some(cli::Sub::Policy(cmd)) => commands::policy(&cli.common, cmd),
        Some(cli::Sub::Explain { json }) => commands::explain(&cli.common, json),
        Some(cli::Sub::Doctor) => doctor::doctor(&cli.common),
        Some(cli::Sub::Completions { shell }) => commands::completions(shell),
        Some(cli::Sub::Man) => commands::man(),
        Some(cli::Sub::SshProxy { host, port }) => proxy::ssh_helper(&host, port),
        Some(cli::Sub::Audit(args)) => audit::audit(&cli.common, args),
    }
}
