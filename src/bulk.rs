//! Bulk data (docs/tree.md, "Bulk data"): every resource's records in one gzip'd NDJSON file,
//! `api/v2/bulk-data/<segment>-<hash>.ndjson.gz`, listed in `api/v2/bulk-data/index.json`.
//!
//! A file is a series of gzip members, each a run of consecutive records ([`members`]): any gzip
//! reader reads it whole, and an edit recompresses only the member it changed, the others'
//! bytes copied from the previous file. A member is written streamed: one record document at a
//! time, made compact, into a gzip encoder that writes through a hasher into the staging
//! folder, so that no resource's records are ever held together. Its name carries the first 16 hex digits of the SHA-256 of its bytes (the
//! compressed bytes, the index's `sha256`), so a host can let it be cached forever. The gzip
//! stream is deterministic: no name, a zero mtime, an unknown OS and a fixed level.
//!
//! The build's write decides which files to write (`build/write/bulk.rs`): a resource whose
//! records all kept their bytes and whose list kept its order keeps its file and its entry;
//! another is written member by member.

pub(crate) mod members;

use crate::tree::layout;
use anyhow::{Context, Result};
use members::{FileMembers, Member};
use serde::{Deserialize, Serialize};
use std::io::{self, Write};
use std::path::Path;

/// `Content-Type` of a bulk-data file, on every host.
pub(crate) const CONTENT_TYPE: &str = "application/x-ndjson";

/// `Content-Encoding` of a bulk-data file, on every host: its bytes are gzip, sent as they are
/// (never compressed again, never decoded for a client that does not ask for gzip).
pub(crate) const CONTENT_ENCODING: &str = "gzip";

/// `Cache-Control` of a bulk-data file, on every host: its name changes with its bytes.
pub(crate) const CACHE_CONTROL: &str = "public, max-age=31536000, immutable";

/// The relation of the bulk-data index in the `Link` header of the root answer: the root lists
/// resources only, so a client finds the index by this name (or by `meta`'s `bulk_data`).
pub(crate) const LINK_RELATION: &str = "bulk-data";

/// The `Link` header every host sends with the root document of a tree that has bulk-data
/// files: `</api/v2/bulk-data/>; rel="bulk-data"` (root-relative, so it holds whatever host
/// name the client used).
pub(crate) fn root_link() -> String {
    format!("<{}>; rel=\"{LINK_RELATION}\"", layout::url_path(layout::BULK_KEY))
}

/// The gzip level the files are written with: fixed, so that the same records give the same
/// bytes. Level 1: the fastest, at about 1.7 times the size of level 6 on the published data
/// (BENCHMARKS.md, "Bulk data").
const LEVEL: u32 = 1;

/// One entry of the bulk-data index: a resource's file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    /// The resource's path segment.
    pub(crate) resource: String,
    /// Records in the file: one line each.
    pub(crate) records: u64,
    /// Bytes of the file (compressed).
    pub(crate) size: u64,
    /// SHA-256 (hex) of the file's bytes.
    pub(crate) sha256: String,
    /// `application/x-ndjson`.
    pub(crate) content_type: String,
    /// `gzip`.
    pub(crate) content_encoding: String,
    /// Absolute url of the file.
    pub(crate) download_url: String,
    /// When the resource's data last changed: its last commit's time when git dates it, else the
    /// tree's `deploy_date` (docs/tree.md, "Bulk data"); never a previous build's date.
    pub(crate) updated_at: String,
}

/// The bulk-data index document: `{"count": N, "results": [entry, ...]}`, in the root's order.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct IndexDocument {
    /// The number of entries.
    pub(crate) count: usize,
    /// One entry per resource.
    pub(crate) results: Vec<Entry>,
}

/// The bulk-data index of `entries` (compact, or indented with `pretty`).
pub(crate) fn index_document(entries: Vec<Entry>, pretty: bool) -> Vec<u8> {
    let document = IndexDocument { count: entries.len(), results: entries };
    let bytes = if pretty { serde_json::to_vec_pretty(&document) } else { serde_json::to_vec(&document) };
    bytes.expect("the bulk-data index serialises")
}

