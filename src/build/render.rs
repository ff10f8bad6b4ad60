//! Validate and render one document: every string that starts with `/api/v2/` is checked
//! against the dataset's index and made absolute with the base URL; nothing else changes.

use crate::build::extract::{self, Extracts};
use crate::build::plan::Content;
use crate::build::schema::{Inferred, REFERENCE_REF};
use crate::data::load::{Dataset, Source};
use crate::json::read_tape;
use crate::json::tape::{Kind, Node, Tape};
use crate::paging;
use crate::problem::{Problem, Step, json_path};
use crate::search;
use crate::tree::layout::{self, API_PREFIX};
use crate::tree::manifest::BuildSettings;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, OnceLock, RwLock};
use view::Rendered;

mod view;

/// Renders documents of one dataset with one base URL and format.
pub struct Renderer<'a> {
    /// The records rendered from.
    pub dataset: &'a Dataset,
    /// Scheme and host the urls of the documents start with.
    pub base_url: &'a str,
    /// Indent the JSON.
    pub pretty: bool,
}

/// What a reference url points at.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Referent<'s> {
    /// `/api/v2/<segment>/`
    List {
        /// The resource.
        segment: &'s str,
    },
    /// `/api/v2/<segment>/<id>/`
    Record {
        /// The resource.
        segment: &'s str,
        /// The record's id.
        id: i64,
    },
    /// `/api/v2/<segment>/<id>/<name>` (with or without a trailing slash)
    SubDoc {
        /// The resource.
        segment: &'s str,
        /// The record's id.
        id: i64,
        /// The sub-document's name.
        name: &'s str,
    },
}

/// Parses a root-relative reference url. `Err` explains the expected form.
pub(crate) fn parse_reference(url: &str) -> Result<Referent<'_>, String> {
    let form = || format!("expected {API_PREFIX}<segment>/<id>/, e.g. {API_PREFIX}berry-firmness/2/");
    let rest = url.strip_prefix(API_PREFIX).ok_or_else(form)?;
    let parts: Vec<&str> = rest.split('/').collect();
    let segment = parts[0];
    if !crate::config::is_valid_segment(segment) {
        return Err(format!("malformed url {url:?}: {}", form()));
    }
    let id = |text: &str| {
        crate::config::parse_id(text)
            .ok_or_else(|| format!("malformed url {url:?}: refer to a record by its integer id ({})", form()))
    };
    match parts.as_slice() {
        [_, ""] => Ok(Referent::List { segment }),
        [_, record, ""] => Ok(Referent::Record { segment, id: id(record)? }),
        [_, record, name] | [_, record, name, ""] if crate::config::is_valid_name(name) => {
            Ok(Referent::SubDoc { segment, id: id(record)?, name })
        }
        _ => Err(format!("malformed url {url:?}: {}", form())),
    }
}

