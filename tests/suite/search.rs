//! Name search (`?q=`): the names document the build writes per resource, and `gen serve`
//! answering `?q=` from it. Expected answers are derived from the data written here (names and
//! localized names, the paging rules), not from the server's output.

use crate::common;
use crate::parity;
use crate::serve_support;

use common::*;
use serde_json::{Value, json};
use serve_support::{BASE, Server};
use std::path::Path;

/// A record: (id, name, localized names (language, name)).
type Creature<'a> = (i64, &'a str, &'a [(&'a str, &'a str)]);

/// Records of `creature`, in list order.
const CREATURES: &[Creature] = &[
    (1, "bulb-seed", &[("en", "Bulb Seed"), ("de", "Knollensaat"), ("ja", "たねぼう")]),
    (2, "ivy-sprout", &[("en", "Ivy Sprout"), ("fr", "Pousse Lierre")]),
    (3, "strasse-cat", &[("de", "Straßenkatze")]),
    (4, "ember-fox", &[("en", "Ember Fox"), ("fr", "Renard Braisé")]),
    (5, "sea-otter", &[("en", "Sea Otter")]),
    (6, "odos-bird", &[("el", "ΟΔΟΣ")]),
    (7, "ember-cub", &[]),
];

fn write_creatures(data: &Path, creatures: &[Creature]) {
    let mut files = vec![("gen.json".to_string(), format!(r#"{{"base_url": "{BASE}", "page_sizes": [2]}}"#))];
    for (id, name, names) in creatures {
        let names: Vec<Value> =
            names.iter().map(|(lang, n)| json!({"name": n, "language": {"name": lang, "url": "x"}})).collect();
        files.push((format!("creature/{id}.json"), json!({"id": id, "name": name, "names": names}).to_string()));
    }
    let files: Vec<(&str, String)> = files.iter().map(|(p, t)| (p.as_str(), t.clone())).collect();
    write_files(data, &files);
}

/// `text` folded as docs/tree.md says names and `q` are compared: NFKD, combining marks
/// (General_Category M) removed, then upper then lower case, final sigma as sigma.
fn fold(text: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let bare: String = text.nfkd().filter(|c| !unicode_normalization::char::is_combining_mark(*c)).collect();
    bare.to_uppercase().to_lowercase().replace('ς', "σ")
}

/// SHA-256 (hex), as `sha256sum` prints it.
fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The ids whose name or localized name contains `q`, both [`fold`]ed.
fn scan(creatures: &[Creature], q: &str) -> Vec<i64> {
    let q = fold(q);
    creatures
        .iter()
        .filter(|(_, name, names)| {
            std::iter::once(*name).chain(names.iter().map(|(_, n)| *n)).any(|n| fold(n).contains(&q))
        })
        .map(|(id, ..)| *id)
        .collect()
}

fn entry(creatures: &[Creature], id: i64) -> Value {
    let name = creatures.iter().find(|c| c.0 == id).unwrap().1;
    json!({"name": name, "url": format!("{BASE}/api/v2/creature/{id}/")})
}

#[test]
fn the_build_writes_a_names_document_per_resource_listed_in_the_manifest() {
    let tmp = TempDir::new("search-names");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    write_creatures(&data, CREATURES);
    build(&data, &out, &["--pretty"]).ok();
    let doc = std::fs::read(out.join("api/v2/creature/_names/index.json")).unwrap();
    let text = String::from_utf8(doc.clone()).unwrap();
    assert_eq!(text.lines().count(), CREATURES.len() + 2, "one entry a line, even with --pretty: {text}");
    let doc: Value = serde_json::from_slice(&doc).unwrap();
    assert_eq!(doc["count"], CREATURES.len());
    // the list it belongs to: its count and the SHA-256 of its `_pages/all` file
    let all = std::fs::read(out.join("api/v2/creature/_pages/all/index.json")).unwrap();
    assert_eq!(doc["list"], json!({"count": CREATURES.len(), "sha256": sha256_hex(&all)}));
    for (i, (id, name, names)) in CREATURES.iter().enumerate() {
        let entry = &doc["results"][i];
        assert_eq!(entry["id"], *id);
        // the name and the localized names (by language), folded, each once
        let mut keys: Vec<String> = vec![fold(name)];
        let mut by_language: Vec<&(&str, &str)> = names.iter().collect();
        by_language.sort();
        for (_, n) in by_language {
            if !keys.contains(&fold(n)) {
                keys.push(fold(n));
            }
        }
        assert_eq!(entry["keys"], json!(keys), "{entry}");
    }
    let manifest = std::fs::read_to_string(out.join("manifest.json")).unwrap();
    assert!(manifest.contains("api/v2/creature/_names/index.json"));
}

#[test]
fn serve_answers_q_with_the_matching_records_as_a_paged_list() {
    let tmp = TempDir::new("search-serve");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    write_creatures(&data, CREATURES);
    build(&data, &out, &[]).ok();
    let server = Server::start(&out, &[]);
    for q in ["ember", "EMBER", "Sprout", "knollen", "たね", "strasse", "STRAß", "οδος", "braisé", "BRAISÉ", "e", "zzz"]
        .into_iter()
        .chain(["braise", "RENARD BRAISE", "brai\u{301}se", "ｂｒａｉｓｅ", "ｓｅａ", "ΟΔΌΣ", "たねほう"])
    {
        let ids = scan(CREATURES, q);
        let page = server.get(&format!("/api/v2/creature/?q={}", query_escape(q))).expect(200).json();
        assert_eq!(page["count"], ids.len(), "{q}");
        let results: Vec<Value> = ids.iter().take(20).map(|&id| entry(CREATURES, id)).collect();
        assert_eq!(page["results"], Value::Array(results), "{q}");
        assert_eq!(page["next"], Value::Null, "{q}");
        assert_eq!(page["previous"], Value::Null, "{q}");
    }
    // accents fold: on the name's side and on q's, written composed or decomposed
    for q in ["braise", "BRAISE", "braise%CC%81", "Brais%C3%A9", "renard%20braise"] {
        let page = server.get(&format!("/api/v2/creature/?q={q}")).expect(200).json();
        assert_eq!(page["results"], json!([entry(CREATURES, 4)]), "{q}");
    }
    // limit and offset apply to the matches, and the links keep q
    let ids = scan(CREATURES, "e");
    assert!(ids.len() >= 5);
    let page = server.get("/api/v2/creature/?q=E&limit=2&offset=1").expect(200).json();
    assert_eq!(page["count"], ids.len());
    assert_eq!(page["results"], json!([entry(CREATURES, ids[1]), entry(CREATURES, ids[2])]));
    assert_eq!(page["next"], format!("{BASE}/api/v2/creature/?offset=3&limit=2&q=E"));
    assert_eq!(page["previous"], format!("{BASE}/api/v2/creature/?offset=0&limit=1&q=E"));
    // a space, as a form sends it (+) or escaped, and characters that need escaping in a url
    let page = server.get("/api/v2/creature/?q=sea+ot&limit=1").expect(200).json();
    assert_eq!(page["results"], json!([entry(CREATURES, 5)]));
    let page = server.get("/api/v2/creature/?q=a%20b%2F..%2F%3F%26").expect(200).json();
    assert_eq!(page["count"], 0);
    let page = server.get("/api/v2/creature/?q=Sea%20Ot&limit=1&offset=0").expect(200).json();
    assert_eq!(page["count"], 1);
    // a q longer than any name
    assert_eq!(server.get(&format!("/api/v2/creature/?q={}", "ember".repeat(50))).expect(200).json()["count"], 0);
    // an empty or absent q: the list itself, byte for byte
    let list = server.get("/api/v2/creature/?limit=3&offset=2").expect(200).body;
    assert_eq!(server.get("/api/v2/creature/?limit=3&offset=2&q=").expect(200).body, list);
    assert_eq!(
        std::fs::read(out.join("api/v2/creature/index.json")).unwrap(),
        server.get("/api/v2/creature/?q=").expect(200).body
    );
    // bad paging parameters are still a 400 with q
    server.get("/api/v2/creature/?q=e&limit=x").expect(400);
    // q on a record is ignored
    assert_eq!(server.get("/api/v2/creature/1/?q=zzz").expect(200).json()["name"], "bulb-seed");
}

#[test]
fn a_renamed_added_or_removed_record_changes_the_next_builds_answers() {
    let tmp = TempDir::new("search-rebuild");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    write_creatures(&data, CREATURES);
    build(&data, &out, &[]).ok();
    let before = std::fs::read(out.join("api/v2/creature/_names/index.json")).unwrap();

    let mut edited: Vec<Creature> = CREATURES.to_vec();
    edited[4] = (5, "sea-otter", &[("en", "Harbor Seal")]); // a localized name changes
    edited.remove(0); // removed
    edited.push((8, "ember-owl", &[("en", "Cinder Owl")])); // added
    std::fs::remove_dir_all(&data).unwrap();
    write_creatures(&data, &edited);
    build(&data, &out, &[]).ok();
    assert_ne!(std::fs::read(out.join("api/v2/creature/_names/index.json")).unwrap(), before);

    let server = Server::start(&out, &[]);
    for q in ["harbor", "otter", "ember", "cinder", "knollen", "e"] {
        let ids = scan(&edited, q);
        let page = server.get(&format!("/api/v2/creature/?q={q}&limit=100")).expect(200).json();
        let results: Vec<Value> = ids.iter().map(|&id| entry(&edited, id)).collect();
        assert_eq!(page["results"], Value::Array(results), "{q}");
    }
}

#[test]
fn an_edit_of_one_record_rewrites_only_its_resources_names_document() {
    let tmp = TempDir::new("search-incremental");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    write_creatures(&data, CREATURES);
    write_files(&data, &[("move/1.json", r#"{"id": 1, "name": "tackle", "names": []}"#.to_string())]);
    build(&data, &out, &[]).ok();
    let move_names = out.join("api/v2/move/_names/index.json");
    let creature_names = out.join("api/v2/creature/_names/index.json");
    let stamp = |p: &Path| std::fs::metadata(p).unwrap().modified().unwrap();
    let (move_before, creature_before) = (stamp(&move_names), stamp(&creature_names));
    std::thread::sleep(std::time::Duration::from_millis(20));
    // an edit that touches no name: the names document keeps its bytes and is not written
    write_files(&data, &[("creature/2.json", json!({"id": 2, "name": "ivy-sprout", "names": [{"name": "Pousse Lierre", "language": {"name": "fr"}}, {"name": "Ivy Sprout", "language": {"name": "en"}}], "extra": 1}).to_string())]);
    build(&data, &out, &[]).ok();
    assert_eq!(stamp(&creature_names), creature_before, "same names: not rewritten");
    // a rename: the creature names document is rewritten, the move one is not
    write_files(
        &data,
        &[(
            "creature/2.json",
            json!({"id": 2, "name": "ivy-sprout", "names": [{"name": "Efeu", "language": {"name": "de"}}]}).to_string(),
        )],
    );
    build(&data, &out, &[]).ok();
    assert_ne!(stamp(&creature_names), creature_before);
    assert_eq!(stamp(&move_names), move_before);
    let doc = read_json(&creature_names);
    assert_eq!(doc["results"][1]["keys"], json!(["ivy-sprout", "efeu"]));
}

#[test]
fn q_on_the_published_fixture_equals_a_scan_of_the_data() {
    let Some((tmp, data)) = parity::fixture_data("search-fixture") else { return };
    let out = tmp.join("out");
    build(&data, &out, &[]).ok();
    // the data, scanned directly: per resource, (id, name, localized names) in list order
    let server = Server::start(&out, &[]);
    let root = server.get("/api/v2/").expect(200).json();
    let (segment, url) = root.as_object().unwrap().iter().next().unwrap();
    let base = url.as_str().unwrap().strip_suffix(&format!("/api/v2/{segment}/")).unwrap().to_string();
    let lists = parity::expected_lists(&data, &base);
    let mut rng = Rng(seed("search-fixture", 0x005e_ed29));
    let segments: Vec<&String> = lists.keys().filter(|s| !lists[*s].is_empty()).collect();
    for _ in 0..200 {
        let segment = *rng.pick(&segments);
        let list = &lists[segment];
        let records: Vec<(i64, String, Vec<String>)> = list
            .iter()
            .map(|entry| {
                let url = entry["url"].as_str().unwrap();
                let id: i64 = url.trim_end_matches('/').rsplit('/').next().unwrap().parse().unwrap();
                let record = read_json(&data.join(segment).join(format!("{id}.json")));
                let name = record["name"].as_str().unwrap_or("").to_string();
                let names = record["names"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|n| n["name"].as_str().map(str::to_string)).collect())
                    .unwrap_or_default();
                (id, name, names)
            })
            .collect();
        let (_, name, names) = rng.pick(&records);
        let source = if names.is_empty() || rng.below(2) == 0 { name.clone() } else { rng.pick(names).clone() };
        let chars: Vec<char> = source.chars().collect();
        if chars.is_empty() {
            continue;
        }
        let start = rng.below(chars.len());
        let len = 1 + rng.below(chars.len() - start);
        let q: String = chars[start..start + len].iter().collect();
        // half the time without its accents, as a user types it
        let q = if rng.below(2) == 0 { fold(&q) } else { q };
        let folded = fold(&q);
        let matched: Vec<usize> = records
            .iter()
            .enumerate()
            .filter(|(_, (_, name, names))| std::iter::once(name).chain(names).any(|n| fold(n).contains(&folded)))
            .map(|(i, _)| i)
            .collect();
        let limit = 1 + rng.below(30) as u64;
        let offset = rng.below(matched.len() + 3) as u64;
        let page = server
            .get(&format!("/api/v2/{segment}/?q={}&limit={limit}&offset={offset}", query_escape(&q)))
            .expect(200)
            .json();
        assert_eq!(page["count"], matched.len(), "{segment} q={q:?}");
        let expected: Vec<Value> =
            matched.iter().skip(offset as usize).take(limit as usize).map(|&i| list[i].clone()).collect();
        assert_eq!(page["results"], Value::Array(expected), "{segment} q={q:?} limit={limit} offset={offset}");
    }
}

#[test]
fn the_html_view_of_a_list_has_a_search_box_and_shows_the_matches() {
    let tmp = TempDir::new("search-html");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    write_creatures(&data, CREATURES);
    build(&data, &out, &[]).ok();
    let server = Server::start(&out, &[]);
    let browser = ("Accept", "text/html,application/xhtml+xml,*/*;q=0.8");
    let plain = server.request("GET", "/api/v2/creature/", &[browser]).expect(200).text();
    // sized to its text, at least 20 characters wide (issue 48)
    assert!(plain.contains(r#"<input type="search" name="q" value="" size="22">"#), "{plain}");
    let page = server.request("GET", "/api/v2/creature/?q=EMBER&limit=1", &[browser]).expect(200).text();
    assert!(page.contains(r#"<input type="search" name="q" value="EMBER" size="22">"#), "{page}");
    assert!(page.contains(r#"<input type="hidden" name="q" value="EMBER">"#), "the page form keeps q: {page}");
    assert!(page.contains("ember-fox") && !page.contains("ember-cub"), "limit 1: {page}");
    assert!(page.contains(&format!("<strong>2</strong> of {} match", CREATURES.len())), "{page}");
    assert!(plain.contains(&format!("<strong>{}</strong> in all", CREATURES.len())), "{plain}");
    // a q that needs escaping in HTML is escaped
    let odd = server.request("GET", "/api/v2/creature/?q=%3Cb%3E%22", &[browser]).expect(200).text();
    assert!(odd.contains(r#"value="&lt;b&gt;&quot;""#), "{odd}");
}

#[test]
fn under_serve_watch_a_renamed_record_is_found_by_its_new_name() {
    let tmp = TempDir::new("search-watch");
    let (data, out) = (tmp.join("data"), tmp.join("out"));
    write_creatures(&data, CREATURES);
    let server = Server::start_preview(&out, &["--quiet", "--watch", "--data", data.to_str().unwrap()]);
    let found = |q: &str| server.get(&format!("/api/v2/creature/?q={q}")).expect(200).json()["count"].as_u64();
    assert_eq!(found("otter"), Some(1));
    assert_eq!(found("walross"), Some(0));
    let renamed = json!({"id": 5, "name": "sea-otter", "names": [{"name": "Walross", "language": {"name": "de"}}]});
    write_files(&data, &[("creature/5.json", renamed.to_string())]);
    assert!(
        serve_support::eventually(std::time::Duration::from_secs(30), || found("walross") == Some(1)),
        "the rebuilt tree's names document is served"
    );
    assert_eq!(found("sea-ott"), Some(1), "the name itself still matches");
    assert_eq!(found("Sea%20Otter"), Some(0), "the old localized name is gone");
}