/// The entries of a bulk-data index document, when `bytes` is one.
pub(crate) fn read_index(bytes: &[u8]) -> Option<Vec<Entry>> {
    serde_json::from_slice::<IndexDocument>(bytes).ok().map(|document| document.results)
}

/// A bulk-data file as written into the staging folder.
#[derive(Debug, Clone)]
pub(crate) struct FileWritten {
    /// Its tree path (`api/v2/bulk-data/<segment>-<hash>.ndjson.gz`).
    pub(crate) path: String,
    /// Records written: one line each.
    pub(crate) records: u64,
    /// Its size in bytes.
    pub(crate) size: u64,
    /// SHA-256 (hex) of its bytes.
    pub(crate) sha256: String,
    /// BLAKE3 of its bytes, for the manifest.
    pub(crate) blake3: blake3::Hash,
}

impl FileWritten {
    /// Its index entry, with the url on `base_url` and the date it was last changed.
    pub(crate) fn entry(&self, segment: &str, base_url: &str, updated_at: &str) -> Entry {
        Entry {
            resource: segment.to_string(),
            records: self.records,
            size: self.size,
            sha256: self.sha256.clone(),
            content_type: CONTENT_TYPE.to_string(),
            content_encoding: CONTENT_ENCODING.to_string(),
            download_url: format!("{base_url}/{}", self.path),
            updated_at: updated_at.to_string(),
        }
    }
}

/// Writes a bulk-data file into the staging folder, one gzip member at a time (see
/// [`members`]): a member is either compressed from its records or copied from the previous
/// file. The file's SHA-256, BLAKE3 and size are computed as it is written.
pub(crate) struct FileWriter {
    segment: String,
    stage: std::path::PathBuf,
    partial: std::path::PathBuf,
    out: Hashing<io::BufWriter<std::fs::File>>,
    members: Vec<Member>,
    records: u64,
    line: Vec<u8>,
}

impl FileWriter {
    /// Starts the file of `segment` in the staging folder `stage`.
    pub(crate) fn create(stage: &Path, segment: &str) -> Result<FileWriter> {
        let folder = stage.join(layout::BULK_KEY);
        crate::fsutil::create_dir_all(&folder)?;
        let partial = folder.join(format!("{segment}.partial"));
        let file = std::fs::File::create(&partial).with_context(|| format!("cannot write {}", partial.display()))?;
        let out = Hashing {
            inner: io::BufWriter::with_capacity(256 << 10, file),
            sha256: ring::digest::Context::new(&ring::digest::SHA256),
            blake3: blake3::Hasher::new(),
            size: 0,
        };
        let (segment, stage) = (segment.to_string(), stage.to_path_buf());
        Ok(FileWriter { segment, stage, partial, out, members: Vec::new(), records: 0, line: Vec::new() })
    }

    /// Appends a member of key `key` compressed from the record documents `records` yields,
    /// each made one compact line (documents are indented when `pretty`). Only one record is
    /// held at a time.
    pub(crate) fn compress(
        &mut self,
        key: String,
        pretty: bool,
        records: impl Iterator<Item = Result<Vec<u8>>>,
    ) -> Result<()> {
        let offset = self.out.size;
        let failed = || format!("cannot write {}", self.partial.display());
        let mut gzip = flate2::GzBuilder::new().mtime(0).operating_system(255).write(&mut self.out, level());
        let mut count = 0u64;
        for record in records {
            let record = record?;
            self.line.clear();
            if pretty {
                compact_into(&record, &mut self.line);
            } else {
                self.line.extend_from_slice(record.trim_ascii_end());
            }
            self.line.push(b'\n');
            gzip.write_all(&self.line).with_context(failed)?;
            count += 1;
        }
        gzip.finish().with_context(failed)?;
        self.push(key, count, offset);
        Ok(())
    }

    /// Appends a member of key `key` holding `records` records: `bytes`, a gzip member of a
    /// previous file of the same resource.
    pub(crate) fn append(&mut self, key: String, records: u64, bytes: &[u8]) -> Result<()> {
        let start = self.out.size;
        self.out.write_all(bytes).with_context(|| format!("cannot write {}", self.partial.display()))?;
        self.push(key, records, start);
        Ok(())
    }

    fn push(&mut self, key: String, records: u64, offset: u64) {
        self.records += records;
        self.members.push(Member { key, records, offset, length: self.out.size - offset });
    }

