//! Family A, continued: denied credentials that the host creates, replaces
//! or makes again while the jail runs (an all-day MCP server, and the user
//! at work in another terminal). The mount view holds a read deny only for
//! the paths as they were when the jail was built: a path that did not
//! exist has nothing to mask, and the kernel detaches a mask when the host
//! replaces or removes the dentry under it, in every namespace. Landlock's
//! read complement alone holds these (`~` gets `read_dir` and a rule per
//! entry it had, so a new inode there has none).
mod common;
use common::*;
use oajail_security::lab::Run;
use std::path::Path;
use std::time::{Duration, Instant};

#[test]
fn blocks_credential_created_during_the_run() {
    // `aws configure` in another terminal.
    let id = "A13-created-during-run";
    let mut lab = Lab::new(id);
    std::fs::remove_dir_all(lab.home(".aws")).expect("remove the planted ~/.aws");
    lab.rebaseline_home();
    let path = lab.home(".aws/credentials");
    let content = format!("secret=OAJ-CANARY-{}-aws-late\n", lab.token);
    let run = run_while_the_host_acts(&lab, Jail::Main, "read-when-created", &path, move |p| {
        std::fs::create_dir_all(p.parent().unwrap_or(p))?;
        std::fs::write(p, content)
    });
    // The only change to the fake home is the test's own file.
    assert_eq!(lab.home_changes(), ["created .aws/credentials"]);
    lab.rebaseline_home();
    assert_blocked(&mut lab, id, &run);
}

#[test]
fn blocks_credential_replaced_during_the_run() {
    // git's credential store rewrites ~/.git-credentials through a lock file
    // and a rename (so do editors' atomic saves, and passwd /etc/shadow). A
    // denied file is masked on its own; a denied directory such as ~/.aws
    // is masked whole, so a rename inside it would change nothing here.
    let id = "A14-replaced-during-run";
    let mut lab = Lab::new(id);
    let path = lab.home(".git-credentials");
    let content = format!(
        "https://u:OAJ-CANARY-{}-git-replaced@example.org\n",
        lab.token
    );
    let replace = replace_by_a_rename(content);
    let run = run_while_the_host_acts(&lab, Jail::Main, "read-when-replaced", &path, replace);
    assert_eq!(lab.home_changes(), ["changed .git-credentials"]);
    lab.rebaseline_home();
    assert_blocked(&mut lab, id, &run);
}

/// A14 on Landlock ABI 1 (Ubuntu 22.04's 5.15; the test build caps the
/// probe), where the run goes ahead with no flag: ABI 1's read complement
/// holds it there too.
#[test]
fn blocks_credential_replaced_during_the_run_on_landlock_abi_1() {
    let id = "A14-replaced-during-run-abi-1";
    let mut lab = Lab::new(id);
    let path = lab.home(".git-credentials");
    let content = format!("https://u:OAJ-CANARY-{}-git-abi1@example.org\n", lab.token);
    let abi1 = Jail::TestBuild(&[("OAJAIL_TEST_LANDLOCK_ABI", "1")]);
    let replace = replace_by_a_rename(content);
    let run = run_while_the_host_acts(&lab, abi1, "read-when-replaced", &path, replace);
    assert_eq!(lab.home_changes(), ["changed .git-credentials"]);
    lab.rebaseline_home();
    assert!(!run.stderr.contains("DEGRADED"), "{}", run.stderr);
    assert_blocked(&mut lab, id, &run);
}

#[test]
fn blocks_credential_directory_made_again_during_the_run() {
    // `rm -rf ~/.aws`, then `aws configure`: removing the directory detaches
    // the jail's tmpfs over it, and the new directory shows at the path.
    let id = "A15-dir-made-again-during-run";
    let mut lab = Lab::new(id);
    let path = lab.home(".aws/credentials");
    let content = format!("secret=OAJ-CANARY-{}-aws-again\n", lab.token);
    let run = run_while_the_host_acts(&lab, Jail::Main, "read-when-replaced", &path, move |p| {
        let dir = p.parent().unwrap_or(p);
        std::fs::remove_dir_all(dir)?;
        std::fs::create_dir(dir)?;
        std::fs::write(p, content)
    });
    let changes = lab.home_changes();
    assert!(
        changes.contains(&"changed .aws/credentials".to_owned())
            && changes.iter().all(|c| c.contains(" .aws")),
        "{changes:?}"
    );
    lab.rebaseline_home();
    assert_blocked(&mut lab, id, &run);
}

