//! A small lexical search engine over operations: BM25+ per field with
//! field boosts, prefix matching, typo tolerance for long terms only and a
//! small synonym map.
//!
//! The scoring follows the well-known MiniSearch defaults (k = 1.2, b = 0.7,
//! d = 0.5; prefix weight 0.375·t/(t+0.3·Δ); fuzzy weight 0.45·t/(t+Δ) with at
//! most round(0.2·len) edits) so results are predictable; the final score is
//! multiplied by the number of distinct query terms a document matched, which
//! favours operations that cover the whole query. Typo tolerance is limited
//! to terms longer than 6 characters because short-term fuzziness makes
//! `show` match `how` and `events` match `event`.

use crate::spec::Catalogue;
use std::collections::{BTreeMap, HashMap};

const K: f64 = 1.2;
const B: f64 = 0.7;
const D: f64 = 0.5;
const SYNONYM_WEIGHT: f64 = 0.6;

/// Indexed fields and their boosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Field {
    Id,
    Summary,
    Keywords,
    Params,
    Enums,
    Path,
    Description,
}

const FIELDS: [Field; 7] = [
    Field::Id,
    Field::Summary,
    Field::Keywords,
    Field::Params,
    Field::Enums,
    Field::Path,
    Field::Description,
];

impl Field {
    fn boost(self) -> f64 {
        match self {
            Field::Id => 3.0,
            Field::Summary | Field::Keywords => 2.0,
            Field::Params | Field::Enums | Field::Path => 1.0,
            Field::Description => 0.3,
        }
    }
}

const STOPWORDS: &[&str] = &[
    "a", "an", "the", "of", "in", "on", "at", "for", "to", "by", "with", "and", "or", "is", "are",
    "be", "it", "this", "that", "these", "those", "from", "as", "i", "do", "does", "can", "please",
    "some", "any", "into", "its", "their", "there", "we", "you", "your", "want", "need", "using",
    "use", "via", "me", "am",
];

const SYNONYMS: &[(&str, &[&str])] = &[
    ("my", &["me"]),
    ("mine", &["me"]),
    ("fetch", &["get"]),
    ("retrieve", &["get"]),
    ("read", &["get"]),
    ("id", &["uid"]),
    ("count", &["facets"]),
    ("aggregate", &["facets"]),
    ("breakdown", &["facets"]),
    ("venue", &["location"]),
    ("venues", &["locations"]),
    ("place", &["location"]),
    ("places", &["locations"]),
    ("calendar", &["agenda"]),
    ("calendars", &["agendas"]),
    ("remove", &["delete"]),
    ("edit", &["update", "patch"]),
    ("modify", &["update", "patch"]),
    // Things people call events.
    ("concert", &["events"]),
    ("concerts", &["events"]),
    ("festival", &["events"]),
    ("festivals", &["events"]),
    ("exhibition", &["events"]),
    ("exhibitions", &["events"]),
    ("shows", &["events"]),
    ("happening", &["events", "upcoming"]),
    ("weekend", &["events", "timings"]),
    ("today", &["events", "timings"]),
    ("tomorrow", &["events", "timings"]),
    ("tonight", &["events", "timings"]),
];

/// One scored operation (index into `Catalogue::ops`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    /// Index of the operation.
    pub op: usize,
    /// Score (0 when listed without a match).
    pub score: f64,
}

struct Posting {
    doc: usize,
    field: Field,
    tf: f64,
}

/// The index over one catalogue.
pub struct SearchIndex {
    n_docs: usize,
    terms: BTreeMap<String, Vec<Posting>>,
    lens: HashMap<(usize, Field), f64>,
    avg: HashMap<Field, f64>,
}

/// Lower-cased word tokens of `text`; with `split_camel`, `agendaUid` also
/// yields `agenda` and `uid`.
pub fn tokenize(text: &str, split_camel: bool) -> Vec<String> {
    let mut out = Vec::new();
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        out.push(word.to_lowercase());
        if split_camel {
            let parts = camel_parts(word);
            if parts.len() > 1 {
                out.extend(parts.into_iter().map(|p| p.to_lowercase()));
            }
        }
    }
    out
}

