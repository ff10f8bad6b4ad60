//! The members of a bulk-data file (docs/tree.md, "Bulk data"): a file is a series of gzip
//! members (RFC 1952 §2.2), each a run of consecutive records in list order, so that an edit
//! recompresses only the member of the record it changed and copies the others' bytes.
//!
//! Where a member ends depends on its records alone, never on history: after a record whose
//! hash, read as a number, falls below its size in a [`target_bytes`] range (a record of
//! `size` bytes ends one with probability `size / target`). So a fresh build and an
//! incremental one cut the same members, and an insert or a delete moves no other cut.
//!
//! The next build finds each file's members in the member table, kept beside the tree (or the
//! archive: `gen build --archive` keeps the same table) as `.<out>.gen/bulk` (never published): per file, the BLAKE3 of its bytes, and per member its
//! key (a hash of its records' hashes), its records, its byte offset and its length. The table
//! is JSON stating its format and the gen that wrote it, followed by the BLAKE3 of those bytes:
//! a table of another format or gen, damaged or cut short is ignored with a note (every file is
//! then written whole). A member is copied only from a file whose bytes hash to what the table
//! says, and only once what it holds is checked against its key (`build/write/bulk_members.rs`).

use crate::GENERATOR;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The uncompressed bytes a member holds on average: 2 MiB, about 130-200 KB of gzip on the
/// published data's shapes (a compression ratio of 10 to 16 at level 1).
pub(crate) const TARGET_BYTES: u64 = 2 << 20;

/// Largest member table read: a table of a million records' files is well under 1 MB.
const MAX_TABLE_BYTES: u64 = 64 << 20;

/// The average member's uncompressed bytes: [`TARGET_BYTES`], or `GEN_BULK_MEMBER_BYTES` when
/// set (tests cut small data into several members with it).
pub(crate) fn target_bytes() -> u64 {
    static TARGET: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TARGET.get_or_init(|| {
        let set = std::env::var("GEN_BULK_MEMBER_BYTES").ok().and_then(|v| v.parse().ok());
        set.filter(|&bytes| bytes > 0).unwrap_or(TARGET_BYTES)
    })
}

/// True when a member ends after a record whose document hashes to `hash` and is `size` bytes
/// long (see the module's doc): a function of the record alone.
pub(crate) fn ends_member(hash: &blake3::Hash, size: u64) -> bool {
    let bytes: [u8; 8] = hash.as_bytes()[..8].try_into().expect("8 bytes");
    u64::from_le_bytes(bytes) % target_bytes() < size
}

/// The key of a member: a hash of the hashes of its record documents, in order, and of the way
/// they become lines (`pretty` documents are made compact).
pub(crate) fn member_key<'h>(pretty: bool, hashes: impl Iterator<Item = &'h blake3::Hash>) -> String {
    let mut hasher = blake3::Hasher::new();
    hasher.update(&[u8::from(pretty)]);
    for hash in hashes {
        hasher.update(hash.as_bytes());
    }
    hasher.finalize().to_hex().to_string()
}

/// One gzip member of a bulk-data file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Member {
    /// Its key (see [`member_key`]).
    pub(crate) key: String,
    /// Records it holds: one line each.
    pub(crate) records: u64,
    /// Where its bytes start in the file.
    pub(crate) offset: u64,
    /// Its bytes (compressed).
    pub(crate) length: u64,
}

/// The members of one bulk-data file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileMembers {
    /// BLAKE3 (hex) of the file's bytes.
    pub(crate) blake3: String,
    /// Its members, in order.
    pub(crate) members: Vec<Member>,
}

/// The member table: each bulk-data file's members, by tree path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Table {
    /// Files by tree path.
    pub(crate) files: BTreeMap<String, FileMembers>,
}

impl Table {
    /// The member table kept at `path` (in the build's state folder beside the tree, never
    /// published), when it is the one the build index `recorded` ([`Table::recorded`] when the
    /// index was written): empty when there is none, or when it cannot be used (then with a
    /// note saying why), and the files are then written whole. A table bound to the index so is
    /// trusted as the index is: its members are copied without being read (a table changed
    /// after, even one made to agree with its own checksum, is not the one recorded).
    pub(crate) fn read(path: &Path, recorded: Option<&str>) -> Table {
        let decoded = Table::load(path).and_then(|loaded| match (loaded, recorded) {
            (None, _) => Ok(Table::default()),
            (Some((table, sum)), Some(recorded)) if recorded == sum => Ok(table),
            (Some(_), Some(_)) => Err(format!("{} is not the one the build index recorded", path.display())),
            (Some(_), None) => Err(format!("the build index records no member table beside {}", path.display())),
        });
        match decoded {
            Ok(table) => table,
            Err(why) => {
                say!("note: {why}: ignoring the member table; this build writes every bulk-data file whole");
                Table::default()
            }
        }
    }

