//! Both MCP eras on the wire, with a raw JSON-lines client: the 2025-11-25
//! handshake and the stateless 2026-07-28 revision.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

mod support;

use serde_json::{Value, json};
use support::{Server, meta};

fn server(args: &[&str]) -> Server {
    Server::start(&[("OA_CODE_EGRESS_AUTHORITY", "none")], args)
}

#[test]
fn legacy_handshake_then_tools() {
    let mut s = server(&[]);
    let init = s.call(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}),
    );
    let r = &init["result"];
    assert_eq!(r["protocolVersion"], json!("2025-11-25"), "{init}");
    assert_eq!(
        r["capabilities"],
        json!({"tools": {}}),
        "only tools is declared"
    );
    assert_eq!(r["serverInfo"]["name"], json!("openagenda-mcp"));
    assert!(r["instructions"].as_str().unwrap().contains("search_docs"));
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    assert_eq!(s.call("ping", json!({}))["result"], json!({}));
    let list = s.call("tools/list", json!({}));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["execute", "search_docs"]);
    let r = s.call(
        "tools/call",
        json!({"name": "execute", "arguments": {"code": "return [1, 2].map(x => x * 2)"}}),
    );
    assert_eq!(
        r["result"]["structuredContent"]["result"],
        json!([2, 4]),
        "{r}"
    );
    assert!(s.finish().success(), "exit on stdin EOF");
}

#[test]
fn legacy_unknown_version_negotiates_ours() {
    let mut s = server(&[]);
    let init = s.call(
        "initialize",
        json!({"protocolVersion": "1999-01-01", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}),
    );
    let v = init["result"]["protocolVersion"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(v.starts_with("20"), "{init}");
}

#[test]
fn modern_discover_and_meta_validation() {
    let mut s = server(&[]);
    let d = s.call("server/discover", json!({"_meta": meta()}));
    let r = &d["result"];
    assert_eq!(r["resultType"], json!("complete"), "{d}");
    assert!(
        r["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2026-07-28"))
    );
    assert!(
        r["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2025-11-25"))
    );
    assert_eq!(r["capabilities"], json!({"tools": {}}));
    assert!(r["ttlMs"].is_number() && r["cacheScope"].is_string());
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        json!("openagenda-mcp")
    );

    let missing = s.call("tools/list", json!({}));
    assert_eq!(missing["error"]["code"], json!(-32602), "{missing}");

    let mut bad = meta();
    bad["io.modelcontextprotocol/protocolVersion"] = json!("1900-01-01");
    let old = s.call("tools/list", json!({"_meta": bad}));
    assert_eq!(old["error"]["code"], json!(-32022), "{old}");

    let list = s.call("tools/list", json!({"_meta": meta()}));
    assert_eq!(list["result"]["resultType"], json!("complete"));
    assert!(list["result"]["ttlMs"].is_number());
    assert_eq!(list["result"]["cacheScope"], json!("private"));

    let unknown = s.call(
        "tools/call",
        json!({"_meta": meta(), "name": "nope", "arguments": {}}),
    );
    assert_eq!(unknown["error"]["code"], json!(-32602), "{unknown}");
    for method in [
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "no/such/method",
    ] {
        let r = s.call(method, json!({"_meta": meta()}));
        assert_eq!(r["error"]["code"], json!(-32601), "{method}: {r}");
    }
    let r = s.tool(
        "execute",
        json!({"code": "const x = await Promise.resolve(20); x + 1"}),
    );
    assert_eq!(r["resultType"], json!("complete"));
    assert_eq!(r["structuredContent"]["result"], json!(21));
    assert_eq!(r["content"][0]["type"], json!("text"));
}

fn tools_list(args: &[&str]) -> Value {
    let mut s = server(args);
    let mut list = s.call("tools/list", json!({"_meta": meta()}))["result"].clone();
    list.as_object_mut().unwrap().remove("_meta");
    list
}

#[test]
fn tools_list_snapshot() {
    insta::assert_json_snapshot!("tools_list_builtin", tools_list(&[]));
}

#[test]
fn annotations_follow_writes() {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/petstore.yaml");
    let ro = tools_list(&["--openapi", fixture]);
    let ex = ro["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "execute")
        .unwrap()
        .clone();
    assert_eq!(ex["annotations"]["readOnlyHint"], json!(true));
    assert_eq!(ex["annotations"]["openWorldHint"], json!(true));
    let rw = tools_list(&["--openapi", fixture, "--allow-writes"]);
    let ex = rw["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "execute")
        .unwrap()
        .clone();
    assert_eq!(ex["annotations"]["readOnlyHint"], json!(false));
    assert_eq!(ex["annotations"]["destructiveHint"], json!(true));
    let sd = rw["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "search_docs")
        .unwrap()
        .clone();
    assert_eq!(sd["annotations"]["readOnlyHint"], json!(true));
    assert_eq!(sd["annotations"]["openWorldHint"], json!(false));
}
