//! Name search (`?q=`): the names document a build writes per resource, and the matching that
//! `gen serve` and the edge handlers both apply to it, so that they answer alike.
//!
//! The names document, `api/v2/<segment>/_names/index.json`, is compact JSON whatever
//! `--pretty` says: `{"count": N, "results": [{"id", "name", "names": {language: name}}]}`, one
//! entry per list entry, in list order (so entry `i` is the list's entry `i`). `names` holds the
//! record's localized names (`names[].name` by `names[].language.name`, the first per language)
//! and is left out when there are none; `name` is left out for a nameless record.
//!
//! A resource of more than [`NAMES_SHARD_ENTRIES`] records has its names split in shards by
//! list position: `_names/index.json` is then `{"count": N, "shards": [{"offset", "count",
//! "url"}]}` and shard `k`, `api/v2/<segment>/_names/<k>/index.json`, is `{"count", "offset",
//! "results"}` with the entries from list position `offset`. A query reads every shard
//! (substring matching needs every name): the split bounds each file, not the work.
//!
//! Matching: a record matches `q` when its `name` or one of its localized names contains `q`,
//! both [`fold`]ed. Folding is Unicode case folding as `to_uppercase` then `to_lowercase` give
//! it (so `ß` matches `ss`, and `Σ`, `σ` and `ς` match each other); accents do not fold (`é` is
//! not `e`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One entry of a names document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NameEntry {
    pub id: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub names: BTreeMap<String, String>,
}

/// Most entries a names file holds: a resource of more records has its names in shards of this
/// many (the last one fewer). At the published data's densest (item: 558 KB for 2,223 records,
/// ten languages) a full shard is about 12.5 MB.
pub const NAMES_SHARD_ENTRIES: usize = 50_000;

/// A names document: the entries (`results`), or for a split one the shards that hold them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamesDoc {
    pub count: u64,
    /// A shard's list position of its first entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    #[serde(default)]
    pub results: Vec<NameEntry>,
    /// The shards of a split names document (none for one that holds its entries).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<Shard>,
}

/// One shard of a split names document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub offset: u64,
    pub count: u64,
    pub url: String,
}

/// The number of shards of the names of a list of `count` records: 0 when one file holds them.
pub fn names_shards(count: usize) -> usize {
    if count <= NAMES_SHARD_ENTRIES { 0 } else { count.div_ceil(NAMES_SHARD_ENTRIES) }
}

/// The bytes of the names document of a resource of `count` records split in shards (see
/// [`names_shards`]) whose urls `shard_url` gives.
pub fn render_names_index(count: usize, shard_url: impl Fn(usize) -> String) -> Vec<u8> {
    let shards = (0..names_shards(count))
        .map(|k| {
            let offset = k * NAMES_SHARD_ENTRIES;
            let n = NAMES_SHARD_ENTRIES.min(count - offset);
            Shard { offset: offset as u64, count: n as u64, url: shard_url(k) }
        })
        .collect();
    let doc = NamesDoc { count: count as u64, offset: None, results: Vec::new(), shards };
    serde_json::to_vec(&doc).expect("a names document serialises")
}

/// The bytes of shard `k` of a split names document, whose entries are `all` (serialised, see
/// [`entry_bytes`]).
pub fn render_names_shard(all: &[impl AsRef<[u8]>], k: usize) -> Vec<u8> {
    let offset = k * NAMES_SHARD_ENTRIES;
    render_names_of(&all[offset..all.len().min(offset + NAMES_SHARD_ENTRIES)], Some(offset))
}

/// The localized names of a record's JSON body, by language: the first name per language of
/// its `names` entries shaped `{"name": "...", "language": {"name": "..."}}` (or with the
/// language as a plain string); others are ignored.
pub fn localized_names(record: &serde_json::Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(entries) = record.get("names").and_then(|n| n.as_array()) else { return out };
    for entry in entries {
        let name = entry.get("name").and_then(|n| n.as_str());
        let language = entry.get("language").and_then(|l| l.get("name").unwrap_or(l).as_str());
        if let (Some(name), Some(language)) = (name, language) {
            out.entry(language.to_string()).or_insert_with(|| name.to_string());
        }
    }
    out
}

