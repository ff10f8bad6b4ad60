//! Comparing two roots of an archive without reading either archive whole (what `gen publish`
//! of an archive needs): the parts each names, the directory blocks only one of them indexes,
//! and, from those blocks alone, the keys whose document changed. A block both roots index (the
//! same hash) holds the same entries, so the keys it holds are the same on both sides.

use std::collections::{BTreeMap, BTreeSet};

use super::format::{Root, decode_block};
use super::{Error, ROOT_FILE, part_file};

/// A directory block where a root says it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockAt {
    /// The index part holding it (`parts/<name>`).
    pub file: String,
    /// Where it starts in that part.
    pub offset: u64,
    /// Its stored (gzip) length.
    pub length: u64,
    /// BLAKE3 of its stored bytes, as the root names it.
    pub hash: [u8; 32],
}

/// What a root names, as files: its parts (`parts/<name>` and size) and its blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootFiles {
    /// Every part the root names: its file and its size in bytes.
    pub parts: BTreeMap<String, u64>,
    /// Every directory block the root indexes, in key order.
    pub blocks: Vec<BlockAt>,
}

impl RootFiles {
    /// The files named by the root whose stored bytes are `stored`; an error says what is wrong
    /// with them.
    pub fn decode(stored: &[u8]) -> Result<RootFiles, Error> {
        let root = Root::decode(stored).map_err(|what| Error::Damaged { file: ROOT_FILE.into(), offset: 0, what })?;
        let parts = root.parts.iter().map(|p| (part_file(&p.name), p.size)).collect();
        let blocks = root
            .blocks
            .iter()
            .map(|b| BlockAt { file: part_file(&b.part), offset: b.offset, length: b.length, hash: b.hash })
            .collect();
        Ok(RootFiles { parts, blocks })
    }

    /// The blocks this root indexes that `other` does not (by their hash).
    pub fn blocks_not_in(&self, other: &RootFiles) -> Vec<BlockAt> {
        let theirs: BTreeSet<[u8; 32]> = other.blocks.iter().map(|b| b.hash).collect();
        self.blocks.iter().filter(|b| !theirs.contains(&b.hash)).cloned().collect()
    }
}

/// The keys of a stored block and the hash of each key's document (decompressed), the block
/// first checked against the hash its root names.
pub fn block_keys(at: &BlockAt, stored: &[u8]) -> Result<Vec<(String, [u8; 32])>, Error> {
    let damaged = |what: String| Error::Damaged { file: at.file.clone(), offset: at.offset, what };
    if stored.len() as u64 != at.length {
        return Err(Error::Truncated {
            file: at.file.clone(),
            offset: at.offset,
            wanted: at.length,
            got: stored.len() as u64,
        });
    }
    if *blake3::hash(stored).as_bytes() != at.hash {
        return Err(damaged("the directory block is not the one the root names".into()));
    }
    let entries = decode_block(stored).map_err(|what| damaged(format!("directory block: {what}")))?;
    Ok(entries.into_iter().map(|e| (e.key, e.hash)).collect())
}

/// The keys whose document differs between `old` and `new` (key → document hash, from the
/// blocks only one root indexes): a hash that changed, a key that appeared or went.
pub fn changed_keys(
    old: impl IntoIterator<Item = (String, [u8; 32])>,
    new: impl IntoIterator<Item = (String, [u8; 32])>,
) -> BTreeSet<String> {
    let old: BTreeMap<String, [u8; 32]> = old.into_iter().collect();
    let new: BTreeMap<String, [u8; 32]> = new.into_iter().collect();
    let differs = |(key, hash): (&String, &[u8; 32]), other: &BTreeMap<String, [u8; 32]>| other.get(key) != Some(hash);
    let gone_or_changed = old.iter().filter(|entry| differs(*entry, &new)).map(|(k, _)| k.clone());
    let added = new.iter().filter(|(key, _)| !old.contains_key(*key)).map(|(k, _)| k.clone());
    gone_or_changed.chain(added).collect()
}

#[cfg(test)]
mod tests {
    use super::super::{Change, Document, Folder, Options, Reader, edit, write};
    use super::*;

    fn doc(key: &str, text: &str) -> Document {
        Document::new(vec![key.into()], text.as_bytes().to_vec())
    }

    fn keys_of(dir: &std::path::Path, root: &RootFiles, other: &RootFiles) -> Vec<(String, [u8; 32])> {
        let source = Folder(dir.to_path_buf());
        let mut keys = Vec::new();
        for at in root.blocks_not_in(other) {
            let stored = super::super::RangeSource::read(&source, &at.file, at.offset, at.length).unwrap();
            keys.extend(block_keys(&at, &stored).unwrap());
        }
        keys
    }

    #[test]
    fn an_edit_changes_only_the_keys_it_put_or_removed() {
        let dir = std::env::temp_dir().join(format!("gen-archive-diff-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let options = Options { block_entries: 4, ..Options::default() };
        let documents = (0..40).map(|i| doc(&format!("api/v2/a/{i:02}/index.json"), &format!("{{\"id\":{i}}}")));
        write(&dir, documents, &options).unwrap();
        let old_stored = std::fs::read(dir.join(ROOT_FILE)).unwrap();
        let changes = vec![
            Change::Put(doc("api/v2/a/07/index.json", "{\"id\":7,\"x\":1}")),
            Change::Put(doc("api/v2/a/31/index.json", "{\"id\":31}")), // the same bytes: not a change
            Change::Put(doc("api/v2/b/index.json", "{}")),
            Change::Remove("api/v2/a/20/index.json".into()),
        ];
        edit(&dir, changes, &options).unwrap();
        let new_stored = std::fs::read(dir.join(ROOT_FILE)).unwrap();
        let (old, new) = (RootFiles::decode(&old_stored).unwrap(), RootFiles::decode(&new_stored).unwrap());
        assert!(old.blocks_not_in(&new).len() < old.blocks.len(), "unchanged blocks are shared");
        let changed = changed_keys(keys_of(&dir, &old, &new), keys_of(&dir, &new, &old));
        let expected = ["api/v2/a/07/index.json", "api/v2/a/20/index.json", "api/v2/b/index.json"];
        assert_eq!(changed.iter().map(String::as_str).collect::<Vec<_>>(), expected);
        assert_eq!(Reader::open(Folder(dir.clone())).unwrap().files().len(), new.parts.len() + 1);
        let mut damaged = std::fs::read(dir.join(&new.blocks[0].file)).unwrap();
        damaged[new.blocks[0].offset as usize + 12] ^= 1;
        let at = &new.blocks[0];
        let stored = &damaged[at.offset as usize..(at.offset + at.length) as usize];
        assert!(matches!(block_keys(at, stored), Err(Error::Damaged { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
