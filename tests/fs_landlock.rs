//! Landlock as a layer of its own. With the `test-layers` feature the mount
//! layer is switched off (`OAJAIL_TEST_DISABLE=mounts`) and the filesystem
//! rules must still hold, from Landlock alone; without the feature only the
//! checks that Landlock is in force under the normal layout run.
//! Run the full set with `cargo test -p oajail --features test-layers --test fs_landlock`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod fs_support;

use fs_support::*;
use serde_json::json;

/// `connect(127.0.0.1:port)` from Python, printing `tcp=<errno>` or `tcp=ok`.
fn tcp_probe(port: u16) -> String {
    format!(
        "/usr/bin/python3 -c '\nimport socket\ns=socket.socket()\ntry:\n  s.connect((\"127.0.0.1\", {port})); print(\"tcp=ok\")\nexcept OSError as e: print(\"tcp=%d\" % e.errno)\n'"
    )
}

#[test]
fn tcp_connect_is_pinned_to_the_proxy_port() {
    let lab = Lab::new("ll-tcp");
    let o = lab.run(
        json!({"denyRead": [], "allowWrite": [], "denyWrite": []}),
        &tcp_probe(9),
    );
    // EACCES from Landlock, not ECONNREFUSED from an empty loopback.
    has(&o, "tcp=13");
}

#[test]
fn allow_local_binding_lifts_the_port_pin() {
    let lab = Lab::new("ll-local");
    let extra =
        json!({"network": {"allowedDomains": [], "deniedDomains": [], "allowLocalBinding": true}});
    let o = lab.run_with(
        json!({"denyRead": [], "allowWrite": [], "denyWrite": []}),
        extra,
        &tcp_probe(9),
    );
    has(&o, "tcp=111");
}

#[cfg(feature = "test-layers")]
mod without_mounts {
    use super::*;

    fn run_landlock_only(lab: &Lab, fs: serde_json::Value, script: &str) -> std::process::Output {
        let file = lab.root.join("settings.json");
        let settings =
            json!({"network": {"allowedDomains": [], "deniedDomains": []}, "filesystem": fs});
        std::fs::write(&file, settings.to_string()).unwrap();
        let mut cmd = lab.command(&file, script);
        cmd.env("OAJAIL_TEST_DISABLE", "mounts");
        cmd.output().unwrap()
    }

    #[test]
    fn deny_read_holds_without_mounts() {
        let lab = Lab::new("ll-read");
        lab.file("home/.ssh/id", "KEY");
        lab.file("home/notes", "NOTES");
        let fs = json!({"denyRead": ["~/.ssh"], "allowWrite": ["."], "denyWrite": []});
        let o = run_landlock_only(
            &lab,
            fs,
            "echo id=$(r $HOME/.ssh/id); echo notes=$(r $HOME/notes)",
        );
        has(&o, "id=DENIED");
        has(&o, "notes=NOTES");
    }

    #[test]
    fn allow_read_inside_a_denied_dir_holds_without_mounts() {
        let lab = Lab::new("ll-reallow");
        lab.file("V/v1/token", "TOKEN");
        lab.file("V/v2/other", "OTHER");
        let fs = json!({"denyRead": [lab.p("V")], "allowRead": [lab.p("V/v1")], "allowWrite": [], "denyWrite": []});
        let l = lab.root.display();
        let o = run_landlock_only(
            &lab,
            fs,
            &format!("echo t=$(r {l}/V/v1/token); echo o=$(r {l}/V/v2/other)"),
        );
        has(&o, "t=TOKEN");
        has(&o, "o=DENIED");
    }

    #[test]
    fn writes_are_limited_to_writable_roots_without_mounts() {
        let lab = Lab::new("ll-write");
        lab.file("outside/f", "ORIG");
        let fs = json!({"denyRead": [], "allowWrite": ["."], "denyWrite": []});
        let l = lab.root.display();
        let o = run_landlock_only(
            &lab,
            fs,
            &format!(
                "echo out=$(w {l}/outside/f); echo in=$(w ok.txt); echo home=$(w $HOME/.bashrc)"
            ),
        );
        has(&o, "out=DENIED");
        has(&o, "in=WROTE");
        has(&o, "home=DENIED");
        assert_eq!(
            std::fs::read_to_string(lab.root.join("outside/f")).unwrap(),
            "ORIG"
        );
    }
}
