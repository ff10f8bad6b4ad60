//! Site settings, kept in `data/gen.json`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// File name of the site settings inside the data folder.
pub const CONFIG_FILE: &str = "gen.json";

/// Site settings: `data/gen.json`. Every key is optional.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct DataSettings {
    /// Scheme and host the tree is served from, without a trailing slash; urls in the tree
    /// are made absolute with it. `gen build --base-url` overrides it.
    pub(crate) base_url: String,
    /// Page sizes whose pages are precomputed as files (20 is always included).
    pub(crate) page_sizes: Vec<u64>,
    /// Segments that records may refer to but that the data does not hold: their urls are made
    /// absolute but not checked.
    pub(crate) external: Vec<String>,
    /// Largest document accepted, in MiB: a guard against a runaway file (a 100 MB record is
    /// almost certainly a mistake, and every document is held in memory while it is rendered).
    pub(crate) max_document_mb: u64,
    /// Most values a declared filter may take in a resource: each value is a folder of files
    /// (its list), so a field with a value per record (or an array of thousands) would write
    /// folders by the hundred thousand.
    pub(crate) max_filter_values: usize,
    /// Names that several records of a resource carry on purpose, by segment
    /// (`{"item": ["roseli-berry"]}`). Any other name is unique within its resource. The name
    /// path of a shared name serves the record with the lowest id.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) shared_names: BTreeMap<String, Vec<String>>,
    /// Names of the headers that carry the deploy date and the tree's hash on every answer
    /// (`{"date": "X-Deploy-Date", "hash": "X-Data-Hash"}` unless set; an import with
    /// `--keep-segment-names` sets the public API's).
    #[serde(skip_serializing_if = "DeployHeaders::is_default")]
    pub(crate) deploy_headers: DeployHeaders,
    /// Filters by segment (`?FIELD=VALUE`, see [`crate::filters`]): a list of JSON paths, each
    /// its own parameter name (`{"creature": ["generation.name"]}`), or parameter names with
    /// their paths (`{"creature": {"type": "types[].type.name"}}`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) filters: BTreeMap<String, FilterDeclaration>,
    /// Whether the tree holds a bulk-data file per resource (`/api/v2/bulk-data/`,
    /// docs/tree.md); `"bulk": false` leaves them out.
    #[serde(skip_serializing_if = "is_true")]
    pub(crate) bulk: bool,
}

/// The filters declared for one resource in `gen.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum FilterDeclaration {
    /// JSON paths, each the name of its parameter.
    Paths(Vec<String>),
    /// Parameter names and their JSON paths.
    Named(BTreeMap<String, String>),
}

impl FilterDeclaration {
    /// The declared fields, in the order links name them: as listed, or by name.
    pub(crate) fn fields(&self) -> Vec<crate::filters::FilterField> {
        use crate::filters::FilterField;
        match self {
            FilterDeclaration::Paths(paths) => {
                paths.iter().map(|p| FilterField { name: p.clone(), path: p.clone() }).collect()
            }
            FilterDeclaration::Named(named) => {
                named.iter().map(|(n, p)| FilterField { name: n.clone(), path: p.clone() }).collect()
            }
        }
    }

    /// The JSON location in `gen.json` of the `i`th of [`FilterDeclaration::fields`] of `segment`.
    pub(crate) fn location(&self, segment: &str, i: usize) -> String {
        use crate::problem::{Step, json_path};
        match self {
            FilterDeclaration::Paths(_) => json_path(&[Step::Key("filters"), Step::Key(segment), Step::Index(i)]),
            FilterDeclaration::Named(named) => {
                let name = named.keys().nth(i).map_or("", String::as_str);
                json_path(&[Step::Key("filters"), Step::Key(segment), Step::Key(name)])
            }
        }
    }

