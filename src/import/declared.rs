//! The filters `gen import api-data` declares: those the default data (`data/gen.json`, built
//! into gen) declares, for each imported resource whose records reach a value at the filter's
//! path, so that `?type=fire`-style filters work on the imported data as on the default data.
//!
//! A filter is declared only where a build can write it (docs/data.md, `filters`): some record
//! reaches a value at its path, it takes at most `max_filter_values` (the default) values, and
//! every value fits a folder name. A resource keeps the form the default data gives its filters
//! (names with paths, or paths). With `--keep-segment-names` the published segment (`pokemon`)
//! gets the filters of its neutral name (`creature`).

use crate::config::{DEFAULT_MAX_FILTER_VALUES, FilterDeclaration, MAX_NAME_BYTES};
use crate::filters::{FieldPath, FilterField, folder_name};
use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

/// The default data's settings, whose `filters` an import declares.
const DEFAULT_SETTINGS: &str = include_str!("../../data/gen.json");

/// The default data's filters, by (neutral) segment.
fn default_filters() -> BTreeMap<String, FilterDeclaration> {
    let value: serde_json::Value = serde_json::from_str(DEFAULT_SETTINGS).expect("data/gen.json is JSON");
    crate::config::parse(value).expect("data/gen.json is valid settings (a unit test checks it)").filters
}

/// What one candidate filter's values were across the records read so far.
#[derive(Default)]
struct Tally {
    values: HashSet<String>,
    /// A value too long for a folder name, or more values than a build takes.
    unusable: bool,
}

/// The candidate filters of the imported resources, and the values their records reach.
pub(super) struct Declared {
    /// By imported folder: its default declaration and each field's parsed path.
    candidates: BTreeMap<String, (FilterDeclaration, Vec<(FilterField, FieldPath)>)>,
    /// By (folder, filter name).
    tallies: Mutex<BTreeMap<(String, String), Tally>>,
}

impl Declared {
    /// The candidates for the imported `folders` (published segment names, or neutral ones: both
    /// are looked up by the neutral name).
    pub(super) fn new<'a>(folders: impl IntoIterator<Item = &'a str>) -> Declared {
        let defaults = default_filters();
        let mut candidates = BTreeMap::new();
        for folder in folders {
            let Some(declaration) = defaults.get(super::rename_segment(folder, false)) else { continue };
            let fields = declaration
                .fields()
                .into_iter()
                .filter_map(|field| FieldPath::parse(&field.path).ok().map(|path| (field, path)))
                .collect();
            candidates.insert(folder.to_string(), (declaration.clone(), fields));
        }
        Declared { candidates, tallies: Mutex::default() }
    }

    /// Notes the values the record `bytes` (JSON, as written) of `folder` reaches at each
    /// candidate path.
    pub(super) fn note(&self, folder: &str, bytes: &[u8]) {
        let Some((_, fields)) = self.candidates.get(folder) else { return };
        let Ok(tape) = crate::json::tape::Tape::parse(bytes) else { return };
        let reached: Vec<(String, Vec<String>)> =
            fields.iter().map(|(field, path)| (field.name.clone(), path.values(tape.root()))).collect();
        let mut tallies = self.tallies.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (name, values) in reached {
            let tally = tallies.entry((folder.to_string(), name)).or_default();
            for value in values {
                if tally.unusable {
                    break;
                }
                if folder_name(&value).len() > MAX_NAME_BYTES {
                    tally.unusable = true;
                }
                tally.values.insert(value);
                tally.unusable |= tally.values.len() > DEFAULT_MAX_FILTER_VALUES;
            }
        }
    }

    /// The filters to declare, by folder, in the default data's form: the candidates some record
    /// reaches a value of, within the bounds of a build.
    pub(super) fn finish(self) -> BTreeMap<String, FilterDeclaration> {
        let tallies = self.tallies.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        let usable = |folder: &str, name: &str| {
            tallies
                .get(&(folder.to_string(), name.to_string()))
                .is_some_and(|tally| !tally.unusable && !tally.values.is_empty())
        };
        let mut declared = BTreeMap::new();
        for (folder, (declaration, fields)) in self.candidates {
            let kept: Vec<&FilterField> = fields.iter().map(|(f, _)| f).filter(|f| usable(&folder, &f.name)).collect();
            if kept.is_empty() {
                continue;
            }
            let declaration = match declaration {
                FilterDeclaration::Paths(_) => FilterDeclaration::Paths(kept.iter().map(|f| f.path.clone()).collect()),
                FilterDeclaration::Named(_) => {
                    FilterDeclaration::Named(kept.iter().map(|f| (f.name.clone(), f.path.clone())).collect())
                }
            };
            declared.insert(folder, declaration);
        }
        declared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_data_declares_filters_an_import_can_take() {
        let defaults = default_filters();
        assert!(defaults.contains_key("creature") && defaults.contains_key("berry"), "{defaults:?}");
        for (segment, declaration) in &defaults {
            for field in declaration.fields() {
                assert!(FieldPath::parse(&field.path).is_ok(), "{segment}: {}", field.path);
            }
        }
    }

    #[test]
    fn only_paths_some_record_reaches_are_declared_in_the_default_form() {
        let declared = Declared::new(["pokemon", "move", "region"]);
        declared.note("pokemon", br#"{"id": 1, "types": [{"type": {"name": "fire"}}], "is_default": true}"#);
        declared.note("move", br#"{"id": 1, "type": {"name": "fire"}, "generation": null}"#);
        declared.note("region", br#"{"id": 1, "name": "kanto"}"#);
        let found = declared.finish();
        let creature = &default_filters()["creature"];
        assert_eq!(found["pokemon"], *creature, "every field reached: the default declaration");
        let FilterDeclaration::Named(move_filters) = &found["move"] else { panic!("{found:?}") };
        assert_eq!(move_filters.keys().collect::<Vec<_>>(), ["type"], "generation reaches no value");
        assert!(!found.contains_key("region"), "no default filters");
        let long = Declared::new(["berry"]);
        let name = "x".repeat(300);
        long.note(
            "berry",
            format!(r#"{{"firmness": {{"name": "{name}"}}, "natural_gift_type": {{"name": "fire"}}}}"#).as_bytes(),
        );
        let FilterDeclaration::Named(berry) = &long.finish()["berry"] else { panic!() };
        assert_eq!(berry.keys().collect::<Vec<_>>(), ["gift-type"], "a value too long for a folder name");
    }
}
