//! The build index: what the tree in `out/` was made from, kept beside it as
//! `.<out>.gen/index` (its state folder, [`state`](crate::build::state)) so that the next build does only the work the change needs.
//!
//! It records, for the tree whose manifest it names (by the manifest file's own stamp):
//! - the settings the tree was built with;
//! - every data file: its stamp (size, modification and change time, inode), its hash and,
//!   for a record, its name;
//! - each list's entries, as one hash per resource;
//! - what rendering saw for the schemas of `openapi.json`;
//! - every document of the tree: its hash, and the stamp its file had when the build left it.
//!
//! The format is binary and compact (docs/builds.md, "The build index"): one fixed-size entry
//! per data file and per document, keyed by resource, record id and sub-document kind; paths
//! are derived from the key, not stored, and names are stored once. It starts with a magic and
//! a version and ends with a BLAKE3 checksum of everything before it: an index of another
//! version, a damaged one or a truncated one is ignored with a one-line note, and the build is
//! then a full one, never a wrong tree.
//!
//! Nothing in it is trusted blindly: a file, of the data or of the tree, is read again unless
//! its stamp is unchanged and it last changed well before the build that recorded it started
//! (see [`Index::trusted`]); it is read only from a regular file, at most [`MAX_INDEX_BYTES`].
//!
//! Its parts, one idea each: [`format`] (the file: magic, version, head, tables, checksum), the
//! two tables, the data files' ([`crate::data::recorded`], the data folder's, whose fixed-size
//! entries, stamps, counted strings and interned keys this file is made of) and the documents'
//! ([`tree_docs`]), [`trust`] (when a stamp may stand for a file's bytes, and the check of a tree
//! against its index), and [`extracts`] (what the extract took from each record, kept in files
//! of their own beside the index, read only by a build that extracts).

mod extract_file;
mod extracts;
mod format;
mod tree_docs;
mod trust;
mod writer;

pub(crate) use extract_file::Kept;
pub(crate) use extracts::{ExtractStore, Summary};
pub(crate) use tree_docs::{DocChanges, DocumentFiles, OtherDoc};
pub(crate) use writer::IndexWriter;

use crate::build::schema::Inferred;
use crate::data::recorded::{DataFiles, FolderNotes, Hash};
use crate::fsutil::Stamp;
use crate::fsutil::{self, NotRead};
use crate::tree::layout::is_tree_path;
use crate::tree::manifest::BuildSettings;
use anyhow::Result;
use format::{decode_docs, decode_parts};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Largest build index read (4 GiB): the index of a tree of a million records is about 200 MB.
/// A larger file is not one gen wrote; it is ignored (and replaced) with a note.
pub(crate) const MAX_INDEX_BYTES: u64 = 4 << 30;

/// One document of the tree: the file at each of its paths (they are hard links of one file,
/// so they share one stamp).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DocumentFile {
    /// BLAKE3 of its bytes, as in the manifest.
    pub(crate) hash: Hash,
    /// The stamp of the file (shared by its hard links).
    pub(crate) stamp: Stamp,
    /// The stamp of its `.gz` sibling, in a tree built with `--gzip`.
    pub(crate) gz: Option<Stamp>,
}

/// The build index of one tree.
#[derive(Debug, Clone)]
pub struct Index {
    /// Stamp of the `manifest.json` this index describes: another manifest means the tree was
    /// changed after the index was written, and the index is ignored.
    pub(crate) manifest: Stamp,
    /// When the build that wrote the index started (nanoseconds since the epoch).
    pub started_ns: i64,
    /// The settings the tree was built with.
    pub(crate) settings: BuildSettings,
    /// Hash of each resource's list entries (ids and names, in list order).
    pub(crate) lists: BTreeMap<String, String>,
    /// What rendering saw, for the schemas: (segment, sub-document kind, inference).
    pub(crate) schemas: Vec<(String, Option<String>, Inferred)>,
    /// Every data file.
    pub data: DataFiles,
    /// What the listing of the data folder noted of its folders, for the next build's listing.
    /// `None` when not known (an index of an older gen, a data folder walked): the next build
    /// then reads every folder (see `listing`).
    pub(crate) folders: Option<FolderNotes>,
    /// The checksum line of the bulk-data files' member table this build left beside the tree
    /// (`bulk::members::Table::recorded`): the next build trusts that table, and no other.
    pub(crate) member_table: Option<String>,
    /// Every document of the tree (the manifest excepted).
    pub(crate) docs: DocumentFiles,
}

