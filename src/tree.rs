//! The built tree as an artefact: where each document lives ([`layout`]), what the tree holds
//! ([`manifest`]), its folder read and written without following a link ([`dir`]), and the
//! files its manifest lists, read bounded and checked against their hashes ([`listing`]).
//! The build writes the tree through this module; serve and publish read it through it.

pub(crate) mod dir;
pub mod layout;
pub(crate) mod listing;
pub mod manifest;

/// The media type of a JSON document, as every host sends it: the tree's documents, and the
/// error bodies and lock files that are not files of the tree.
pub(crate) const JSON_MEDIA_TYPE: &str = "application/json; charset=utf-8";

/// The media type a host sends with the tree's file at `path` (its `.gz` sibling is the same
/// document, sent with `Content-Encoding: gzip`): [`JSON_MEDIA_TYPE`] for a `.json` file, as
/// every file the tree lists is; `application/octet-stream` for anything else.
pub(crate) fn media_type(path: &str) -> &'static str {
    let path = path.strip_suffix(".gz").unwrap_or(path);
    if path.ends_with(".json") { JSON_MEDIA_TYPE } else { "application/octet-stream" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_json_file_and_its_gz_sibling_is_json() {
        for path in ["api/v2/index.json", "api/v2/berry/1/index.json.gz", "api/v2/openapi.json", "manifest.json"] {
            assert_eq!(media_type(path), "application/json; charset=utf-8", "{path}");
        }
        for path in ["CNAME", ".nojekyll", "api/v2/berry/1/index.json.tmp"] {
            assert_eq!(media_type(path), "application/octet-stream", "{path}");
        }
    }
}
