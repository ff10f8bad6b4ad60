//! The HTML view's list pages (issue 48 item 4), through the real server: every filter value
//! reachable, the page size kept to the last page and back, the name a search matched, counts
//! in good English, and boxes sized to their text. tests/suite/browser.rs sees the layout in
//! Chromium.

use crate::common::{self, TempDir};
use crate::serve_support::{Server, Site};

/// What a browser sends.
const HTML: &str = "Accept: text/html";

/// Records of the test resource: `c-<id>`, stage `<id>` (a declared filter: 70 values), and
/// kind `odd`/`even` (a filter of two values).
const COUNT: u64 = 70;

/// A tree of one resource, `creature`, of [`COUNT`] records with the filters `stage` and `kind`;
/// creature 1 has localized names (its French one, `Bulbizarre`, holds `ar`; its name does not).
fn site(label: &str) -> Site {
    let site = Site { tmp: TempDir::new(label) };
    let config = r#"{"base_url": "https://api.example.org", "page_sizes": [5],
        "filters": {"creature": {"stage": "stage", "kind": "kind"}}}"#;
    let mut files = vec![("gen.json".to_string(), config.to_string())];
    for id in 1..=COUNT {
        let mut record = serde_json::json!({"id": id, "name": format!("c-{id}"), "stage": id,
            "kind": if id % 2 == 0 { "even" } else { "odd" }});
        if id == 1 {
            record["names"] = serde_json::json!([
                {"name": "Bulbasaur", "language": {"name": "en"}},
                {"name": "Bulbizarre", "language": {"name": "fr"}},
                {"name": "Bisasam", "language": {"name": "de"}}
            ]);
        }
        files.push((format!("creature/{id}.json"), record.to_string()));
    }
    let files: Vec<(&str, String)> = files.iter().map(|(p, t)| (p.as_str(), t.clone())).collect();
    common::write_files(&site.data(), &files);
    site.build(&[]);
    site
}

/// The HTML page at `target`, 200.
fn page(server: &Server, target: &str) -> String {
    server.get_with(target, &[HTML]).expect(200).text()
}

/// The `href` of the link whose id is `id`, `&amp;` decoded.
fn href_of(html: &str, id: &str) -> Option<String> {
    let at = html.find(&format!("id=\"{id}\" href=\""))? + id.len() + 12;
    Some(html[at..at + html[at..].find('"')?].replace("&amp;", "&"))
}

