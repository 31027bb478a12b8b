//! The `search_docs` answer: a lead on how to call the client, rich cards
//! for the top hits, one line per operation after that, and the named types
//! the cards use. Pure text, bounded in size.

use crate::search::Hit;
use crate::spec::{Catalogue, Operation, Param, ParamIn, ref_name};
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt::Write;

/// Hits ranked below this get a one-line entry.
const RICH_CARDS: usize = 3;
/// Soft cap on the whole answer, in bytes; components are cut first.
const MAX_ANSWER: usize = 24 * 1024;
/// Properties shown per object shape.
const MAX_PROPS: usize = 14;
/// Description characters in a card.
const MAX_DESCRIPTION: usize = 700;

const LEAD: &str = "How to call: in `execute`, `oa.<operation>({ path, query, body })` resolves to `{ data, error }` \
and never throws on HTTP errors — check `error`, then use `data`. The server adds authentication (never pass a key). \
`return` the value you need; `console.log` lines come back separately. List responses are cursor-paginated: \
pass `data.pagination.after` back as `query.after` and resend the same filters.";

/// Renders the answer for `hits` (empty hits: the compact list of all ops).
pub fn render(cat: &Catalogue, hits: &[Hit], query: &str) -> String {
    let mut out = String::from(LEAD);
    out.push_str("\n\n---\n");
    if hits.is_empty() {
        let _ = writeln!(
            out,
            "No operation matched {query:?}. All {} operations:\n",
            cat.ops.len()
        );
        for op in &cat.ops {
            out.push_str(&compact_line(op));
        }
        return bounded(out);
    }
    let mut used = BTreeSet::new();
    for (rank, hit) in hits.iter().enumerate() {
        let op = &cat.ops[hit.op];
        if rank < RICH_CARDS {
            out.push_str(&card(cat, op, &mut used));
            out.push_str("\n---\n");
        } else {
            out.push_str(&compact_line(op));
        }
    }
    let components = components(cat, &used, MAX_ANSWER.saturating_sub(out.len()));
    if !components.is_empty() {
        out.push_str("\nComponents — the named types used above:\n");
        out.push_str(&components);
    }
    bounded(out)
}

fn bounded(mut text: String) -> String {
    if text.len() > MAX_ANSWER {
        let mut end = MAX_ANSWER;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("\n… (answer truncated; search with more specific words)");
    }
    text
}

/// `oa.x.y({ path: { a, b }, query, body })`.
pub fn call_signature(op: &Operation) -> String {
    let path: Vec<&str> = op
        .params
        .iter()
        .filter(|p| p.location == ParamIn::Path)
        .map(|p| p.name.as_str())
        .collect();
    let mut args = Vec::new();
    if !path.is_empty() {
        args.push(format!("path: {{ {} }}", path.join(", ")));
    }
    if op.params.iter().any(|p| p.location == ParamIn::Query) {
        args.push("query".to_owned());
    }
    if op.body.is_some() {
        args.push("body".to_owned());
    }
    if args.is_empty() {
        format!("oa.{}()", op.js_path)
    } else {
        format!("oa.{}({{ {} }})", op.js_path, args.join(", "))
    }
}

fn compact_line(op: &Operation) -> String {
    format!(
        "### {} — {}\n`{}` — {} {}\n",
        op.id,
        op.summary,
        call_signature(op),
        op.method,
        op.path
    )
}

