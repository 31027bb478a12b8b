//! OpenAPI 3.0/3.1 loader: YAML or JSON text → [`Catalogue`].
//!
//! Only local `$ref`s (`#/...`) are followed, with a depth bound so a
//! reference cycle is an error rather than a hang. Unknown keywords are
//! ignored; a missing `paths` or a non-3.x `openapi` field is an error.

use super::{Catalogue, EnumValue, Operation, Param, ParamIn, Style};
use crate::McpError;
use serde_json::{Map, Value};

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];
const MAX_REF_DEPTH: usize = 16;

/// Parses and loads one OpenAPI document.
pub fn load_document(text: &str, origin: &str, allow_writes: bool) -> Result<Catalogue, McpError> {
    let mut root = parse(text, origin)?;
    let version = root.get("openapi").and_then(Value::as_str).unwrap_or("");
    if !version.starts_with("3.") {
        return Err(McpError::spec(
            origin,
            format!("openapi: expected 3.x, got {version:?}"),
        ));
    }
    let paths = root
        .get("paths")
        .and_then(Value::as_object)
        .ok_or_else(|| McpError::spec(origin, "paths: missing or not an object"))?;
    let mut ops = Vec::new();
    for (path, item) in paths {
        let item = resolve(&root, item, origin)?;
        let shared = item.get("parameters").cloned().unwrap_or(Value::Null);
        for method in METHODS {
            let Some(op) = item.get(method) else { continue };
            ops.push(load_operation(&root, origin, path, method, op, &shared)?);
        }
    }
    ops.sort_by(|a, b| a.id.cmp(&b.id));
    check_unique(&ops, origin)?;
    // Moved out, not cloned: the document is dropped right after.
    let schemas = match root.pointer_mut("/components/schemas").map(Value::take) {
        Some(Value::Object(m)) => m.into_iter().collect(),
        _ => Default::default(),
    };
    let title = root
        .pointer("/info/title")
        .and_then(Value::as_str)
        .unwrap_or("API");
    // Texts say "the {title} API": "OpenAgenda API" would read twice.
    let title = title.strip_suffix(" API").unwrap_or(title).to_owned();
    Ok(Catalogue {
        title,
        ops,
        schemas,
        writes_enabled: allow_writes,
    })
}

fn check_unique(ops: &[Operation], origin: &str) -> Result<(), McpError> {
    for pair in ops.windows(2) {
        if pair[0].id == pair[1].id {
            return Err(McpError::spec(
                origin,
                format!("operationId {:?} is not unique", pair[0].id),
            ));
        }
    }
    let mut paths: Vec<&str> = ops.iter().map(|o| o.js_path.as_str()).collect();
    paths.sort_unstable();
    if let Some(dup) = paths.windows(2).find(|w| w[0] == w[1]) {
        return Err(McpError::spec(
            origin,
            format!("two operations map to oa.{}", dup[0]),
        ));
    }
    Ok(())
}

fn load_operation(
    root: &Value,
    origin: &str,
    path: &str,
    method: &str,
    op: &Value,
    shared: &Value,
) -> Result<Operation, McpError> {
    let id = match op.get("operationId").and_then(Value::as_str) {
        Some(id) if !id.is_empty() => id.to_owned(),
        _ => derived_id(method, path),
    };
    let mut params = Vec::new();
    for list in [shared, op.get("parameters").unwrap_or(&Value::Null)] {
        for raw in list.as_array().into_iter().flatten() {
            let p = load_param(root, origin, raw)?;
            params.retain(|q: &Param| !(q.name == p.name && q.location == p.location));
            params.push(p);
        }
    }
    params.extend(header_credentials(root, op));
    let (body, body_required) = load_body(root, origin, op)?;
    let text = |k: &str| {
        op.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim()
            .to_owned()
    };
    Ok(Operation {
        js_path: js_path(&id),
        method: method.to_ascii_uppercase(),
        path: path.to_owned(),
        summary: text("summary"),
        description: text("description"),
        params,
        body,
        body_required,
        response: load_response(root, origin, op)?,
        synonyms: string_list(op.get("x-synonyms")),
        example: op
            .pointer("/x-codeSamples/0/source")
            .and_then(Value::as_str)
            .map(|s| s.trim_end().to_owned()),
        is_write: method != "get",
        multipart: is_multipart(root, origin, op)?,
        id,
    })
}