impl Renderer<'_> {
    /// A malformed reference's message, made precise when the fix is plain: a missing final
    /// `/`, or a record named where its id belongs.
    fn hint(&self, url: &str, message: String) -> String {
        let with_slash = format!("{url}/");
        if parse_reference(&with_slash).is_ok() {
            return format!("malformed url {url:?}: add the trailing /: {with_slash:?}");
        }
        let parts: Vec<&str> = url.strip_prefix(API_PREFIX).unwrap_or("").split('/').collect();
        if let [segment, key, ""] = parts.as_slice()
            && let Some(resource) = self.dataset.resources.get(*segment)
        {
            let names = resource.records.iter().filter_map(|r| r.name.as_deref().map(|name| (name, r.id)));
            if let Some((_, id)) = names.clone().find(|(name, _)| name == key) {
                return format!("{message}: {key:?} is {segment} {id}, so write \"{API_PREFIX}{segment}/{id}/\"");
            }
            if let Some(meant) = crate::problem::closest(key, names.map(|(name, _)| name)) {
                return format!("{message}: did you mean {meant:?}? refer to it by its id");
            }
        }
        message
    }

    /// Reads, checks and renders the document in `file`. Returns the bytes to publish, or
    /// every problem found in it.
    pub fn render_file(&self, source: &Source) -> Result<Vec<u8>, Vec<Problem>> {
        self.render_file_observed(source, |_| {})
    }

    /// Like [`Renderer::render_file`], and shows the rendered value to `observe` (for schema
    /// inference) before it is serialised.
    pub(crate) fn render_file_observed(
        &self,
        source: &Source,
        observe: impl FnOnce(Rendered<'_>),
    ) -> Result<Vec<u8>, Vec<Problem>> {
        let file = &source.problem_path();
        // held from before the read until the document is rendered: the parsed tape is several
        // times the text
        let _share = crate::data::parse_budget::hold(source.size());
        let bytes = source.read().map_err(|problem| vec![problem])?;
        let tape = read_tape(source.at(), &bytes).map_err(|p| vec![p])?;
        let mut problems = Vec::new();
        let mut steps = Vec::new();
        self.check(file, tape.root(), &mut steps, &mut problems);
        if !problems.is_empty() {
            return Err(problems);
        }
        let rendered = Rendered::top(tape.root(), self.base_url);
        observe(rendered);
        Ok(self.serialize(&rendered))
    }

    /// Serialises a value compactly or pretty (two-space indent), keys sorted.
    pub(crate) fn serialize(&self, value: &impl serde::Serialize) -> Vec<u8> {
        let result = if self.pretty { serde_json::to_vec_pretty(value) } else { serde_json::to_vec(value) };
        result.expect("a JSON value always serialises")
    }

    /// Checks every string of `node` (each object's members in key order, as they are
    /// written): the references the rendered document makes absolute ([`Rendered`]).
    fn check<'v>(&self, file: &Path, node: Node<'v>, steps: &mut Vec<Step<'v>>, problems: &mut Vec<Problem>) {
        match node.kind() {
            Kind::Object(_) => {
                let claimed_name = node.get("name").and_then(Node::as_str);
                for (key, child) in node.sorted_members() {
                    steps.push(Step::Key(key));
                    if let Some(text) = child.as_str() {
                        let name = if key == "url" { claimed_name } else { None };
                        self.check_string(file, key == "url", name, text, steps, problems);
                    } else {
                        self.check(file, child, steps, problems);
                    }
                    steps.pop();
                }
            }
            Kind::Array(_) => {
                for (i, child) in node.items().enumerate() {
                    steps.push(Step::Index(i));
                    if let Some(text) = child.as_str() {
                        self.check_string(file, false, None, text, steps, problems);
                    } else {
                        self.check(file, child, steps, problems);
                    }
                    steps.pop();
                }
            }
            _ => {}
        }
    }

    /// Checks one string: a reference, when it starts with `/api/v2/`, to a document the tree has.
    fn check_string(
        &self,
        file: &Path,
        is_url_key: bool,
        claimed_name: Option<&str>,
        text: &str,
        steps: &[Step<'_>],
        problems: &mut Vec<Problem>,
    ) {
        if !text.starts_with(API_PREFIX) {
            if is_url_key && text.contains(API_PREFIX) {
                problems.push(Problem::new(
                    file,
                    json_path(steps),
                    format!("reference url {text:?} must be root-relative: write it from {API_PREFIX} on; the build adds the base URL"),
                ));
            }
            return;
        }
        if let Err(message) = self.check_reference(text, claimed_name) {
            problems.push(Problem::new(file, json_path(steps), message));
        }
    }

    fn check_reference(&self, url: &str, claimed_name: Option<&str>) -> Result<(), String> {
        let target = parse_reference(url).map_err(|message| self.hint(url, message))?;
        let segment = match target {
            Referent::List { segment } | Referent::Record { segment, .. } | Referent::SubDoc { segment, .. } => segment,
        };
        let config = &self.dataset.config;
        // the data folder as the user names it (`mydata/`), in what to add
        let data = crate::fsutil::show_dir(&self.dataset.dir);
        let Some(resource) = self.dataset.resources.get(segment) else {
            if config.external.iter().any(|e| e == segment) {
                return Ok(());
            }
            let known = self.dataset.resources.keys().chain(&config.external).map(String::as_str);
            if let Some(meant) = crate::problem::closest(segment, known) {
                return Err(format!(
                    "{url:?} points to segment {segment:?}, which {data} does not hold: did you mean {meant:?}?"
                ));
            }
            return Err(format!(
                "{url:?} points to segment {segment:?}, which {data} does not hold: add {data}{segment}/ or declare it in \"external\" in gen.json"
            ));
        };
        let (id, subdoc) = match target {
            Referent::List { .. } => return Ok(()),
            Referent::Record { id, .. } => (id, None),
            Referent::SubDoc { id, name, .. } => (id, Some(name)),
        };
        // what to add is said in the resource's layout: a table's line, or a file
        let table = resource.records.first().is_some_and(|record| record.line.is_some());
        let Some(record) = resource.get(id) else {
            let add = match table {
                true => format!("add a line with \"id\": {id} to {data}{segment}.ndjson"),
                false => format!("add {data}{segment}/{id}.json"),
            };
            return Err(format!("{url:?} points to {segment} {id}, which does not exist: {add}"));
        };
        if let Some(name) = subdoc {
            if !record.subdocs.iter().any(|s| *s.name == *name) {
                let add = match table {
                    true => format!("add a line {{\"id\": {id}, \"document\": ...}} to {data}{segment}.{name}.ndjson"),
                    false => format!("add {data}{segment}/{id}/{name}.json"),
                };
                return Err(format!("{url:?} points to a sub-document that does not exist: {add}"));
            }
            return Ok(());
        }
        match (claimed_name, record.name.as_deref()) {
            (Some(claimed), Some(actual)) if claimed != actual => {
                Err(format!("reference names {claimed:?} but {url} is named {actual:?}: write \"name\": {actual:?}"))
            }
            (Some(claimed), None) => {
                Err(format!("reference names {claimed:?} but {url} has no name: remove \"name\" from the reference"))
            }
            _ => Ok(()),
        }
    }
}

