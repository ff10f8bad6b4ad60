//! The data folder's walk: every file classified by its place (a record, an order file, a
//! sub-document), anything else reported as a problem.

use super::data_path::{DataPath, is_ignored};
use crate::fsutil;
use crate::problem::Problem;
use std::path::{Path, PathBuf};

/// What a file in the data folder is, by its place.
pub(crate) enum Entry {
    Record { segment: String, id: i64, file: PathBuf },
    Order { segment: String, file: PathBuf },
    SubDoc { segment: String, id: i64, name: String, file: PathBuf },
}

/// What the walk found besides the files of resource folders: the folders and the tables.
#[derive(Debug, Default)]
pub(crate) struct Tables {
    /// Segments held as a folder (`<segment>/`).
    pub(crate) folders: Vec<String>,
    /// Resources held as one file, a record a line (`<segment>.ndjson`): (segment, file).
    pub(crate) records: Vec<(String, PathBuf)>,
    /// Sub-documents of a table's records (`<segment>.<name>.ndjson`): (segment, name, file).
    pub(crate) subdocs: Vec<(String, String, PathBuf)>,
}

/// One thing the walk found.
enum Found {
    Entry(Entry),
    Folder(String),
    Table(String, PathBuf),
    SubDocTable(String, String, PathBuf),
}

/// Walks the data folder and classifies every file by its place; anything else is a problem.
/// Entries come in the order the file system lists them (not sorted: a folder of a million
/// records would take a second to sort, and every later step sorts what it needs).
pub(crate) fn walk(dir: &Path, problems: &mut Vec<Problem>, tables: &mut Tables) -> Vec<Entry> {
    let mut entries = Vec::new();
    let walker = walkdir::WalkDir::new(dir)
        .min_depth(1)
        .max_depth(3)
        .follow_links(true)
        .into_iter()
        .filter_entry(|entry| entry.depth() == 0 || !is_ignored(&entry.file_name().to_string_lossy()));
    for item in walker {
        let item = match item {
            Ok(item) => item,
            Err(e) => {
                let path = e.path().unwrap_or(dir).to_path_buf();
                problems.push(Problem::new(&path, "-", format!("cannot read: {}", io_message(&e))));
                continue;
            }
        };
        match classify(dir, &item) {
            Ok(Some(Found::Entry(entry))) => entries.push(entry),
            Ok(Some(Found::Folder(segment))) => tables.folders.push(segment),
            Ok(Some(Found::Table(segment, file))) => tables.records.push((segment, file)),
            Ok(Some(Found::SubDocTable(segment, name, file))) => tables.subdocs.push((segment, name, file)),
            Ok(None) => {}
            Err(problem) => problems.push(problem),
        }
    }
    entries
}

/// What a file or folder of the data folder is, by its place ([`DataPath`]): an entry to load,
/// nothing to load (the settings, a resource's folder, a record's folder), or a problem.
fn classify(dir: &Path, item: &walkdir::DirEntry) -> Result<Option<Found>, Problem> {
    let path = item.path().to_path_buf();
    let rel = fsutil::relative(dir, &path);
    let file = path.clone();
    match DataPath::parse(&rel, item.file_type().is_dir()) {
        Ok(DataPath::Record { segment, id }) => {
            Ok(Some(Found::Entry(Entry::Record { segment: segment.to_string(), id, file })))
        }
        Ok(DataPath::Order { segment }) => Ok(Some(Found::Entry(Entry::Order { segment: segment.to_string(), file }))),
        Ok(DataPath::SubDoc { segment, id, name }) => {
            Ok(Some(Found::Entry(Entry::SubDoc { segment: segment.to_string(), id, name: name.to_string(), file })))
        }
        Ok(DataPath::ResourceFolder { segment }) => Ok(Some(Found::Folder(segment.to_string()))),
        Ok(DataPath::Table { segment }) => Ok(Some(Found::Table(segment.to_string(), file))),
        Ok(DataPath::SubDocTable { segment, name }) => {
            Ok(Some(Found::SubDocTable(segment.to_string(), name.to_string(), file)))
        }
        Ok(_) => Ok(None),
        Err(not_data) => match not_data.stray_message(dir) {
            Some(message) => Err(Problem::new(&path, "-", message)),
            None => Ok(None),
        },
    }
}

pub(crate) fn io_message(e: &walkdir::Error) -> String {
    if e.loop_ancestor().is_some() {
        return "symbolic link loop".to_string();
    }
    e.io_error().map(|e| e.to_string()).unwrap_or_else(|| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_classified_by_their_place() {
        let dir = std::env::temp_dir().join(format!("gen-walk-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for file in [
            "gen.json",
            "berry/1.json",
            "berry/-1.json",
            "berry/order.json",
            "berry/1/flavor.json",
            "notes.txt",
            "berry/cheri.json",
            "Bad/1.json",
            "nut.ndjson",
            "nut.shell.ndjson",
            "nut.json",
        ] {
            let path = dir.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "{}").unwrap();
        }
        let mut problems = Vec::new();
        let mut tables = Tables::default();
        let entries = walk(&dir, &mut problems, &mut tables);
        let _ = std::fs::remove_dir_all(&dir);
        let mut found: Vec<String> = entries
            .iter()
            .map(|entry| match entry {
                Entry::Record { segment, id, .. } => format!("record {segment} {id}"),
                Entry::Order { segment, .. } => format!("order {segment}"),
                Entry::SubDoc { segment, id, name, .. } => format!("sub {segment} {id} {name}"),
            })
            .chain(tables.folders.iter().map(|segment| format!("folder {segment}")))
            .chain(tables.records.iter().map(|(segment, _)| format!("table {segment}")))
            .chain(tables.subdocs.iter().map(|(segment, name, _)| format!("table {segment} {name}")))
            .collect();
        found.sort();
        assert_eq!(
            found,
            [
                "folder berry",
                "order berry",
                "record berry -1",
                "record berry 1",
                "sub berry 1 flavor",
                "table nut",
                "table nut shell"
            ]
        );
        let mut reported: Vec<String> =
            problems.iter().map(|p| p.path.strip_prefix(&dir).unwrap().display().to_string()).collect();
        reported.sort();
        assert_eq!(reported, ["Bad", "berry/cheri.json", "notes.txt", "nut.json"]);
    }
}