fn camel_parts(word: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut prev_lower = false;
    for c in word.chars() {
        if c.is_uppercase() && prev_lower {
            parts.push(String::new());
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        if let Some(last) = parts.last_mut() {
            last.push(c);
        }
    }
    parts.retain(|p| !p.is_empty());
    parts
}

fn field_texts(cat: &Catalogue, i: usize) -> Vec<(Field, Vec<String>)> {
    let op = &cat.ops[i];
    let words = |t: &str| -> Vec<String> {
        tokenize(t, true)
            .into_iter()
            .filter(|w| !STOPWORDS.contains(&w.as_str()))
            .collect()
    };
    let mut keywords: Vec<String> = op.synonyms.iter().flat_map(|s| words(s)).collect();
    keywords.extend(words(&op.id.replace('.', " ")));
    let params: Vec<String> = op.params.iter().flat_map(|p| words(&p.name)).collect();
    let enums: Vec<String> = op
        .params
        .iter()
        .flat_map(|p| p.enum_values.iter())
        .flat_map(|e| {
            let mut w = words(&e.value.to_string());
            w.extend(e.label.as_deref().map(words).unwrap_or_default());
            w
        })
        .collect();
    let path: Vec<String> = words(&op.path.replace(['{', '}'], " "));
    vec![
        (Field::Id, words(&op.id.replace('.', " "))),
        (Field::Summary, words(&op.summary)),
        (Field::Keywords, keywords),
        (Field::Params, params),
        (Field::Enums, enums),
        (Field::Path, path),
        (Field::Description, words(&op.description)),
    ]
}

impl SearchIndex {
    /// Indexes every operation of the catalogue.
    pub fn build(cat: &Catalogue) -> Self {
        let mut terms: BTreeMap<String, Vec<Posting>> = BTreeMap::new();
        let mut lens = HashMap::new();
        let mut totals: HashMap<Field, f64> = HashMap::new();
        for doc in 0..cat.ops.len() {
            for (field, words) in field_texts(cat, doc) {
                lens.insert((doc, field), words.len() as f64);
                *totals.entry(field).or_default() += words.len() as f64;
                let mut tf: BTreeMap<String, f64> = BTreeMap::new();
                for w in words {
                    *tf.entry(w).or_default() += 1.0;
                }
                for (term, count) in tf {
                    terms.entry(term).or_default().push(Posting {
                        doc,
                        field,
                        tf: count,
                    });
                }
            }
        }
        let n = cat.ops.len().max(1) as f64;
        let avg = FIELDS
            .iter()
            .map(|f| (*f, totals.get(f).copied().unwrap_or(0.0) / n))
            .collect();
        Self {
            n_docs: cat.ops.len(),
            terms,
            lens,
            avg,
        }
    }

    /// Expands a query into weighted terms (stopwords dropped, synonyms added).
    fn query_terms(query: &str) -> Vec<(usize, String, f64)> {
        let mut out = Vec::new();
        let words: Vec<String> = tokenize(query, false)
            .into_iter()
            .filter(|w| !STOPWORDS.contains(&w.as_str()))
            .collect();
        for (i, w) in words.iter().enumerate() {
            out.push((i, w.clone(), 1.0));
            if let Some((_, syns)) = SYNONYMS.iter().find(|(k, _)| *k == w.as_str()) {
                out.extend(syns.iter().map(|s| (i, (*s).to_owned(), SYNONYM_WEIGHT)));
            }
        }
        out
    }

    /// Index terms matching a query term, with their match weight.
    fn matches(&self, q: &str) -> Vec<(&str, f64)> {
        let t = q.chars().count() as f64;
        let mut out: Vec<(&str, f64)> = Vec::new();
        for (term, _) in self.terms.range(q.to_owned()..) {
            if !term.starts_with(q) {
                break;
            }
            let dist = (term.chars().count() as f64) - t;
            let w = if dist == 0.0 {
                1.0
            } else {
                0.375 * t / (t + 0.3 * dist)
            };
            out.push((term.as_str(), w));
        }
        let len = q.chars().count();
        if len > 6 {
            let max_edits = ((len as f64) * 0.2).round().min(6.0) as usize;
            for term in self.terms.keys() {
                if term.starts_with(q) {
                    continue;
                }
                let tl = term.chars().count();
                if tl.abs_diff(len) > max_edits {
                    continue;
                }
                let d = edit_distance(q, term);
                if d > 0 && d <= max_edits {
                    out.push((term.as_str(), 0.45 * t / (t + d as f64)));
                }
            }
        }
        out
    }

    /// Top `limit` operations for `query`; empty when nothing matches.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Hit> {
        let n = self.n_docs as f64;
        let mut scores: HashMap<usize, (f64, u64)> = HashMap::new();
        for (qi, q, qw) in Self::query_terms(query) {
            for (term, mw) in self.matches(&q) {
                let Some(postings) = self.terms.get(term) else {
                    continue;
                };
                for field in FIELDS {
                    let df = postings.iter().filter(|p| p.field == field).count() as f64;
                    if df == 0.0 {
                        continue;
                    }
                    let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                    let avg = self.avg.get(&field).copied().unwrap_or(1.0).max(1.0);
                    for p in postings.iter().filter(|p| p.field == field) {
                        let len = self.lens.get(&(p.doc, field)).copied().unwrap_or(0.0);
                        let tf = p.tf;
                        let bm = idf * (D + tf * (K + 1.0) / (tf + K * (1.0 - B + B * len / avg)));
                        let entry = scores.entry(p.doc).or_insert((0.0, 0));
                        entry.0 += bm * field.boost() * mw * qw;
                        entry.1 |= 1u64 << (qi.min(63));
                    }
                }
            }
        }
        let mut hits: Vec<Hit> = scores
            .into_iter()
            .map(|(op, (s, mask))| Hit {
                op,
                score: s * f64::from(mask.count_ones()),
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.op.cmp(&b.op)));
        hits.truncate(limit);
        hits
    }
}

/// Levenshtein distance (operations are few and terms short).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn camel_case_is_split() {
        assert_eq!(
            tokenize("agendaUid", true),
            vec!["agendauid", "agenda", "uid"]
        );
        assert_eq!(
            tokenize("x-synonyms: Fetch", false),
            vec!["x", "synonyms", "fetch"]
        );
    }

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("locations", "locatoins"), 2);
        assert_eq!(edit_distance("events", "events"), 0);
    }
}