impl Index {
    /// Where the index of the tree in `out` is kept: in its state folder beside it, so that
    /// nothing of it is published.
    pub(crate) fn path(out: &Path) -> PathBuf {
        crate::build::state::file(out, crate::build::state::INDEX)
    }

    /// Reads the index of the tree in `out`, if there is one that describes its current
    /// manifest. An index that is not a regular file, is larger than [`MAX_INDEX_BYTES`], is of
    /// another version, fails its checksum or lists a path no build writes is ignored with a
    /// one-line note (the build is then a full one).
    pub fn read(out: &Path) -> Option<Index> {
        // the documents' table decoded in the same pass as the checksum
        Index::read_parts(out, true).map(|(index, _)| index)
    }

    /// Reads the index of the tree in `out` as [`Index::read`] does (its checksum checked
    /// whole), all but its documents' table, which is read when the build needs it
    /// ([`DeferredDocs::read`]): a build holds it and the data table at once only if it must.
    pub(crate) fn read_deferred(out: &Path) -> Option<(Index, DeferredDocs)> {
        Index::read_parts(out, false)
    }

    /// The index of the tree in `out` (its documents' table decoded when `docs`, else left for
    /// the [`DeferredDocs`] returned), or `None` with a note saying why it is not used.
    fn read_parts(out: &Path, docs: bool) -> Option<(Index, DeferredDocs)> {
        let path = Index::path(out);
        let file = match fsutil::open_regular_file(&path, MAX_INDEX_BYTES, false) {
            Ok(file) => file,
            Err(NotRead::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => return ignored(fsutil::why_not_read(&path, MAX_INDEX_BYTES, &e)),
        };
        let size = file.metadata().map_or(0, |m| m.len());
        let decoded = decode_parts((&file).take(MAX_INDEX_BYTES), size, docs);
        let checked = decoded.and_then(|(index, at)| check_listed_paths(&index.docs).map(|()| (index, at)));
        let (index, at) = match checked {
            Ok(read) => read,
            Err(why) => return ignored(format!("{} {why}", path.display())),
        };
        let manifest = Stamp::of_file(&super::state::commit_file(out))?;
        (index.manifest == manifest).then_some((index, DeferredDocs { file, at, size, path }))
    }

    /// Writes the index of the tree in `out` (in its state folder, then renamed into place).
    pub fn write(&self, out: &Path) -> Result<()> {
        IndexWriter::begin(out, &self.data)?.finish(self)
    }
}

/// The documents' table of an index read without it (its checksum checked already): the file
/// stays open (a build replaces the index by renaming a new one into place, never by writing
/// into it), and the table is decoded when asked for.
#[derive(Debug)]
pub(crate) struct DeferredDocs {
    file: std::fs::File,
    at: u64,
    size: u64,
    path: PathBuf,
}

impl DeferredDocs {
    /// The documents' table, or `None` with a note saying why it cannot be used (it does not
    /// add up, or lists a path no build writes).
    /// It may be read again (after the first table is let go).
    pub(crate) fn read(&self) -> Option<DocumentFiles> {
        use std::io::{Seek, SeekFrom};
        let mut file = &self.file;
        let read = file.seek(SeekFrom::Start(self.at)).map_err(|e| e.to_string());
        let docs = read.and_then(|_| decode_docs(file, self.at, self.size));
        match docs.and_then(|docs| check_listed_paths(&docs).map(|()| docs)) {
            Ok(docs) => Some(docs),
            Err(why) => ignored(format!("{} {why}", self.path.display())),
        }
    }
}

/// Says why the build index is not used (the build is then a full one); `None`.
fn ignored<T>(why: String) -> Option<T> {
    say!("note: {why}: ignoring the build index; this build checks every file and writes a new index");
    None
}

/// Checks that every path listed for the documents that are not records' is a path of a gen
/// tree (a build removes the files the index lists).
fn check_listed_paths(docs: &DocumentFiles) -> Result<(), String> {
    match docs.other.iter().flat_map(|doc| &doc.paths).find(|path| !is_tree_path(path)) {
        Some(bad) => Err(format!("lists {bad:?}, which is not a path of a gen tree")),
        None => Ok(()),
    }
}

/// The `.gz` sibling of a file of the tree.
pub(crate) fn gz_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".gz");
    PathBuf::from(name)
}