/// Every value of a filter can be reached: past the first 60, a "more" link opens the page of
/// them all, each a link that keeps the list's page size and other filters (it was plain text,
/// `… 10 more`).
#[test]
fn every_filter_value_is_reachable_through_the_more_link() {
    let site = site("view-more");
    let server = Server::start(&site.out(), &[]);
    let list = page(&server, "/api/v2/creature/?limit=5&kind=even");
    // the first 60 values link, in numeric order; then the link to the rest
    assert!(list.contains(r#"href="/api/v2/creature/?limit=5&amp;kind=even&amp;stage=60""#), "{list}");
    assert!(!list.contains("stage=61\""), "{list}");
    let more = href_of(&list, "more-stage").unwrap_or_else(|| panic!("no more link: {list}"));
    assert_eq!(more, "/api/v2/creature/_filters/stage/?limit=5&kind=even");
    assert!(list.contains("… 10 more values</a>"), "{list}");
    // a filter of two values has no such link
    assert!(href_of(&list, "more-kind").is_none());

    let all = page(&server, &more);
    assert!(all.contains("every value of <strong>stage</strong>"), "{all}");
    for stage in 1..=COUNT {
        let link = format!(r#"href="/api/v2/creature/?limit=5&amp;kind=even&amp;stage={stage}""#);
        assert!(all.contains(&link), "stage {stage}: {all}");
    }
    assert_eq!(href_of(&all, "back").as_deref(), Some("/api/v2/creature/?limit=5&kind=even"));
    // a value past the 60th, followed: its records
    let json = server.get("/api/v2/creature/?limit=5&kind=even&stage=64").expect(200).json();
    assert_eq!(json["count"], 1);
    assert_eq!(json["results"][0]["name"], "c-64");
}

/// The page size the user asked for survives the last page: the JSON's `next` to the last page
/// shrinks the limit (8 to 6: 70 records), but the view's next link keeps 8, and so do its
/// forms and its previous link, which shows entries 57-64 again (not 59-64).
#[test]
fn the_page_size_asked_for_survives_the_last_page() {
    let site = site("view-limit");
    let server = Server::start(&site.out(), &[]);
    let json = server.get("/api/v2/creature/?limit=8&offset=56").expect(200).json();
    assert_eq!(json["next"], "https://api.example.org/api/v2/creature/?offset=64&limit=6", "the public API's rule");

    let before = page(&server, "/api/v2/creature/?limit=8&offset=56");
    let next = href_of(&before, "next").expect("a next link");
    assert_eq!(next, "/api/v2/creature/?offset=64&limit=8");
    let last = page(&server, &next);
    assert!(last.contains("entries 65–70"), "{last}");
    assert!(last.contains(r#"name="limit" value="8""#), "{last}");
    assert!(!last.contains(r#"name="limit" value="6""#), "{last}");
    assert_eq!(href_of(&last, "next"), None);
    let previous = href_of(&last, "previous").expect("a previous link");
    assert_eq!(previous, "/api/v2/creature/?offset=56&limit=8");
    assert!(page(&server, &previous).contains("entries 57–64"));
    // with q and a filter, the links keep them too
    let narrowed = page(&server, "/api/v2/creature/?limit=2&offset=2&q=c-1&kind=odd");
    assert_eq!(href_of(&narrowed, "next").as_deref(), Some("/api/v2/creature/?offset=4&limit=2&q=c-1&kind=odd"));
    assert_eq!(href_of(&narrowed, "previous").as_deref(), Some("/api/v2/creature/?offset=0&limit=2&q=c-1&kind=odd"));
}

/// A search result shows the name it matched: `?q=ar` lists c-1 because its French name
/// `Bulbizarre` holds `ar` (accents and case folded as the search folds them).
#[test]
fn a_search_result_shows_the_name_it_matched() {
    let site = site("view-matched");
    let server = Server::start(&site.out(), &[]);
    let json = server.get("/api/v2/creature/?q=AR").expect(200).json();
    assert_eq!(json["count"], 1);
    let html = page(&server, "/api/v2/creature/?q=AR");
    assert!(
        html.contains(r#"<li><a href="/api/v2/creature/1/">c-1</a> matched “<strong>Bulbizarre</strong>” <span class="note">(fr)</span></li>"#),
        "{html}"
    );
    // a record found by its own name says so
    let html = page(&server, "/api/v2/creature/?q=c-7&limit=50");
    assert!(html.contains(r#"<a href="/api/v2/creature/70/">c-70</a> matched its name “c-70”"#), "{html}");
    // no search, no such lines
    assert!(!page(&server, "/api/v2/creature/").contains("id=\"matched\""));
}

/// Counts read in good English: one match "matches", several "match"; one entry is "entry".
#[test]
fn counts_read_in_good_english() {
    let site = site("view-counts");
    let server = Server::start(&site.out(), &[]);
    let one = page(&server, "/api/v2/creature/?q=c-70");
    assert!(one.contains("<strong>1</strong> of 70 matches · entry 1</p>"), "{one}");
    let two = page(&server, "/api/v2/creature/?q=c-7");
    assert!(two.contains("<strong>2</strong> of 70 match · entries 1–2</p>"), "{two}");
    let all = page(&server, "/api/v2/creature/?offset=69");
    assert!(all.contains("<strong>70</strong> in all · entry 70</p>"), "{all}");
    let root = page(&server, "/");
    assert!(root.contains("<span class=\"note\">70 entries</span>"), "{root}");
    // a resource of one record
    common::write_files(&site.data(), &[("solo/1.json", r#"{"id": 1, "name": "only"}"#.to_string())]);
    site.build(&[]);
    let server = Server::start(&site.out(), &[]);
    let root = page(&server, "/");
    assert!(root.contains("/api/v2/solo/</a> <span class=\"note\">1 entry</span>"), "{root}");
    assert!(page(&server, "/api/v2/solo/").contains("<strong>1</strong> in all · entry 1</p>"));
    let download = page(&server, "/api/v2/solo/");
    assert!(download.contains("(1 record in one gzip'd NDJSON file, "), "{download}");
}

/// The boxes fit their text: the search box is as wide as its value (`size`), long error
/// details wrap inside their box (tests/suite/browser.rs measures both in Chromium).
#[test]
fn the_search_box_is_sized_to_its_text_and_errors_wrap() {
    let site = site("view-boxes");
    let server = Server::start(&site.out(), &[]);
    let short = page(&server, "/api/v2/creature/?q=Salam%C3%A8che");
    assert!(short.contains(r#"name="q" value="Salamèche" size="22""#), "{short}");
    let long = "Dracaufeu Salamèche Reptincel Carapuce";
    let html = page(&server, &format!("/api/v2/creature/?q={}", long.replace(' ', "%20").replace('è', "%C3%A8")));
    assert!(html.contains(&format!(r#"value="{long}" size="40""#)), "{html}");
    assert!(html.contains("input[type=search] { width: auto;"), "the size is not overridden by a fixed width");
    assert!(html.contains("overflow-wrap: anywhere"), "error details wrap");
}