/// The bytes of a names document (compact).
pub fn render_names(results: &[NameEntry]) -> Vec<u8> {
    let entries: Vec<Vec<u8>> = results.iter().map(entry_bytes).collect();
    render_names_of(&entries, None)
}

/// One entry of a names document, serialised (compact), as a build holds it until the document
/// is written: a few dozen bytes where the parsed entry takes hundreds.
pub fn entry_bytes(entry: &NameEntry) -> Vec<u8> {
    serde_json::to_vec(entry).expect("a names entry serialises")
}

/// A names document (`offset`: `None`) or shard (the list position of its first entry) of the
/// serialised `entries`: `{"count", ["offset",] "results"}`, the bytes serde writes for it.
fn render_names_of(entries: &[impl AsRef<[u8]>], offset: Option<usize>) -> Vec<u8> {
    let size: usize = entries.iter().map(|e| e.as_ref().len() + 1).sum();
    let mut out = Vec::with_capacity(size + 64);
    out.extend_from_slice(format!("{{\"count\":{}", entries.len()).as_bytes());
    if let Some(offset) = offset {
        out.extend_from_slice(format!(",\"offset\":{offset}").as_bytes());
    }
    out.extend_from_slice(b",\"results\":[");
    for (i, entry) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(entry.as_ref());
    }
    out.extend_from_slice(b"]}");
    out
}

/// The bytes of the names document of serialised `entries` (see [`entry_bytes`]).
pub fn render_names_raw(entries: &[impl AsRef<[u8]>]) -> Vec<u8> {
    render_names_of(entries, None)
}

/// `text` case-folded for matching (see the module's doc).
pub fn fold(text: &str) -> String {
    text.to_uppercase().to_lowercase().replace('ς', "σ")
}

/// True when the entry's name or a localized name contains `folded` (already [`fold`]ed).
pub fn entry_matches(entry: &NameEntry, folded: &str) -> bool {
    entry.name.iter().chain(entry.names.values()).any(|name| fold(name).contains(folded))
}

/// The list positions of the entries that match `q` (not yet folded), in list order.
pub fn matching(doc: &NamesDoc, q: &str) -> Vec<usize> {
    let folded = fold(q);
    doc.results.iter().enumerate().filter(|(_, e)| entry_matches(e, &folded)).map(|(i, _)| i).collect()
}

