//! A built API as an archive (docs/archive.md, "A built API as an archive"), as `gen config`
//! reads it: the tree's manifest from its `manifest.json` key, its files from the directory's
//! entries; and the hosts that cannot serve one, refused saying what to build instead.

use super::Host;
use crate::archive::{Folder, MANIFEST_KEY, Reader};
use crate::tree::manifest::Manifest;
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::path::Path;

/// What the handler for an archive knows beyond its manifest.
#[derive(Debug, Clone)]
pub(crate) struct Archived {
    /// Each key's document size, decompressed (the largest bounds a read).
    pub(crate) sizes: BTreeMap<String, u64>,
    /// The archive's files, its root last: what a bucket must hold, at these keys.
    pub(crate) files: Vec<String>,
}

/// The manifest of the archive in `dir`, its files listed from the directory (each key's hash
/// in hex), and the archive's sizes and files.
pub(crate) fn read(dir: &Path) -> Result<(Manifest, Archived)> {
    let reader = Reader::open(Folder(dir.to_path_buf()))
        .with_context(|| format!("cannot read the archive in {}", dir.display()))?;
    let found = reader.get(MANIFEST_KEY).with_context(|| format!("cannot read the archive in {}", dir.display()))?;
    let Some(found) = found else {
        bail!(
            "the archive in {} holds no {MANIFEST_KEY}: it is not a built API; build it with `gen build --archive`",
            dir.display()
        );
    };
    let mut manifest = Manifest::from_bytes(&found.bytes).with_context(|| {
        format!("the {MANIFEST_KEY} of the archive in {} is not a manifest gen reads: build it again", dir.display())
    })?;
    let mut sizes = BTreeMap::new();
    for entry in reader.entries().with_context(|| format!("cannot read the archive in {}", dir.display()))? {
        if entry.key == MANIFEST_KEY {
            continue;
        }
        let hash: String = entry.hash.iter().map(|b| format!("{b:02x}")).collect();
        sizes.insert(entry.key.clone(), entry.size);
        manifest.files.insert(entry.key, hash);
    }
    Ok((manifest, Archived { sizes, files: reader.files() }))
}

/// Refuses `host` for the archive in `dir` when it cannot serve one: nginx, Caddy and a
/// CloudFront Function serve a tree's files as they are, one file per document.
pub(crate) fn refuse(host: Host, dir: &Path) -> Result<()> {
    let name = match host {
        Host::Nginx => "nginx",
        Host::Caddy => "Caddy",
        Host::Edge(super::Edge::Cloudfront) => "a CloudFront Function (a bare bucket)",
        Host::Edge(_) => return Ok(()),
    };
    bail!(
        "{dir} is an archive (`gen build --archive`): {name} serves a tree's files, one file per document, and \
         cannot read the documents out of an archive's parts. Build a tree for it (`gen build` without --archive, \
         into another folder), or serve the archive as it is: `gen serve --dir {dir}`, or an edge handler that \
         reads it by byte ranges (`gen config cloudflare|deno|node --dir {dir}`, docs/deploy.md)",
        dir = dir.display()
    )
}