/// Renders every kind of document of the tree.
pub(crate) struct DocumentRenderer<'a> {
    /// The renderer of records and sub-documents.
    pub(crate) records: Renderer<'a>,
    /// The settings the tree is built with.
    pub(crate) options: &'a BuildSettings,
    /// Each resource's list stamp (for its names document), made once when first asked for.
    list_stamps: BTreeMap<&'a str, OnceLock<search::ListStamp>>,
    meta: Vec<u8>,
    /// What rendering has seen of each resource's records, and of each kind of sub-document
    /// (`(segment, Some(name))`), for the schemas.
    seen: BTreeMap<(&'a str, Option<&'a str>), Mutex<Inferred>>,
    /// The names and filter values of the resources whose documents of them this build renders
    /// (set after the plan, which needs them too; let go once those documents are rendered).
    extracts: RwLock<Extracts>,
}

impl<'a> DocumentRenderer<'a> {
    /// Prepares the renderer: the meta document. A list's entries are not held: each page
    /// renders the entries it shows from the dataset ([`DocumentRenderer::entries`]), so that a
    /// million records' entries are never in memory at once.
    pub(crate) fn new(dataset: &'a Dataset, options: &'a BuildSettings) -> DocumentRenderer<'a> {
        let records = Renderer { dataset, base_url: &options.base_url, pretty: options.pretty };
        let list_stamps = dataset.resources.keys().map(|segment| (segment.as_str(), OnceLock::new())).collect();
        let bulk_data = options.bulk.then(|| layout::list_url(&options.base_url, layout::BULK_SEGMENT));
        let meta = records.serialize(&serde_json::json!({
            "built_at": options.built_at,
            "bulk_data": bulk_data,
            "data_hash": options.data_hash,
            "deploy_date": options.deploy_date,
            "generator": options.generator,
            "hash": options.hash,
            "links": options.links,
            "page_sizes": options.page_sizes,
            "resources": dataset.resources.len(),
            "records": dataset.record_count(),
        }));
        let mut seen = BTreeMap::new();
        for (segment, resource) in &dataset.resources {
            seen.insert((segment.as_str(), None), Mutex::default());
            for record in &resource.records {
                for sub in &record.subdocs {
                    seen.entry((segment.as_str(), Some(&*sub.name))).or_insert_with(Mutex::default);
                }
            }
        }
        DocumentRenderer { records, options, list_stamps, meta, seen, extracts: RwLock::new(Extracts::new()) }
    }

    /// Renders one planned document.
    pub(crate) fn render(&self, content: &Content<'_>) -> Result<Vec<u8>, Vec<Problem>> {
        let dataset = self.records.dataset;
        match *content {
            Content::Root => {
                // resources only: every entry is a list (the bulk-data index is named by meta,
                // the OpenAPI document and the root answer's `Link` header, docs/tree.md)
                let root: BTreeMap<&str, String> = dataset
                    .resources
                    .keys()
                    .map(|s| (s.as_str(), layout::list_url(&self.options.base_url, s)))
                    .collect();
                Ok(self.records.serialize(&serde_json::to_value(root).expect("a map serialises")))
            }
            Content::Meta => Ok(self.meta.clone()),
            Content::Record { segment, position } => {
                let source = dataset.record_source(segment, &dataset.resources[segment].records[position]);
                self.records.render_file_observed(&source, |value| self.observe(segment, None, value))
            }
            Content::SubDoc { segment, position, subdoc } => {
                let record = &dataset.resources[segment].records[position];
                let sub = &record.subdocs[subdoc];
                let source = dataset.subdoc_source(segment, record.id, sub);
                self.records.render_file_observed(&source, |value| self.observe(segment, Some(&sub.name), value))
            }
            Content::Page { segment, page } => {
                let list_url = layout::list_url(&self.options.base_url, segment);
                let links = paging::ListLinks::of_list(&list_url, self.options.links);
                let count = dataset.resources[segment].records.len() as u64;
                let shown = self.entries_at(segment, page.range(count));
                Ok(paging::render_shown_page(count, shown, &links, page, self.options.pretty))
            }
            Content::Names { segment } => self.names(segment, None),
            Content::NamesShard { segment, shard } => self.names(segment, Some(shard)),
            Content::FilterValues { segment, field } => {
                let extracts = self.extracts.read().expect("no panic while rendering");
                let values = &extracts[segment].fields[field];
                let declared = &self.options.filters[segment][field];
                Ok(extract::values_document(self.options, segment, declared, values))
            }
            Content::FilterPage { segment, field, value, page } => {
                let extracts = self.extracts.read().expect("no panic while rendering");
                let (text, positions) = &extracts[segment].fields[field][value];
                let declared = &self.options.filters[segment][field];
                let count = positions.len() as u64;
                let shown = self.entries_at(segment, positions[page.range(count)].iter().map(|&i| i as usize));
                Ok(extract::filter_page(self.options, segment, count, shown, (declared, text), page))
            }
        }
    }

    /// Renders one planned document as [`DocumentRenderer::render`] does, but a record unseen by the
    /// schemas (they saw it already: a bulk-data file renders it again when the tree cannot give
    /// it back).
    pub(crate) fn render_unobserved(&self, content: &Content<'_>) -> Result<Vec<u8>, Vec<Problem>> {
        let Content::Record { segment, position } = *content else { return self.render(content) };
        let dataset = self.records.dataset;
        self.records.render_file(&dataset.record_source(segment, &dataset.resources[segment].records[position]))
    }

    /// The names document of `segment` (or its shard `shard`, see [`search::names_shards`]), from
    /// its extract (made now when the build has none: a record that changed since the load read
    /// it is then a problem).
    fn names(&self, segment: &str, shard: Option<usize>) -> Result<Vec<u8>, Vec<Problem>> {
        let count = self.records.dataset.resources[segment].records.len();
        let list = self.list_stamps[segment].get_or_init(|| self.list_stamp(segment));
        if shard.is_none() && search::names_shards(count) > 0 {
            let base = &self.options.base_url;
            return Ok(search::render_names_index(list, |k| layout::names_shard_url(base, segment, k)));
        }
        let made;
        let extracts = self.extracts.read().expect("no panic while rendering");
        // an extract held without its names ([`extract::Extracted::names`]) has none to give
        let entries = match extracts.get(segment).filter(|extracted| extracted.names.len() == count) {
            Some(extracted) => &extracted.names,
            None => {
                made = extract::extract_one(self.records.dataset, segment, &[], None);
                if !made.problems.is_empty() {
                    return Err(made.problems);
                }
                &made.names
            }
        };
        Ok(match shard {
            Some(k) => search::render_names_shard(entries, k, list),
            None => search::render_names_raw(entries, list),
        })
    }
}

