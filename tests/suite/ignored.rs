//! Filters and ignored parameters (issue 48, item 2): a list answer that ignored a query
//! parameter says so in its `Gen-Ignored` header (the body unchanged), the HTML view says it in
//! words, and `gen import api-data` declares the filters the default data declares. The edge
//! handler's side is in tests/suite/edge.rs, the rule's cases in tests/vectors/ignored.json.
//! Expected values come from the rule as docs/serve.md states it and from the data written here
//! or the published fixture read directly, not from the server's output.

use crate::common;
use crate::parity;
use crate::serve_support;

use common::*;
use serde_json::{Value, json};
use serve_support::Server;
use std::path::Path;

/// The sample tree's list requests that ignore parameters, each with the same request without
/// them (whose body must be the same) and the `Gen-Ignored` value the rule gives (`None`: no
/// header). berry declares `firmness` and `size`, effect `appeal`; ailment and form declare none.
pub(crate) const IGNORING: &[(&str, &str, Option<&str>)] = &[
    ("/api/v2/ailment/?type=fire&limit=2", "/api/v2/ailment/?limit=2", Some("type; declared: (none)")),
    // the whole list (its `_pages/all` file)
    ("/api/v2/ailment/?limit=100&x=1", "/api/v2/ailment/?limit=100", Some("x; declared: (none)")),
    (
        "/api/v2/form/?Limit=3&colour=red&colour=blue&flag",
        "/api/v2/form/",
        Some("Limit, colour, flag; declared: (none)"),
    ),
    ("/api/v2/ailment/?%C3%A9t%C3%A9=1&a%2Cb=2", "/api/v2/ailment/", Some("%C3%A9t%C3%A9, a%2Cb; declared: (none)")),
    // an undeclared parameter with an empty value on a list with filters: ignored (with a value
    // it is a 400)
    (
        "/api/v2/berry/?firmness=firm-2&colour=&offset=3",
        "/api/v2/berry/?firmness=firm-2&offset=3",
        Some("colour; declared: firmness, size"),
    ),
    ("/api/v2/effect/?Appeal=", "/api/v2/effect/", Some("Appeal; declared: appeal")),
    // the list's own parameters and its declared filters, empty or not: nothing ignored
    ("/api/v2/berry/?limit=5&q=berry-1&format=json&size=", "/api/v2/berry/?limit=5&q=berry-1", None),
    ("/api/v2/ailment/?FORMAT=JSON&offset=1", "/api/v2/ailment/?offset=1", None),
];

#[test]
fn a_list_answer_names_the_parameters_it_ignored_in_a_header_and_keeps_its_body() {
    let tree = parity::sample_tree("ignored-serve", &[]);
    let server = Server::start(&tree.out, &[]);
    for (target, plain, header) in IGNORING {
        let reply = server.get(target).expect(200);
        let without = server.get(plain).expect(200);
        assert!(reply.body == without.body, "{target}: not the body of {plain}");
        assert_eq!(reply.header("gen-ignored"), *header, "{target}: {:?}", reply.headers);
        assert_eq!(without.header("gen-ignored"), None, "{plain}");
        // a browser's script may read it: exposed beside the deploy headers
        let exposed = reply.header("access-control-expose-headers").unwrap();
        let expected =
            if header.is_some() { "X-Deploy-Date, X-Data-Hash, Gen-Ignored" } else { "X-Deploy-Date, X-Data-Hash" };
        assert_eq!(exposed, expected, "{target}");
        // HEAD and a 304 say the same
        let head = server.request("HEAD", target, &[]);
        assert_eq!(head.header("gen-ignored"), *header, "HEAD {target}");
        let etag = reply.header("etag").unwrap();
        let again = server.request("GET", target, &[("If-None-Match", etag)]).expect(304);
        assert_eq!(again.header("gen-ignored"), *header, "304 {target}");
    }
    // a 400 names the undeclared parameter in its body, and no Gen-Ignored
    let refused = server.get("/api/v2/berry/?colour=red").expect(400);
    assert_eq!(refused.header("gen-ignored"), None);
    assert_eq!(refused.json()["filters"], json!(["firmness", "size"]));
    // at most 16 names, the others counted; a name of more than 64 characters (encoded) counted
    let many: Vec<String> = (1..=18).map(|i| format!("p{i}=1")).collect();
    let long = "n".repeat(65);
    let target = format!("/api/v2/ailment/?{long}=1&{}", many.join("&"));
    let named: Vec<String> = (1..=16).map(|i| format!("p{i}")).collect();
    let expected = format!("{}, (3 more); declared: (none)", named.join(", "));
    assert_eq!(server.get(&target).expect(200).header("gen-ignored"), Some(expected.as_str()));
}