/// Header credentials other than the bearer token: an operation whose
/// `security` names an `apiKey` scheme `in: header` (OpenAgenda's
/// `X-Upload-Ticket` for `uploads.staged`) takes that header from the
/// script, as a header parameter. The bearer key stays the server's.
fn header_credentials(root: &Value, op: &Value) -> Vec<Param> {
    let schemes = root.pointer("/components/securitySchemes");
    let names = op
        .get("security")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .flat_map(|req| req.keys());
    names
        .filter_map(|n| schemes.and_then(|s| s.get(n)))
        .filter(|s| {
            s.get("type") == Some(&Value::from("apiKey"))
                && s.get("in") == Some(&Value::from("header"))
        })
        .filter_map(|s| s.get("name").and_then(Value::as_str))
        .map(|name| Param {
            name: name.to_owned(),
            location: ParamIn::Header,
            required: false,
            description: "credential header of this operation".into(),
            type_name: "string".into(),
            default: None,
            minimum: None,
            maximum: None,
            enum_values: Vec::new(),
            style: crate::spec::Style::Form,
            explode: true,
        })
        .collect()
}

fn load_param(root: &Value, origin: &str, raw: &Value) -> Result<Param, McpError> {
    let p = resolve(root, raw, origin)?;
    let name = p
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| McpError::spec(origin, "parameter without name"))?;
    let location = match p.get("in").and_then(Value::as_str) {
        Some("path") => ParamIn::Path,
        Some("query") => ParamIn::Query,
        Some("header") => ParamIn::Header,
        Some("cookie") => ParamIn::Header,
        other => {
            return Err(McpError::spec(
                origin,
                format!("parameter {name}: bad in {other:?}"),
            ));
        }
    };
    let schema = p.get("schema").cloned().unwrap_or(Value::Null);
    let flat = resolve(root, &schema, origin)?;
    let style = match p.get("style").and_then(Value::as_str) {
        Some("deepObject") => Style::DeepObject,
        _ => Style::Form,
    };
    Ok(Param {
        name: name.to_owned(),
        location,
        required: p
            .get("required")
            .and_then(Value::as_bool)
            .unwrap_or(location == ParamIn::Path),
        description: p
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim()
            .to_owned(),
        type_name: type_name(root, &schema),
        default: flat.get("default").cloned(),
        minimum: flat.get("minimum").and_then(Value::as_f64),
        maximum: flat.get("maximum").and_then(Value::as_f64),
        enum_values: enum_values(root, &schema, 0),
        style,
        explode: p.get("explode").and_then(Value::as_bool).unwrap_or(true),
    })
}

fn load_body(root: &Value, origin: &str, op: &Value) -> Result<(Option<Value>, bool), McpError> {
    let Some(raw) = op.get("requestBody") else {
        return Ok((None, false));
    };
    let body = resolve(root, raw, origin)?;
    let required = body
        .get("required")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let schema = first_content_schema(body);
    Ok((Some(schema.unwrap_or(Value::Object(Map::new()))), required))
}

/// Whether the request body is sent as `multipart/form-data` (uploads).
fn is_multipart(root: &Value, origin: &str, op: &Value) -> Result<bool, McpError> {
    let Some(raw) = op.get("requestBody") else {
        return Ok(false);
    };
    let body = resolve(root, raw, origin)?;
    Ok(body
        .get("content")
        .and_then(Value::as_object)
        .is_some_and(|c| {
            !c.keys().any(|k| k.contains("json")) && c.contains_key("multipart/form-data")
        }))
}

fn load_response(root: &Value, origin: &str, op: &Value) -> Result<Option<Value>, McpError> {
    let Some(responses) = op.get("responses").and_then(Value::as_object) else {
        return Ok(None);
    };
    let ok = responses.iter().find(|(code, _)| code.starts_with('2'));
    match ok {
        Some((_, raw)) => Ok(first_content_schema(resolve(root, raw, origin)?)),
        None => Ok(None),
    }
}

fn first_content_schema(holder: &Value) -> Option<Value> {
    let content = holder.get("content")?.as_object()?;
    let media = content
        .get("application/json")
        .or_else(|| {
            content
                .iter()
                .find(|(k, _)| k.contains("json"))
                .map(|(_, v)| v)
        })
        .or_else(|| content.values().next())?;
    media.get("schema").cloned()
}

