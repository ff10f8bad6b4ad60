//! The data folder's file grammar, in one place: what a path relative to `data/` is
//! ([`DataPath::parse`]) and the path of each kind of file ([`DataPath::file`]). Walk, the
//! build index, import and the NDJSON layout all read and spell paths through it.

use crate::config::{CONFIG_FILE, ORDER_FILE, is_valid_name, is_valid_segment, parse_id};
use crate::tree::layout::{self, API_PREFIX};

/// The extension of a resource held as one file, a record a line.
pub(crate) const TABLE_EXTENSION: &str = "ndjson";

/// True for names the data walk skips: hidden files and folders (`.git`, an editor's
/// `.1.json.swp`) and backups ending in `~`, as editors and version control leave them.
pub(crate) fn is_ignored(name: &str) -> bool {
    name.starts_with('.') || name.ends_with('~')
}

/// What a file or folder of the data folder is, by its path relative to the data folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DataPath<'a> {
    /// `gen.json`: the settings.
    Settings,
    /// `<segment>/`: a resource's folder.
    ResourceFolder {
        /// The resource.
        segment: &'a str,
    },
    /// `<segment>/<id>.json`: a record.
    Record {
        /// The resource.
        segment: &'a str,
        /// The record's id.
        id: i64,
    },
    /// `<segment>/order.json`: a resource's list order.
    Order {
        /// The resource.
        segment: &'a str,
    },
    /// `<segment>/<id>/`: a record's folder of sub-documents.
    RecordFolder {
        /// The resource.
        segment: &'a str,
        /// The record's id.
        id: i64,
    },
    /// `<segment>/<id>/<name>.json`: a sub-document.
    SubDoc {
        /// The resource.
        segment: &'a str,
        /// The record's id.
        id: i64,
        /// The sub-document's name.
        name: &'a str,
    },
    /// `<segment>.ndjson`: a resource held as one file, a record a line.
    Table {
        /// The resource.
        segment: &'a str,
    },
    /// `<segment>.<name>.ndjson`: the sub-documents `name` of a table's records, one
    /// `{"id": …, "document": …}` a line.
    SubDocTable {
        /// The resource.
        segment: &'a str,
        /// The sub-documents' name.
        name: &'a str,
    },
}

/// Why a path is not one of the data folder's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NotData {
    /// A misplaced or misnamed file or folder: what the place holds.
    Stray(String),
    /// Inside a folder that is itself reported: nothing more to say.
    Inside,
}

