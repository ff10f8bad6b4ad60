//! The new manifest: every path of the tree with its document's hash, streamed sorted into the
//! staging folder one resource at a time (a large tree's listing is never held whole).

use super::docs::{Doc, Docs};
use super::stage::Placed;
use crate::tree::manifest::{MANIFEST_FILE, Manifest};
use anyhow::{Context, Result};
use std::path::Path;

/// Streams `manifest`, listing every path with its document's hash in path order, into the
/// staging folder `stage` (the manifest of a large tree is large: neither it nor the list of
/// its paths is ever held whole; see [`sorted_files`]). Returns its size.
pub(super) fn write_manifest(
    mut manifest: Manifest,
    stage: &Path,
    docs: &Docs<'_, '_>,
    placed: &[Placed],
) -> Result<u64> {
    manifest.files.clear();
    let path = stage.join(MANIFEST_FILE);
    let file = std::fs::File::create(&path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut counting = CountingWriter { inner: file, bytes: 0 };
    manifest
        .write_sorted_listing(sorted_files(docs, placed), &mut counting)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(counting.bytes)
}

/// Every path of the tree with its document's hash, sorted by path, one resource at a time:
/// the documents outside resources one by one, and each resource's paths sorted by the key
/// they start with (a record's id or name, `_pages`, ...), so that only one resource's keys
/// are in memory at once.
pub(super) fn sorted_files<'d>(
    docs: &'d Docs<'_, '_>,
    placed: &'d [Placed],
) -> impl Iterator<Item = (String, blake3::Hash)> + 'd {
    enum Group {
        Path(String, blake3::Hash),
        Resource(std::ops::Range<usize>),
    }
    let mut groups: Vec<(String, Group)> = Vec::new();
    let mut i = 0;
    let count = docs.outputs.len() + docs.late.len();
    while i < count {
        let segment = match docs.doc(i) {
            Doc::Planned(output) => output.content.segment(),
            Doc::Late(_) => None,
        };
        match segment {
            Some(segment) => {
                let start = i;
                while i < count && matches!(docs.doc(i), Doc::Planned(o) if o.content.segment() == Some(segment)) {
                    i += 1;
                }
                groups.push((format!("{}/{segment}/", crate::tree::layout::API_ROOT), Group::Resource(start..i)));
            }
            None => {
                for path in docs.paths(&docs.doc(i)) {
                    groups.push((path.clone(), Group::Path(path, placed[i].hash)));
                }
                i += 1;
            }
        }
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    groups.into_iter().flat_map(move |(_, group)| -> Box<dyn Iterator<Item = (String, blake3::Hash)>> {
        match group {
            Group::Path(path, hash) => Box::new(std::iter::once((path, hash))),
            Group::Resource(range) => Box::new(resource_files(docs, &placed[range.clone()], range.start)),
        }
    })
}

/// The paths of one resource's documents (`placed[0]` is output `first`), sorted: grouped by
/// the key that follows the segment (`<id>/`, `<name>/`, or the whole rest for list pages),
/// keys sorted, and each record's paths sorted within its key.
pub(super) fn resource_files<'d>(
    docs: &'d Docs<'_, '_>,
    placed: &'d [Placed],
    first: usize,
) -> impl Iterator<Item = (String, blake3::Hash)> + 'd {
    let output_at = move |i: usize| docs.outputs.get(first + i);
    let mut keys: Vec<(String, usize)> = Vec::new();
    let segment = output_at(0).content.segment().unwrap_or_default();
    let prefix = format!("{}/{segment}/", crate::tree::layout::API_ROOT);
    for i in 0..placed.len() {
        let output = output_at(i);
        match output.place(docs.dataset) {
            Some((place, name)) if place.kind.is_none() => {
                keys.push((format!("{}/", place.id), i));
                if let Some(name) = name {
                    keys.push((format!("{name}/"), i));
                }
            }
            Some(_) => {}
            // keyed by the path below the resource's folder, as records are: all sort as paths
            None => {
                keys.extend(output.listed.iter().map(|path| (path.strip_prefix(&prefix).unwrap_or(path).into(), i)))
            }
        }
    }
    keys.sort_unstable();
    keys.into_iter().flat_map(move |(key, i)| {
        let output = output_at(i);
        let mut files: Vec<(String, blake3::Hash)> = match output.place(docs.dataset) {
            None => vec![(format!("{prefix}{key}"), placed[i].hash)],
            Some((place, _)) => {
                let key = key.trim_end_matches('/');
                let record = std::iter::once((place.tree_path(key), placed[i].hash));
                let subdocs = (i + 1..placed.len())
                    .map_while(|j| {
                        output_at(j).place(docs.dataset).filter(|(p, _)| p.kind.is_some()).map(|(p, _)| (j, p))
                    })
                    .map(|(j, p)| (p.tree_path(key), placed[j].hash));
                record.chain(subdocs).collect()
            }
        };
        files.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        files
    })
}

/// Writes through to a file, counting the bytes.
pub(super) struct CountingWriter {
    pub(super) inner: std::fs::File,
    pub(super) bytes: u64,
}

impl std::io::Write for CountingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
