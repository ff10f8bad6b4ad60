//! The HTML view's pages of documents, within `--cache-mb`.
//!
//! Rendering a page parses its JSON and writes the page, which takes several times the JSON's
//! bytes at once, and the page is then held while it is sent. So a page of a JSON body over
//! [`SMALL_JSON`] is rendered within the budget of answers in flight (see
//! [`super::budget`]): the render holds what [`render_cost`] counts, then the page's own bytes
//! while any answer sends it, and a render that waits [`IN_FLIGHT_WAIT`] for room is
//! answered 503. The requests for the same page meanwhile (same tree, target, status, JSON and
//! problems shown) wait for that one render and share its page, however slowly each is sent.
//! A document too large for the cache (sent from its file, see [`super::stream`]) is not
//! rendered at all: its page says so and links its JSON.

use super::budget::Permit;
use super::html::{self, Preview};
use super::route::Target;
use super::tree::{IN_FLIGHT_WAIT, ServedTree};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, OnceLock, Weak};

/// Pages of JSON bodies up to this size are rendered outside the budget (each answer holds at
/// most one: a few hundred KiB).
pub(crate) const SMALL_JSON: usize = 64 << 10;

/// Bytes rendering a page holds at once for each byte of its JSON: the page (about three times
/// the JSON) and its copy into the template.
pub(crate) const RENDER_BYTES_PER_BYTE: usize = 6;

/// Bytes rendering a page holds at once for each value of its JSON (counted as the `,` `:` `[`
/// `{` it holds, plus one): the JSON parsed, about 64 bytes a value, and the page's share of it.
pub(crate) const RENDER_BYTES_PER_VALUE: usize = 112;

/// Most bytes rendering the page of `json` holds at once (see the constants above; measured on
/// a 13 MB record of a million strings: 180 MB, counted 202 MB).
pub(crate) fn render_cost(json: &[u8]) -> usize {
    let values = json.iter().filter(|b| matches!(b, b',' | b':' | b'[' | b'{')).count() + 1;
    json.len().saturating_mul(RENDER_BYTES_PER_BYTE).saturating_add(values.saturating_mul(RENDER_BYTES_PER_VALUE))
}

/// A page of the HTML view, with its bytes in the budget of answers in flight while any answer
/// sends it.
#[derive(Debug)]
pub struct HtmlPage {
    /// The page's bytes.
    pub(crate) bytes: Vec<u8>,
    _held: Option<Permit>,
}

impl HtmlPage {
    /// A page counted in no budget (a small one).
    pub(crate) fn unheld(bytes: Vec<u8>) -> Arc<HtmlPage> {
        Arc::new(HtmlPage { bytes, _held: None })
    }
}

/// One render under way; `None` when it found no room in the budget.
type Flight = OnceLock<Option<Arc<HtmlPage>>>;

/// The renders under way, and the pages answers still send, by [`page_key`].
#[derive(Default)]
struct Pages {
    rendering: HashMap<[u8; 32], Arc<Flight>>,
    sending: HashMap<[u8; 32], Weak<HtmlPage>>,
}

static PAGES: LazyLock<Mutex<Pages>> = LazyLock::new(Mutex::default);

/// The HTML view of `json`, the answer to `target` with `status` (see the module's doc); `None`
/// when no room came for its render within [`IN_FLIGHT_WAIT`] (answered 503).
pub(crate) fn document(
    tree: &ServedTree,
    preview: &Preview,
    target: &Target<'_>,
    status: u16,
    json: &[u8],
) -> Option<Arc<HtmlPage>> {
    if json.len() <= SMALL_JSON {
        return Some(HtmlPage::unheld(html::document(tree, preview, target, status, json)));
    }
    let key = page_key(tree, preview, target.text, status, json);
    let lock = || PAGES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let flight = {
        let mut pages = lock();
        if let Some(page) = pages.sending.get(&key).and_then(Weak::upgrade) {
            return Some(page);
        }
        pages.rendering.entry(key).or_default().clone()
    };
    let page = flight.get_or_init(|| render(tree, preview, target, status, json)).clone();
    {
        let mut pages = lock();
        if pages.rendering.get(&key).is_some_and(|f| Arc::ptr_eq(f, &flight)) {
            pages.rendering.remove(&key);
            if let Some(page) = &page {
                pages.sending.retain(|_, sent| sent.strong_count() > 0);
                pages.sending.insert(key, Arc::downgrade(page));
            }
        }
    }
    page
}

/// Renders the page within the budget; `None` when no room came within [`IN_FLIGHT_WAIT`].
fn render(
    tree: &ServedTree,
    preview: &Preview,
    target: &Target<'_>,
    status: u16,
    json: &[u8],
) -> Option<Arc<HtmlPage>> {
    let mut held = tree.cache.in_flight.acquire(render_cost(json), IN_FLIGHT_WAIT)?;
    let bytes = html::document(tree, preview, target, status, json);
    held.shrink_to(bytes.len());
    Some(Arc::new(HtmlPage { bytes, _held: Some(held) }))
}

/// What a page is made from: the tree, the target, the status, the JSON and the problems shown.
fn page_key(tree: &ServedTree, preview: &Preview, target: &str, status: u16, json: &[u8]) -> [u8; 32] {
    let problems = preview.problems.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    let mut hasher = blake3::Hasher::new();
    hasher.update(tree.digest.as_bytes()).update(&status.to_le_bytes());
    for part in [target.as_bytes(), problems.as_deref().unwrap_or("").as_bytes(), json] {
        hasher.update(&(part.len() as u64).to_le_bytes()).update(part);
    }
    *hasher.finalize().as_bytes()
}
