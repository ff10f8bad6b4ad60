//! The default dataset in data/ against the published fixture `../shared/fixtures/api-data`
//! (read at test time): every fact they share is the same.
//!
//! Facts are ids, names, numbers, booleans, reference targets and list order. Prose (effects,
//! flavor texts, descriptions) is ours and is left out. Our data is a connected sample: a list
//! that refers to records must hold exactly the published entries whose references all resolve
//! inside data/, in the published order. Records the fixture does not hold are checked through
//! what the fixture's records say about them (a color's species have that color, an ailment's
//! moves have that ailment, ...).

use crate::common;

use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Differences we keep on purpose: (location as the test prints it, why). Starts empty.
const DELIBERATE: &[(&str, &str)] = &[];

/// Fields that hold prose: ours, in our own words, never compared.
const PROSE: [&str; 4] = ["effect_entries", "effect_changes", "flavor_text_entries", "descriptions"];

/// Resources of the fixture that the default data holds only as samples; it holds every other
/// served resource (`common::RESOURCES`) in full.
const SAMPLED: [&str; 2] = ["ability", "creature-form"];

/// What a fixture record says about records of other resources, and the field of those records
/// that must say the same back: (fixture resource, path in its record, our resource, path in
/// its record). A path is dot-separated keys, `[]` walks a list; it ends at a reference.
const INVERSES: &[(&str, &str, &str, &str)] = &[
    ("ability", "creature[].creature", "creature", "abilities[].ability"),
    ("berry-flavor", "contest_type", "contest-type", "berry_flavor"),
    ("creature-color", "creature_species[]", "creature-species", "color"),
    ("creature-form", "creature", "creature", "forms[]"),
    ("item-attribute", "items[]", "item", "attributes[]"),
    ("move-ailment", "moves[]", "move", "meta.ailment"),
    ("move-category", "moves[]", "move", "meta.category"),
    ("nature", "athlon_stat_changes[].athlon_stat", "athlon-stat", "affecting_natures.increase[].nature"),
    ("nature", "athlon_stat_changes[].athlon_stat", "athlon-stat", "affecting_natures.decrease[].nature"),
    ("region", "main_generation", "generation", "main_region"),
    ("region", "version_groups[]", "version-group", "regions[]"),
    ("super-contest-effect", "moves[]", "move", "super_contest_effect"),
];

/// The published name of one of our segments.
fn published(segment: &str) -> String {
    match segment {
        "athlon-stat" => "pokeathlon-stat".to_string(),
        s if s == "creature" || s.starts_with("creature-") => s.replacen("creature", "pokemon", 1),
        s => s.to_string(),
    }
}

/// A published key or url segment under our neutral name.
fn neutral(word: &str) -> String {
    word.replace("pokeathlon", "athlon").replace("pokemon", "creature")
}

/// A published document with its keys and its urls' segments renamed to ours.
fn neutral_value(value: &Value) -> Value {
    match value {
        Value::String(s) => match s.strip_prefix("/api/v2/").and_then(|rest| rest.split_once('/')) {
            Some((segment, tail)) => Value::String(format!("/api/v2/{}/{tail}", neutral(segment))),
            None => value.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(neutral_value).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (neutral(k), neutral_value(v))).collect()),
        other => other.clone(),
    }
}

/// `/api/v2/<segment>/<id>/` → (segment, id).
fn record_ref(url: &str) -> Option<(String, i64)> {
    let rest = url.strip_prefix("/api/v2/")?.strip_suffix('/')?;
    let (segment, id) = rest.split_once('/')?;
    Some((segment.to_string(), id.parse().ok()?))
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every record of data/: segment → id → record.
type Records = BTreeMap<String, BTreeMap<i64, Value>>;

fn load_data(data: &Path) -> Records {
    let mut records = Records::new();
    for folder in std::fs::read_dir(data).unwrap().map(|e| e.unwrap()).filter(|e| e.path().is_dir()) {
        let segment = folder.file_name().to_string_lossy().to_string();
        let resource = records.entry(segment).or_default();
        for file in std::fs::read_dir(folder.path()).unwrap().map(|e| e.unwrap().path()) {
            let Some(id) = file.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse::<i64>().ok()) else {
                continue;
            };
            if file.extension().is_some_and(|e| e == "json") {
                resource.insert(id, read_json(&file));
            }
        }
    }
    records
}

