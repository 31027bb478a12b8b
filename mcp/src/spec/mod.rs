//! The operations the server exposes, loaded from an OpenAPI document.
//!
//! One code path loads both the built-in catalogue — the public OpenAgenda
//! v3 OpenAPI document, shipped verbatim in `openagenda-v3/openapi.yaml`
//! with its MIT licence beside it — and any `--openapi FILE`. Every
//! operation is loaded and searchable; write operations (POST, PUT, PATCH,
//! DELETE) are refused by the executor unless writes are allowed, and their
//! search cards say so.

mod openapi;

use serde_json::Value;
use std::collections::BTreeMap;

pub use openapi::load_document;

/// The built-in catalogue source, verbatim (the tests compare it with the
/// published document).
pub const BUILTIN_SOURCE: &str = include_str!("openagenda-v3/openapi.yaml");

/// The same document as compact JSON, made by `build.rs` (what the server
/// loads: several times faster to read than the YAML, see there).
pub const BUILTIN_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/openagenda-v3.json"));

/// Where a parameter goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamIn {
    /// A `{name}` segment of the path.
    Path,
    /// The query string.
    Query,
    /// A request header (passed through `query`-style args as `header`).
    Header,
}

/// How an array or object query value is serialised (OpenAPI `style`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// `form`: repeated keys when exploded, comma-joined otherwise.
    Form,
    /// `deepObject`: `key[sub]=value`.
    DeepObject,
}

/// One enum value and its human label (`x-enum-descriptions`).
#[derive(Clone, Debug, PartialEq)]
pub struct EnumValue {
    /// The wire value.
    pub value: Value,
    /// Its label, when the spec gives one.
    pub label: Option<String>,
}

/// One operation parameter, with its schema flattened for rendering.
#[derive(Clone, Debug)]
pub struct Param {
    /// Wire name.
    pub name: String,
    /// Location.
    pub location: ParamIn,
    /// Required by the spec.
    pub required: bool,
    /// Description (may be empty).
    pub description: String,
    /// Type for display: `integer`, `string[]`, `EventStatus[]`, `object`.
    pub type_name: String,
    /// Default value.
    pub default: Option<Value>,
    /// Inclusive minimum.
    pub minimum: Option<f64>,
    /// Inclusive maximum.
    pub maximum: Option<f64>,
    /// Allowed values, with labels.
    pub enum_values: Vec<EnumValue>,
    /// Serialisation style.
    pub style: Style,
    /// OpenAPI `explode` (default true for form).
    pub explode: bool,
}

/// One API operation.
#[derive(Clone, Debug)]
pub struct Operation {
    /// operationId (or one derived from method and path).
    pub id: String,
    /// The JS path under `oa`, e.g. `agendas.events.list`.
    pub js_path: String,
    /// Upper-case HTTP method.
    pub method: String,
    /// Path template relative to the base URL, e.g. `/agendas/{agendaUid}`.
    pub path: String,
    /// One-line summary.
    pub summary: String,
    /// Longer description.
    pub description: String,
    /// Parameters (path-level ones merged in).
    pub params: Vec<Param>,
    /// Request body schema, when the operation takes one.
    pub body: Option<Value>,
    /// Whether the body is required.
    pub body_required: bool,
    /// Success response schema (possibly a `$ref`).
    pub response: Option<Value>,
    /// `x-synonyms`.
    pub synonyms: Vec<String>,
    /// First `x-codeSamples` source.
    pub example: Option<String>,
    /// POST/PUT/PATCH/DELETE.
    pub is_write: bool,
    /// The body is `multipart/form-data` (an upload), not JSON.
    pub multipart: bool,
}

/// A loaded API description.
#[derive(Clone, Debug, Default)]
pub struct Catalogue {
    /// `info.title`.
    pub title: String,
    /// Operations sorted by id (deterministic order everywhere).
    pub ops: Vec<Operation>,
    /// `components.schemas`, for response shapes and enum tables.
    pub schemas: BTreeMap<String, Value>,
    /// Write operations may be called (`--allow-writes`).
    pub writes_enabled: bool,
}