    /// The checksum line of the member table at `path` (what the build index records of it),
    /// when there is one gen can use.
    pub(crate) fn recorded(path: &Path) -> Option<String> {
        Table::load(path).ok().flatten().map(|(_, sum)| sum)
    }

    /// The table at `path` and its checksum line: `None` when there is none, `Err` with why
    /// when it cannot be read or used.
    fn load(path: &Path) -> Result<Option<(Table, String)>, String> {
        // Opened without waiting (a FIFO there is not a table) or following a link.
        let why_not = |e: &crate::fsutil::NotRead| crate::fsutil::why_not_read(path, MAX_TABLE_BYTES, e);
        let bytes = match crate::fsutil::open_regular_file(path, MAX_TABLE_BYTES, true) {
            Err(crate::fsutil::NotRead::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(why_not(&e)),
            Ok(file) => crate::fsutil::read_bounded(file, MAX_TABLE_BYTES).map_err(|e| why_not(&e))?,
        };
        Table::decode(&bytes).map(Some).map_err(|why| format!("{} {why}", path.display()))
    }

    /// The table a member table file's `bytes` hold: `Err` with why for another format, another
    /// gen, or bytes that do not match their checksum; with its checksum line.
    fn decode(bytes: &[u8]) -> Result<(Table, String), String> {
        let damaged = || "is damaged, cut short or of an older gen (it does not end with its checksum)".to_string();
        let body = bytes.strip_suffix(b"\n").ok_or_else(damaged)?;
        let at = body.iter().rposition(|b| *b == b'\n').ok_or_else(damaged)?;
        let (json, sum) = (&body[..at], &body[at + 1..]);
        if sum != checksum(json).as_bytes() {
            return Err(damaged());
        }
        let stored: Stored = serde_json::from_slice(json).map_err(|_| damaged())?;
        if stored.format != FORMAT || stored.generator != GENERATOR {
            return Err(format!(
                "was written by {} (format {}), not by this {GENERATOR} (format {FORMAT})",
                stored.generator, stored.format
            ));
        }
        Ok((stored.table, String::from_utf8_lossy(sum).into_owned()))
    }

    /// The bytes of the table's file: JSON stating the format and this gen, a newline, the
    /// checksum line (`blake3:` and the hex BLAKE3 of the JSON).
    fn encode(&self) -> Vec<u8> {
        let stored = Stored { format: FORMAT, generator: GENERATOR.to_string(), table: self.clone() };
        let mut bytes = serde_json::to_vec(&stored).expect("the member table serialises");
        let sum = checksum(&bytes);
        bytes.push(b'\n');
        bytes.extend_from_slice(sum.as_bytes());
        bytes.push(b'\n');
        bytes
    }

    /// Writes the table at `path`, through `temporary` (a file of the same folder, which must
    /// exist) renamed into place.
    pub(crate) fn write(&self, path: &Path, temporary: &Path) -> Result<()> {
        // Created anew: a link left at the temporary name is removed, never written through.
        crate::fsutil::write_new(temporary, &self.encode())?;
        crate::fsutil::rename(temporary, path)
    }
}

/// Version of the member table's file; another is ignored. 2: JSON stating the format and the
/// gen that wrote it, then a checksum line (1 was the bare JSON table, with neither).
const FORMAT: u32 = 2;

/// A member table's file as stored: the table, and what wrote it.
#[derive(Serialize, Deserialize)]
struct Stored {
    format: u32,
    generator: String,
    #[serde(flatten)]
    table: Table,
}

/// The checksum line of a member table's JSON `bytes`.
fn checksum(bytes: &[u8]) -> String {
    format!("blake3:{}", blake3::hash(bytes).to_hex())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_depends_on_the_record_alone_and_comes_about_every_target_bytes() {
        let hashes: Vec<blake3::Hash> = (0..20_000u32).map(|n| blake3::hash(&n.to_le_bytes())).collect();
        let cuts = hashes.iter().filter(|hash| ends_member(hash, 1000)).count();
        let expected = 20_000 * 1000 / target_bytes() as usize;
        assert!(cuts > expected / 2 && cuts < expected * 2, "{cuts} cuts, about {expected} expected");
        assert!(hashes.iter().all(|hash| ends_member(hash, target_bytes())), "a record of the target ends one");
    }
}