    /// Ends the file: renames it to its name, which carries its hash. Gives it and its members.
    pub(crate) fn finish(mut self) -> Result<(FileWritten, FileMembers)> {
        self.out.inner.flush().with_context(|| format!("cannot write {}", self.partial.display()))?;
        let sha256 = hex(self.out.sha256.finish().as_ref());
        let path = layout::bulk_file_path(&self.segment, &sha256[..16]);
        let target = self.stage.join(&path);
        std::fs::rename(&self.partial, &target).with_context(|| format!("cannot write {}", target.display()))?;
        let blake3 = self.out.blake3.finalize();
        let members = FileMembers { blake3: blake3.to_hex().to_string(), members: self.members };
        Ok((FileWritten { path, records: self.records, size: self.out.size, sha256, blake3 }, members))
    }
}

fn level() -> flate2::Compression {
    flate2::Compression::new(LEVEL)
}

/// Adds the bulk-data index and files to an OpenAPI document of the tree: their schemas, their
/// paths, its url in meta's schema, and the root answer's `Link` header naming it.
pub(crate) fn describe_in_openapi(document: &mut serde_json::Value) {
    use serde_json::json;
    let segment = layout::BULK_SEGMENT;
    let schemas = &mut document["components"]["schemas"];
    // the root lists resources only: meta names the index, and the root answer's `Link` header
    schemas["Meta"]["properties"]["bulk_data"] = json!({ "type": "string", "format": "uri",
        "description": "The url of the bulk-data index (getBulkData), which the root does not list." });
    let text = |description: &str| json!({ "type": "string", "description": description });
    schemas["BulkDataEntry"] = json!({
        "type": "object",
        "description": "One resource's bulk-data file: every record, one compact JSON document a line, in list order, gzip'd.",
        "required": ["resource", "records", "size", "sha256", "content_type", "content_encoding", "download_url", "updated_at"],
        "properties": {
            "resource": text("The resource's segment."),
            "records": { "type": "integer", "minimum": 0, "description": "Records in the file: one line each." },
            "size": { "type": "integer", "minimum": 0, "description": "Bytes of the file (compressed)." },
            "sha256": { "type": "string", "pattern": "^[0-9a-f]{64}$", "description": "SHA-256 of the file's bytes." },
            "content_type": { "const": CONTENT_TYPE },
            "content_encoding": { "const": CONTENT_ENCODING },
            "download_url": { "type": "string", "format": "uri", "description": "The file's url: its name carries its hash." },
            "updated_at": { "type": "string", "pattern": "^-?[0-9]+$", "description": "Unix seconds: the last commit that touched the resource's data or gen.json when the data is committed in git, else the deploy_date of the tree (the same for every fresh clone of a commit)." }
        }
    });
    schemas["BulkData"] = json!({
        "type": "object",
        "description": "One entry per resource, in the root's order.",
        "required": ["count", "results"],
        "properties": {
            "count": { "type": "integer", "minimum": 0 },
            "results": { "type": "array", "items": { "$ref": "#/components/schemas/BulkDataEntry" } }
        }
    });
    let index = json!({ "get": {
        "operationId": "getBulkData",
        "summary": "Every resource's bulk-data file (revalidated on every use: Cache-Control no-cache).",
        "responses": { "200": { "description": "OK", "content": { "application/json": {
            "schema": { "$ref": "#/components/schemas/BulkData" } } } } }
    }});
    let file = json!({ "get": {
        "operationId": "getBulkDataFile",
        "summary": "One resource's records, one a line, gzip'd (sent with Content-Encoding: gzip whatever the client accepts; cached forever).",
        "parameters": [{ "name": "file", "in": "path", "required": true,
            "schema": { "type": "string", "pattern": "^[a-z0-9-]+-[0-9a-f]{16}\\.ndjson\\.gz$" },
            "description": "The file's name, as the index gives it: <segment>-<first 16 hex digits of its SHA-256>.ndjson.gz." }],
        "responses": {
            "200": { "description": "The file's bytes.", "content": { CONTENT_TYPE: {
                "schema": { "type": "string", "description": "Compact JSON records, one a line." } } } },
            "404": { "$ref": "#/components/responses/NotFound" }
        }
    }});
    document["paths"][format!("{}{segment}/", layout::API_PREFIX)] = index;
    document["paths"][format!("{}{segment}/{{file}}", layout::API_PREFIX)] = file;
    document["paths"][layout::API_PREFIX]["get"]["responses"]["200"]["headers"]["Link"] = json!({
        "description": format!("Names the bulk-data index, which the root does not list: `{}`.", root_link()),
        "schema": { "type": "string" }
    });
}

