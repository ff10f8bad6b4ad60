//! Site settings, kept in `data/gen.json`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// File name of the site settings inside the data folder.
pub const CONFIG_FILE: &str = "gen.json";

/// Site settings: `data/gen.json`. Every key is optional.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SiteConfig {
    /// Scheme and host the tree is served from, without a trailing slash; urls in the tree
    /// are made absolute with it. `gen build --base-url` overrides it.
    pub base_url: String,
    /// Page sizes whose pages are precomputed as files (20 is always included).
    pub page_sizes: Vec<u64>,
    /// Segments that records may refer to but that the data does not hold: their urls are made
    /// absolute but not checked.
    pub external: Vec<String>,
    /// Largest document accepted, in MiB: a guard against a runaway file (a 100 MB record is
    /// almost certainly a mistake, and every document is held in memory while it is rendered).
    pub max_document_mb: u64,
    /// Names that several records of a resource carry on purpose, by segment
    /// (`{"item": ["roseli-berry"]}`). Any other name is unique within its resource. The name
    /// path of a shared name serves the record with the lowest id.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub shared_names: BTreeMap<String, Vec<String>>,
}

impl SiteConfig {
    /// True when `name` is declared shared within `segment`.
    pub fn is_shared_name(&self, segment: &str, name: &str) -> bool {
        self.shared_names.get(segment).is_some_and(|names| names.iter().any(|n| n == name))
    }
}

impl Default for SiteConfig {
    fn default() -> Self {
        SiteConfig {
            base_url: DEFAULT_BASE_URL.to_string(),
            page_sizes: vec![20, 50, 100],
            external: Vec::new(),
            max_document_mb: DEFAULT_MAX_DOCUMENT_MB,
            shared_names: BTreeMap::new(),
        }
    }
}

/// Default of `max_document_mb`: far above any published record (the largest are a few MB).
pub const DEFAULT_MAX_DOCUMENT_MB: u64 = 32;

/// The base URL that makes a default tree work with `gen serve`'s default address.
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:8080";

/// Checks a base URL: `http(s)://host[:port][/prefix]`, no trailing slash, query or fragment.
pub fn check_base_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| format!("base URL {url:?} must start with http:// or https://"))?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err(format!("base URL {url:?} has no host"));
    }
    if url.ends_with('/') {
        return Err(format!("base URL {url:?} must not end with '/': write {:?}", url.trim_end_matches('/')));
    }
    if url.contains(['?', '#', ' ', '"', '\\']) || url.chars().any(char::is_control) {
        return Err(format!("base URL {url:?} must not contain a query, a fragment, spaces or quotes"));
    }
    Ok(())
}

/// True when `segment` is a valid resource path segment: `[a-z0-9-]+`.
pub fn is_valid_segment(segment: &str) -> bool {
    !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// True when `name` is a valid record name: `[a-z0-9-]+` with at least one letter or hyphen,
/// so that it never collides with an id path.
pub fn is_valid_name(name: &str) -> bool {
    is_valid_segment(name) && !name.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["cheri", "a", "-", "mr-mime", "porygon2", "10-percent"] {
            assert!(is_valid_name(ok), "{ok}");
        }
        for bad in ["", "123", "0", "Cheri", "mr_mime", "é", "a b", "a/b", "."] {
            assert!(!is_valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn base_urls() {
        assert!(check_base_url("http://127.0.0.1:8080").is_ok());
        assert!(check_base_url("https://example.org/data").is_ok());
        for bad in ["example.org", "http://", "http://x/", "ftp://x", "http://x?y", "http://a b"] {
            assert!(check_base_url(bad).is_err(), "{bad}");
        }
    }
}