impl<'a> DataPath<'a> {
    /// What `rel` (relative to the data folder, `/`-separated) is, a folder when `is_dir`.
    pub(crate) fn parse(rel: &'a str, is_dir: bool) -> Result<DataPath<'a>, NotData> {
        // Up to four parts, on the stack (no path of the data folder has more than three: a
        // fourth stands for all the rest, which every rule reads the same way).
        let mut parts = [""; 4];
        let mut n = 0;
        for part in rel.split('/').take(4) {
            parts[n] = part;
            n += 1;
        }
        match (&parts[..n], is_dir) {
            ([folder], true) if !is_valid_segment(folder) => Err(stray(format!(
                "folder name is not a valid segment: use lower-case letters, digits and '-' (it is the path segment in {API_PREFIX}<segment>/){}",
                layout::reserved_segment(folder).map_or(String::new(), |why| format!("; {why}"))
            ))),
            ([segment], true) => Ok(DataPath::ResourceFolder { segment }),
            ([file], false) if *file == CONFIG_FILE => Ok(DataPath::Settings),
            ([file], false) => parse_table(file),
            ([segment, ..], _) if !is_valid_segment(segment) => Err(NotData::Inside),
            ([segment, file], false) if *file == ORDER_FILE => Ok(DataPath::Order { segment }),
            ([segment, file], false) => match file.strip_suffix(".json").and_then(parse_id) {
                Some(id) => Ok(DataPath::Record { segment, id }),
                None => Err(stray(format!(
                    "stray file: a resource folder holds <id>.json records (e.g. 1.json, -1.json) and an optional {ORDER_FILE}"
                ))),
            },
            ([segment, folder], true) => match parse_id(folder) {
                Some(id) => Ok(DataPath::RecordFolder { segment, id }),
                None => Err(stray(
                    "stray folder: a folder inside a resource holds a record's sub-documents and is named by the record's id",
                )),
            },
            ([_, folder, _], _) if parse_id(folder).is_none() => Err(NotData::Inside),
            ([segment, folder, file], false) => {
                let id = parse_id(folder).expect("checked above");
                match file.strip_suffix(".json").filter(|name| is_valid_name(name)) {
                    Some(name) => Ok(DataPath::SubDoc { segment, id, name }),
                    None => Err(stray(
                        "stray file: a sub-document is <name>.json, the name made of lower-case letters, digits and '-'",
                    )),
                }
            }
            ([_, _, _], true) => Err(stray("stray folder: sub-documents are files, <segment>/<id>/<name>.json")),
            _ => Err(NotData::Inside),
        }
    }

    /// The path of this file or folder, relative to the data folder: [`DataPath::parse`] gives
    /// it back.
    pub(crate) fn file(&self) -> String {
        match *self {
            DataPath::Settings => CONFIG_FILE.to_string(),
            DataPath::ResourceFolder { segment } => segment.to_string(),
            DataPath::Record { segment, id } => format!("{segment}/{id}.json"),
            DataPath::Order { segment } => format!("{segment}/{ORDER_FILE}"),
            DataPath::RecordFolder { segment, id } => format!("{segment}/{id}"),
            DataPath::SubDoc { segment, id, name } => format!("{segment}/{id}/{name}.json"),
            DataPath::Table { segment } => format!("{segment}.{TABLE_EXTENSION}"),
            DataPath::SubDocTable { segment, name } => format!("{segment}.{name}.{TABLE_EXTENSION}"),
        }
    }

    /// True when `rel` is a record file or the order file of `segment`: a file its list's entries
    /// are made of (a table's lines are its records).
    pub(crate) fn is_list_input(rel: &str, segment: &str) -> bool {
        match DataPath::parse(rel, false) {
            Ok(DataPath::Record { segment: s, .. } | DataPath::Order { segment: s }) => s == segment,
            _ => false,
        }
    }

    /// True for a folder.
    #[cfg(test)]
    pub(crate) fn is_folder(&self) -> bool {
        matches!(self, DataPath::ResourceFolder { .. } | DataPath::RecordFolder { .. })
    }
}

fn stray(message: impl Into<String>) -> NotData {
    NotData::Stray(message.into())
}

/// How a stray message names the data folder, which [`DataPath::parse`] does not know: the walk
/// names it ([`NotData::stray_message`]).
const DATA_FOLDER: &str = "the data folder";

impl NotData {
    /// The message of a stray file or folder of the data folder `data`, naming it as messages
    /// name paths (`mydata/`, not a fixed `data/`); `None` inside a folder already reported.
    pub(crate) fn stray_message(self, data: &std::path::Path) -> Option<String> {
        match self {
            NotData::Stray(message) => {
                Some(message.replacen(DATA_FOLDER, &format!("{DATA_FOLDER} {}", crate::fsutil::show_dir(data)), 1))
            }
            NotData::Inside => None,
        }
    }
}

/// A file at the top of the data folder other than `gen.json`: a table, or stray.
fn parse_table(file: &str) -> Result<DataPath<'_>, NotData> {
    let table = file.strip_suffix(".ndjson").map(|stem| stem.split_once('.').unwrap_or((stem, "")));
    match table {
        Some((segment, "")) if is_valid_segment(segment) => Ok(DataPath::Table { segment }),
        Some((segment, name)) if is_valid_segment(segment) && is_valid_name(name) => {
            Ok(DataPath::SubDocTable { segment, name })
        }
        _ => Err(stray(format!(
            "stray file: {DATA_FOLDER} holds {CONFIG_FILE}, one folder per resource, or a resource as \
             <segment>.ndjson (its sub-documents as <segment>.<name>.ndjson)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse_by_their_place_and_file_gives_them_back() {
        let cases: &[(&str, bool, DataPath<'_>)] = &[
            ("gen.json", false, DataPath::Settings),
            ("berry", true, DataPath::ResourceFolder { segment: "berry" }),
            ("berry/1.json", false, DataPath::Record { segment: "berry", id: 1 }),
            ("berry/-1.json", false, DataPath::Record { segment: "berry", id: -1 }),
            ("berry/order.json", false, DataPath::Order { segment: "berry" }),
            ("berry/7", true, DataPath::RecordFolder { segment: "berry", id: 7 }),
            ("berry/7/flavor-text.json", false, DataPath::SubDoc { segment: "berry", id: 7, name: "flavor-text" }),
            ("berry.ndjson", false, DataPath::Table { segment: "berry" }),
            ("berry-firmness.ndjson", false, DataPath::Table { segment: "berry-firmness" }),
            ("berry.flavor.ndjson", false, DataPath::SubDocTable { segment: "berry", name: "flavor" }),
        ];
        for (rel, is_dir, expected) in cases {
            assert_eq!(DataPath::parse(rel, *is_dir).as_ref(), Ok(expected), "{rel}");
            assert_eq!(expected.file(), *rel);
            assert_eq!(expected.is_folder(), *is_dir, "{rel}");
        }
        assert!(
            DataPath::is_list_input("berry/1.json", "berry") && DataPath::is_list_input("berry/order.json", "berry")
        );
        assert!(
            !DataPath::is_list_input("berry/1/flavor.json", "berry")
                && !DataPath::is_list_input("berry-x/1.json", "berry")
        );
    }

    #[test]
    fn misplaced_paths_are_stray_and_paths_under_a_stray_folder_are_not_reported_again() {
        let stray_cases = [
            ("Bad", true),
            ("notes.txt", false),
            ("berry.json", false),
            ("Berry.ndjson", false),
            ("berry.Flavor.ndjson", false),
            ("berry.a.b.ndjson", false),
            ("berry/cheri.json", false),
            ("berry/01.json", false),
            ("berry/cheri", true),
            ("berry/1/Flavor.json", false),
            ("berry/1/flavor", true),
        ];
        for (rel, is_dir) in stray_cases {
            assert!(matches!(DataPath::parse(rel, is_dir), Err(NotData::Stray(_))), "{rel}");
        }
        for (rel, is_dir) in [("Bad/1.json", false), ("berry/cheri/x.json", false), ("berry/1/a/b.json", false)] {
            assert_eq!(DataPath::parse(rel, is_dir), Err(NotData::Inside), "{rel}");
        }
    }
}