/// Nanoseconds since the epoch, now.
pub fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::recorded::{DataFile, Place};
    use crate::tree::layout;
    use format::decode;

    fn stamp(n: u64) -> Stamp {
        Stamp { size: n, mtime_ns: n as i64, ctime_ns: n as i64 + 1, ino: n + 2 }
    }

    fn sample() -> Index {
        let mut data = DataFiles::default();
        let file = |n: u64, name: Option<&str>| DataFile {
            stamp: stamp(n),
            hash: Hash(blake3::hash(&n.to_le_bytes())),
            name: name.map(str::to_string),
            line: None,
        };
        data.insert("berry/2.json", file(2, Some("oran")));
        data.insert("berry/1.json", file(1, Some("cheri")));
        data.insert("berry/1/flavor.json", file(3, None));
        data.insert("gen.json", file(4, None));
        data.finish();
        let mut docs = DocumentFiles::default();
        let tree = |n: u64| DocumentFile { hash: Hash(blake3::hash(&n.to_le_bytes())), stamp: stamp(n), gz: None };
        docs.push_keyed(&Place { segment: "berry", kind: None, id: 2 }, Some("oran"), tree(5));
        docs.push_keyed(&Place { segment: "berry", kind: Some("flavor"), id: 1 }, Some("cheri"), tree(6));
        docs.push_other(vec![layout::ROOT_PATH.to_string()], tree(7));
        docs.finish();
        let settings = crate::build::BuildOptions::default()
            .settings(&crate::config::DataSettings::default(), "d".into())
            .expect("default settings");
        Index {
            manifest: stamp(9),
            started_ns: 10,
            settings,
            lists: BTreeMap::new(),
            schemas: Vec::new(),
            data,
            folders: Some(FolderNotes {
                hollow: vec!["berry/9".to_string()],
                resources: BTreeMap::from([("berry".to_string(), (1, 2))]),
            }),
            member_table: Some("blake3:00".to_string()),
            docs,
        }
    }

    fn bytes(index: &Index) -> Vec<u8> {
        let mut out = crate::data::recorded::codec::Checksummed::new(Vec::new());
        Index::encode_data(&index.data, &mut out).unwrap();
        index.encode_rest(&mut out).unwrap();
        let (mut bytes, sum) = out.finish();
        bytes.extend_from_slice(sum.as_bytes());
        bytes
    }

    #[test]
    fn an_index_reads_back_as_written() {
        let index = sample();
        let written = bytes(&index);
        let read = decode(&written[..], written.len() as u64).unwrap();
        assert_eq!(read.data.iter().collect::<Vec<_>>(), index.data.iter().collect::<Vec<_>>());
        assert_eq!(read.docs.paths().collect::<Vec<_>>(), index.docs.paths().collect::<Vec<_>>());
        assert_eq!(read.data.get("berry/1.json").unwrap().name.as_deref(), Some("cheri"));
        let flavor = read.docs.file("api/v2/berry/cheri/flavor/index.json").unwrap();
        assert_eq!(flavor.stamp, stamp(6));
        assert_eq!(read.docs.file("api/v2/berry/1/flavor/index.json"), Some(flavor));
        assert_eq!(
            read.docs.keyed(&Place { segment: "berry", kind: None, id: 2 }, Some("oran")).unwrap().stamp,
            stamp(5)
        );
        assert_eq!(read.docs.keyed(&Place { segment: "berry", kind: None, id: 2 }, Some("other")), None);
        assert_eq!(bytes(&read), written, "the same index gives the same bytes");
    }

    #[test]
    fn a_damaged_cut_or_other_version_index_is_refused() {
        let written = bytes(&sample());
        for at in [0, 9, 20, written.len() / 2, written.len() - 1] {
            let mut damaged = written.clone();
            damaged[at] ^= 0x40;
            assert!(decode(&damaged[..], damaged.len() as u64).is_err(), "a flipped byte at {at} is caught");
        }
        for cut in [4, 12, written.len() / 2, written.len() - 1] {
            assert!(decode(&written[..cut], cut as u64).is_err(), "cut at {cut}");
        }
        let mut other = written.clone();
        other[8..12].copy_from_slice(&2u32.to_le_bytes());
        assert!(decode(&other[..], other.len() as u64).unwrap_err().contains("format 2"));
        let json = br#"{"format":2,"files":{}}"#;
        assert!(decode(&json[..], json.len() as u64).unwrap_err().contains("not a build index of this version"));
    }
}
