//! The manifest of a build that changed few documents, written by patching the previous one:
//! its `files` object is sorted by path, one entry a line, so the new manifest is the new
//! header, then the previous entries merged with the changed ones (unchanged lines copied as
//! bytes), with the same bytes as a manifest written whole (see [`super::listing`]).

use super::listing::CountingWriter;
use crate::fsutil::Stamp;
use crate::tree::dir::TreeDir;
use crate::tree::manifest::{MANIFEST_FILE, MAX_MANIFEST_BYTES, Manifest};
use anyhow::{Context, Result};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

/// One entry of the new listing that differs from the previous one: a path and its new hash,
/// or `None` when the path is gone.
pub(super) type Change = (String, Option<blake3::Hash>);

/// The lines before and after the entries of a manifest's `files` object.
const FILES_OPEN: &[u8] = b"  \"files\": {\n";
const FILES_CLOSE: &[u8] = b"  }\n";

/// Writes `manifest` (whose `files` is empty) into the staging folder `stage`, listing the
/// previous tree's manifest's files with `changes` applied (`changes` sorted by path, each
/// path once). The previous manifest is used only when its stamp is `expected` (the one the
/// build index recorded: then its entries are the index's documents) and it reads as gen
/// writes manifests; otherwise nothing is written and `None` returned, for a full write.
/// Returns the size written.
pub(super) fn patch_manifest(
    manifest: &Manifest,
    tree: &TreeDir,
    expected: Stamp,
    changes: &[Change],
    stage: &Path,
) -> Result<Option<u64>> {
    let Some(mut previous) = open_previous(tree, expected) else { return Ok(None) };
    let mut head = Vec::new();
    manifest.write_sorted_listing(std::iter::empty::<(&str, blake3::Hash)>(), &mut head)?;
    let Some(head) = head.strip_suffix(b"{}\n}\n".as_slice()) else { return Ok(None) };
    let path = stage.join(MANIFEST_FILE);
    let file = std::fs::File::create(&path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 16, CountingWriter { inner: file, bytes: 0 });
    let written = (|| -> std::io::Result<Option<()>> {
        if !skip_to_files(&mut previous)? {
            return Ok(None);
        }
        out.write_all(head)?;
        out.write_all(b"{")?;
        let mut merge = Merge { out: &mut out, first: true };
        if merge.entries(&mut previous, changes)?.is_none() {
            return Ok(None);
        }
        let any = !merge.first;
        out.write_all(if any { b"\n  }\n}\n" } else { b"}\n}\n" })?;
        out.flush().map(Some)
    })()
    .with_context(|| format!("cannot write {}", path.display()))?;
    let bytes = out.into_inner().map_err(|e| e.into_error()).context("cannot write the manifest")?.bytes;
    Ok(written.map(|()| bytes))
}

/// The previous manifest, open for reading line by line (never held whole: a tree of a
/// million records has one of a few hundred MB), when its stamp is `expected`.
fn open_previous(tree: &TreeDir, expected: Stamp) -> Option<BufReader<std::fs::File>> {
    let file = tree.open_file(MANIFEST_FILE, MAX_MANIFEST_BYTES).ok()?;
    let stamp = Stamp::of(&file.metadata().ok()?);
    (stamp == expected).then(|| BufReader::with_capacity(1 << 16, file))
}

/// Reads past the previous manifest's header, to its first entry: false when it has no
/// `files` object laid out as gen writes it.
fn skip_to_files(previous: &mut impl BufRead) -> std::io::Result<bool> {
    let mut line = Vec::new();
    loop {
        line.clear();
        if previous.read_until(b'\n', &mut line)? == 0 {
            return Ok(false);
        }
        if line == FILES_OPEN {
            return Ok(true);
        }
    }
}

/// Writes the merged entries of the `files` object, each after `\n` or `,\n` as serde_json's
/// pretty printer does.
struct Merge<'w, W: Write> {
    out: &'w mut W,
    first: bool,
}

impl<W: Write> Merge<'_, W> {
    /// Merges the previous entries `body` with `changes`; `None` when a line of `body` is not
    /// an entry as gen writes one.
    fn entries(&mut self, previous: &mut impl BufRead, changes: &[Change]) -> std::io::Result<Option<()>> {
        let mut changes = changes.iter().peekable();
        let (mut line, mut last) = (Vec::new(), String::new());
        loop {
            line.clear();
            previous.read_until(b'\n', &mut line)?;
            if line == FILES_CLOSE {
                break;
            }
            let Some(entry) = line.strip_suffix(b"\n") else { return Ok(None) };
            let entry = entry.strip_suffix(b",").unwrap_or(entry);
            let Some((key, entry)) = parse_entry(entry) else { return Ok(None) };
            // A manifest whose paths are not strictly sorted (as written before gen sorted
            // list pages among records) cannot be merged: it is written whole.
            if !last.is_empty() && *key <= *last {
                return Ok(None);
            }
            last.clear();
            last.push_str(&key);
            let mut replaced = false;
            while let Some((path, hash)) = changes.next_if(|(path, _)| path.as_str() <= &*key) {
                if let Some(hash) = hash {
                    self.new_entry(path, hash)?;
                }
                replaced |= path.as_str() == &*key;
            }
            if !replaced {
                self.separator()?;
                self.out.write_all(entry)?;
            }
        }
        line.clear();
        previous.read_until(b'\n', &mut line)?;
        if line != b"}\n" || previous.read_until(b'\n', &mut line)? != 0 {
            return Ok(None);
        }
        for (path, hash) in changes {
            if let Some(hash) = hash {
                self.new_entry(path, hash)?;
            }
        }
        Ok(Some(()))
    }

    fn new_entry(&mut self, path: &str, hash: &blake3::Hash) -> std::io::Result<()> {
        self.separator()?;
        let key = serde_json::to_string(path).expect("a string always serialises");
        write!(self.out, "{key}: \"{}\"", hash.to_hex())
    }

    fn separator(&mut self) -> std::io::Result<()> {
        let separator: &[u8] = if self.first { b"\n    " } else { b",\n    " };
        self.first = false;
        self.out.write_all(separator)
    }
}

/// The path of one line of a manifest's `files` object (`    "<path>": "<64 hex>"`), and the
/// line's entry (without its indent), or `None` when the line is not one.
fn parse_entry(line: &[u8]) -> Option<(std::borrow::Cow<'_, str>, &[u8])> {
    let entry = line.strip_prefix(b"    ")?;
    let key_end = entry.len().checked_sub(68)?;
    let (key, value) = entry.split_at(key_end);
    let hex = value.strip_prefix(b": \"")?.strip_suffix(b"\"")?;
    if hex.len() != 64 || !hex.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let key = std::str::from_utf8(key).ok()?;
    let inner = key.strip_prefix('"')?.strip_suffix('"')?;
    let path = match inner.contains('\\') {
        false => std::borrow::Cow::Borrowed(inner),
        true => std::borrow::Cow::Owned(serde_json::from_str::<String>(key).ok()?),
    };
    Some((path, entry))
}
