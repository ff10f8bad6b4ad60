//! The archive writer (`gen build --archive`, docs/builds.md "The archive writer"): the second
//! [`Output`] beside the tree's. It takes the render step's stream as the tree writer does, and
//! writes the archive of the tree the same data and options give (docs/archive.md, "A built API
//! as an archive"): every document under the tree's paths, the bulk-data files and their index,
//! and `manifest.json` with no files listed. Each body is compressed by the worker that renders
//! it and spooled beside the archive (in the build's state folder): memory holds keys and places.
//!
//! Into a folder without an archive (or with `--verify`) it writes a fresh one; over an archive
//! it writes only the change (`archive::edit`'s rules): the documents whose bytes differ, the
//! keys gone, and a new root last (the commit point), or nothing at all when nothing differs.

use super::{NewDocs, Output, WriteReport, Written};
use crate::archive::{self, MANIFEST_KEY, Receipt, Stream};
use crate::build::index::DocumentFiles;
use crate::build::rendering::{Document, Documents};
use crate::build::state;
use crate::bulk;
use crate::staging::FolderLock;
use crate::tree::layout;
use crate::tree::manifest::{BuildSettings, Manifest};
use anyhow::{Context, Result};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

/// The spool of an archive build, in the state folder beside the archive.
const SPOOL: &str = "archive.spool";
/// Where an archive build writes its bulk-data files before it spools them, in the state folder.
const BULK_STAGE: &str = "archive-bulk";

/// The archive writer: see the module's doc.
pub(crate) struct ArchiveWriter<'a> {
    /// The output folder, locked for this build.
    pub(crate) target: &'a mut FolderLock,
    /// The archive's `manifest.json`: the tree's settings and resources, no files listed.
    pub(crate) manifest: Manifest,
    /// The bulk-data files' dates by resource, when the build asked git for them.
    pub(crate) bulk_dates: Option<&'a BTreeMap<String, i64>>,
    /// Write a fresh archive even over one in place (`--verify`: nothing of it is trusted).
    pub(crate) fresh: bool,
}

impl Output for ArchiveWriter<'_> {
    /// Spools every document (the planned ones, the bulk-data files made from the record
    /// documents spooled, the late ones, the manifest), then writes the archive or its change.
    /// A failure before the root is renamed leaves the archive in place as it was.
    fn write<'d>(self, documents: &Documents<'_, 'd>) -> Result<Written<'d>> {
        let ArchiveWriter { target, manifest, bulk_dates, fresh } = self;
        let out = target.dir.clone();
        let stream = Stream::create(state::ensure(&out)?.join(SPOOL))?;
        let visited = documents.place_each(|document| match document {
            Document::Rendered { paths, bytes, .. } => Ok(stream.put(paths, &bytes)?),
            _ => anyhow::bail!("an archive build renders every planned document"),
        })?;
        anyhow::ensure!(visited.at.is_none(), "an archive build visits every planned document");
        let mut late = documents.late();
        if manifest.settings.bulk {
            late.push(bulk_files(&stream, documents, &visited.each, &manifest.settings, bulk_dates, &out)?);
        }
        for document in late {
            let Document::Late { path, bytes, .. } = document else { unreachable!("a late document") };
            stream.put(vec![path], &bytes)?;
        }
        let mut listing = Vec::new();
        manifest.write_sorted_listing(std::iter::empty::<(String, blake3::Hash)>(), &mut listing)?;
        stream.put(vec![MANIFEST_KEY.to_string()], &listing)?;
        let options = archive::Options::default();
        let edit = !fresh && archive::is_archive(&out);
        let written = match edit {
            true => stream.edit(&out, &options).with_context(|| {
                format!("cannot edit the archive in {}; `gen build --archive --verify` writes it afresh", out.display())
            })?,
            false => stream.write(&out, &options)?,
        };
        target.exists = true;
        archive::prune(&out)?; // the parts neither this root nor the one it replaced names
        let (files, bytes) = archive::totals(&out)?;
        let report = WriteReport { files, bytes, written: written.files.len(), manifest_patched: None };
        // The index keeps no documents' table for an archive: a rebuild compares with the
        // archive's own directory (see [`Stream::edit`]).
        Ok(Written { report, docs: NewDocs::Whole(DocumentFiles::default()) })
    }
}

/// Writes every resource's bulk-data file (in parallel, into the state folder), from the record
/// documents spooled (`receipts`, by plan position), then spools each; returns the bulk-data
/// index, a late document. The same code as the tree's cuts the members and names the files.
fn bulk_files(
    stream: &Stream,
    documents: &Documents<'_, '_>,
    receipts: &[Receipt],
    settings: &BuildSettings,
    known_dates: Option<&BTreeMap<String, i64>>,
    out: &Path,
) -> Result<Document> {
    let (dataset, plan) = (documents.dataset(), documents.plan());
    let stage = state::folder(out).join(BULK_STAGE);
    let _ = crate::fsutil::remove_dir_all(&stage);
    crate::fsutil::create_dir_all(&stage)?;
    let segments: Vec<&str> = dataset.resources.keys().map(String::as_str).collect();
    let dates = super::bulk::updated_dates(&dataset.dir, &segments, settings, known_dates);
    let entries: Vec<Result<bulk::Entry>> = segments
        .par_iter()
        .map(|segment| {
            let positions = plan.record_positions(segment);
            let records: Vec<(blake3::Hash, u64)> =
                positions.iter().map(|&i| (blake3::Hash::from_bytes(receipts[i].hash), receipts[i].size)).collect();
            let bytes = |n: usize| Ok(stream.read(receipts[positions[n]])?);
            let written = bulk::write_whole(&stage, segment, settings.pretty, &records, bytes)?;
            stream.put_file(vec![written.path.clone()], &stage.join(&written.path))?;
            std::fs::remove_file(stage.join(&written.path))
                .with_context(|| format!("cannot remove {}", stage.join(&written.path).display()))?;
            let updated_at = dates.get(*segment).map_or_else(|| settings.deploy_date.clone(), i64::to_string);
            Ok(written.entry(segment, &settings.base_url, &updated_at))
        })
        .collect();
    let _ = crate::fsutil::remove_dir_all(&stage);
    let entries = entries.into_iter().collect::<Result<Vec<_>>>()?;
    let (path, bytes) = (layout::BULK_INDEX_PATH.to_string(), bulk::index_document(entries, settings.pretty));
    Ok(Document::Late { hash: blake3::hash(&bytes), path, bytes, previous: None })
}
