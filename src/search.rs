//! Name search (`?q=`): the names document a build writes per resource, and the matching that
//! `gen serve` and the edge handlers both apply to it, so that they answer alike.
//!
//! The names document, `api/v2/<segment>/_names/index.json`, is JSON written one entry per line
//! whatever `--pretty` says, so that a reader matches it line by line, holding one entry at a
//! time and never the parse tree of the whole file:
//!
//! ```text
//! {"count":N,"list":{"count":N,"sha256":"<hex>"},"results":[
//! {"id":1,"keys":["cheri","cheri berry","amrenabeere"]},
//! {"id":2,"keys":[]}
//! ]}
//! ```
//!
//! One entry per list entry, in list order (entry `i` is the list's entry `i`). `keys` are the
//! record's name and its localized names (`names[].name`, the first per language), each
//! [`fold`]ed, each once. `list` names the list the document belongs to: its count and the
//! SHA-256 of its `_pages/all/index.json` file's bytes. A reader that finds another list there
//! (a publish stopped between the two files, a tree copied in part) refuses the pair with a 503
//! and caches nothing: the entries would not be the list's.
//!
//! A resource of more than [`NAMES_SHARD_ENTRIES`] records has its names split in shards by
//! list position: `_names/index.json` is then one line, `{"count": N, "list": {...}, "shards":
//! [{"offset", "count", "url"}]}`, and shard `k`, `api/v2/<segment>/_names/<k>/index.json`, is
//! laid out as above with `"offset"` after `"count"`: the entries from list position `offset`,
//! and the same `list`. A query reads the shards one after the other, each matched line by line
//! and dropped before the next is read: its memory is one shard's bytes, one entry and the
//! matching positions, whatever the resource's size.
//!
//! Matching: a record matches `q` when one of its keys contains `q` [`fold`]ed. Folding is NFKD
//! decomposition with the combining marks (General_Category M) removed, then Unicode case
//! folding as `to_uppercase` then `to_lowercase` give it, and `ς` as `σ`: so `salameche` finds
//! `Salamèche`, `ß` matches `ss`, `Σ`, `σ` and `ς` match each other, full-width letters match
//! their ASCII forms, and a kana with a voicing mark matches the one without (`ガ` finds `カ`).
//! The names are folded once, by the build, into the document; only `q` is folded at query
//! time, by `gen serve` or by an edge handler's JavaScript (`normalize("NFKD")`, `/\p{M}/gu`),
//! so their Unicode versions can differ only on a `q` holding a character one of them does not
//! know.

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// One record's names, as the build extracts them (see [`entry_bytes`] for what is written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NameEntry {
    /// The record's id.
    pub(crate) id: i64,
    /// Its name, when it has one.
    pub(crate) name: Option<String>,
    /// Its localized names, by language.
    pub(crate) names: BTreeMap<String, String>,
}

/// One line of a names document: a record's id and its folded names.
#[derive(Debug, Serialize, Deserialize)]
struct Line<'a> {
    id: i64,
    #[serde(borrow)]
    keys: Vec<Cow<'a, str>>,
}

/// Most entries a names file holds: a resource of more records has its names in shards of this
/// many (the last one fewer). At the published data's densest (item: ten languages) a full shard
/// is about 12 MB, the most a query holds of it at once.
pub(crate) const NAMES_SHARD_ENTRIES: usize = 50_000;

/// The list a names document belongs to: its count and the SHA-256 (hex) of its `_pages/all`
/// file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ListStamp {
    /// Entries of the list.
    pub(crate) count: u64,
    /// SHA-256 of the list's `_pages/all` file, lower-case hex.
    pub(crate) sha256: String,
}

impl ListStamp {
    /// The stamp of the list of `count` entries whose `_pages/all` file is `all`.
    #[cfg(test)]
    pub(crate) fn of(count: u64, all: &[u8]) -> ListStamp {
        ListStamp { count, sha256: sha256_hex(all) }
    }

    /// The stamp of the list of `count` entries whose `_pages/all` file `render` puts into the
    /// sink it is given: hashed as it goes, never held whole (a million entries are 50 MB).
    pub(crate) fn of_rendered(count: u64, render: impl FnOnce(&mut PageHasher)) -> ListStamp {
        let mut hasher = PageHasher { context: ring::digest::Context::new(&ring::digest::SHA256), block: Vec::new() };
        render(&mut hasher);
        hasher.context.update(&hasher.block);
        ListStamp { count, sha256: hex(hasher.context.finish().as_ref()) }
    }
}

/// A page rendered straight into its SHA-256 (see [`ListStamp::of_rendered`]), in blocks.
pub(crate) struct PageHasher {
    context: ring::digest::Context,
    block: Vec<u8>,
}