/// Appends `document` (JSON, indented or not) to `out` without the whitespace between its
/// tokens: the compact form of the same document.
pub(crate) fn compact_into(document: &[u8], out: &mut Vec<u8>) {
    let (mut in_string, mut escaped) = (false, false);
    for &b in document {
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if b == b'"' {
            in_string = true;
            out.push(b);
        } else if !matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
            out.push(b);
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes through to `inner`, hashing (SHA-256 and BLAKE3) and counting the bytes.
struct Hashing<W> {
    inner: W,
    sha256: ring::digest::Context,
    blake3: blake3::Hasher,
    size: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.sha256.update(&buf[..n]);
        self.blake3.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_keeps_strings_and_drops_the_indentation() {
        let pretty = serde_json::to_vec_pretty(&serde_json::json!({"a": [1, {"b": "x y\n\"z\\"}], "c": {}})).unwrap();
        let mut out = Vec::new();
        compact_into(&pretty, &mut out);
        assert_eq!(out, br#"{"a":[1,{"b":"x y\n\"z\\"}],"c":{}}"#);
    }

    /// Writes `records` as two members: the first one and the rest.
    fn two_members(stage: &Path) -> (FileWritten, FileMembers) {
        let records: [&[u8]; 3] = [b"{\"id\":1}", b"{\n  \"id\": 2\n}\n", b"{\"id\":3}"];
        let run = |r: &[&[u8]]| r.iter().map(|b| Ok(b.to_vec())).collect::<Vec<_>>().into_iter();
        let mut file = FileWriter::create(stage, "berry").unwrap();
        file.compress("a".into(), true, run(&records[..1])).unwrap();
        file.compress("b".into(), true, run(&records[1..])).unwrap();
        file.finish().unwrap()
    }

    #[test]
    fn the_same_records_give_the_same_bytes_and_a_copied_member_too() {
        let dir = std::env::temp_dir().join(format!("gen-bulk-unit-{}", std::process::id()));
        let (first, members) = two_members(&dir.join("a"));
        let (second, _) = two_members(&dir.join("b"));
        let bytes = std::fs::read(dir.join("a").join(&first.path)).unwrap();
        assert_eq!(bytes, std::fs::read(dir.join("b").join(&second.path)).unwrap());
        assert_eq!(first.sha256, hex(ring::digest::digest(&ring::digest::SHA256, &bytes).as_ref()));
        assert_eq!(members.blake3, blake3::hash(&bytes).to_hex().to_string());
        assert!(first.path.ends_with(&format!("berry-{}.ndjson.gz", &first.sha256[..16])));
        assert_eq!((first.size, first.records), (bytes.len() as u64, 3));
        let lengths: Vec<(u64, u64, u64)> = members.members.iter().map(|m| (m.offset, m.length, m.records)).collect();
        assert_eq!(lengths[1].0, lengths[0].1, "the second member starts where the first ends");
        assert_eq!(lengths[0].1 + lengths[1].1, bytes.len() as u64);
        let mut text = String::new();
        io::Read::read_to_string(&mut flate2::read::MultiGzDecoder::new(&bytes[..]), &mut text).unwrap();
        assert_eq!(text, "{\"id\":1}\n{\"id\":2}\n{\"id\":3}\n");

        let mut file = FileWriter::create(&dir.join("c"), "berry").unwrap();
        file.compress("a".into(), true, std::iter::once(Ok(b"{\"id\":1}".to_vec()))).unwrap();
        let second = &members.members[1];
        let at = second.offset as usize..(second.offset + second.length) as usize;
        file.append(second.key.clone(), second.records, &bytes[at]).unwrap();
        let (copied, copied_members) = file.finish().unwrap();
        assert_eq!(std::fs::read(dir.join("c").join(&copied.path)).unwrap(), bytes);
        assert_eq!(copied_members, members);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
