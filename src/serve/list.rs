//! The list answers: a list page asked plainly, paged, with `?q=` (see [`crate::search`]) or with
//! declared filters (`?FIELD=VALUE`, see [`crate::filters`]), from the [`ListQuery`] the router
//! read, answered from the files a build writes for them, as the edge handlers answer them from
//! the same files (`src/hosts/edge/list.js`, whose `listAnswer` follows [`answer`] step by
//! step).
//!
//! - No `q` and no filter: the list's page file, or a page rendered from its `_pages/all` file
//!   (the whole list, when the page holds it all, is that file, sent from it when too large for
//!   the cache).
//! - One filter alone, with a value the tree holds: that value's list, answered as a list is (its
//!   page files, or a page rendered from its `_pages/all` file, linked in the tree's link style).
//! - Anything else (`q`, several filters, a value the tree holds no list of): the entries of the
//!   value lists that are in every one of them and whose names match `q`, in list order, each
//!   page rendered now with query links (`?offset=&limit=`, then `q`, then the filters in the
//!   order they are declared).

use super::item::{Doc, Item, Key as CacheKey, List};
use super::route::ListQuery;
use super::tree::{ServedTree, Unserved, render, render_linked};
use crate::answers;
use crate::filters::{self, FilterField, query_page_url, query_tail};
use crate::paging::{self, ListLinks, Page};
use crate::search;
use crate::tree::layout;
use std::collections::HashSet;
use std::sync::Arc;

/// A value list's folder, its `_pages/all` file and that file's hash.
type ValueFiles = (String, String, blake3::Hash);

/// What a list request gets.
#[derive(Debug)]
pub(crate) enum ListAnswer {
    /// 400: a parameter that is no filter of the list, or more filters than a list answers.
    Refused(serde_json::Value),
    /// The list's whole page file, at this key (sent from its file when too large for the cache).
    Whole(String),
    /// A page: a file of the tree, or rendered now; `Ok(None)` when the tree holds no answer.
    Page(Result<Option<Arc<Doc>>, Unserved>),
}

/// The answer to `query` of the list of `segment` (a list the tree holds), asking for `page`:
/// the parameters matched against the list's declared filters (a resource without filters
/// ignores them, as the public API does), then the page, narrowed or not.
pub(crate) fn answer(tree: &ServedTree, segment: &str, query: &ListQuery, page: Page) -> ListAnswer {
    let declared = tree.filters(segment);
    let given = if declared.is_empty() { &[][..] } else { &query.conditions[..] };
    let conditions = match filters::order_conditions(declared, given) {
        Err(name) => return ListAnswer::Refused(answers::not_a_filter(segment, name, declared)),
        // each condition may be one read of its value's list: bounded
        Ok(conditions) if conditions.len() > filters::MAX_CONDITIONS => {
            return ListAnswer::Refused(answers::too_many_filters(filters::MAX_CONDITIONS));
        }
        Ok(conditions) => conditions,
    };
    let whole = tree.count(segment).is_some_and(|count| page.is_everything(count));
    if query.q.is_none() && conditions.is_empty() && whole {
        return ListAnswer::Whole(layout::all_page_key(segment));
    }
    ListAnswer::Page(tree.narrowed(segment, query.q.as_deref(), &conditions, page))
}

/// The [`filters::IGNORED_HEADER`] value of the answer to `query` of the list of `segment`: the
/// parameters that are neither the list's own nor a filter it declares; `None` when there are
/// none (docs/serve.md, "Ignored parameters").
pub(crate) fn ignored_header(tree: &ServedTree, segment: &str, query: &ListQuery) -> Option<String> {
    let declared = tree.filters(segment);
    filters::ignored_header(declared, &filters::ignored(declared, &query.params))
}

impl ServedTree {
    /// `page` of the list of `segment`: the file that holds it when there is one, else rendered
    /// from the list's entries (byte for byte as the build would have written it) and cached.
    pub(crate) fn page(&self, segment: &str, page: Page) -> Result<Option<Arc<Doc>>, Unserved> {
        let Some(&count) = self.lists.get(segment) else { return Ok(None) };
        if page.is_everything(count) {
            return self.doc(&layout::all_page_key(segment));
        }
        let file = layout::page_path(segment, page.limit, page.offset);
        if let Some(hash) = self.hash_of(&file)? {
            return self.read(&file, &hash).map(Some);
        }
        let all_path = layout::all_page_path(segment);
        let Some(all_hash) = self.hash_of(&all_path)? else { return Ok(None) };
        let key = CacheKey::Page(*all_hash.as_bytes(), page);
        if let Some(Item::Doc(doc)) = self.cache.get(&key) {
            return Ok(Some(doc));
        }
        let list = self.list(segment, Some(count), &all_path, &all_hash)?;
        let doc = Arc::new(Doc { cached_as: Some(key), ..Doc::computed(render(&list, page, self.links, self.pretty)) });
        self.cache.insert(key, Item::Doc(doc.clone()), doc.bytes());
        Ok(Some(doc))
    }