impl Catalogue {
    /// Loads the built-in OpenAgenda v3 catalogue.
    pub fn builtin(allow_writes: bool) -> Result<Self, crate::McpError> {
        load_document(BUILTIN_JSON, "built-in", allow_writes)
    }

    /// Loads an OpenAPI 3.0/3.1 file (YAML or JSON).
    pub fn from_file(path: &std::path::Path, allow_writes: bool) -> Result<Self, crate::McpError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| crate::McpError::Io {
            what: origin.clone(),
            source: e,
        })?;
        load_document(&text, &origin, allow_writes)
    }

    /// Finds an operation by its id.
    pub fn op(&self, id: &str) -> Option<&Operation> {
        self.ops.iter().find(|o| o.id == id)
    }

    /// `(oa. path, operationId)` of every exposed operation, for the workers.
    pub fn js_ops(&self) -> Vec<(String, String)> {
        self.ops
            .iter()
            .map(|o| (o.js_path.clone(), o.id.clone()))
            .collect()
    }

    /// Whether write operations can be called (enabled and present).
    pub fn has_writes(&self) -> bool {
        self.writes_enabled && self.ops.iter().any(|o| o.is_write)
    }

    /// Why `op` cannot be called here, if it cannot.
    pub fn refusal(&self, op: &Operation) -> Option<String> {
        (op.is_write && !self.writes_enabled).then(|| {
            format!(
                "oa.{} is a write operation ({} {}) and this server runs read-only; \
                 it must be started with --allow-writes to call it",
                op.js_path, op.method, op.path
            )
        })
    }
}

/// The component name of a `$ref` like `#/components/schemas/Event`.
pub fn ref_name(schema: &Value) -> Option<&str> {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/components/schemas/"))
}

/// A display type for a schema of the catalogue: a component name, a
/// primitive, `T[]`, `A|B`.
pub fn display_type(cat: &Catalogue, schema: &Value) -> String {
    let has = |name: &str| cat.schemas.contains_key(name);
    type_name_with(&has, schema)
}

/// A display type, with `has` telling whether a component exists.
pub(crate) fn type_name_with(has: &dyn Fn(&str) -> bool, schema: &Value) -> String {
    if let Some(name) = ref_name(schema) {
        return if has(name) {
            name.to_owned()
        } else {
            "object".into()
        };
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(list) = schema.get(key).and_then(Value::as_array) {
            let parts: Vec<String> = list.iter().map(|s| type_name_with(has, s)).collect();
            return parts.join("|");
        }
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let nullable = types.contains(&"null") || schema.get("nullable") == Some(&Value::Bool(true));
    let base: Vec<String> = types
        .iter()
        .filter(|t| **t != "null")
        .map(|t| {
            if *t == "array" {
                let inner = type_name_with(has, schema.get("items").unwrap_or(&Value::Null));
                if inner.contains('|') {
                    format!("({inner})[]")
                } else {
                    format!("{inner}[]")
                }
            } else {
                (*t).to_owned()
            }
        })
        .collect();
    let mut ty = if !base.is_empty() {
        base.join("|")
    } else if schema.get("properties").is_some() || schema.get("allOf").is_some() {
        "object".into()
    } else if types.is_empty() {
        "any".into()
    } else {
        "null".into()
    };
    if nullable && ty != "null" {
        ty.push_str("|null");
    }
    ty
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON the server loads is the verbatim YAML, read the same way.
    #[test]
    fn builtin_json_is_the_yaml_document() {
        let from_json = load_document(BUILTIN_JSON, "json", true).unwrap();
        let from_yaml = load_document(BUILTIN_SOURCE, "yaml", true).unwrap();
        assert!(BUILTIN_JSON.starts_with('{'));
        assert_eq!(from_json.ops.len(), 24);
        assert_eq!(from_json.title, from_yaml.title);
        assert_eq!(from_json.schemas, from_yaml.schemas);
        assert_eq!(
            format!("{:?}", from_json.ops),
            format!("{:?}", from_yaml.ops)
        );
    }
}