impl crate::paging::PageSink for PageHasher {
    fn put(&mut self, bytes: &[u8]) {
        self.block.extend_from_slice(bytes);
        if self.block.len() >= 1 << 16 {
            self.context.update(&self.block);
            self.block.clear();
        }
    }
}

/// The SHA-256 of `bytes`, lower-case hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The first line of a names file (or the whole of a split one's index).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct NamesHead {
    /// Number of entries it covers.
    pub(crate) count: u64,
    /// A shard's list position of its first entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) offset: Option<u64>,
    /// The list it belongs to.
    pub(crate) list: ListStamp,
    /// The shards of a split names document (none for one that holds its entries).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) shards: Vec<Shard>,
}

/// One shard of a split names document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Shard {
    /// List position of its first entry.
    pub(crate) offset: u64,
    /// Entries it holds.
    pub(crate) count: u64,
    /// Its url.
    pub(crate) url: String,
}

/// The number of shards of the names of a list of `count` records: 0 when one file holds them.
pub(crate) fn names_shards(count: usize) -> usize {
    if count <= NAMES_SHARD_ENTRIES { 0 } else { count.div_ceil(NAMES_SHARD_ENTRIES) }
}

/// The bytes of the names document of the list `list` split in shards (see [`names_shards`])
/// whose urls `shard_url` gives: one line.
pub(crate) fn render_names_index(list: &ListStamp, shard_url: impl Fn(usize) -> String) -> Vec<u8> {
    let count = list.count as usize;
    let shards = (0..names_shards(count))
        .map(|k| {
            let offset = k * NAMES_SHARD_ENTRIES;
            let n = NAMES_SHARD_ENTRIES.min(count - offset);
            Shard { offset: offset as u64, count: n as u64, url: shard_url(k) }
        })
        .collect();
    let head = NamesHead { count: list.count, offset: None, list: list.clone(), shards };
    serde_json::to_vec(&head).expect("a names document serialises")
}

/// The bytes of shard `k` of the split names document of `list`, whose entries are `all`
/// (serialised, see [`entry_bytes`]).
pub(crate) fn render_names_shard(all: &[impl AsRef<[u8]>], k: usize, list: &ListStamp) -> Vec<u8> {
    let offset = k * NAMES_SHARD_ENTRIES;
    render_names_of(&all[offset..all.len().min(offset + NAMES_SHARD_ENTRIES)], Some(offset), list)
}

/// The localized names of a record's JSON body, by language: the first name per language of
/// its `names` entries shaped `{"name": "...", "language": {"name": "..."}}` (or with the
/// language as a plain string); others are ignored.
pub(crate) fn localized_names(record: crate::json::tape::Node<'_>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(entries) = record.get("names") else { return out };
    for entry in entries.items() {
        let name = entry.get("name").and_then(|n| n.as_str());
        let language = entry.get("language").and_then(|l| l.get("name").unwrap_or(l).as_str());
        if let (Some(name), Some(language)) = (name, language) {
            out.entry(language.to_string()).or_insert_with(|| name.to_string());
        }
    }
    out
}

/// One line of a names document, as a build holds it until the document is written: the id
/// and the name and localized names (by language), [`fold`]ed, each once.
pub(crate) fn entry_bytes(entry: &NameEntry) -> Vec<u8> {
    let mut keys: Vec<Cow<str>> = Vec::new();
    for name in entry.name.iter().chain(entry.names.values()) {
        let key = Cow::Owned(fold(name));
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    serde_json::to_vec(&Line { id: entry.id, keys }).expect("a names entry serialises")
}

/// A names document (`offset`: `None`) or shard (the list position of its first entry) of the
/// serialised `entries` of the list `list`: the head line, one line per entry, then `]}`.
fn render_names_of(entries: &[impl AsRef<[u8]>], offset: Option<usize>, list: &ListStamp) -> Vec<u8> {
    let size: usize = entries.iter().map(|e| e.as_ref().len() + 2).sum();
    let mut out = Vec::with_capacity(size + 160);
    let head =
        NamesHead { count: entries.len() as u64, offset: offset.map(|o| o as u64), list: list.clone(), shards: vec![] };
    let mut head = serde_json::to_vec(&head).expect("a names head serialises");
    head.pop(); // the closing brace: the results follow
    out.extend_from_slice(&head);
    out.extend_from_slice(b",\"results\":[\n");
    for (i, entry) in entries.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b",\n");
        }
        out.extend_from_slice(entry.as_ref());
    }
    if !entries.is_empty() {
        out.push(b'\n');
    }
    out.extend_from_slice(b"]}");
    out
}

