//! Checking a settings document against the srt schema tables in
//! `schema.rs`: types, required keys, ranges and strict objects, with one
//! warning line per ignored or unknown key.

use crate::PathEntry;
use crate::domain::DomainPattern;
use crate::env::{valid_env_name, valid_env_pattern};
use crate::error::{JsonPath, Problem, quote};
use crate::json::type_name;
use crate::normalize::parse_address;
use crate::schema::{MAX_SAFE_INTEGER, Obj, ROOT, Ty, Use};
use serde_json::{Map, Value};

/// Checks `root` against [`ROOT`]; returns one warning line per ignored or
/// unknown key.
pub(crate) fn check_document(root: &Value) -> Result<Vec<String>, Problem> {
    let mut warnings = Vec::new();
    check(
        root,
        &Ty::Object(&ROOT),
        &JsonPath::root(),
        false,
        &mut warnings,
    )?;
    Ok(warnings)
}

/// Checks one value. `quiet` is set inside an ignored key, whose own warning
/// already covers everything below it.
fn check(
    value: &Value,
    ty: &Ty,
    path: &JsonPath,
    quiet: bool,
    warn: &mut Vec<String>,
) -> Result<(), Problem> {
    match (ty, value) {
        (Ty::Nullable(_), Value::Null) => Ok(()),
        (Ty::Nullable(inner), Value::Number(_)) => check(value, inner, path, quiet, warn),
        (Ty::List(item) | Ty::List1(item), Value::Array(items)) => {
            if items.is_empty() && matches!(ty, Ty::List1(_)) {
                return Err(Problem::new(path, "must not be empty"));
            }
            for (i, item_value) in items.iter().enumerate() {
                check(item_value, item, &path.index(i), quiet, warn)?;
            }
            Ok(())
        }
        (Ty::Record(item), Value::Object(members)) => {
            for (key, member) in members {
                check(member, item, &path.key(key), quiet, warn)?;
            }
            Ok(())
        }
        (Ty::Object(obj), Value::Object(members)) => check_object(members, obj, path, quiet, warn),
        (Ty::Entry, Value::Object(members)) => check_literal_entry(members, path),
        (Ty::Int(min, max), Value::Number(_)) => check_int(value, *min, *max, path),
        (Ty::Bool, Value::Bool(_)) => Ok(()),
        (Ty::Never(why), _) => Err(Problem::new(path, *why)),
        (_, Value::String(text)) if expects_string(ty) => check_string(text, ty, path),
        (Ty::PortRange, Value::Array(items)) => check_port_range(items, path),
        _ => Err(Problem::new(
            path,
            format!("expected {}, found {}", describe(ty), type_name(value)),
        )),
    }
}

fn check_object(
    members: &Map<String, Value>,
    obj: &Obj,
    path: &JsonPath,
    quiet: bool,
    warn: &mut Vec<String>,
) -> Result<(), Problem> {
    for field in obj.fields {
        if field.required && !members.contains_key(field.name) {
            return Err(Problem::new(
                &path.key(field.name),
                "required key is missing",
            ));
        }
    }
    for (key, value) in members {
        let key_path = path.key(key);
        let Some(field) = obj.fields.iter().find(|f| f.name == key) else {
            if obj.strict {
                return Err(Problem::new(&key_path, "unknown key"));
            }
            if !quiet {
                warn.push(format!("{key_path}: unknown key (ignored, as srt does)"));
            }
            continue;
        };
        let inner_quiet = match field.using {
            Use::Ignored(why) => {
                if !quiet {
                    warn.push(format!("{key_path}: {why}"));
                }
                true
            }
            Use::Used => quiet,
        };
        check(value, &field.ty, &key_path, inner_quiet, warn)?;
    }
    Ok(())
}

/// `{"path": "…", "literal": true}`, strict as in srt.
fn check_literal_entry(members: &Map<String, Value>, path: &JsonPath) -> Result<(), Problem> {
    for key in members.keys() {
        if key != "path" && key != "literal" {
            return Err(Problem::new(&path.key(key), "unknown key"));
        }
    }
    match members.get("path") {
        Some(Value::String(text)) => {
            // Literal: glob characters (and a trailing `/` after them) are plain.
            PathEntry::parse(text, true)
                .map_err(|e| Problem::new(&path.key("path"), e.to_string()))?;
        }
        Some(other) => {
            let found = type_name(other);
            return Err(Problem::new(
                &path.key("path"),
                format!("expected a string, found {found}"),
            ));
        }
        None => return Err(Problem::new(&path.key("path"), "required key is missing")),
    }
    match members.get("literal") {
        Some(Value::Bool(true)) => Ok(()),
        None => Err(Problem::new(
            &path.key("literal"),
            "required key is missing",
        )),
        Some(_) => Err(Problem::new(
            &path.key("literal"),
            "must be true (write the path as a plain string otherwise)",
        )),
    }
}