    /// Every mistake in the declaration of `segment`'s filters, with its JSON location.
    fn mistakes(&self, segment: &str) -> Vec<(String, String)> {
        use crate::problem::{Step, json_path};
        let mut wrong = Vec::new();
        let fields = self.fields();
        for (i, field) in fields.iter().enumerate() {
            let at = self.location(segment, i);
            if let Err(why) = crate::filters::FieldPath::parse(&field.path) {
                wrong.push((at.clone(), why));
            }
            let name_ok = matches!(self, FilterDeclaration::Paths(_))
                || (!field.name.is_empty()
                    && field.name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-".contains(&b)));
            if !name_ok {
                wrong.push((
                    at.clone(),
                    format!("{:?} is not a filter name: a name is made of a-z, 0-9, '_' and '-'", field.name),
                ));
            }
            if crate::filters::RESERVED.contains(&field.name.as_str()) {
                let (name, path) = (&field.name, &field.path);
                let reserved = crate::filters::RESERVED.join(", ");
                let example = format!("{{\"{name}_\": \"{path}\"}}");
                let message = format!(
                    "{name:?} is a parameter of every list ({reserved}): give the filter another name, e.g. {example}"
                );
                wrong.push((at.clone(), message));
            }
            let folder = crate::tree::layout::folder_name(&field.name);
            if folder.len() > MAX_NAME_BYTES {
                let message = format!(
                    "the filter name {:?} makes a folder name of {} bytes (each character other than a-z, 0-9 and '-' \
                     takes 3): a folder name is at most {MAX_NAME_BYTES} bytes; give the filter a shorter name",
                    field.name,
                    folder.len()
                );
                wrong.push((at.clone(), message));
            }
            if fields[..i].iter().any(|f| f.name == field.name) {
                wrong.push((at, format!("{:?} is declared twice", field.name)));
            }
        }
        if !is_valid_segment(segment) {
            let at = json_path(&[Step::Key("filters"), Step::Key(segment)]);
            wrong.push((at, format!("{segment:?} is not a resource segment: a segment is made of a-z, 0-9 and '-'")));
        }
        wrong
    }
}

impl DataSettings {
    /// True when `name` is declared shared within `segment`.
    pub(crate) fn is_shared_name(&self, segment: &str, name: &str) -> bool {
        self.shared_names.get(segment).is_some_and(|names| names.iter().any(|n| n == name))
    }
}

impl Default for DataSettings {
    fn default() -> Self {
        DataSettings {
            base_url: DEFAULT_BASE_URL.to_string(),
            page_sizes: vec![20, 50, 100],
            external: Vec::new(),
            max_document_mb: crate::json::DEFAULT_MAX_DOCUMENT_MB,
            max_filter_values: DEFAULT_MAX_FILTER_VALUES,
            shared_names: BTreeMap::new(),
            deploy_headers: DeployHeaders::default(),
            filters: BTreeMap::new(),
            bulk: true,
        }
    }
}

/// True for `true`: a setting left at its default is not written out.
fn is_true(value: &bool) -> bool {
    *value
}

/// The keys `gen.json` takes.
pub(crate) const KEYS: [&str; 9] = [
    "base_url",
    "page_sizes",
    "external",
    "max_document_mb",
    "max_filter_values",
    "shared_names",
    "deploy_headers",
    "filters",
    "bulk",
];

/// Reads settings from the parsed `gen.json`: every key that is wrong is reported, each with
/// its JSON location and a message (with the key it likely meant).
pub(crate) fn parse(value: serde_json::Value) -> Result<DataSettings, Vec<(String, String)>> {
    let serde_json::Value::Object(map) = value else {
        let example = r#"{"base_url": "https://api.example.org"}"#;
        return Err(vec![(
            "$".to_string(),
            format!("settings are a JSON object of keys ({}), e.g. {example}", KEYS.join(", ")),
        )]);
    };
    let mut wrong = Vec::new();
    let mut known = serde_json::Map::new();
    for (key, value) in map {
        if KEYS.contains(&key.as_str()) {
            match serde_json::from_value::<DataSettings>(serde_json::json!({ key.clone(): value })) {
                Ok(_) => {
                    known.insert(key, value);
                }
                Err(e) => {
                    let message = if key == "filters" {
                        r#"filters are declared per resource, as JSON paths or as names with their paths: {"creature": ["generation.name"], "move": {"type": "type.name"}}"#.to_string()
                    } else {
                        e.to_string()
                    };
                    wrong.push((crate::problem::json_path(&[crate::problem::Step::Key(&key)]), message))
                }
            }
        } else {
            let hint = match crate::problem::closest(&key, KEYS) {
                Some(meant) => format!("did you mean {meant:?}?"),
                None => format!("the keys are {}", KEYS.join(", ")),
            };
            wrong.push((
                crate::problem::json_path(&[crate::problem::Step::Key(&key)]),
                format!("unknown setting {key:?}: {hint}"),
            ));
        }
    }
    if !wrong.is_empty() {
        return Err(wrong);
    }
    let settings: DataSettings =
        serde_json::from_value(serde_json::Value::Object(known)).map_err(|e| vec![("$".to_string(), e.to_string())])?;
    settings.deploy_headers.check().map_err(|e| vec![("$.deploy_headers".to_string(), e)])?;
    let wrong: Vec<(String, String)> =
        settings.filters.iter().flat_map(|(segment, declared)| declared.mistakes(segment)).collect();
    if !wrong.is_empty() {
        return Err(wrong);
    }
    Ok(settings)
}

/// Default of `max_filter_values`: above any published field a filter reads (the most, a few
/// hundred), far below the hundred thousand folders one array of strings could ask for.
pub(crate) const DEFAULT_MAX_FILTER_VALUES: usize = 10_000;

/// The address `gen serve` listens on and `gen config` configures unless told otherwise.
macro_rules! default_addr {
    () => {
        "127.0.0.1:8080"
    };
}

/// The address `gen serve` listens on and `gen config` configures unless told otherwise.
pub const DEFAULT_ADDR: &str = default_addr!();

/// The base URL that makes a default tree work with `gen serve`'s default address.
pub(crate) const DEFAULT_BASE_URL: &str = concat!("http://", default_addr!());

/// Checks a base URL: `http(s)://host[:port][/path]` and nothing else. The host is a DNS
/// name or IPv4 address (letters, digits, '-' and '.') or an IPv6 address in brackets; the
/// port is 1 to 65535; the path is segments of letters, digits, '-', '.', '_' and '~' (or
/// %XX escapes), without a trailing '/'. No user name or password, query or fragment.
pub(crate) fn check_base_url(url: &str) -> Result<(), String> {
    const FORM: &str =
        "a base URL is http(s)://host[:port][/path], e.g. https://api.example.org or http://127.0.0.1:8080/data";
    let bad = |what: String| format!("base URL {url:?} {what}: {FORM}");
    let Some(rest) = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://")) else {
        return Err(bad("must start with http:// or https://".into()));
    };
    let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
    if authority.contains('@') {
        return Err(bad("has a user name or password (user:password@): those do not belong in links".into()));
    }
    if let Some(c) = url.chars().find(|c| matches!(c, '?' | '#')) {
        return Err(bad(format!("has a {} ('{c}')", if c == '?' { "query" } else { "fragment" })));
    }
    let (host, port) = split_authority(authority).map_err(bad)?;
    check_host(authority, host).map_err(bad)?;
    if let Some(port) = port {
        check_port(port).map_err(bad)?;
    }
    if path.is_empty() {
        return Ok(());
    }
    if path.ends_with('/') {
        return Err(format!("base URL {url:?} must not end with '/': write {:?}", url.trim_end_matches('/')));
    }
    path[1..].split('/').try_for_each(check_path_segment).map_err(bad)
}

