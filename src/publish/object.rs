//! Reading one of gen's own objects of the target (the manifest, the marker, the lock, a stopped
//! publish's record): bounded, as a stream, with the version the store gives for a conditional
//! write.

use super::target::{Stage, Target, explain};
use futures_util::TryStreamExt;
use object_store::{ObjectStore, ObjectStoreExt, UpdateVersion};

/// What reading one of gen's own objects of the target (manifest, marker, lock) can end in.
pub(super) enum ReadObject {
    Store(object_store::Error),
    /// More bytes than gen ever writes there: at least this many.
    TooLarge(u64),
}

/// The bytes of the object at `path` of the tree, or `None` when there is none: at most `limit`
/// bytes, read as a stream. A larger object is refused by the size the store states, or once
/// the stream passes the limit: it is never held whole.
pub(super) async fn read_optional(
    store: &dyn ObjectStore,
    target: &Target,
    path: &str,
    limit: u64,
) -> std::result::Result<Option<Vec<u8>>, ReadObject> {
    Ok(read_object(store, target, path, limit).await?.map(|(bytes, _)| bytes))
}

/// [`read_optional`], with the version the store gave for the bytes read (its ETag, and its
/// generation on GCS), for a write conditional on it.
pub(super) async fn read_object(
    store: &dyn ObjectStore,
    target: &Target,
    path: &str,
    limit: u64,
) -> std::result::Result<Option<(Vec<u8>, UpdateVersion)>, ReadObject> {
    let result = match store.get(&target.key(path)).await {
        Ok(result) => result,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(ReadObject::Store(e)),
    };
    let size = result.meta.size;
    if size > limit {
        return Err(ReadObject::TooLarge(size));
    }
    let version = UpdateVersion { e_tag: result.meta.e_tag.clone(), version: result.meta.version.clone() };
    let mut bytes = Vec::with_capacity(size as usize);
    let mut stream = result.into_stream();
    while let Some(chunk) = stream.try_next().await.map_err(ReadObject::Store)? {
        if (bytes.len() + chunk.len()) as u64 > limit {
            return Err(ReadObject::TooLarge((bytes.len() + chunk.len()) as u64));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Some((bytes, version)))
}

/// The error for [`read_optional`]'s failure on `path` (read up to `limit` bytes), `doing` it.
pub(super) fn read_failed(
    e: ReadObject,
    path: &str,
    limit: u64,
    doing: &str,
    target: &Target,
    place: &str,
) -> anyhow::Error {
    match e {
        ReadObject::Store(e) => explain(e, doing, target, place, Stage::Before),
        ReadObject::TooLarge(size) => anyhow::anyhow!(
            "{}/{path} is {size} bytes, more than gen ever writes there ({} at most): it is not gen's, and it \
             was not read. Nothing was published; remove that object from the target, then publish again",
            target.shown.trim_end_matches('/'),
            if limit >= 1 << 20 { format!("{} MB", limit >> 20) } else { format!("{} KiB", limit >> 10) }
        ),
    }
}