/// The published fixture's `api/v2`, or `None` with a message when `../shared` is absent (a
/// failure under CI).
fn published_api() -> Option<PathBuf> {
    common::fixture().map(|fixture| fixture.join("api/v2"))
}

/// Compares our data with the fixture, collecting every difference as `location: what`.
struct Comparison<'a> {
    records: &'a Records,
    differences: Vec<String>,
    facts: usize,
}

impl Comparison<'_> {
    fn resolves(&self, value: &Value) -> bool {
        match value {
            Value::String(s) => match record_ref(s) {
                Some((segment, id)) => self.records.get(&segment).is_some_and(|r| r.contains_key(&id)),
                None => true,
            },
            Value::Array(items) => items.iter().all(|v| self.resolves(v)),
            Value::Object(map) => map.values().all(|v| self.resolves(v)),
            _ => true,
        }
    }

    fn differ(&mut self, at: &str, what: String) {
        self.differences.push(format!("{at}: {what}"));
    }

    fn compare(&mut self, at: &str, ours: &Value, theirs: &Value) {
        match (ours, theirs) {
            (Value::Array(ours), Value::Array(theirs)) => {
                let theirs: Vec<&Value> = theirs.iter().filter(|v| self.resolves(v)).collect();
                if ours.len() != theirs.len() {
                    let what = format!("{} entries here, {} published inside the set", ours.len(), theirs.len());
                    return self.differ(at, what);
                }
                for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
                    self.compare(&format!("{at}[{i}]"), a, b);
                }
            }
            (Value::Object(ours), Value::Object(theirs)) => {
                let keys: BTreeSet<&String> = ours.keys().chain(theirs.keys()).collect();
                for key in keys.into_iter().filter(|k| !PROSE.contains(&k.as_str())) {
                    match (ours.get(key), theirs.get(key)) {
                        (Some(a), Some(b)) => self.compare(&format!("{at}.{key}"), a, b),
                        (Some(_), None) => self.differ(&format!("{at}.{key}"), "not published".into()),
                        _ => self.differ(&format!("{at}.{key}"), "published, missing here".into()),
                    }
                }
            }
            _ => {
                self.facts += 1;
                if ours != theirs {
                    self.differ(at, format!("{ours} here, {theirs} published"));
                }
            }
        }
    }

    /// One of our records against its published record: every field we have (prose aside).
    fn compare_record(&mut self, at: &str, ours: &Map<String, Value>, theirs: &Map<String, Value>) {
        for (key, value) in ours.iter().filter(|(k, _)| !PROSE.contains(&k.as_str())) {
            match theirs.get(key) {
                Some(published) => self.compare(&format!("{at}.{key}"), value, published),
                None => self.differ(&format!("{at}.{key}"), "not published".into()),
            }
        }
    }
}

/// The references found at `path` in `value` (see [`INVERSES`]).
fn refs_at(value: &Value, path: &str) -> Vec<(String, i64)> {
    let mut values = vec![value];
    for step in path.split('.') {
        let (key, walk) = step.strip_suffix("[]").map_or((step, false), |k| (k, true));
        values = values.into_iter().filter_map(|v| v.get(key)).collect();
        if walk {
            values = values.into_iter().filter_map(|v| v.as_array()).flatten().collect();
        }
    }
    let url = |v: &Value| v.get("url").and_then(|u| u.as_str()).or(v.as_str()).and_then(record_ref);
    values.into_iter().filter_map(url).collect()
}

/// Our list order: `order.json`, else by id.
fn our_order(data: &Path, segment: &str, records: &Records) -> Vec<i64> {
    let order = data.join(segment).join("order.json");
    if order.is_file() {
        serde_json::from_value(read_json(&order)).unwrap()
    } else {
        records[segment].keys().copied().collect()
    }
}