/// Residual (docs/threat-model.md): a denied file inside a writable root,
/// replaced by the host during the run, is readable in the jail. Landlock
/// grants read on the whole writable root, and the rename detaches the
/// mask. oajail says so at start; the test notices a change either way.
#[test]
fn residual_denied_file_in_a_writable_root_replaced_by_the_host_is_readable() {
    let lab = Lab::new("A14b-replaced-in-writable-root");
    let path = lab.ws(".env");
    std::fs::write(&path, "OLD=1\n").expect("plant ws/.env");
    let policy = lab.policy_text(
        &serde_json::json!({
            "network": {"allowedDomains": [], "deniedDomains": []},
            "filesystem": {"denyRead": [path], "allowWrite": [lab.ws("")], "denyWrite": []}
        })
        .to_string(),
    );
    let content = format!("TOKEN=OAJ-CANARY-{}-env-saved\n", lab.token);
    let jail = Jail::Policy(&policy);
    let replace = replace_by_a_rename(content);
    let run = run_while_the_host_acts(&lab, jail, "read-when-replaced", &path, replace);
    assert!(
        run.stderr.contains("is inside the writable root"),
        "no warning: {}",
        run.stderr
    );
    assert_still_residual(&run);
}

/// What git's credential store and an editor's save do: write the new
/// content beside the file, then rename it over the file.
fn replace_by_a_rename(content: String) -> impl FnOnce(&Path) -> std::io::Result<()> {
    move |p| {
        let fresh = p.with_extension("new");
        std::fs::write(&fresh, content)?;
        std::fs::rename(&fresh, p)
    }
}

/// Which oajail runs the probe, and with which policy.
#[derive(Clone, Copy)]
enum Jail<'a> {
    /// The build under test, the built-in default.
    Main,
    /// The `test-layers` build with these switches, the built-in default.
    TestBuild(&'a [(&'a str, &'a str)]),
    /// The build under test with this settings file.
    Policy(&'a str),
}

/// Run `<probe> VERB PATH` under `jail` while the host does
/// `act` on PATH, once it sees the probe running in the jail (after its
/// `execve`, so after the jail's set-up).
fn run_while_the_host_acts(
    lab: &Lab,
    jail: Jail<'_>,
    verb: &str,
    path: &str,
    act: impl FnOnce(&Path) -> std::io::Result<()> + Send + 'static,
) -> Run {
    let host = std::thread::spawn({
        let (verb, path) = (verb.to_owned(), path.to_owned());
        move || {
            wait_for_probe(&verb, &path)?;
            act(Path::new(&path)).map_err(|e| format!("{path}: {e}"))
        }
    });
    let (probe, opts) = ([verb, path], RunOptions::default());
    let run = match jail {
        Jail::Main => lab.jailed_default(&probe, &opts),
        Jail::TestBuild(switches) => lab.jailed_default_test_build(switches, &probe, &opts),
        Jail::Policy(file) => lab.jailed_with_file(file, &probe, &opts),
    };
    let acted = (host.join()).unwrap_or_else(|_| Err("the host thread panicked".into()));
    assert_eq!(acted, Ok(()), "{} {}", run.stdout, run.stderr);
    run
}

/// Wait (up to 20 s) until a process runs `<probe> VERB PATH` and has
/// taken its first look at PATH (it then renames itself `oajail-waiting`):
/// acting earlier, the host's change would be what the probe first sees.
fn wait_for_probe(verb: &str, path: &str) -> Result<(), String> {
    let want = format!("{verb}\0{path}\0");
    let running = || {
        std::fs::read_dir("/proc").is_ok_and(|procs| {
            procs.flatten().any(|p| {
                let looked = std::fs::read_to_string(p.path().join("comm"))
                    .is_ok_and(|c| c.trim_end() == "oajail-waiting");
                looked
                    && std::fs::read(p.path().join("cmdline")).is_ok_and(|c| {
                        let c = String::from_utf8_lossy(&c);
                        c.split_once('\0').is_some_and(|(_, rest)| rest == want)
                    })
            })
        })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !running() {
        if Instant::now() > deadline {
            return Err("the probe was never seen running".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}