#[test]
fn the_html_view_says_which_parameters_were_ignored_and_what_the_list_takes() {
    let tree = parity::sample_tree("ignored-html", &[]);
    let server = Server::start(&tree.out, &[]);
    let browser = ("Accept", "text/html,application/xhtml+xml,*/*;q=0.8");
    let page = |target: &str| server.request("GET", target, &[browser]).expect(200).text();
    let none = page("/api/v2/ailment/?type=fire&x=%3Cb%3E");
    assert!(
        none.contains(
            "Ignored parameters: <code>type</code>, <code>x</code> (not parameters of this list: it takes \
             <code>limit</code>, <code>offset</code> and <code>q</code>, and declares no filters).</p>"
        ),
        "{none}"
    );
    // an ignored parameter is not shown as narrowing the list
    assert!(!none.contains("id=\"active\"") && none.contains("in all"), "{none}");
    let some = page("/api/v2/berry/?colour=&firmness=firm-2");
    assert!(
        some.contains(
            "Ignored parameter: <code>colour</code> (not a parameter of this list: it takes <code>limit</code>, \
             <code>offset</code>, <code>q</code> and the filters <code>firmness</code>, <code>size</code>).</p>"
        ),
        "{some}"
    );
    // the active filter is still shown
    assert!(some.contains("firmness = firm-2"), "{some}");
    for plain in ["/api/v2/berry/", "/api/v2/ailment/?limit=2&q=ail", "/api/v2/berry/?size=&format=xml"] {
        assert!(!page(plain).contains("id=\"ignored\""), "{plain}");
    }
    // a name is escaped
    let odd = page("/api/v2/ailment/?%3Cscript%3E=1");
    assert!(odd.contains("<code>&lt;script&gt;</code>") && !odd.contains("<code><script>"), "{odd}");
}

/// A published tree of the public API's shape, in `dir`: pokemon (whose records reach both of
/// the default data's creature filters), move (whose `generation` is null everywhere: only
/// `type` reaches a value) and region (no default filters).
fn published_shapes(dir: &Path) {
    let mut files: Vec<(String, String)> = Vec::new();
    let creatures = [
        (1, "bulba", &["grass", "poison"][..], true),
        (2, "charm", &["fire"][..], true),
        (3, "mega", &["fire", "dragon"][..], false),
    ];
    let mut lists = vec![("pokemon", Vec::new()), ("move", Vec::new()), ("region", Vec::new())];
    for (id, name, types, default) in creatures {
        let types: Vec<Value> =
            types.iter().map(|t| json!({"slot": 1, "type": {"name": t, "url": "/api/v2/type/1/"}})).collect();
        let record = json!({"id": id, "name": name, "types": types, "is_default": default});
        files.push((format!("api/v2/pokemon/{id}/index.json"), record.to_string()));
        lists[0].1.push(json!({"name": name, "url": format!("/api/v2/pokemon/{id}/")}));
    }
    for (id, name, kind) in [(1, "pound", "normal"), (2, "ember", "fire")] {
        let record =
            json!({"id": id, "name": name, "type": {"name": kind, "url": "/api/v2/type/1/"}, "generation": null});
        files.push((format!("api/v2/move/{id}/index.json"), record.to_string()));
        lists[1].1.push(json!({"name": name, "url": format!("/api/v2/move/{id}/")}));
    }
    files.push(("api/v2/region/1/index.json".into(), json!({"id": 1, "name": "kanto"}).to_string()));
    lists[2].1.push(json!({"name": "kanto", "url": "/api/v2/region/1/"}));
    for (segment, results) in lists {
        let list = json!({"count": results.len(), "next": null, "previous": null, "results": results});
        files.push((format!("api/v2/{segment}/index.json"), list.to_string()));
    }
    let files: Vec<(&str, String)> = files.iter().map(|(p, t)| (p.as_str(), t.clone())).collect();
    write_files(dir, &files);
}

/// The filters the repository's default data (`data/gen.json`) declares for `segment`.
fn default_filters(segment: &str) -> Value {
    read_json(&Path::new(env!("CARGO_MANIFEST_DIR")).join("data/gen.json"))["filters"][segment].clone()
}