impl DocumentRenderer<'_> {
    /// Sets the names and filter values the documents made of them are rendered from.
    pub(crate) fn set_extracts(&mut self, extracts: Extracts) {
        *self.extracts.get_mut().expect("no panic while rendering") = extracts;
    }

    /// Lets go of the extracts once every document made of them is rendered (a names entry
    /// a record: 150 MB at a million records, held no longer than needed).
    pub(crate) fn release_extracts(&self) {
        std::mem::take(&mut *self.extracts.write().expect("no panic while rendering"));
        // a names entry a record, small blocks: kept by the allocator, they would stay beside
        // the new index's document table, which is allocated apart
        crate::data::parse_budget::give_back_freed_memory();
    }

    /// The list entries of `segment` at the list positions `positions`, serialised as
    /// [`paging::render_entry`] does.
    fn entries_at<'s>(
        &'s self,
        segment: &'s str,
        positions: impl Iterator<Item = usize> + 's,
    ) -> impl Iterator<Item = Vec<u8>> + 's {
        let records = &self.records.dataset.resources[segment].records;
        let base_url = &self.options.base_url;
        let entry = move |r: &crate::data::load::Record| {
            paging::render_entry(r.name.as_deref(), &layout::record_url(base_url, segment, r.id), self.options.pretty)
        };
        positions.map(move |i| entry(&records[i]))
    }

    /// The stamp of the list of `segment`, which its names document names: its `_pages/all`
    /// file's bytes, rendered again to hash them (an entry at a time, not held).
    fn list_stamp(&self, segment: &str) -> search::ListStamp {
        let count = self.records.dataset.resources[segment].records.len();
        let list_url = layout::list_url(&self.options.base_url, segment);
        let links = paging::ListLinks::of_list(&list_url, self.options.links);
        let whole = paging::Page { offset: 0, limit: (count as u64).max(1) };
        let entries = self.entries_at(segment, 0..count);
        search::ListStamp::of_rendered(count as u64, |hasher| {
            paging::render_shown_page_into(hasher, count as u64, entries, &links, whole, self.options.pretty)
        })
    }

    fn observe(&self, segment: &str, subdoc: Option<&str>, value: Rendered<'_>) {
        if let Some(seen) = self.seen.get(&(segment, subdoc)) {
            seen.lock().expect("no panic while observing").observe(value);
        }
    }

    /// Starts the schemas from what a previous build saw (an incremental build renders only
    /// the documents that changed): kinds this dataset no longer has are ignored.
    pub(crate) fn seed_schemas(&self, seen: Vec<(String, Option<String>, Inferred)>) {
        for (segment, subdoc, inferred) in seen {
            if let Some(slot) = self.seen.get(&(segment.as_str(), subdoc.as_deref())) {
                *slot.lock().expect("no panic while observing") = inferred;
            }
        }
    }

    /// Takes back what rendering a previous version of a document showed the schemas, given its
    /// published bytes (for a document of `segment`, or of its sub-document kind `subdoc`).
    pub(crate) fn forget(&self, segment: &str, subdoc: Option<&str>, published: &[u8]) -> Result<(), String> {
        let value = Tape::parse(published).map_err(|e| e.to_string())?;
        let slot = self.seen.get(&(segment, subdoc)).ok_or("no such kind of document")?;
        let mut seen = slot.lock().expect("no panic while observing");
        if seen.count() == 0 {
            return Err("nothing seen to forget".into());
        }
        seen.forget(value.root());
        Ok(())
    }

    /// What rendering has seen, for the build index: one entry per resource and sub-document
    /// kind.
    pub(crate) fn schemas(&self) -> Vec<(String, Option<String>, Inferred)> {
        self.seen
            .iter()
            .map(|(&(segment, subdoc), seen)| {
                let seen = seen.lock().expect("no panic while observing").clone();
                (segment.to_string(), subdoc.map(str::to_string), seen)
            })
            .collect()
    }

    /// The schema inferred from every rendered record of `segment` (or, with `subdoc`, from
    /// every sub-document of that name): call it once every document has been rendered.
    pub(crate) fn inferred_schema(&self, segment: &str, subdoc: Option<&str>) -> Value {
        let seen = self.seen[&(segment, subdoc)].lock().expect("no panic while observing");
        seen.to_schema(REFERENCE_REF)
    }

    /// The names of the kinds of sub-document the records of `segment` have, sorted.
    pub(crate) fn subdoc_kinds(&self, segment: &str) -> Vec<&str> {
        self.seen.keys().filter_map(|&(s, sub)| sub.filter(|_| s == segment)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_forms() {
        assert_eq!(parse_reference("/api/v2/berry/"), Ok(Referent::List { segment: "berry" }));
        assert_eq!(parse_reference("/api/v2/berry/1/"), Ok(Referent::Record { segment: "berry", id: 1 }));
        assert_eq!(
            parse_reference("/api/v2/move-ailment/-1/"),
            Ok(Referent::Record { segment: "move-ailment", id: -1 })
        );
        assert_eq!(
            parse_reference("/api/v2/creature/132/encounters"),
            Ok(Referent::SubDoc { segment: "creature", id: 132, name: "encounters" })
        );
        for bad in [
            "/api/v2/",
            "/api/v2/berry",
            "/api/v2/berry/1",
            "/api/v2/berry/cheri/",
            "/api/v2/Berry/1/",
            "/api/v2/berry/01/",
            "/api/v2/berry//",
            "/api/v2/berry/1/a/b",
            "/api/v2/../1/",
        ] {
            assert!(parse_reference(bad).is_err(), "{bad}");
        }
    }
}