/// The bytes of the names document of the list `list` whose entries are `entries` (serialised,
/// see [`entry_bytes`]), when one file holds them.
pub(crate) fn render_names_raw(entries: &[impl AsRef<[u8]>], list: &ListStamp) -> Vec<u8> {
    render_names_of(entries, None, list)
}

/// A names file read: its head, and the lines of its entries (`None` for a split document's
/// index, which holds shards). `None` when `body` is not laid out as [`render_names_of`] and
/// [`render_names_index`] write it.
pub(crate) fn names_head(body: &[u8]) -> Option<(NamesHead, Option<&[u8]>)> {
    let Some(newline) = body.iter().position(|&b| b == b'\n') else {
        let head: NamesHead = serde_json::from_slice(body).ok()?;
        return (!head.shards.is_empty()).then_some((head, None));
    };
    let first = body[..newline].strip_suffix(b",\"results\":[")?;
    let head: NamesHead = serde_json::from_slice(&[first, b"}"].concat()).ok()?;
    let lines = body[newline + 1..].strip_suffix(b"]}")?;
    head.shards.is_empty().then_some((head, Some(lines)))
}

/// Matches the entry lines `lines` of a names file (see [`names_head`]) against `folded` (a
/// [`fold`]ed `q`), one line at a time: pushes to `found` the list position (`offset` plus its
/// place) of each entry that matches. The number of entries, or `None` when a line is not one.
pub(crate) fn match_lines(lines: &[u8], folded: &str, offset: usize, found: &mut Vec<usize>) -> Option<usize> {
    let mut seen = 0;
    for line in lines.split(|&b| b == b'\n').filter(|line| !line.is_empty()) {
        let line = line.strip_suffix(b",").unwrap_or(line);
        let entry: Line = serde_json::from_slice(line).ok()?;
        if entry.keys.iter().any(|key| key.contains(folded)) {
            found.push(offset + seen);
        }
        seen += 1;
    }
    Some(seen)
}

/// `text` folded for matching (see the module's doc): NFKD, combining marks removed, case
/// folded, `ς` as `σ`.
pub(crate) fn fold(text: &str) -> String {
    let bare: String = text.nfkd().filter(|c| !is_combining_mark(*c)).collect();
    bare.to_uppercase().to_lowercase().replace('ς', "σ")
}