#[test]
fn import_declares_the_default_datas_filters_where_the_records_have_the_fields() {
    let tmp = TempDir::new("ignored-import");
    let src = tmp.join("src");
    published_shapes(&src);
    for (keep, flags, creature) in [(false, &[][..], "creature"), (true, &["--keep-segment-names"][..], "pokemon")] {
        let data = tmp.join(&format!("data-{keep}"));
        let mut args = vec!["import", "api-data", src.to_str().unwrap(), "--out", data.to_str().unwrap()];
        args.extend_from_slice(flags);
        let said = run(&args).ok().stdout();
        let filters = read_json(&data.join("gen.json"))["filters"].clone();
        let moves = default_filters("move");
        assert_eq!(filters[creature], default_filters("creature"), "{filters}");
        assert_eq!(filters["move"], json!({"type": moves["type"]}), "generation reaches no value: {filters}");
        assert_eq!(filters.as_object().unwrap().len(), 2, "region has no default filters: {filters}");
        let names: Vec<String> = default_filters("creature").as_object().unwrap().keys().cloned().collect();
        let names = names.join(", ");
        assert!(said.contains("declared filters (as the default data does): "), "{said}");
        assert!(said.contains(&format!("{creature} ({names})")) && said.contains("move (type)"), "{said}");
        // and they work when served
        let out = tmp.join(&format!("out-{keep}"));
        build(&data, &out, &[]).ok();
        let server = Server::start(&out, &[]);
        let fire = server.get(&format!("/api/v2/{creature}/?type=fire")).expect(200);
        let results = fire.json()["results"].clone();
        let names: Vec<&str> = results.as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["charm", "mega"]);
        assert_eq!(fire.header("gen-ignored"), None);
        assert_eq!(server.get(&format!("/api/v2/{creature}/?default=false")).expect(200).json()["count"], 1);
        assert_eq!(server.get("/api/v2/move/?type=fire").expect(200).json()["count"], 1);
        assert_eq!(
            server.get("/api/v2/region/?type=fire").expect(200).header("gen-ignored"),
            Some("type; declared: (none)")
        );
    }
    // --force over a folder that declares its own filters keeps them
    let data = tmp.join("data-false");
    let mut config = read_json(&data.join("gen.json"));
    config["filters"] = json!({"move": {"kind": "type.name"}});
    std::fs::write(data.join("gen.json"), config.to_string()).unwrap();
    run(&["import", "api-data", src.to_str().unwrap(), "--out", data.to_str().unwrap(), "--force"]).ok();
    assert_eq!(read_json(&data.join("gen.json"))["filters"], json!({"move": {"kind": "type.name"}}));
}

/// The published fixture imported: the default data's filters its records have (berry's) are
/// declared, and `?firmness=`/`?gift-type=` answer the records a direct reading of the fixture
/// finds, through the real server; other resources name what they ignored.
#[test]
fn the_published_fixture_imported_answers_the_default_datas_filters() {
    let Some((tmp, data)) = parity::fixture_data("ignored-fixture") else { return };
    let declared = &read_json(&data.join("gen.json"))["filters"];
    assert_eq!(declared["berry"], default_filters("berry"), "{declared}");
    let out = tmp.join("out");
    build(&data, &out, &[]).ok();
    let server = Server::start(&out, &[]);
    let berries = fixture().unwrap().join("api/v2/berry");
    let list = read_json(&berries.join("index.json"));
    let records: Vec<Value> = list["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let id = e["url"].as_str().unwrap().trim_end_matches('/').rsplit('/').next().unwrap().to_string();
            read_json(&berries.join(id).join("index.json"))
        })
        .collect();
    for (param, field) in [("firmness", "firmness"), ("gift-type", "natural_gift_type")] {
        let mut values: Vec<&str> = records.iter().filter_map(|r| r[field]["name"].as_str()).collect();
        values.sort();
        values.dedup();
        assert!(values.len() > 2, "{param}: {values:?}");
        for value in values {
            let names: Vec<&str> =
                records.iter().filter(|r| r[field]["name"] == value).map(|r| r["name"].as_str().unwrap()).collect();
            let page = server.get(&format!("/api/v2/berry/?{param}={}&limit=100", query_escape(value))).expect(200);
            assert_eq!(page.header("gen-ignored"), None);
            let got: Vec<String> = page.json()["results"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["name"].as_str().unwrap().to_string())
                .collect();
            assert_eq!(got, names, "{param}={value}");
        }
    }
    let nature = server.get("/api/v2/nature/?type=fire&limit=3").expect(200);
    assert_eq!(nature.header("gen-ignored"), Some("type; declared: (none)"));
    assert!(nature.body == server.get("/api/v2/nature/?limit=3").expect(200).body);
}
