//! The build index's bytes on disk (docs/builds.md, "The build index"): a magic and a version,
//! a small JSON head, the two tables of fixed-size entries, and a BLAKE3 checksum of everything
//! before it. Decoding refuses, with a one-line reason, a file of another version, a damaged or
//! cut one, and one whose entries do not add up; it never panics on what it reads.

use super::codec::{Checksummed, Decoder, damaged, put_bytes};
use super::{DataFiles, DocumentFiles, Index};
use crate::build::schema::Inferred;
use crate::fsutil::Stamp;
use crate::tree::manifest::BuildSettings;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Write};

/// Version of the index's format; another version is ignored (the next build is a full one).
/// 3: binary, one fixed-size entry per data file and per document (2 was JSON, one entry per
/// path of the tree). 4: the same, naming a manifest whose paths are sorted (one of format 3
/// may list a resource's pages out of order, and the manifest's patch reads only a few of its
/// lines: src/build/write/patch.rs).
pub const FORMAT: u32 = 4;

/// The first bytes of an index file.
pub(super) const MAGIC: &[u8; 8] = b"genindex";

/// The small part of the index, stored as JSON inside the binary file.
#[derive(Serialize, Deserialize)]
pub(super) struct Head {
    pub(super) manifest: Stamp,
    pub(super) started_ns: i64,
    pub(super) settings: BuildSettings,
    pub(super) lists: BTreeMap<String, String>,
    pub(super) schemas: Vec<(String, Option<String>, Inferred)>,
}

impl Index {
    pub(super) fn encode(&self, out: &mut impl Write) -> std::io::Result<()> {
        out.write_all(MAGIC)?;
        out.write_all(&FORMAT.to_le_bytes())?;
        let head = Head {
            manifest: self.manifest,
            started_ns: self.started_ns,
            settings: self.settings.clone(),
            lists: self.lists.clone(),
            schemas: self.schemas.clone(),
        };
        put_bytes(out, &serde_json::to_vec(&head).map_err(std::io::Error::other)?)?;
        self.data.encode(out)?;
        self.docs.encode(out)
    }
}

/// Decodes an index file: magic, version, the head, the data files, the documents, and the
/// checksum of all that at the end. The checksum is taken of large blocks as they are read (a
/// hash fed entry by entry costs more than the decoding).
pub(super) fn decode(reader: impl Read, size: u64) -> Result<Index, String> {
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
    let head: Head = serde_json::from_str(&input.string()?).map_err(|_| damaged())?;
    let data = DataFiles::decode(&mut input)?;
    let docs = DocumentFiles::decode(&mut input)?;
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
    Ok(Index {
        manifest: head.manifest,
        started_ns: head.started_ns,
        settings: head.settings,
        lists: head.lists,
        schemas: head.schemas,
        data,
        docs,
    })
}