    /// `page` of the records of the list of `segment` that match `q` (when given) and every one
    /// of `conditions` (a declared field's place and a value, see
    /// [`crate::filters::order_conditions`]); `Ok(None)` when the tree holds no such list, or no
    /// names document for a `q` (a tree built before them).
    pub(crate) fn narrowed(
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
        let all_hash = self.hash_of(&all_path)?.ok_or_else(|| self.missing(&all_path))?;
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
            Some(q) => match self.matching_names(segment, &list, q)? {
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
        let Some((folder, all_path, all_hash)) = self.value_files(segment, field, value)? else { return Ok(None) };
        let file = layout::page_path(&folder, page.limit, page.offset);
        if let Some(hash) = self.hash_of(&file)? {
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
        let Some((folder, all_path, all_hash)) = self.value_files(segment, field, value)? else { return Ok(None) };
        self.list(&folder, None, &all_path, &all_hash).map(Some)
    }

    /// The folder of the list of the records whose `field` takes `value`, its `_pages/all` file
    /// and that file's hash, when the tree holds that list.
    fn value_files(&self, segment: &str, field: &FilterField, value: &str) -> Result<Option<ValueFiles>, Unserved> {
        let folder = layout::filter_list(segment, &field.name, value);
        let all_path = layout::all_page_path(&folder);
        let Some(all_hash) = self.hash_of(&all_path)? else { return Ok(None) };
        Ok(Some((folder, all_path, all_hash)))
    }

    /// The list positions of the records of `segment` (its list `list`) whose names match `q`,
    /// from its names document, read one file at a time and matched line by line (see
    /// [`crate::search`]); `None` for a tree without names documents. A names document that
    /// names another list than `list` is refused (503), as a file that does not match.
    fn matching_names(&self, segment: &str, list: &List, q: &str) -> Result<Option<Vec<usize>>, Unserved> {
        let names_path = layout::names_path(segment);
        let Some(names_hash) = self.hash_of(&names_path)? else { return Ok(None) };
        let count = list.count();
        let stamp = search::ListStamp { count, sha256: self.list_sha256(segment, list)? };
        let folded = search::fold(q);
        let mut found = Vec::new();
        let doc = self.read(&names_path, &names_hash)?;
        let (head, lines) = search::names_head(&doc.body).ok_or_else(|| self.not_names(&names_path, count))?;
        if head.list != stamp || head.count != count || head.offset.is_some() {
            return Err(self.not_names(&names_path, count));
        }
        if let Some(lines) = lines {
            let seen = search::match_lines(lines, &folded, 0, &mut found);
            return if seen == Some(count as usize) {
                Ok(Some(found))
            } else {
                Err(self.not_names(&names_path, count))
            };
        }
        drop(doc);
        // a split names document: its shards, in list order, one at a time
        let mut seen = 0;
        for (k, shard) in head.shards.iter().enumerate() {
            let path = layout::names_shard_path(segment, k);
            let hash = self.hash_of(&path)?.ok_or_else(|| self.missing(&path))?;
            let doc = self.read(&path, &hash)?;
            let held = search::names_head(&doc.body).filter(|(shard_head, _)| {
                shard_head.list == stamp
                    && (shard_head.offset, shard_head.count) == (Some(shard.offset), shard.count)
                    && shard.offset == seen
            });
            let lines = held.and_then(|(_, lines)| lines).ok_or_else(|| self.not_names(&names_path, count))?;
            match search::match_lines(lines, &folded, seen as usize, &mut found) {
                Some(n) if n as u64 == shard.count => seen += shard.count,
                _ => return Err(self.not_names(&names_path, count)),
            }
        }
        if seen != count {
            return Err(self.not_names(&names_path, count));
        }
        Ok(Some(found))
    }

    /// The SHA-256 (hex) of the `_pages/all` file of `segment`'s list `list`, as the build wrote
    /// it (read again when the tree is served rebased), computed once per list.
    fn list_sha256(&self, segment: &str, list: &List) -> Result<String, Unserved> {
        if let Some(sha256) = list.sha256.get() {
            return Ok(sha256.clone());
        }
        // One list hashed at a time, the searches that need it meanwhile waiting for that hash:
        // a rebased tree's `_pages/all` is read raw here, outside the cache and the budget, and
        // 32 searches at once each read their own copy (11 MB each at 150,000 records).
        let _hashing = self.list_parse.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(sha256) = list.sha256.get() {
            return Ok(sha256.clone());
        }
        let all_path = layout::all_page_path(segment);
        let all_hash = self.hash_of(&all_path)?.ok_or_else(|| self.missing(&all_path))?;
        let sha256 = if self.base_url == self.built_base_url {
            search::sha256_hex(&self.read(&all_path, &all_hash)?.body)
        } else {
            search::sha256_hex(&self.read_source(&all_path, &all_hash)?.0)
        };
        Ok(list.sha256.get_or_init(|| sha256).clone())
    }

    fn not_names(&self, path: &str, count: u64) -> Unserved {
        let detail = format!(
            "{}: not the names document of the list of {count} entries served beside it (a names file and \
             `_pages/all` of different builds): repair the tree with `gen build --verify`",
            self.dir.join(path).display()
        );
        Unserved { path: path.to_string(), detail, busy: false }
    }

    /// The answer when the manifest does not list a file every tree holds.
    fn missing(&self, path: &str) -> Unserved {
        let detail = format!(
            "{}: not listed in the manifest: repair the tree with `gen build --verify`",
            self.dir.join(path).display()
        );
        Unserved { path: path.to_string(), detail, busy: false }
    }
}