fn card(cat: &Catalogue, op: &Operation, used: &mut BTreeSet<String>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "### {}", op.id);
    let _ = writeln!(s, "`{}` — {} {}", call_signature(op), op.method, op.path);
    if op.is_write && !cat.writes_enabled {
        let _ = writeln!(
            s,
            "**Write operation: disabled on this server** (read-only; calling it returns an error \
             unless the server is started with `--allow-writes`)."
        );
    }
    if op.multipart {
        let _ = writeln!(
            s,
            "Body is multipart/form-data: pass text fields as strings and a file as \
             `{{ filename, contentType, base64 }}` (or `text` instead of `base64`)."
        );
    }
    if !op.summary.is_empty() {
        let _ = writeln!(s, "{}", op.summary);
    }
    if !op.description.is_empty() {
        let _ = writeln!(s, "{}", clip(&op.description, MAX_DESCRIPTION));
    }
    let (notable, other): (Vec<&Param>, Vec<&Param>) =
        op.params.iter().partition(|p| is_notable(p));
    if !notable.is_empty() {
        s.push_str("Parameters:\n");
        for p in notable {
            s.push_str(&param_line(p));
            note_types(&p.type_name, used);
        }
    }
    if !other.is_empty() {
        let names: Vec<&str> = other.iter().map(|p| p.name.as_str()).collect();
        let _ = writeln!(s, "Other optional parameters: {}.", names.join(", "));
    }
    if let Some(body) = &op.body {
        let req = if op.body_required { " (required)" } else { "" };
        let _ = writeln!(s, "Body{req}: {}", shape(cat, body, used));
    }
    if let Some(resp) = &op.response {
        let _ = writeln!(s, "Response: {}", shape(cat, resp, used));
    }
    s.push_str("Example:\n```js\n");
    s.push_str(&op.example.clone().unwrap_or_else(|| skeleton(op)));
    s.push_str("\n```\n");
    s
}

fn is_notable(p: &Param) -> bool {
    p.required
        || !p.enum_values.is_empty()
        || p.default.is_some()
        || p.minimum.is_some()
        || p.maximum.is_some()
}

fn param_line(p: &Param) -> String {
    let mut extra = Vec::new();
    if p.location == ParamIn::Path {
        extra.push("path".to_owned());
    }
    if p.required {
        extra.push("required".to_owned());
    }
    let mut facts = Vec::new();
    if !p.enum_values.is_empty() {
        let values: Vec<String> = p
            .enum_values
            .iter()
            .map(|e| match &e.label {
                Some(l) => format!("{} = {l}", plain(&e.value)),
                None => plain(&e.value),
            })
            .collect();
        facts.push(format!("one of: {}", values.join(", ")));
    }
    if let Some(d) = &p.default {
        facts.push(format!("default {}", plain(d)));
    }
    match (p.minimum, p.maximum) {
        (Some(a), Some(b)) => facts.push(format!("range {a}…{b}")),
        (Some(a), None) => facts.push(format!("min {a}")),
        (None, Some(b)) => facts.push(format!("max {b}")),
        _ => {}
    }
    let kind = if extra.is_empty() {
        p.type_name.clone()
    } else {
        format!("{}, {}", p.type_name, extra.join(", "))
    };
    let mut line = format!(
        "- `{}` ({kind}) — {}",
        p.name,
        clip(first_sentence(&p.description), 200)
    );
    if !facts.is_empty() {
        let _ = write!(line, " [{}]", clip(&facts.join("; "), 600));
    }
    line.push('\n');
    line
}

fn skeleton(op: &Operation) -> String {
    let path: Vec<String> = op
        .params
        .iter()
        .filter(|p| p.location == ParamIn::Path)
        .map(|p| {
            format!(
                "{}: {}",
                p.name,
                if p.type_name == "integer" {
                    "12345"
                } else {
                    "'…'"
                }
            )
        })
        .collect();
    let mut args = Vec::new();
    if !path.is_empty() {
        args.push(format!("path: {{ {} }}", path.join(", ")));
    }
    if op.body.is_some() {
        args.push("body: { /* … */ }".to_owned());
    }
    let arg = if args.is_empty() {
        String::new()
    } else {
        format!("{{ {} }}", args.join(", "))
    };
    format!(
        "const {{ data, error }} = await oa.{}({arg});\nif (error) throw error;\nreturn data;",
        op.js_path
    )
}