/// Follows local `$ref`s until a non-reference value.
pub(crate) fn resolve<'a>(
    root: &'a Value,
    mut value: &'a Value,
    origin: &str,
) -> Result<&'a Value, McpError> {
    for _ in 0..MAX_REF_DEPTH {
        let Some(r) = value.get("$ref").and_then(Value::as_str) else {
            return Ok(value);
        };
        let pointer = r.strip_prefix('#').ok_or_else(|| {
            McpError::spec(
                origin,
                format!("$ref {r}: only local references are supported"),
            )
        })?;
        value = root
            .pointer(pointer)
            .ok_or_else(|| McpError::spec(origin, format!("$ref {r}: target not found")))?;
    }
    Err(McpError::spec(
        origin,
        "$ref: reference chain too deep (cycle?)",
    ))
}

/// A display type for a schema (see [`super::type_name_with`]).
pub(crate) fn type_name(root: &Value, schema: &Value) -> String {
    let has = |name: &str| {
        root.pointer(&format!("/components/schemas/{name}"))
            .is_some()
    };
    super::type_name_with(&has, schema)
}

/// Enum values (with labels) of a schema, looking through `$ref`, `items`
/// and `oneOf`/`anyOf` branches.
pub(crate) fn enum_values(root: &Value, schema: &Value, depth: usize) -> Vec<EnumValue> {
    if depth > 4 {
        return Vec::new();
    }
    let flat = match resolve(root, schema, "") {
        Ok(v) => v,
        Err(_) => return Vec::new(),
    };
    if let Some(values) = flat.get("enum").and_then(Value::as_array) {
        let labels = flat.get("x-enum-descriptions");
        return values
            .iter()
            .map(|v| EnumValue {
                value: v.clone(),
                label: label_for(labels, v),
            })
            .collect();
    }
    if let Some(items) = flat.get("items") {
        return enum_values(root, items, depth + 1);
    }
    let mut out = Vec::new();
    for key in ["oneOf", "anyOf"] {
        for branch in flat
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            out.extend(enum_values(root, branch, depth + 1));
        }
    }
    out
}

fn label_for(labels: Option<&Value>, value: &Value) -> Option<String> {
    let key = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    labels?.get(&key).and_then(Value::as_str).map(str::to_owned)
}

fn string_list(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn derived_id(method: &str, path: &str) -> String {
    let mut id = method.to_owned();
    for seg in path.split('/').filter(|s| !s.is_empty()) {
        id.push('_');
        id.push_str(seg.trim_matches(|c| c == '{' || c == '}'));
    }
    id
}

/// The `oa.` path of an operation id: dot-separated identifiers.
pub(crate) fn js_path(id: &str) -> String {
    let segs: Vec<String> = id
        .split('.')
        .filter(|s| !s.is_empty())
        .map(|seg| {
            let mut s: String = seg
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '$' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            if s.starts_with(|c: char| c.is_ascii_digit()) {
                s.insert(0, '_');
            }
            s
        })
        .collect();
    if segs.is_empty() {
        "_".into()
    } else {
        segs.join(".")
    }
}

/// The document as JSON. A JSON document (the built-in one, see
/// `build.rs`) is read by `serde_json`; YAML is read straight into a JSON
/// value, which keeps the load's peak (and so the heap the server keeps for
/// its whole life: freed chunks below live ones are not returned to the
/// system) to one tree instead of a YAML tree plus its JSON copy. A YAML
/// document that has no direct JSON reading (a custom `!tag`) goes through
/// the YAML tree.
fn parse(text: &str, origin: &str) -> Result<Value, McpError> {
    if text.trim_start().starts_with('{')
        && let Ok(v) = serde_json::from_str::<Value>(text)
    {
        return Ok(v);
    }
    if let Ok(v) = serde_yaml_ng::from_str::<Value>(text) {
        return Ok(v);
    }
    let yaml: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(text).map_err(|e| McpError::spec(origin, e.to_string()))?;
    Ok(yaml_to_json(yaml))
}

fn yaml_to_json(value: serde_yaml_ng::Value) -> Value {
    use serde_yaml_ng::Value as Y;
    match value {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                n.as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map_or(Value::Null, Value::Number)
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(seq) => Value::Array(seq.into_iter().map(yaml_to_json).collect()),
        Y::Mapping(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let key = match k {
                    Y::String(s) => s,
                    other => match yaml_to_json(other) {
                        Value::String(s) => s,
                        v => v.to_string(),
                    },
                };
                out.insert(key, yaml_to_json(v));
            }
            Value::Object(out)
        }
        Y::Tagged(t) => yaml_to_json(t.value),
    }
}
