//! search_docs ranking and rendering, on the built-in catalogue, on a small
//! fixture, and on the full public OpenAgenda v3 spec when there is one:
//! `OAJAIL_TEST_FULL_SPEC` names it (then a missing or wrong file fails loudly),
//! else `../shared/data/openagenda-v3/openapi.yaml` next to the workspace is
//! used when present. The build and the other tests never need it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

use openagenda_mcp::render::render;
use openagenda_mcp::search::SearchIndex;
use openagenda_mcp::spec::Catalogue;

/// Natural-language queries and the operation expected first.
const RANKING: &[(&str, &str)] = &[
    ("list upcoming events", "agendas.events.list"),
    ("upcoming events in Paris", "agendas.events.list"),
    ("events", "agendas.events.list"),
    ("show events", "agendas.events.list"),
    ("show me events", "agendas.events.list"),
    ("find concerts this weekend", "agendas.events.list"),
    ("aggregate breakdown counts", "agendas.events.facets"),
    ("how many events per city", "agendas.events.facets"),
    ("FACETS", "agendas.events.facets"),
    ("get one event by uid", "agendas.events.get"),
    ("fetch event by id", "agendas.events.get"),
    ("agendas", "agendas.list"),
    ("browse agendas", "agendas.list"),
    ("my agendas", "me.agendas.list"),
    ("which agendas am I a member of", "me.agendas.list"),
    ("locations of an agenda", "agendas.locations.list"),
    ("venues", "agendas.locations.list"),
    ("get a venue", "agendas.locations.get"),
    ("event by external id", "agendas.events.getByExtId"),
    ("custom fields of the event form", "agendas.events.schema"),
    ("agenda statistics dashboard", "agendas.overview"),
    ("locatoins", "agendas.locations.list"),
];

fn top(cat: &Catalogue, index: &SearchIndex, q: &str) -> String {
    let hits = index.search(q, 5);
    hits.first()
        .map(|h| cat.ops[h.op].id.clone())
        .unwrap_or_default()
}

