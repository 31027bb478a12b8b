//! `openagenda-mcp --jail`: one `mcpServers` entry that runs this server
//! under oajail with exactly its own egress policy.
//!
//! A client starts `/abs/path/openagenda-mcp --jail` (no shell, any working
//! directory, a minimal `PATH`). Outside a jail (no `OAJAIL` in the
//! environment) the process computes its policy ([`crate::egress::Needs`]),
//! writes it into a pipe and replaces itself with
//! `oajail --settings /proc/self/fd/N -- <this binary> <the same
//! arguments>`. `OA_API_KEY` is not kept by flag: the policy masks it
//! (srt `credentials`), so the jailed server holds a stand-in that the
//! wrapper's proxy swaps for the key on requests to the API host only. oajail reads the policy from the pipe (there is no
//! file to keep in sync or to leave behind), closes every inherited
//! descriptor above stderr before the jailed command runs, and starts the
//! same binary again inside the jail, where `OAJAIL` is set: that instance
//! serves, and its boot check compares the wrapper's hash with the policy it
//! derives itself, so the two can never drift apart.
//!
//! oajail is found by absolute path: `OA_OAJAIL` when set (it must be
//! absolute), else `oajail` beside this binary (after resolving symbolic
//! links, so a link in `~/.local/bin` finds the real install directory).
//! `PATH` is never searched: clients start servers with a minimal one.
//! The working directory becomes `/` before the exec: the server reads no
//! file relative to it, and a cwd inside a denied region (`~`) is then no
//! concern of the jail.

use crate::McpError;
use crate::egress::{self, Needs};
use std::ffi::OsString;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// Environment variable naming the oajail binary (absolute path).
pub const OAJAIL_ENV: &str = "OA_OAJAIL";

/// The oajail binary to run under: `OA_OAJAIL`, else beside `exe`.
pub fn oajail_path(exe: &Path, configured: Option<&str>) -> Result<PathBuf, McpError> {
    let not_found = |message: String| McpError::Config {
        field: "--jail",
        message,
    };
    if let Some(p) = configured.filter(|p| !p.is_empty()) {
        let path = PathBuf::from(p);
        if !path.is_absolute() {
            return Err(not_found(format!(
                "{OAJAIL_ENV} must be an absolute path, got {p:?}"
            )));
        }
        return if path.is_file() {
            Ok(path)
        } else {
            Err(not_found(format!("{OAJAIL_ENV}={p}: no such file")))
        };
    }
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let beside = dir.join("oajail");
    if beside.is_file() {
        return Ok(beside);
    }
    Err(not_found(format!(
        "no oajail beside this server ({}); install both in one directory or set {OAJAIL_ENV} to oajail's absolute path",
        beside.display()
    )))
}

/// Replaces this process with oajail running this binary under `needs`'
/// policy; returns only on failure.
///
/// `files` are the file options already resolved to absolute paths
/// (`OA_OPENAPI`, `OA_EXTRA_CA_CERTS`): they are passed by environment and
/// their flags dropped from `args`, since the jailed server starts in `/`.
/// `listener` (the HTTP transport's port, bound here on the host's
/// network) becomes the jailed server's stdin, with `OA_HTTP_LISTEN=stdin`
/// instead of `--listen`: the jail's own network namespace has no way in.
pub fn exec_under_oajail(
    oajail: &Path,
    needs: &Needs,
    args: &[OsString],
    files: &[(&str, PathBuf)],
    listener: Option<std::net::TcpListener>,
) -> McpError {
    let mut args = without_file_flags(args);
    if listener.is_some() {
        args = without_flag(&args, "--listen");
    }
    match prepare(oajail, needs, &args) {
        Ok((mut cmd, _pipe)) => {
            cmd.envs(files.iter().map(|(k, v)| (*k, v.as_os_str())));
            if let Some(l) = listener {
                cmd.stdin(std::process::Stdio::from(std::os::fd::OwnedFd::from(l)))
                    .env("OA_HTTP_LISTEN", "stdin");
            }
            let e = cmd.exec();
            McpError::Io {
                what: format!("exec {}", oajail.display()),
                source: e,
            }
        }
        Err(e) => e,
    }
}

/// The oajail command and the read end of the pipe holding the policy (kept
/// open, without close-on-exec, until the exec).
fn prepare(
    oajail: &Path,
    needs: &Needs,
    args: &[OsString],
) -> Result<(std::process::Command, std::os::fd::OwnedFd), McpError> {
    let io = |what: &str| {
        let what = what.to_owned();
        move |e: std::io::Error| McpError::Io { what, source: e }
    };
    let text = egress::print("srt", needs)?;
    // nix's pipe() leaves both ends inheritable; the policy (well under the
    // 64 KiB pipe buffer) is written and the write end closed before exec.
    let (read, write) = nix::unistd::pipe().map_err(|e| io("policy pipe")(e.into()))?;
    let mut writer = std::fs::File::from(write);
    writer
        .write_all(text.as_bytes())
        .map_err(io("policy pipe"))?;
    drop(writer);
    let mut cmd = std::process::Command::new(oajail);
    cmd.arg("--settings")
        .arg(format!("/proc/self/fd/{}", read.as_raw_fd()))
        .arg("--")
        .arg(&needs.exe)
        .args(args)
        .current_dir("/");
    Ok((cmd, read))
}

/// `args` without `--openapi`/`--extra-ca-certs` and their values.
fn without_file_flags(args: &[OsString]) -> Vec<OsString> {
    without_flags(args, &["--openapi", "--extra-ca-certs"])
}

/// `args` without `flag` and its value.
fn without_flag(args: &[OsString], flag: &str) -> Vec<OsString> {
    without_flags(args, &[flag])
}

/// `args` without the `FLAGS` and their values (`--f v` or `--f=v`).
fn without_flags(args: &[OsString], flags: &[&str]) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut skip_value = false;
    for a in args {
        let text = a.to_string_lossy();
        if skip_value {
            skip_value = false;
        } else if flags.contains(&text.as_ref()) {
            skip_value = true;
        } else if !flags.iter().any(|f| text.starts_with(&format!("{f}="))) {
            out.push(a.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_flags_are_dropped_with_their_values() {
        let args: Vec<OsString> = [
            "--jail",
            "--openapi",
            "a.yaml",
            "--extra-ca-certs=ca.pem",
            "--allow-writes",
        ]
        .into_iter()
        .map(OsString::from)
        .collect();
        assert_eq!(
            without_file_flags(&args),
            vec![OsString::from("--jail"), OsString::from("--allow-writes")]
        );
    }

    #[test]
    fn relative_oajail_is_refused() {
        let e = oajail_path(Path::new("/usr/bin/openagenda-mcp"), Some("oajail")).unwrap_err();
        assert!(e.to_string().contains("absolute"), "{e}");
    }

    #[test]
    fn missing_sibling_names_the_fix() {
        let e = oajail_path(Path::new("/nonexistent/dir/openagenda-mcp"), None).unwrap_err();
        assert!(e.to_string().contains(OAJAIL_ENV), "{e}");
    }
}
