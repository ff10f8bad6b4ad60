//! Narrowed lists: a list asked with `?q=` (see [`crate::search`]) or with declared filters
//! (`?FIELD=VALUE`, see [`crate::filters`]), answered from the files a build writes for them, as
//! the edge handlers answer them from the same files (`src/hosts/edge/handler.js`).
//!
//! - One filter alone, with a value the tree holds: that value's list, answered as a list is (its
//!   page files, or a page rendered from its `_pages/all` file, linked in the tree's link style).
//! - Anything else (`q`, several filters, a value the tree holds no list of): the entries of the
//!   value lists that are in every one of them and whose names match `q`, in list order, each
//!   page rendered now with query links (`?offset=&limit=`, then `q`, then the filters in the
//!   order they are declared).

use super::item::{Doc, Item, Key as CacheKey, List};
use super::tree::{Tree, Unserved, render_linked};
use crate::filters::{FilterField, query_page_url, query_tail};
use crate::layout;
use crate::paging::{self, ListLinks, Page};
use crate::search;
use std::collections::HashSet;
use std::sync::Arc;

impl Tree {
    /// `page` of the records of the list of `segment` that match `q` (when given) and every one
    /// of `conditions` (a declared field's place and a value, see
    /// [`crate::filters::order_conditions`]); `Ok(None)` when the tree holds no such list, or no
    /// names document for a `q` (a tree built before them).
    pub fn narrowed(
        &self,
        segment: &str,
        q: Option<&str>,
        conditions: &[(usize, &str)],
        page: Page,
    ) -> Result<Option<Arc<Doc>>, Unserved> {
        let Some(&count) = self.lists.get(segment) else { return Ok(None) };
        let declared = self.filters(segment);
        match (q, conditions) {
            (None, []) => return self.page(segment, page),
            (None, [(field, value)]) => {
                if let Some(doc) = self.value_page(segment, &declared[*field], value, page)? {
                    return Ok(Some(doc));
                }
            }
            _ => {}
        }
        let mut hasher = blake3::Hasher::new();
        hasher.update(b"narrowed").update(self.digest.as_bytes()).update(segment.as_bytes());
        hasher.update(&page.offset.to_le_bytes()).update(&page.limit.to_le_bytes());
        for text in q.into_iter().chain(conditions.iter().map(|(_, value)| *value)) {
            hasher.update(&(text.len() as u64).to_le_bytes()).update(text.as_bytes());
        }
        for (field, _) in conditions {
            hasher.update(&(*field as u64).to_le_bytes());
        }
        let key = CacheKey::Search(*hasher.finalize().as_bytes());
        if let Some(Item::Doc(doc)) = self.cache.get(&key) {
            return Ok(Some(doc));
        }
        let all_path = layout::all_page_path(segment);
        let all_hash = self.listing.hash_of(&all_path).ok_or_else(|| self.missing(&all_path))?;
        let list = self.list(segment, Some(count), &all_path, &all_hash)?;
        // the entries each condition allows, and those whose names match `q`
        let mut lists = Vec::with_capacity(conditions.len());
        for (field, value) in conditions {
            lists.push(self.value_list(segment, &declared[*field], value)?);
        }
        let mut sets: Vec<HashSet<&[u8]>> = Vec::new();
        for list in &lists {
            sets.push(list.as_ref().map(|l| (0..l.count() as usize).map(|i| l.entry(i)).collect()).unwrap_or_default());
        }
        let named = match q {
            Some(q) => match self.matching_names(segment, count, q)? {
                Some(positions) => Some(positions),
                None => return Ok(None),
            },
            None => None,
        };
        let candidates: Box<dyn Iterator<Item = usize>> = match named {
            Some(positions) => Box::new(positions.into_iter()),
            None => Box::new(0..count as usize),
        };
        let found: Vec<&[u8]> =
            candidates.map(|i| list.entry(i)).filter(|entry| sets.iter().all(|set| set.contains(entry))).collect();
        let total = found.len() as u64;
        let shown = &found[page.range(total)];
        let named: Vec<(&str, &str)> = conditions.iter().map(|(f, v)| (declared[*f].name.as_str(), *v)).collect();
        let link = |p: Option<Page>| p.map(|p| query_page_url(&list.url, q.unwrap_or(""), named.iter().copied(), p));
        let mut out = Vec::new();
        paging::render_page(
            &mut out,
            total,
            link(page.next(total)).as_deref(),
            link(page.previous()).as_deref(),
            shown,
            self.pretty,
        );
        let doc = Arc::new(Doc { cached_as: Some(key), ..Doc::computed(out) });
        self.cache.insert(key, Item::Doc(doc.clone()), doc.bytes());
        Ok(Some(doc))
    }

