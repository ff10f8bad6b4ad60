//! The build index's bytes on disk (docs/builds.md, "The build index"): a magic and a version,
//! a small JSON head, the two tables of fixed-size entries, and a BLAKE3 checksum of everything
//! before it. Decoding refuses, with a one-line reason, a file of another version, a damaged or
//! cut one, and one whose entries do not add up; it never panics on what it reads.

use super::{DocumentFiles, Index};
use crate::build::schema::Inferred;
use crate::data::recorded::codec::{Checksummed, Decoder, damaged, put_bytes};
use crate::data::recorded::{DataFiles, FolderNotes};
use crate::fsutil::Stamp;
use crate::tree::manifest::{BuildSettings, GENERATOR};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Write};

/// Version of the index's format; another version is ignored (the next build is a full one).
/// 7: the data table ends with each table's line groups' hashes (src/data/table/lines.rs).
/// 6: the head names the gen that wrote the index (an index another gen wrote is ignored), and
/// the lines of sub-document tables it records were checked by the one reader of the data
/// (json/reader.rs); a 5 recorded them read by serde_json's own (numbers rewritten, keys twice
/// kept, the number mark read), which a rebuild must not trust. 5: the data table first (written as soon as the build no longer needs it), the head, then the
/// documents' table last (read only once the build needs it). 4: a table's hash is made of its
/// lines' hashes and line ends, not of its bytes (the same table had another hash in 3). 3:
/// binary, one fixed-size entry per data file and per document (2 was JSON, one entry per path
/// of the tree). From 5 on, the manifest an index names is sorted (one an older index names may
/// list a resource's pages out of order, and the manifest's patch reads only a few of its
/// lines: src/build/write/patch.rs).
pub(crate) const FORMAT: u32 = 7;

/// The first bytes of an index file.
pub(super) const MAGIC: &[u8; 8] = b"genindex";

/// The small part of the index, stored as JSON inside the binary file.
#[derive(Serialize, Deserialize)]
pub(super) struct Head {
    /// The gen that wrote the index ([`GENERATOR`]): an index another gen wrote is not used.
    pub(super) generator: String,
    pub(super) manifest: Stamp,
    pub(super) started_ns: i64,
    pub(super) settings: BuildSettings,
    pub(super) lists: BTreeMap<String, String>,
    pub(super) schemas: Vec<(String, Option<String>, Inferred)>,
    /// Absent from the head of an index written before gen listed folders.
    #[serde(default)]
    pub(super) folders: Option<FolderNotes>,
    /// Absent from the head of an index written before gen bound the member table to it.
    #[serde(default)]
    pub(super) member_table: Option<String>,
}

impl Index {
    /// The first part of the index's bytes: magic, version and the data table of `data`.
    pub(super) fn encode_data(data: &DataFiles, out: &mut impl Write) -> std::io::Result<()> {
        out.write_all(MAGIC)?;
        out.write_all(&FORMAT.to_le_bytes())?;
        data.encode(out)
    }

    /// The rest of the index's bytes (the checksum aside): the head, then the documents' table.
    pub(super) fn encode_rest(&self, out: &mut impl Write) -> std::io::Result<()> {
        let head = Head {
            generator: GENERATOR.to_string(),
            manifest: self.manifest,
            started_ns: self.started_ns,
            settings: self.settings.clone(),
            lists: self.lists.clone(),
            schemas: self.schemas.clone(),
            folders: self.folders.clone(),
            member_table: self.member_table.clone(),
        };
        put_bytes(out, &serde_json::to_vec(&head).map_err(std::io::Error::other)?)?;
        self.docs.encode(out)
    }
}

/// Decodes an index file whole (see [`decode_parts`]).
#[cfg(test)]
pub(super) fn decode(reader: impl Read, size: u64) -> Result<Index, String> {
    decode_parts(reader, size, true).map(|(index, _)| index)
}

/// Decodes an index file: magic, version, the data files, the head, the documents (when `docs`;
/// else they are only checksummed, and left empty), and the checksum of all that at the end.
/// The checksum is taken of large blocks as they are read (a hash fed entry by entry costs more
/// than the decoding). Also gives where the documents' table starts.
pub(super) fn decode_parts(reader: impl Read, size: u64, docs: bool) -> Result<(Index, u64), String> {
    let not_index = || {
        "is not a build index of this version of gen (a JSON index of an earlier version, or another file)".to_string()
    };
    let body = size.checked_sub(32).ok_or_else(not_index)?;
    let checksummed = Checksummed::new(reader.take(body));
    let mut input = Decoder { inner: std::io::BufReader::with_capacity(1 << 20, checksummed), left: body };
    let mut magic = [0u8; 8];
    let read = input.exact(&mut magic);
    if read.is_err() || &magic != MAGIC {
        return Err(not_index());
    }
    let format = u32::from_le_bytes(input.array()?);
    if format != FORMAT {
        return Err(format!("has format {format}, this gen reads format {FORMAT}"));
    }
    let data = DataFiles::decode(&mut input)?;
    let head: Head = serde_json::from_str(&input.string()?).map_err(|_| damaged())?;
    if head.generator != GENERATOR {
        return Err(format!("was written by {}, not by this {GENERATOR}", head.generator));
    }
    let docs_at = body - input.left;
    let docs = match docs {
        true => DocumentFiles::decode(&mut input)?,
        false => {
            let mut skipped = vec![0u8; 1 << 20];
            while input.left > 0 {
                let n = input.left.min(skipped.len() as u64) as usize;
                input.exact(&mut skipped[..n])?;
            }
            DocumentFiles::default()
        }
    };
    if input.left != 0 {
        return Err(damaged());
    }
    let (reader, sum) = input.inner.into_inner().finish();
    let mut reader = reader.into_inner();
    let mut stored = [0u8; 32];
    reader.read_exact(&mut stored).map_err(|_| damaged())?;
    if stored != *sum.as_bytes() {
        return Err(damaged());
    }
    let index = Index {
        manifest: head.manifest,
        started_ns: head.started_ns,
        settings: head.settings,
        lists: head.lists,
        schemas: head.schemas,
        data,
        folders: head.folders,
        member_table: head.member_table,
        docs,
    };
    Ok((index, docs_at))
}

/// Decodes the documents' table of an index file checksummed already, from `reader` at its start
/// (`at`, in a file of `size` bytes).
pub(super) fn decode_docs(reader: impl Read, at: u64, size: u64) -> Result<DocumentFiles, String> {
    let left = size.checked_sub(32).and_then(|body| body.checked_sub(at)).ok_or_else(damaged)?;
    let mut input = Decoder { inner: std::io::BufReader::with_capacity(1 << 20, reader.take(left)), left };
    let docs = DocumentFiles::decode(&mut input)?;
    if input.left != 0 {
        return Err(damaged());
    }
    Ok(docs)
}
