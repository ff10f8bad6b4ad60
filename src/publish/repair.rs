//! Comparing the target with the tree (a listing, each object by its MD5 or read back), and the
//! second look a publish takes when it found an unfinished publish (its marker, or a record of a
//! stopped one).
//!
//! Why a second look: the publish it replaced (killed, or still running after its lock was
//! taken over) may have writes that land after this one compared the target: requests already
//! sent when it was killed, or the rest of the wave it was in when its lock was taken. Each of
//! them is to a path its marker names (what it uploads and deletes). So once this publish's
//! manifest is live and its deletes done, it lists the target again and compares those paths,
//! plus those of any record a publish stopped meanwhile left (written after that one's last
//! write), and repairs what differs, before its marker goes: the bucket it leaves is the tree
//! (`Writer::second_look` in `remote.rs` carries it out).

use super::local::LocalTree;
use super::marker::Marker;
use super::plan::Listed;
use super::target::Target;
use crate::tree::layout;
use crate::tree::manifest::MANIFEST_FILE;
use futures_util::{StreamExt, TryStreamExt, stream};
use object_store::{ObjectStore, ObjectStoreExt};
use std::collections::{BTreeMap, BTreeSet};

/// Most second looks one publish takes: another only after one that repaired something (a write
/// of the replaced publish may still have been landing).
pub(super) const MAX_LOOKS: usize = 3;

/// Lists the target and tells which files of the tree it already holds with the same bytes:
/// by the object's MD5 (its ETag on S3) when the store gives one, else by reading it back.
/// With `only`, just those paths are compared (`manifest.json` among them, against the tree's
/// manifest); every path present is listed all the same.
pub(super) async fn list_and_compare(
    tree: &LocalTree<'_>,
    target: &Target,
    store: &dyn ObjectStore,
    jobs: usize,
    only: Option<&BTreeSet<String>>,
) -> object_store::Result<Listed> {
    /// How an object present on the target is compared with the local file.
    enum Check {
        /// By the MD5 its ETag states (S3, for objects not uploaded in parts).
        Md5(String),
        /// By reading it back (a local folder, or an ETag that is no MD5).
        Read,
    }
    let files = &tree.manifest.files;
    let wanted = |path: &str| match only {
        None => files.contains_key(path),
        Some(only) => only.contains(path) && (path == MANIFEST_FILE || files.contains_key(path)),
    };
    let local_size = |path: &str| match path {
        MANIFEST_FILE => Some(tree.manifest_bytes.len() as u64),
        _ => tree.files.stamp(path).map(|stamp| stamp.size),
    };
    let mut present = BTreeSet::new();
    let mut checks: Vec<(String, Check)> = Vec::new();
    let mut listing = store.list(target.list_prefix().as_ref());
    while let Some(meta) = listing.try_next().await? {
        let Some(path) = target.relative(&meta.location) else { continue };
        if wanted(&path) {
            let md5 = meta.e_tag.as_deref().map(|t| t.trim_matches('"').to_ascii_lowercase());
            match md5.filter(|t| t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit())) {
                Some(md5) if local_size(&path) == Some(meta.size) => checks.push((path.clone(), Check::Md5(md5))),
                Some(_) => {}
                None => checks.push((path.clone(), Check::Read)),
            }
        }
        present.insert(path);
    }
    let same: BTreeSet<String> = stream::iter(checks)
        .map(|(path, check)| async move {
            let equal = match check {
                Check::Md5(md5) if path == MANIFEST_FILE => md5_hex(tree.manifest_bytes) == md5,
                Check::Md5(md5) => tree.read(&path).is_ok_and(|local| md5_hex(&local) == md5),
                Check::Read => {
                    let bytes = store.get(&target.key(&path)).await?.bytes().await?;
                    if path == MANIFEST_FILE {
                        bytes.as_ref() == tree.manifest_bytes
                    } else {
                        Some(&blake3::hash(&bytes).to_hex().to_string()) == files.get(&path)
                    }
                }
            };
            Ok::<_, object_store::Error>(equal.then_some(path))
        })
        .buffer_unordered(jobs.max(1))
        .try_filter_map(|path| async move { Ok(path) })
        .try_collect()
        .await?;
    Ok(Listed { present, same })
}

fn md5_hex(bytes: &[u8]) -> String {
    use md5::Digest as _;
    let digest = md5::Md5::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// What a second look compares, and what it may delete.
pub(super) struct Look {
    /// The paths an unfinished publish may have written: what its marker (or record) says it
    /// uploads or deletes.
    pub(super) suspects: BTreeSet<String>,
    /// The paths this publish may delete where they are present: listed by the published
    /// manifest or named by an unfinished publish's marker, absent from the tree, tree files.
    pub(super) deletable: BTreeSet<String>,
}

impl Look {
    /// The look after the unfinished publish whose `marker` was found, for a tree of `files`
    /// published over a manifest of `old` files.
    pub(super) fn after(
        marker: &Marker,
        old: Option<&BTreeMap<String, String>>,
        files: &BTreeMap<String, String>,
    ) -> Look {
        let old = old.into_iter().flat_map(|old| old.keys());
        let deletable = old.filter(|p| !files.contains_key(*p) && layout::is_tree_file(p)).cloned().collect();
        let mut look = Look { suspects: BTreeSet::new(), deletable };
        look.add(marker, |path| files.contains_key(path));
        look
    }

    /// Takes in what the marker (or record) of an unfinished publish names (`in_tree` answers
    /// whether the tree has a path).
    pub(super) fn add(&mut self, marker: &Marker, in_tree: impl Fn(&str) -> bool) {
        let written = marker.changed.iter().chain(&marker.created).chain(&marker.deletes);
        self.suspects.extend(written.filter(|p| *p == MANIFEST_FILE || layout::is_tree_file(p)).cloned());
        let gone = marker.deletes.iter().chain(&marker.created);
        self.deletable.extend(gone.filter(|p| !in_tree(p) && layout::is_tree_file(p)).cloned());
    }
}
