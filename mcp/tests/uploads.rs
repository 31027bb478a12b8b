//! The built-in catalogue is the real OpenAgenda v3 spec: every operation
//! is searchable, writes are documented but refused without
//! `--allow-writes`, and uploads work (multipart/form-data bodies, header
//! credentials) against the local TLS mock.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod support;

use serde_json::json;
use support::mock::Mock;
use support::{Server, error_code};

fn server(mock: &Mock, args: &[&str]) -> Server {
    let base = mock.base_url();
    let ca = mock.ca_path.to_str().unwrap().to_owned();
    Server::start(
        &[
            ("OA_CODE_EGRESS_AUTHORITY", "none"),
            ("OA_BASE_URL", base.as_str()),
            ("OA_EXTRA_CA_CERTS", ca.as_str()),
            ("OA_API_KEY", "oa_sk_uploads"),
        ],
        args,
    )
}

#[test]
fn every_operation_of_the_real_spec_is_searchable_and_writes_say_they_are_off() {
    let mock = Mock::start();
    let mut s = server(&mock, &[]);
    let r = s.tool(
        "search_docs",
        json!({"query": "upload an image file for an event", "limit": 30}),
    );
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("oa.agendas.uploads.create"), "{text}");
    assert!(
        text.contains("Write operation: disabled on this server"),
        "{text}"
    );
    assert!(text.contains("multipart/form-data"), "{text}");
    for (query, id) in [
        ("create an event", "agendas.events.create"),
        ("delete an event", "agendas.events.delete"),
        ("upload with a ticket", "uploads.staged"),
        (
            "validate an event before creating it",
            "agendas.events.validate",
        ),
        ("list events", "agendas.events.list"),
    ] {
        let r = s.tool("search_docs", json!({"query": query}));
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains(&format!("oa.{id}")),
            "{query:?} does not find {id}:\n{text}"
        );
    }
    let r = s.execute(
        "const r = await oa.agendas.events.create({ path: { agendaUid: 1 }, body: { title: { fr: 'x' } } }); return r.error.message",
    );
    let msg = r["structuredContent"]["result"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        msg.contains("write operation") && msg.contains("--allow-writes"),
        "{r}"
    );
    assert!(
        mock.seen.lock().unwrap().is_empty(),
        "a refused write reached the API"
    );
}

#[test]
fn uploads_send_multipart_bodies_and_header_credentials() {
    let mock = Mock::start();
    let mut s = server(&mock, &["--allow-writes"]);
    let r = s.execute(
        "const a = await oa.agendas.uploads.create({ path: { agendaUid: 7 }, body: { \
           file: { filename: 'note.txt', contentType: 'text/plain', text: 'hello upload' } } });\n\
         const b = await oa.uploads.staged({ header: { 'X-Upload-Ticket': 'tkt-42' }, body: { \
           file: { filename: 'p.png', contentType: 'image/png', base64: 'iVBORw0KGgo=' } } });\n\
         return [a.error, a.data, b.error, b.data];",
    );
    assert_eq!(
        r["structuredContent"]["result"],
        json!([null, {"ref": "staging/mock-1"}, null, {"ref": "staging/mock-1"}]),
        "{r}"
    );
    let seen = mock.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    let header = |i: usize, name: &str| {
        seen[i]
            .headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    assert!(header(0, "content-type").starts_with("multipart/form-data; boundary="));
    let body = String::from_utf8_lossy(&seen[0].body);
    assert!(
        body.contains("name=\"file\"; filename=\"note.txt\""),
        "{body}"
    );
    assert!(
        body.contains("Content-Type: text/plain") && body.contains("hello upload"),
        "{body}"
    );
    assert_eq!(seen[0].target, "/v3/agendas/7/uploads");
    assert_eq!(header(1, "x-upload-ticket"), "tkt-42");
    assert!(
        seen[1].body.windows(8).any(|w| w == b"\x89PNG\r\n\x1a\n"),
        "decoded base64"
    );
    // A bad file object is the script's error, not a request.
    let r = s.execute(
        "return (await oa.agendas.uploads.create({ path: { agendaUid: 7 }, body: { file: { filename: 'x' } } })).error.message",
    );
    assert!(
        r["structuredContent"]["result"]
            .as_str()
            .unwrap()
            .contains("base64"),
        "{r}"
    );
    assert_eq!(mock.seen.lock().unwrap().len(), 2);
    let _ = error_code;
}