fn check_int(value: &Value, min: i64, max: i64, path: &JsonPath) -> Result<(), Problem> {
    if as_integer(value).is_some_and(|n| (i128::from(min)..=i128::from(max)).contains(&n)) {
        return Ok(());
    }
    Err(Problem::new(
        path,
        format!("must be an integer from {min} to {max}, found {value}"),
    ))
}

/// The integer a JSON number denotes, if it is one. `3.0` counts, as it
/// does for srt's JavaScript; `1e400` and `1.5` do not.
pub(crate) fn as_integer(value: &Value) -> Option<i128> {
    let Value::Number(n) = value else { return None };
    if let Some(i) = n.as_i64() {
        return Some(i128::from(i));
    }
    if let Some(u) = n.as_u64() {
        return Some(i128::from(u));
    }
    let f = n.as_f64()?;
    // Only exactly representable integers within the safe range are taken.
    let safe = MAX_SAFE_INTEGER as f64;
    (f.fract() == 0.0 && f.abs() <= safe).then_some(f as i128)
}

fn expects_string(ty: &Ty) -> bool {
    matches!(
        ty,
        Ty::Str
            | Ty::NonEmpty
            | Ty::StrLen(..)
            | Ty::OneOf(_)
            | Ty::AbsPath
            | Ty::Domain(_)
            | Ty::Address
            | Ty::Url
            | Ty::Uuid
            | Ty::EnvName
            | Ty::EnvPattern
            | Ty::MachName
            | Ty::Entry
    )
}

fn check_string(text: &str, ty: &Ty, path: &JsonPath) -> Result<(), Problem> {
    let problem = match ty {
        Ty::NonEmpty if text.is_empty() => Some("must not be empty".to_owned()),
        Ty::StrLen(min, max) if !(*min..=*max).contains(&text.chars().count()) => {
            Some(format!("must be {min} to {max} characters long"))
        }
        Ty::OneOf(allowed) if !allowed.contains(&text) => Some(format!(
            "must be one of {}, found {}",
            allowed
                .iter()
                .map(|a| quote(a))
                .collect::<Vec<_>>()
                .join(", "),
            quote(text)
        )),
        Ty::AbsPath if !text.starts_with('/') => Some("must be an absolute path".to_owned()),
        Ty::Domain(kind) => DomainPattern::parse(text, *kind)
            .err()
            .map(|e| e.to_string()),
        Ty::Address => parse_address(text).err(),
        Ty::Url if !looks_like_url(text) => Some(format!("{} is not a url", quote(text))),
        Ty::Uuid if !is_uuid(text) => Some(format!("{} is not a uuid", quote(text))),
        Ty::EnvName if !valid_env_name(text) => Some(format!(
            "{} is not an environment variable name (letters, digits and _, not starting with a digit)",
            quote(text)
        )),
        Ty::EnvPattern if !valid_env_pattern(text) => Some(format!(
            "{} is not an environment variable name (optionally ending in *)",
            quote(text)
        )),
        Ty::MachName if text.strip_suffix('*').unwrap_or(text).contains('*') => {
            Some("wildcards are only allowed as a single trailing \"*\"".to_owned())
        }
        Ty::Entry => PathEntry::parse(text, false).err().map(|e| e.to_string()),
        _ => None,
    };
    problem.map_or(Ok(()), |message| Err(Problem::new(path, message)))
}

fn check_port_range(items: &[Value], path: &JsonPath) -> Result<(), Problem> {
    let [low, high] = items else {
        return Err(Problem::new(path, "expected [low, high]"));
    };
    check_int(low, 1, i64::MAX, &path.index(0))?;
    check_int(high, i64::MIN, 65535, &path.index(1))?;
    let (low, high) = (as_integer(low).unwrap_or(0), as_integer(high).unwrap_or(0));
    if low > high || high - low > 64 {
        return Err(Problem::new(
            path,
            "low must be <= high and the range at most 64 wide",
        ));
    }
    Ok(())
}

/// A loose check for what WHATWG `new URL()` accepts: a scheme and a rest.
fn looks_like_url(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        && !rest.is_empty()
}

fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    let lengths = [8, 4, 4, 4, 12];
    groups.len() == 5
        && groups
            .iter()
            .zip(lengths)
            .all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
}

fn describe(ty: &Ty) -> &'static str {
    match ty {
        Ty::Bool => "a boolean",
        Ty::Int(..) => "an integer",
        Ty::Nullable(_) => "an integer or null",
        Ty::List(_) | Ty::List1(_) => "an array",
        Ty::Record(_) | Ty::Object(_) => "an object",
        Ty::PortRange => "an array [low, high]",
        Ty::Entry => "a path, or {\"path\": \"<path>\", \"literal\": true}",
        _ => "a string",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn minimal() -> Value {
        json!({
            "network": {"allowedDomains": [], "deniedDomains": []},
            "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []}
        })
    }

    fn problem(value: &Value) -> String {
        let p = check_document(value).unwrap_err();
        format!("{}: {}", p.path, p.message)
    }

    #[test]
    fn minimal_document_passes_silently() {
        assert_eq!(check_document(&minimal()).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn ignored_and_unknown_keys_warn_once_each() {
        let mut doc = minimal();
        doc["network"]["allowMachLookup"] = json!(["com.x.*"]);
        doc["network"]["parentProxy"] = json!({"noProxy": "x", "bogus": 1});
        doc["fooBar"] = json!(1);
        let warnings = check_document(&doc).unwrap();
        assert_eq!(
            warnings,
            vec![
                "fooBar: unknown key (ignored, as srt does)",
                "network.allowMachLookup: accepted but not implemented on linux (ignored)",
                "network.parentProxy: chaining to a parent proxy is not implemented; destinations are dialled directly (ignored)",
            ]
        );
    }

    #[test]
    fn ignored_keys_are_still_type_checked() {
        let mut doc = minimal();
        doc["mandatoryDenySearchDepth"] = json!(11);
        assert_eq!(
            problem(&doc),
            "mandatoryDenySearchDepth: must be an integer from 1 to 10, found 11"
        );
        let mut doc = minimal();
        doc["network"]["allowMachLookup"] = json!(["a*b"]);
        assert_eq!(
            problem(&doc),
            "network.allowMachLookup[0]: wildcards are only allowed as a single trailing \"*\""
        );
        let mut doc = minimal();
        doc["bwrapPath"] = json!("bwrap");
        assert_eq!(problem(&doc), "bwrapPath: must be an absolute path");
        let mut doc = minimal();
        doc["windows"] = json!({"proxyPortRange": [10, 100]});
        assert_eq!(
            problem(&doc),
            "windows.proxyPortRange: low must be <= high and the range at most 64 wide"
        );
    }

    #[test]
    fn strict_objects_refuse_unknown_keys() {
        let mut doc = minimal();
        doc["credentials"] = json!({"files": [], "bogus": true});
        assert_eq!(problem(&doc), "credentials.bogus: unknown key");
        let mut doc = minimal();
        doc["filesystem"]["denyRead"] = json!([{"path": "/x", "literal": true, "glob": 1}]);
        assert_eq!(problem(&doc), "filesystem.denyRead[0].glob: unknown key");
        let mut doc = minimal();
        doc["oajail"] = json!({"limits": {"coreBytes": 0, "cores": 1}});
        assert_eq!(problem(&doc), "oajail.limits.cores: unknown key");
    }

    /// Every key of the schema tables is documented in policy-format.md.
    #[test]
    fn every_schema_key_is_documented() {
        fn keys(obj: &Obj, out: &mut Vec<&'static str>) {
            for field in obj.fields {
                out.push(field.name);
                let mut ty = &field.ty;
                while let Ty::List(inner) | Ty::List1(inner) | Ty::Nullable(inner) = ty {
                    ty = inner;
                }
                if let Ty::Object(inner) = ty {
                    keys(inner, out);
                }
            }
        }
        let docs = include_str!("../../docs/policy-format.md");
        let mut names = Vec::new();
        keys(&ROOT, &mut names);
        assert!(names.len() > 80, "{}", names.len());
        for name in names {
            assert!(
                docs.contains(&format!("`{name}`")),
                "{name} is not in docs/policy-format.md"
            );
        }
    }

    #[test]
    fn integers_follow_javascript() {
        assert_eq!(as_integer(&json!(3.0)), Some(3));
        assert_eq!(as_integer(&json!(3.5)), None);
        assert_eq!(as_integer(&json!(-2)), Some(-2));
        assert_eq!(as_integer(&json!(1e300)), None);
    }
}