/// A base URL's authority as host and optional port; `Err` says what is wrong with it.
fn split_authority(authority: &str) -> Result<(&str, Option<&str>), String> {
    let Some(v6) = authority.strip_prefix('[') else {
        return Ok(match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        });
    };
    let Some((address, after)) = v6.split_once(']') else {
        return Err("has an IPv6 host without its closing ']'".into());
    };
    if address.parse::<std::net::Ipv6Addr>().is_err() {
        return Err(format!("has [{address}] as host, which is not an IPv6 address"));
    }
    match after.strip_prefix(':') {
        Some(port) => Ok((address, Some(port))),
        None if after.is_empty() => Ok((address, None)),
        None => Err(format!("has {after:?} after its IPv6 host")),
    }
}

/// Checks a base URL's host: an IPv6 address in brackets, or dot-separated labels of letters,
/// digits and '-'.
fn check_host(authority: &str, host: &str) -> Result<(), String> {
    if host.is_empty() {
        return Err("has no host".into());
    }
    let host_ok = authority.starts_with('[')
        || host.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if !host_ok {
        return Err(format!("has {host:?} as host: a host is a name or address of letters, digits, '-' and '.'"));
    }
    Ok(())
}

/// Checks a base URL's port: digits only, 1 to 65535.
fn check_port(port: &str) -> Result<(), String> {
    match port.parse::<u16>() {
        Ok(n) if n > 0 && port.bytes().all(|b| b.is_ascii_digit()) => Ok(()),
        _ => Err(format!("has {port:?} as port: a port is a number from 1 to 65535")),
    }
}