/// `text` percent-encoded for a query value: every byte but `A-Z a-z 0-9 - . _ ~` as `%XX`
/// (upper-case hex), as the edge handler writes it too.
pub fn encode_query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: i64, name: &str, names: &[(&str, &str)]) -> NameEntry {
        NameEntry {
            id,
            name: Some(name.to_string()),
            names: names.iter().map(|(l, n)| (l.to_string(), n.to_string())).collect(),
        }
    }

    fn doc() -> NamesDoc {
        let results = vec![
            entry(1, "cheri", &[("en", "Cheri Berry"), ("ja", "クラボのみ"), ("de", "Amrenabeere")]),
            entry(2, "chesto", &[("en", "Chesto Berry"), ("fr", "Baie Maron")]),
            entry(3, "strasse", &[("de", "Straße")]),
            entry(4, "sigma", &[("el", "ΟΔΟΣ")]),
            entry(5, "cafe", &[("fr", "Café")]),
            NameEntry { id: 6, name: None, names: BTreeMap::new() },
        ];
        NamesDoc { count: results.len() as u64, offset: None, results, shards: Vec::new() }
    }

    #[test]
    fn case_folds_and_localized_names_match() {
        let doc = doc();
        assert_eq!(matching(&doc, "CHE"), vec![0, 1]);
        assert_eq!(matching(&doc, "berry"), vec![0, 1]);
        assert_eq!(matching(&doc, "クラボ"), vec![0]);
        assert_eq!(matching(&doc, "maron"), vec![1]);
        assert_eq!(matching(&doc, "AMRENA"), vec![0]);
        // full case folding: ß is ss, final sigma is sigma
        assert_eq!(matching(&doc, "STRASSE"), vec![2]);
        assert_eq!(matching(&doc, "straß"), vec![2]);
        assert_eq!(matching(&doc, "οδος"), vec![3]);
        assert_eq!(matching(&doc, "οδοσ"), vec![3]);
    }

    #[test]
    fn accents_do_not_fold() {
        let doc = doc();
        assert_eq!(matching(&doc, "café"), vec![4]);
        assert_eq!(matching(&doc, "CAFÉ"), vec![4]);
        assert_eq!(matching(&doc, "cafe"), vec![4], "the plain name matches");
        assert_eq!(matching(&doc, "afé"), vec![4]);
        assert_eq!(matching(&doc, "afe b"), Vec::<usize>::new());
    }

    #[test]
    fn empty_long_and_odd_queries() {
        let doc = doc();
        assert_eq!(matching(&doc, ""), vec![0, 1, 2, 3, 4], "every named record; the nameless one has nothing");
        assert!(matching(&doc, &"cheri".repeat(40)).is_empty());
        assert!(matching(&doc, "a/../b?&=#%").is_empty());
    }

    #[test]
    fn shards_cover_the_list_in_order() {
        assert_eq!((names_shards(0), names_shards(NAMES_SHARD_ENTRIES)), (0, 0));
        assert_eq!(names_shards(NAMES_SHARD_ENTRIES + 1), 2);
        let count = 2 * NAMES_SHARD_ENTRIES + 7;
        let all: Vec<Vec<u8>> =
            (0..count as i64).map(|id| entry_bytes(&NameEntry { id, name: None, names: BTreeMap::new() })).collect();
        let index: NamesDoc = serde_json::from_slice(&render_names_index(count, |k| format!("u/{k}/"))).unwrap();
        assert_eq!(index.count, count as u64);
        assert!(index.results.is_empty());
        let mut seen = Vec::new();
        for (k, shard) in index.shards.iter().enumerate() {
            assert_eq!(shard.url, format!("u/{k}/"));
            let doc: NamesDoc = serde_json::from_slice(&render_names_shard(&all, k)).unwrap();
            assert_eq!((doc.offset, doc.count), (Some(shard.offset), shard.count));
            assert_eq!(doc.results.len() as u64, doc.count);
            seen.extend(doc.results.into_iter().map(|e| e.id));
        }
        assert_eq!(seen, (0..count as i64).collect::<Vec<_>>());
        assert_eq!(index.shards.last().unwrap().count, 7);
    }

    #[test]
    fn documents_of_serialised_entries_are_the_bytes_serde_writes() {
        let doc = doc();
        assert_eq!(render_names(&doc.results), serde_json::to_vec(&doc).unwrap());
        let shard = NamesDoc { offset: Some(0), ..doc.clone() };
        let entries: Vec<Vec<u8>> = doc.results.iter().map(entry_bytes).collect();
        assert_eq!(render_names_shard(&entries, 0), serde_json::to_vec(&shard).unwrap());
        assert_eq!(render_names_raw(&Vec::<Vec<u8>>::new()), br#"{"count":0,"results":[]}"#);
    }

    #[test]
    fn urls_escape_every_reserved_byte() {
        assert_eq!(encode_query_value("a b&c=d/é%?#+"), "a%20b%26c%3Dd%2F%C3%A9%25%3F%23%2B");
        assert_eq!(encode_query_value("Az09-._~"), "Az09-._~");
    }

    #[test]
    fn localized_names_take_the_first_per_language() {
        let record = serde_json::json!({"names": [
            {"name": "Cheri", "language": {"name": "en"}},
            {"name": "Other", "language": {"name": "en"}},
            {"name": "x"},
            {"name": "Cerise", "language": "fr"},
            {"name": "y", "language": 3},
            {"language": {"name": "fr"}},
            {"name": "Kirsche", "language": {"name": "de", "url": "u"}}
        ]});
        let mut names = localized_names(&record);
        assert_eq!(names.len(), 3);
        assert_eq!(names["fr"], "Cerise");
        names.remove("fr");
        assert_eq!(names["en"], "Cheri");
        assert_eq!(names["de"], "Kirsche");
        assert!(localized_names(&serde_json::json!({"names": "x"})).is_empty());
        let rendered = render_names(&[entry(1, "a", &[("en", "A")]), NameEntry { id: 2, name: None, names }]);
        assert_eq!(
            String::from_utf8(rendered).unwrap(),
            r#"{"count":2,"results":[{"id":1,"name":"a","names":{"en":"A"}},{"id":2,"names":{"de":"Kirsche","en":"Cheri"}}]}"#
        );
    }
}