/// A one-line shape: `Name` → { a: T, b?: T } for a ref, or the inline shape.
fn shape(cat: &Catalogue, schema: &Value, used: &mut BTreeSet<String>) -> String {
    if let Some(name) = ref_name(schema) {
        used.insert(name.to_owned());
        return match cat.schemas.get(name) {
            Some(s) => format!("`{name}` → {}", inline(cat, s, used)),
            None => format!("`{name}`"),
        };
    }
    inline(cat, schema, used)
}

fn inline(cat: &Catalogue, schema: &Value, used: &mut BTreeSet<String>) -> String {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        let t = type_of(cat, schema);
        note_types(&t, used);
        return t;
    };
    let required: BTreeSet<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut parts = Vec::new();
    for (name, prop) in props.iter().take(MAX_PROPS) {
        let t = type_of(cat, prop);
        note_types(&t, used);
        let opt = if required.contains(name.as_str()) {
            ""
        } else {
            "?"
        };
        parts.push(format!("{name}{opt}: {t}"));
    }
    if props.len() > MAX_PROPS {
        parts.push(format!("… {} more", props.len() - MAX_PROPS));
    }
    format!("{{ {} }}", parts.join(", "))
}

fn type_of(cat: &Catalogue, schema: &Value) -> String {
    let mut t = crate::spec::display_type(cat, schema);
    if let Some(values) = schema
        .get("enum")
        .and_then(Value::as_array)
        .filter(|v| v.len() <= 8)
    {
        let v: Vec<String> = values.iter().map(plain).collect();
        t = v.join("|");
    }
    t
}

fn note_types(type_name: &str, used: &mut BTreeSet<String>) {
    for part in type_name
        .split(['|', '[', ']', '(', ')'])
        .filter(|p| p.starts_with(|c: char| c.is_ascii_uppercase()))
    {
        used.insert(part.to_owned());
    }
}

fn components(cat: &Catalogue, used: &BTreeSet<String>, budget: usize) -> String {
    let mut out = String::new();
    let mut seen = BTreeSet::new();
    let mut queue: Vec<String> = used.iter().cloned().collect();
    while let Some(name) = queue.first().cloned() {
        queue.remove(0);
        if !seen.insert(name.clone()) {
            continue;
        }
        let Some(schema) = cat.schemas.get(&name) else {
            continue;
        };
        let mut more = BTreeSet::new();
        let line = component_line(cat, &name, schema, &mut more);
        if out.len() + line.len() > budget {
            out.push_str("… (more types: search for a specific operation)\n");
            break;
        }
        out.push_str(&line);
        if seen.len() < 12 {
            queue.extend(more.into_iter().filter(|m| !seen.contains(m)));
        }
    }
    out
}

fn component_line(
    cat: &Catalogue,
    name: &str,
    schema: &Value,
    more: &mut BTreeSet<String>,
) -> String {
    let desc = schema
        .get("description")
        .and_then(Value::as_str)
        .map(|d| clip(first_sentence(d), 160));
    let head = match desc {
        Some(d) if !d.is_empty() => format!("`{name}` — {d}"),
        _ => format!("`{name}`"),
    };
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let labels = schema.get("x-enum-descriptions");
        let items: Vec<String> = values
            .iter()
            .map(|v| {
                let key = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                match labels.and_then(|l| l.get(&key)).and_then(Value::as_str) {
                    Some(l) => format!("{} = {l}", plain(v)),
                    None => plain(v),
                }
            })
            .collect();
        return format!("{head}\n  one of: {}\n", clip(&items.join(", "), 800));
    }
    format!("{head}\n  {}\n", inline(cat, schema, more))
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn first_sentence(text: &str) -> &str {
    let text = text.trim();
    match text.find(". ") {
        Some(i) => &text[..=i],
        None => text,
    }
}

fn clip(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut s: String = flat.chars().take(max).collect();
    s.push('…');
    s
}
