//! Issue 32: hostile `execute` scripts against the real server over stdio,
//! bare and under `--jail`, with the API mocked on loopback (bare) or on
//! this host's address (jailed). Each test ends with [`Rig::end`]: `ping`
//! answers at once, `SIGTERM` ends the server within a second and no process
//! it started is left.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::rig::{Mode, Rig};

fn result(r: &Value) -> &Value {
    &r["structuredContent"]["result"]
}

/// A path parameter whose value is itself a template used to loop for ever
/// at 100% CPU on the event loop (no request, deadline or SIGTERM answered
/// any more), and let one parameter pull in another's value. Each
/// parameter is substituted once, from the caller's value, percent-encoded.
fn self_referencing_template(mode: Mode) {
    let Some(mut rig) = Rig::start(mode, &[], &[]) else {
        return;
    };
    let started = Instant::now();
    let r = rig.server.execute(
        "const a = await oa.agendas.get({ path: { agendaUid: '{agendaUid}' } });\n\
         const b = await oa.agendas.events.get({ path: { agendaUid: '{eventUid}', eventUid: '{agendaUid}' } });\n\
         return [a.error, b.error && b.error.status];",
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(result(&r), &json!([null, 404]), "{r}");
    let targets: Vec<String> = rig
        .mock
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.target.clone())
        .collect();
    assert_eq!(
        targets,
        [
            "/v3/agendas/%7BagendaUid%7D",
            "/v3/agendas/%7BeventUid%7D/events/%7BagendaUid%7D"
        ]
    );
    rig.end();
}

#[test]
fn a_self_referencing_path_template_bare() {
    self_referencing_template(Mode::Bare);
}

#[test]
fn a_self_referencing_path_template_jailed() {
    self_referencing_template(Mode::Jailed);
}
