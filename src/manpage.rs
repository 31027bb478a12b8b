//! `oajail man`: the manual page, from the clap definitions (synopsis,
//! options, commands) plus the sections clap has no data for: exit
//! status, environment, files, examples.
//!
//! clap_mangen's own subcommand section names a page per subcommand
//! (`oajail-audit(1)`), which oajail does not ship: the commands are
//! described here, in this page, instead; it names no other page.

use clap::CommandFactory;
use roff::{Roff, bold, italic, roman};
use std::io::Write;

/// Exit statuses of a run and of the subcommands.
const EXIT_STATUS: &[(&str, &str)] = &[
    (
        "N",
        "the command's own exit status; 128+N when it was killed by signal N",
    ),
    (
        "2",
        "bad usage or a bad settings file, before anything ran (one line names the option, or the file and the JSON path of the field)",
    ),
    (
        "124",
        "--timeout (or limits.wallSeconds) expired and the whole jail was killed",
    ),
    (
        "125",
        "a jail set-up step failed (named), or the kernel leaves a rule of the policy without a layer to hold it; nothing of the command ran",
    ),
    ("126", "the command was found but could not be executed"),
    ("127", "the command was not found"),
    (
        "1",
        "oajail audit: an escape or an inconclusive attack, or a finding --fail-on forbids; oajail doctor: this kernel would refuse the run",
    ),
];

const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "OAJAIL_SETTINGS",
        "the settings file when -s is not given (before ~/.srt-settings.json)",
    ),
    (
        "HOME",
        "the home directory: ~ in policy paths, and where ~/.srt-settings.json is looked for",
    ),
    (
        "PATH",
        "where -c finds bash; the command's own PATH is searched for the command",
    ),
    (
        "SSH_AUTH_SOCK",
        "its directory is hidden in the jail (the agent's socket)",
    ),
    (
        "XDG_CONFIG_HOME",
        "the guard protects the configuration files there as under ~/.config",
    ),
    (
        "OAJAIL_LOG_JSON_MAX_BYTES",
        "the size cap of the --log-json output (default 64 MiB)",
    ),
    (
        "OAJAIL_PROBE_BIN, OAJAIL_LAB_BIN",
        "oajail audit: the attack probe and lab to use instead of those beside the oajail binary",
    ),
];

const FILES: &[(&str, &str)] = &[
    (
        "~/.srt-settings.json",
        "the settings file (srt's format) when neither -s nor OAJAIL_SETTINGS names one; without it the built-in policy applies (oajail policy print shows it)",
    ),
    (
        "/etc/apparmor.d/oajail",
        "the AppArmor profile that lets /usr/bin/oajail create user namespaces on Ubuntu 23.10 and later",
    ),
    (
        "/usr/bin/oajail-probe, /usr/bin/oajail-lab",
        "the attack probe and the lab oajail audit runs (found beside the oajail binary)",
    ),
    (
        "/usr/share/doc/oajail/README.md",
        "the README: set-up, usage, kernels",
    ),
];

const EXAMPLES: &[(&str, &str)] = &[
    (
        "oajail -- sh -c 'id; touch ~/x'",
        "run a command under the built-in policy (no network, no writes outside the private /tmp): the write is refused, and a line says which entry would allow it",
    ),
    (
        "oajail -s .srt-settings.json -c 'npm test'",
        "run a shell command under a settings file",
    ),
    (
        "oajail learn -s base.json --out learned.json -- npm install",
        "run in the jail, refuse what base.json refuses, and write base.json plus the smallest additions that would have allowed it; run again with -s learned.json --out learned.json until nothing is refused",
    ),
    (
        "oajail --ask -- bash",
        "an interactive shell whose refused hosts are asked on this terminal (allow once, for the run, add to the settings file, deny)",
    ),
    (
        "oajail --log-json - -- curl https://example.com",
        "every decision and refusal as JSON lines on stderr",
    ),
    (
        "oajail doctor",
        "which kernel layers hold each rule of the policy here",
    ),
    (
        "oajail audit -s .srt-settings.json --fail-on allowed",
        "attack the policy in a hermetic lab; exit 1 on an escape or an allowed secret read or exfiltration",
    ),
];

/// Write the page (roff).
pub fn render(w: &mut dyn Write) -> std::io::Result<()> {
    let cmd = crate::cli::Cli::command();
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    man.render_options_section(w)?;
    let mut roff = Roff::default();
    commands(&mut roff, &cmd);
    table(&mut roff, "EXIT STATUS", EXIT_STATUS);
    table(&mut roff, "ENVIRONMENT", ENVIRONMENT);
    table(&mut roff, "FILES", FILES);
    table(&mut roff, "EXAMPLES", EXAMPLES);
    roff.to_writer(w)?;
    man.render_version_section(w)
}

/// Each subcommand with its options, in this page.
fn commands(roff: &mut Roff, cmd: &clap::Command) {
    roff.control("SH", ["COMMANDS"]);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        subcommand(roff, &format!("oajail {}", sub.get_name()), sub);
    }
}

fn subcommand(roff: &mut Roff, name: &str, sub: &clap::Command) {
    if sub.has_subcommands() {
        for inner in sub.get_subcommands().filter(|s| !s.is_hide_set()) {
            subcommand(roff, &format!("{name} {}", inner.get_name()), inner);
        }
        return;
    }
    roff.control("TP", []);
    roff.text([bold(name)]);
    if let Some(about) = sub.get_about() {
        roff.text([roman(about.to_string())]);
    }
    let args = sub
        .get_arguments()
        .filter(|a| !a.is_hide_set() && a.get_id() != "help");
    for arg in args {
        let flag = match (arg.get_short(), arg.get_long()) {
            (Some(s), Some(l)) => format!("-{s}, --{l}"),
            (None, Some(l)) => format!("--{l}"),
            (Some(s), None) => format!("-{s}"),
            (None, None) => arg.get_id().to_string().to_uppercase(),
        };
        roff.control("RS", []);
        roff.control("TP", []);
        roff.text([italic(flag)]);
        if let Some(help) = arg.get_help() {
            roff.text([roman(help.to_string())]);
        }
        roff.control("RE", []);
    }
}

fn table(roff: &mut Roff, heading: &str, rows: &[(&str, &str)]) {
    roff.control("SH", [heading]);
    for (what, text) in rows {
        roff.control("TP", []);
        roff.text([bold(*what)]);
        roff.text([roman(*text)]);
    }
}