#[test]
fn default_data_has_the_published_facts() {
    let Some(fixture) = published_api() else { return };
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
    let records = load_data(&data);
    let mut comparison = Comparison { records: &records, differences: Vec::new(), facts: 0 };
    let mut compared = BTreeSet::new();
    let mut published_records: Records = Records::new();

    for (segment, ours) in &records {
        let folder = fixture.join(published(segment));
        if !folder.join("index.json").is_file() {
            continue;
        }
        compared.insert(segment.clone());
        let list = neutral_value(&read_json(&folder.join("index.json")));
        let published_ids: Vec<i64> = list["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|entry| record_ref(entry["url"].as_str().unwrap()).unwrap().1)
            .collect();
        let theirs = published_records.entry(segment.clone()).or_default();
        for id in &published_ids {
            theirs.insert(*id, neutral_value(&read_json(&folder.join(id.to_string()).join("index.json"))));
        }

        for (id, record) in ours {
            let at = format!("{segment}/{id}");
            match theirs.get(id) {
                Some(published) => {
                    comparison.compare_record(&at, record.as_object().unwrap(), published.as_object().unwrap())
                }
                None => comparison.differ(&at, "no such published record".into()),
            }
        }
        // the list order, and the complete resources hold every published record
        let order: Vec<i64> = published_ids.iter().copied().filter(|id| ours.contains_key(id)).collect();
        if our_order(&data, segment, &records) != order {
            comparison.differ(&format!("{segment}/"), format!("list order differs from the published {order:?}"));
        }
        if common::RESOURCES.contains(&segment.as_str()) && !SAMPLED.contains(&segment.as_str()) {
            let missing: Vec<&i64> = published_ids.iter().filter(|id| !ours.contains_key(id)).collect();
            if !missing.is_empty() {
                comparison.differ(&format!("{segment}/"), format!("complete, but lacks published ids {missing:?}"));
            }
        }
    }

    // what the fixture's records say about records it does not hold, said back by ours
    for (fixture_segment, path, target, back) in INVERSES {
        let held = |segment: &str, id: i64| records.get(segment).is_some_and(|r| r.contains_key(&id));
        let mut said = BTreeSet::new();
        for (id, record) in published_records.get(*fixture_segment).into_iter().flatten() {
            if held(fixture_segment, *id) {
                for (segment, to) in refs_at(record, path) {
                    if segment == *target && held(target, to) {
                        said.insert((to, *id));
                    }
                }
            }
        }
        let mut said_back = BTreeSet::new();
        for (id, record) in records.get(*target).into_iter().flatten() {
            for (segment, from) in refs_at(record, back) {
                if segment == *fixture_segment && held(fixture_segment, from) {
                    said_back.insert((*id, from));
                }
            }
        }
        // a nature's change goes to one of two lists: compare only the side that list holds
        if back.starts_with("affecting_natures") {
            let increase = back.contains("increase");
            said.retain(|(to, from)| {
                let change = published_records["nature"][from]["athlon_stat_changes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|c| refs_at(c, "athlon_stat").first().is_some_and(|r| r.1 == *to))
                    .map(|c| c["max_change"].as_i64().unwrap())
                    .unwrap();
                (change > 0) == increase
            });
        }
        for (to, from) in said.difference(&said_back) {
            comparison.differ(
                &format!("{target}/{to}.{back}"),
                format!("published {fixture_segment}/{from}.{path} refers to it, but it does not refer back"),
            );
        }
        for (to, from) in said_back.difference(&said) {
            comparison.differ(
                &format!("{target}/{to}.{back}"),
                format!("refers to {fixture_segment}/{from}, whose published {path} does not list it"),
            );
        }
        comparison.facts += said.len();
    }

    // every published resource of the fixture is in the default data
    let fixture_segments: BTreeSet<String> = read_json(&fixture.join("index.json"))
        .as_object()
        .unwrap()
        .keys()
        .filter(|segment| fixture.join(segment).join("index.json").is_file())
        .map(|segment| neutral(segment))
        .collect();
    assert_eq!(compared, fixture_segments, "resources of the fixture that data/ lacks");

    let mut unexplained = Vec::new();
    let mut used = BTreeSet::new();
    for difference in &comparison.differences {
        match DELIBERATE.iter().find(|(at, _)| difference.starts_with(&format!("{at}:"))) {
            Some((at, _)) => {
                used.insert(*at);
            }
            None => unexplained.push(difference.as_str()),
        }
    }
    let stale: Vec<&str> = DELIBERATE.iter().map(|(at, _)| *at).filter(|at| !used.contains(at)).collect();
    assert!(stale.is_empty(), "deliberate differences that no longer occur: {stale:?}");
    assert!(
        unexplained.is_empty(),
        "{} of {} facts differ from the published fixture (fix data/, or list a deliberate difference with its reason):\n{}",
        unexplained.len(),
        comparison.facts,
        unexplained.iter().take(60).copied().collect::<Vec<_>>().join("\n")
    );
    assert!(comparison.facts > 1000, "only {} facts compared", comparison.facts);
    eprintln!("{} facts of {} resources agree with the fixture", comparison.facts, compared.len());
}