/// Checks one segment of a base URL's path: letters, digits, '-', '.', '_', '~' and %XX escapes.
fn check_path_segment(segment: &str) -> Result<(), String> {
    if segment.is_empty() {
        return Err("has an empty path segment ('//')".into());
    }
    let bytes = segment.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' && bytes.len() > i + 2 && bytes[i + 1].is_ascii_hexdigit() && bytes[i + 2].is_ascii_hexdigit() {
            i += 3;
            continue;
        }
        if !(b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')) {
            let c = segment[i..].chars().next().unwrap_or('?');
            return Err(format!(
                "has {c:?} in its path: a path is made of letters, digits, '-', '.', '_' and '~' (other characters as %XX)"
            ));
        }
        i += 1;
    }
    Ok(())
}

/// An address to listen on, as `gen serve --addr` and `gen config --listen` both take it:
/// `HOST:PORT`, `[IPv6]:PORT`, `:PORT` or `PORT` (the last two: every interface). The host is
/// an address or a name of letters, digits, '.' and '-'. Returns the host without brackets
/// (empty for every interface) and the port; `None` when `text` has none of these forms.
pub(crate) fn parse_listen(text: &str) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, port) = rest.split_once("]:")?;
        host.parse::<std::net::Ipv6Addr>().ok()?;
        (host, port)
    } else if let Some((host, port)) = text.rsplit_once(':') {
        if !host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-') {
            return None;
        }
        (host, port)
    } else {
        ("", text)
    };
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((host.to_string(), port.parse().ok()?))
}

/// File, inside a resource folder, that states the resource's list order.
pub(crate) const ORDER_FILE: &str = "order.json";

/// Parses a record id as written in a file name: the integer's canonical decimal form.
pub(crate) fn parse_id(text: &str) -> Option<i64> {
    let id: i64 = text.parse().ok()?;
    (id.to_string() == text).then_some(id)
}

/// True when `segment` is a valid resource path segment: `[a-z0-9-]+`.
pub(crate) fn is_valid_segment(segment: &str) -> bool {
    !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// The longest record name, in bytes: a name is a folder name in the tree
/// (`api/v2/<segment>/<name>/`), and file systems allow at most 255 bytes.
pub(crate) const MAX_NAME_BYTES: usize = 255;

/// True when `name` is a valid record name: `[a-z0-9-]+` with at least one letter or hyphen,
/// so that it never collides with an id path.
pub(crate) fn is_valid_name(name: &str) -> bool {
    is_valid_segment(name) && !name.bytes().all(|b| b.is_ascii_digit())
}

/// The names of the deploy headers: `deploy_headers` in `gen.json` and the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeployHeaders {
    /// The header carrying the deploy date.
    pub(crate) date: String,
    /// The header carrying the tree's hash.
    pub(crate) hash: String,
}

impl Default for DeployHeaders {
    /// Neutral names; a tree imported with `--keep-segment-names` uses [`DeployHeaders::public_api`].
    fn default() -> Self {
        DeployHeaders { date: "X-Deploy-Date".into(), hash: "X-Data-Hash".into() }
    }
}

impl DeployHeaders {
    /// The names the public API sends (and its browser client reads).
    pub(crate) fn public_api() -> Self {
        DeployHeaders { date: "X-PokeAPI-Deploy-Date".into(), hash: "X-PokeAPI-Hash".into() }
    }