fn check_ranking(cat: &Catalogue) {
    let index = SearchIndex::build(cat);
    let mut wrong = Vec::new();
    for (q, want) in RANKING {
        let got = top(cat, &index, q);
        if got != *want {
            let all: Vec<String> = index
                .search(q, 3)
                .iter()
                .map(|h| cat.ops[h.op].id.clone())
                .collect();
            wrong.push(format!("{q:?}: want {want}, got {all:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "ranking mismatches:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn builtin_ranking_table() {
    check_ranking(&Catalogue::builtin(false).unwrap());
}

#[test]
fn no_match_lists_every_operation_compactly() {
    let cat = Catalogue::builtin(false).unwrap();
    let index = SearchIndex::build(&cat);
    let hits = index.search("zzzzz-nonsense", 8);
    assert!(hits.is_empty());
    let text = render(&cat, &hits, "zzzzz-nonsense");
    assert!(text.starts_with("How to call"));
    for op in &cat.ops {
        assert!(
            text.contains(&format!("### {} — ", op.id)),
            "{} missing",
            op.id
        );
    }
}

#[test]
fn cards_lead_with_the_call_and_stay_bounded() {
    let cat = Catalogue::builtin(false).unwrap();
    let index = SearchIndex::build(&cat);
    let hits = index.search("upcoming events in Paris", 8);
    let text = render(&cat, &hits, "upcoming events in Paris");
    assert!(text.starts_with("How to call"));
    assert!(text.contains(
        "`oa.agendas.events.list({ path: { agendaUid }, query })` — GET /agendas/{agendaUid}/events"
    ));
    assert!(text.contains("[default 20; range 1…100]"));
    assert!(text.contains("1 = Scheduled"), "enum labels are shown");
    assert!(text.contains(
        "Response: `EventList` → { data: (Event|EventSummary)[], pagination: Pagination }"
    ));
    assert!(text.contains("```js"));
    assert!(text.contains("Components — the named types used above:"));
    assert!(text.contains("`EventStatus`"));
    assert!(text.len() <= 25 * 1024, "{} bytes", text.len());
}

#[test]
fn fixture_spec_loads_with_and_without_writes() {
    let path = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/petstore.yaml"
    ));
    // Read-only still loads (and documents) every operation; the writes
    // are refused when called.
    let ro = Catalogue::from_file(path, false).unwrap();
    let ids: Vec<&str> = ro.ops.iter().map(|o| o.id.as_str()).collect();
    assert_eq!(
        ids,
        vec!["createPet", "get_pets_petId", "listPets", "pets.delete"]
    );
    assert!(ro.refusal(ro.op("createPet").unwrap()).is_some());
    assert!(ro.refusal(ro.op("listPets").unwrap()).is_none());
    assert!(!ro.has_writes());
    let get = ro.op("get_pets_petId").unwrap();
    assert_eq!(get.params[0].name, "petId", "path-level parameter merged");
    let list = ro.op("listPets").unwrap();
    let species = &list.params[0];
    assert_eq!(species.type_name, "Species");
    assert_eq!(
        species.enum_values[1].label.as_deref(),
        Some("Canis familiaris")
    );
    let rw = Catalogue::from_file(path, true).unwrap();
    let ids: Vec<&str> = rw.ops.iter().map(|o| o.id.as_str()).collect();
    assert_eq!(
        ids,
        vec!["createPet", "get_pets_petId", "listPets", "pets.delete"]
    );
    assert!(rw.op("createPet").unwrap().body_required);
    let index = SearchIndex::build(&rw);
    assert_eq!(top(&rw, &index, "add a new pet"), "createPet");
    assert_eq!(top(&rw, &index, "animals"), "listPets");
}

#[test]
fn bad_documents_are_errors_naming_the_problem() {
    let e =
        openagenda_mcp::spec::load_document("openapi: 2.0\npaths: {}\n", "t", false).unwrap_err();
    assert!(e.to_string().contains("expected 3.x"), "{e}");
    let e = openagenda_mcp::spec::load_document("openapi: 3.1.0\n", "t", false).unwrap_err();
    assert!(e.to_string().contains("paths"), "{e}");
    let doc = "openapi: 3.1.0\npaths:\n  /a:\n    get:\n      parameters:\n        - $ref: '#/components/parameters/Nope'\n";
    let e = openagenda_mcp::spec::load_document(doc, "t", false).unwrap_err();
    assert!(e.to_string().contains("Nope"), "{e}");
}

/// The built-in catalogue is the full public OpenAgenda v3 spec; when CI has
/// the published copy (`OAJAIL_TEST_FULL_SPEC`, or `../shared` beside the
/// checkout) the shipped one must be byte-identical to it.
#[test]
fn builtin_catalogue_is_the_full_public_spec() {
    let published = std::env::var_os("OAJAIL_TEST_FULL_SPEC")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            let sibling = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../shared/data/openagenda-v3/openapi.yaml");
            sibling.is_file().then_some(sibling)
        });
    if let Some(path) = published {
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("OAJAIL_TEST_FULL_SPEC {}: {e}", path.display()));
        assert_eq!(
            text.trim_end(),
            openagenda_mcp::spec::BUILTIN_SOURCE.trim_end(),
            "the shipped spec differs from {}",
            path.display()
        );
    }
    let all = Catalogue::builtin(true).unwrap();
    assert_eq!(all.ops.len(), 24, "the public spec has 24 operations");
    // Read-only: every operation is listed (and searchable), writes are
    // refused when called.
    let reads = Catalogue::builtin(false).unwrap();
    assert_eq!(reads.ops.len(), 24);
    let gets: Vec<_> = reads.ops.iter().filter(|o| o.method == "GET").collect();
    assert_eq!(gets.len(), 12, "12 GETs");
    assert!(gets.iter().all(|o| reads.refusal(o).is_none()));
    let create = reads.op("agendas.events.create").unwrap();
    assert!(
        reads.refusal(create).is_some(),
        "a write is refused read-only"
    );
    let list = reads.op("agendas.events.list").unwrap();
    assert_eq!(list.params.len(), 39);
    let city = list.params.iter().find(|p| p.name == "city").unwrap();
    assert_eq!(city.type_name, "string[]");
    check_ranking(&reads);
    let index = SearchIndex::build(&all);
    assert_eq!(
        top(&all, &index, "create an event"),
        "agendas.events.create"
    );
    for q in [
        "upcoming events in Paris",
        "create an event",
        "zzzzz-nonsense",
        "my agendas",
    ] {
        let hits = index.search(q, 8);
        let text = render(&all, &hits, q);
        assert!(text.len() <= 25 * 1024, "{q}: {} bytes", text.len());
    }
}