/// `text` percent-encoded for a query value: every byte but `A-Z a-z 0-9 - . _ ~` as `%XX`
/// (upper-case hex), as the edge handler writes it too.
pub(crate) fn encode_query_value(text: &str) -> String {
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

    fn stamp(count: usize) -> ListStamp {
        ListStamp::of(count as u64, b"{}")
    }

    fn entries() -> Vec<NameEntry> {
        vec![
            entry(1, "cheri", &[("en", "Cheri Berry"), ("ja", "クラボのみ"), ("de", "Amrenabeere")]),
            entry(2, "chesto", &[("en", "Chesto Berry"), ("fr", "Baie Maron")]),
            entry(3, "strasse", &[("de", "Straße")]),
            entry(4, "sigma", &[("el", "ΟΔΟΣ")]),
            entry(5, "cafe", &[("fr", "Café")]),
            NameEntry { id: 6, name: None, names: BTreeMap::new() },
            entry(7, "salameche", &[("fr", "Salamèche"), ("en", "Pokémon Ｆｕｌｌ")]),
        ]
    }

    /// The list positions that match `q` in the names document of `entries`, as serve reads it.
    fn matching(entries: &[NameEntry], q: &str) -> Vec<usize> {
        let lines: Vec<Vec<u8>> = entries.iter().map(entry_bytes).collect();
        let body = render_names_raw(&lines, &stamp(lines.len()));
        let (head, lines) = names_head(&body).expect("a names document");
        let mut found = Vec::new();
        assert_eq!(match_lines(lines.unwrap(), &fold(q), 0, &mut found), Some(head.count as usize));
        found
    }

    #[test]
    fn case_folds_and_localized_names_match() {
        let doc = entries();
        assert_eq!(matching(&doc, "CHE"), vec![0, 1, 6]);
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
    fn accents_and_compatibility_forms_fold() {
        let doc = entries();
        assert_eq!(matching(&doc, "café"), vec![4]);
        assert_eq!(matching(&doc, "CAFÉ"), vec![4]);
        assert_eq!(matching(&doc, "cafe"), vec![4]);
        assert_eq!(matching(&doc, "afé"), vec![4]);
        assert_eq!(matching(&doc, "salamèche"), vec![6]);
        assert_eq!(matching(&doc, "pokemon"), vec![6]);
        assert_eq!(matching(&doc, "POKÉMON"), vec![6]);
        // a decomposed q (e + U+0301) and full-width letters fold too
        assert_eq!(matching(&doc, "poke\u{301}mon full"), vec![6]);
        assert_eq!(matching(&doc, "ｃａｆｅ"), vec![4]);
        // kana voicing marks are combining marks: ボ folds to ホ on both sides
        assert_eq!(matching(&doc, "クラホ"), vec![0]);
        assert_eq!(matching(&doc, "afe b"), Vec::<usize>::new());
        assert_eq!(fold("Salamèche"), "salameche");
        assert_eq!(fold("İstanbul"), "istanbul");
    }

    #[test]
    fn empty_long_and_odd_queries() {
        let doc = entries();
        assert_eq!(matching(&doc, ""), vec![0, 1, 2, 3, 4, 6], "every named record; the nameless one has nothing");
        assert!(matching(&doc, &"cheri".repeat(40)).is_empty());
        assert!(matching(&doc, "a/../b?&=#%").is_empty());
        assert!(matching(&doc, "\n").is_empty());
    }

    #[test]
    fn entries_hold_each_folded_name_once() {
        let line = entry_bytes(&entry(9, "Eevee", &[("en", "Eevee"), ("fr", "Évoli"), ("de", "evoli")]));
        assert_eq!(String::from_utf8(line).unwrap(), r#"{"id":9,"keys":["eevee","evoli"]}"#);
        let nameless = entry_bytes(&NameEntry { id: 6, name: None, names: BTreeMap::new() });
        assert_eq!(nameless, br#"{"id":6,"keys":[]}"#);
    }

    #[test]
    fn shards_cover_the_list_in_order() {
        assert_eq!((names_shards(0), names_shards(NAMES_SHARD_ENTRIES)), (0, 0));
        assert_eq!(names_shards(NAMES_SHARD_ENTRIES + 1), 2);
        let count = 2 * NAMES_SHARD_ENTRIES + 7;
        let all: Vec<Vec<u8>> =
            (0..count as i64).map(|id| entry_bytes(&NameEntry { id, name: None, names: BTreeMap::new() })).collect();
        let list = stamp(count);
        let index = render_names_index(&list, |k| format!("u/{k}/"));
        assert!(!index.contains(&b'\n'), "the index is one line");
        let (index, lines) = names_head(&index).unwrap();
        assert!(lines.is_none());
        assert_eq!((index.count, &index.list), (count as u64, &list));
        let mut seen = 0;
        for (k, shard) in index.shards.iter().enumerate() {
            assert_eq!(shard.url, format!("u/{k}/"));
            let body = render_names_shard(&all, k, &list);
            let (head, lines) = names_head(&body).unwrap();
            assert_eq!((head.offset, head.count, &head.list), (Some(shard.offset), shard.count, &list));
            assert_eq!(shard.offset as usize, seen);
            let mut found = Vec::new();
            seen += match_lines(lines.unwrap(), "", shard.offset as usize, &mut found).unwrap();
            assert!(found.is_empty(), "nameless entries match nothing");
            assert_eq!(seen as u64, shard.offset + shard.count);
        }
        assert_eq!(seen, count);
        assert_eq!(index.shards.last().unwrap().count, 7);
    }

    #[test]
    fn documents_are_json_one_entry_a_line() {
        let lines: Vec<Vec<u8>> = entries().iter().map(entry_bytes).collect();
        let body = render_names_raw(&lines, &stamp(lines.len()));
        let value: serde_json::Value = serde_json::from_slice(&body).expect("valid JSON");
        assert_eq!(value["count"], 7);
        assert_eq!(value["list"]["count"], 7);
        assert_eq!(value["results"][6]["keys"], serde_json::json!(["salameche", "pokemon full"]));
        let text = String::from_utf8(body).unwrap();
        assert_eq!(text.lines().count(), 9, "the head, seven entries, the end");
        let empty = render_names_raw(&Vec::<Vec<u8>>::new(), &stamp(0));
        assert!(serde_json::from_slice::<serde_json::Value>(&empty).is_ok());
        let (head, lines) = names_head(&empty).unwrap();
        assert_eq!((head.count, lines), (0, Some(&b""[..])));
        assert!(names_head(b"{\"count\":1,\"results\":[]}").is_none(), "a document of an older gen");
        assert!(names_head(b"junk\n").is_none());
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
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
        let names_of = |record: serde_json::Value| {
            let text = record.to_string();
            localized_names(crate::json::tape::Tape::parse(text.as_bytes()).unwrap().root())
        };
        let mut names = names_of(record);
        assert_eq!(names.len(), 3);
        assert_eq!(names["fr"], "Cerise");
        names.remove("fr");
        assert_eq!(names["en"], "Cheri");
        assert_eq!(names["de"], "Kirsche");
        assert!(names_of(serde_json::json!({"names": "x"})).is_empty());
    }
}