    /// Checks the names: each a header name of letters, digits and '-' (so that it can be
    /// written into any host's configuration as it is), the two different.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        for (key, name) in [("date", &self.date), ("hash", &self.hash)] {
            let plain =
                !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
            if !plain {
                return Err(format!(
                    "deploy_headers.{key} {name:?} is not a header name: use letters, digits and '-' (at most 64), e.g. \"X-Deploy-Date\""
                ));
            }
        }
        if self.date.eq_ignore_ascii_case(&self.hash) {
            return Err(format!(
                "deploy_headers names {:?} twice: give the date and the hash different headers",
                self.date
            ));
        }
        Ok(())
    }

    /// True for the default names (left out of a written `gen.json`).
    pub(crate) fn is_default(&self) -> bool {
        *self == DeployHeaders::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_the_settings_fields() {
        let config = DataSettings {
            shared_names: BTreeMap::from([("a".into(), vec![])]),
            deploy_headers: DeployHeaders::public_api(),
            filters: BTreeMap::from([("a".into(), FilterDeclaration::Paths(vec!["x.y".into()]))]),
            bulk: false,
            ..DataSettings::default()
        };
        let value = serde_json::to_value(&config).unwrap();
        let fields: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
        let mut keys = KEYS.to_vec();
        keys.sort_unstable();
        assert_eq!(fields, keys);
        assert_eq!(parse(value).unwrap(), config);
    }

    #[test]
    fn ids_are_canonical_integers() {
        assert_eq!(parse_id("-1"), Some(-1));
        assert_eq!(parse_id("0"), Some(0));
        for bad in ["01", "+1", "-0", "1.0", "", "9223372036854775808"] {
            assert_eq!(parse_id(bad), None, "{bad}");
        }
    }

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
    fn listen_forms() {
        let l = |h: &str, p| Some((h.to_string(), p));
        assert_eq!(parse_listen("127.0.0.1:8080"), l("127.0.0.1", 8080));
        assert_eq!(parse_listen("[::1]:80"), l("::1", 80));
        assert_eq!(parse_listen(":0"), l("", 0));
        assert_eq!(parse_listen("8080"), l("", 8080));
        assert_eq!(parse_listen("localhost:8080"), l("localhost", 8080));
        for bad in ["", ":", "127.0.0.1", "127.0.0.1:99999", "::1:80", "[x]:80", "a b:80", "h:p", "h:+80", "[::1]"] {
            assert_eq!(parse_listen(bad), None, "{bad}");
        }
    }

    #[test]
    fn base_urls() {
        for ok in [
            "http://127.0.0.1:8080",
            "https://example.org/data",
            "https://api.example.org",
            "http://localhost:1",
            "http://[::1]:8080",
            "https://[2001:db8::1]/v1/api",
            "https://example.org/a%20b/c_d.e~f",
            "http://x:65535",
        ] {
            assert_eq!(check_base_url(ok), Ok(()), "{ok}");
        }
        for (bad, says) in [
            ("example.org", "must start with http:// or https://"),
            ("ftp://x", "must start with http:// or https://"),
            ("http://", "has no host"),
            ("http://:80", "has no host"),
            ("http://x/", "must not end with '/'"),
            ("http://x?y", "has a query ('?')"),
            ("http://x#y", "has a fragment ('#')"),
            ("http://a b", "as host"),
            ("http://x'", "as host"),
            ("http://x/'", "has '\\'' in its path"),
            ("http://x/<x>", "has '<' in its path"),
            ("http://x/{x}", "has '{' in its path"),
            ("http://{x}", "as host"),
            ("http://user:pw@x", "user name or password"),
            ("http://x:99999", "as port: a port is a number from 1 to 65535"),
            ("http://x:0", "as port"),
            ("http://x:+80", "as port"),
            ("http://x:", "as port"),
            ("http://x//y", "empty path segment"),
            ("http://[::1", "closing ']'"),
            ("http://[zz]:80", "not an IPv6 address"),
            ("http://-x.org", "as host"),
            ("http://x..org", "as host"),
            ("http://x/a b", "in its path"),
            ("http://x/%zz", "in its path"),
        ] {
            let message = check_base_url(bad).expect_err(bad);
            assert!(message.contains(says), "{bad}: {message}");
            assert!(message.contains(&format!("{bad:?}")), "{bad}: {message}");
        }
    }
}
