//! The documents and lists read so far, bounded by bytes.
//!
//! Two generations: new entries go into the current one; when it would pass half the budget
//! it becomes the old one and the old one is dropped. A hit in the old generation moves the
//! entry back into the current one, so what is used stays and what is not goes within two
//! turns. Every step is O(1); memory never passes the budget. Hits in the current generation
//! take a read lock only, so concurrent readers do not wait on each other.
//!
//! Entries are keyed by the BLAKE3 hash the manifest gives a file (and pages by the hash of the
//! list they are computed from), so an entry can only ever stand for those bytes: entries of a
//! previous build are reused when the new manifest lists the same bytes, and are unreachable
//! otherwise.

use super::budget::Budget;
use super::item::{Item, Key};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Bytes an entry costs beyond its bodies: its key, map slot and headers.
const OVERHEAD: usize = 256;

/// An archive's directory blocks are held within `1 / BLOCK_SHARE` of `--cache-mb` more.
const BLOCK_SHARE: usize = 8;

/// A byte-bounded cache (see the module's doc).
#[derive(Debug)]
pub struct Cache {
    budget: usize,
    /// The bound of the decoded directory blocks an archive's reader holds (see [`Cache::new`]).
    blocks: usize,
    generations: RwLock<Generations>,
    /// The bodies too large to be held here, while answers send them: as many bytes again.
    pub(crate) in_flight: Arc<Budget>,
}

#[derive(Debug, Default)]
struct Generations {
    current: HashMap<Key, (Item, usize)>,
    old: HashMap<Key, (Item, usize)>,
    current_bytes: usize,
    old_bytes: usize,
}

impl Cache {
    /// A cache of at most `budget` bytes of documents and lists, and an eighth of that more for
    /// the directory blocks of an archive served from it ([`Cache::block_bytes`]). The documents
    /// keep the whole budget so that a document is held, or sent from its file, at the same size
    /// whether it comes from a tree or an archive (their answers are the same).
    pub fn new(budget: usize) -> Cache {
        let blocks = budget / BLOCK_SHARE;
        Cache { budget, blocks, generations: RwLock::default(), in_flight: Budget::new(budget) }
    }

    /// The bound of the decoded directory blocks an archive's reader holds.
    pub(crate) fn block_bytes(&self) -> usize {
        self.blocks
    }

    /// True when an item of `bytes` (its bodies) would be held (see [`Cache::insert`]).
    pub(crate) fn would_hold(&self, bytes: usize) -> bool {
        bytes + OVERHEAD <= self.budget / 2
    }

    /// The entry for `key`, if held.
    pub(crate) fn get(&self, key: &Key) -> Option<Item> {
        {
            let generations = self.generations.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((item, _)) = generations.current.get(key) {
                return Some(item.clone());
            }
            if !generations.old.contains_key(key) {
                return None;
            }
        }
        let mut generations = self.generations.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((item, bytes)) = generations.old.remove(key) {
            generations.old_bytes -= bytes;
            generations.admit(*key, item.clone(), bytes, self.budget / 2);
            return Some(item);
        }
        generations.current.get(key).map(|(item, _)| item.clone())
    }

    /// Holds `item`, which takes `bytes` (its bodies), under `key`. An item larger than half
    /// the budget is not held.
    pub(crate) fn insert(&self, key: Key, item: Item, bytes: usize) {
        if !self.would_hold(bytes) {
            return;
        }
        let bytes = bytes + OVERHEAD;
        let mut generations = self.generations.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        generations.admit(key, item, bytes, self.budget / 2);
    }

    /// Counts `bytes` more for the entry under `key` (its gzip body, made after it was held).
    pub(crate) fn charge(&self, key: &Key, bytes: usize) {
        let mut generations = self.generations.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        let generations = &mut *generations;
        if let Some((_, held)) = generations.current.get_mut(key) {
            *held += bytes;
            generations.current_bytes += bytes;
            if generations.current_bytes > self.budget / 2 {
                generations.old = std::mem::take(&mut generations.current);
                generations.old_bytes = std::mem::replace(&mut generations.current_bytes, 0);
            }
        } else if let Some((item, held)) = generations.old.remove(key) {
            generations.old_bytes -= held;
            generations.admit(*key, item, held + bytes, self.budget / 2);
        }
    }

    /// Drops every entry.
    pub(crate) fn clear(&self) {
        *self.generations.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Generations::default();
    }

    /// Bytes held, and the number of entries.
    #[cfg(test)]
    pub(crate) fn usage(&self) -> (usize, usize) {
        let generations = self.generations.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        (generations.current_bytes + generations.old_bytes, generations.current.len() + generations.old.len())
    }
}

impl Generations {
    /// Puts an entry into the current generation, turning generations first when it would pass
    /// `half` bytes.
    fn admit(&mut self, key: Key, item: Item, bytes: usize, half: usize) {
        if let Some((_, replaced)) = self.current.remove(&key) {
            self.current_bytes -= replaced;
        }
        if self.current_bytes + bytes > half {
            self.old = std::mem::take(&mut self.current);
            self.old_bytes = std::mem::replace(&mut self.current_bytes, 0);
        }
        if let Some((_, dropped)) = self.old.remove(&key) {
            self.old_bytes -= dropped;
        }
        self.current.insert(key, (item, bytes));
        self.current_bytes += bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::super::item::Doc;
    use super::*;
    use std::sync::Arc;

    fn doc(n: usize) -> Item {
        Item::Doc(Arc::new(Doc::new(vec![b'x'; n], &blake3::hash(&[]))))
    }

    fn key(i: u8) -> Key {
        Key::Doc([i; 32])
    }

    #[test]
    fn stays_within_its_budget_and_keeps_what_is_used() {
        let cache = Cache::new(10 * (1000 + OVERHEAD));
        for i in 0..100u8 {
            cache.insert(key(i), doc(1000), 1000);
            assert!(cache.get(&key(0)).is_some(), "the entry used all along stays ({i})");
            assert!(cache.usage().0 <= 10 * (1000 + OVERHEAD), "{:?}", cache.usage());
        }
        assert!(cache.get(&key(1)).is_none(), "an entry not used is dropped");
        assert!(cache.get(&key(99)).is_some());
        cache.insert(key(200), doc(7 * 1000), 7 * 1000);
        assert!(cache.get(&key(200)).is_none(), "more than half the budget is not held");
        let before = cache.usage().0;
        cache.charge(&key(99), 500);
        assert_eq!(cache.usage().0, before + 500, "a gzip body made later is counted");
        cache.clear();
        assert_eq!(cache.usage(), (0, 0));
    }
}
