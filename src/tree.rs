//! The built tree as an artefact: where each document lives ([`layout`]), what the tree holds
//! ([`manifest`]), its folder read and written without following a link ([`dir`]), and the
//! files its manifest lists, read bounded and checked against their hashes ([`listing`]).
//! The build writes the tree through this module; serve and publish read it through it.

pub(crate) mod dir;
pub mod layout;
pub(crate) mod listing;
pub mod manifest;

pub(crate) use layout::{JSON_MEDIA_TYPE, media_type};

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