    /// `page` of the list of the records whose `field` takes `value`, when the tree holds it: its
    /// page file, or a page rendered from its whole list as the build renders pages.
    fn value_page(
        &self,
        segment: &str,
        field: &FilterField,
        value: &str,
        page: Page,
    ) -> Result<Option<Arc<Doc>>, Unserved> {
        let Some((folder, all_path, all_hash)) = self.value_files(segment, field, value) else { return Ok(None) };
        let file = layout::page_path(&folder, page.limit, page.offset);
        if let Some(hash) = self.listing.hash_of(&file) {
            return self.read(&file, &hash).map(Some);
        }
        let mut hasher = blake3::Hasher::new();
        hasher.update(all_hash.as_bytes()).update(all_path.as_bytes());
        let key = CacheKey::Page(*hasher.finalize().as_bytes(), page);
        if let Some(Item::Doc(doc)) = self.cache.get(&key) {
            return Ok(Some(doc));
        }
        let list = self.list(&folder, None, &all_path, &all_hash)?;
        if page.is_everything(list.count()) {
            return self.read(&all_path, &all_hash).map(Some);
        }
        let list_url = layout::list_url(&self.base_url, segment);
        let tail = query_tail([(field.name.as_str(), value)]);
        let links = ListLinks { list_url: &list_url, query_tail: &tail, files_url: &list.url, style: self.links };
        let doc =
            Arc::new(Doc { cached_as: Some(key), ..Doc::computed(render_linked(&list, page, &links, self.pretty)) });
        self.cache.insert(key, Item::Doc(doc.clone()), doc.bytes());
        Ok(Some(doc))
    }

    /// The entries of the list of the records whose `field` takes `value`; `None` when the tree
    /// holds no such list (no record takes the value).
    fn value_list(&self, segment: &str, field: &FilterField, value: &str) -> Result<Option<Arc<List>>, Unserved> {
        let Some((folder, all_path, all_hash)) = self.value_files(segment, field, value) else { return Ok(None) };
        self.list(&folder, None, &all_path, &all_hash).map(Some)
    }

    /// The folder of the list of the records whose `field` takes `value`, its `_pages/all` file
    /// and that file's hash, when the tree holds that list.
    fn value_files(&self, segment: &str, field: &FilterField, value: &str) -> Option<(String, String, blake3::Hash)> {
        let folder = layout::filter_list(segment, &field.name, value);
        let all_path = layout::all_page_path(&folder);
        let all_hash = self.listing.hash_of(&all_path)?;
        Some((folder, all_path, all_hash))
    }

    /// The list positions of the records of `segment` (a list of `count`) whose names match `q`,
    /// from its names document; `None` for a tree without names documents.
    fn matching_names(&self, segment: &str, count: u64, q: &str) -> Result<Option<Vec<usize>>, Unserved> {
        let names_path = layout::names_path(segment);
        let Some(names_hash) = self.listing.hash_of(&names_path) else { return Ok(None) };
        let mut names = self.names_file(&names_path, &names_hash, count, None)?;
        // a split names document: its shards, in list order
        for (k, shard) in std::mem::take(&mut names.shards).into_iter().enumerate() {
            let path = layout::names_shard_path(segment, k);
            let hash = self.listing.hash_of(&path).ok_or_else(|| self.missing(&path))?;
            names.results.extend(self.names_file(&path, &hash, shard.count, Some(shard.offset))?.results);
        }
        if names.results.len() as u64 != count {
            return Err(self.not_names(&names_path, count));
        }
        Ok(Some(search::matching(&names, q)))
    }

    /// A names document or shard (`offset`: a shard's first list position), checked: `count`
    /// entries, or shards for them.
    fn names_file(
        &self,
        path: &str,
        hash: &blake3::Hash,
        count: u64,
        offset: Option<u64>,
    ) -> Result<search::NamesDoc, Unserved> {
        let doc = self.read(path, hash)?;
        serde_json::from_slice(&doc.body)
            .ok()
            .filter(|doc: &search::NamesDoc| {
                let split = !doc.shards.is_empty() && offset.is_none();
                doc.count == count && doc.offset == offset && (split || doc.results.len() as u64 == count)
            })
            .ok_or_else(|| self.not_names(path, count))
    }

    fn not_names(&self, path: &str, count: u64) -> Unserved {
        let detail = format!(
            "{}: not a names document of {count} entries: rebuild with `gen build`",
            self.dir.join(path).display()
        );
        Unserved { path: path.to_string(), detail, busy: false }
    }

    /// The answer when the manifest does not list a file every tree holds.
    fn missing(&self, path: &str) -> Unserved {
        let detail = format!("{}: not listed in the manifest: rebuild with `gen build`", self.dir.join(path).display());
        Unserved { path: path.to_string(), detail, busy: false }
    }
}
