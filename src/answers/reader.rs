//! The HTTP reader's limits and the words of what it refuses, in one place: `gen serve`'s HTTP
//! reader (the vendored tiny_http, `vendor/tiny_http/PATCHES.md`) takes the limits and these
//! words through its [`tiny_http::Reader`], `gen serve`'s router checks the same limits
//! (`serve::respond`), and the edge handlers are printed with them (`hosts::edge`).

use super::{ALLOW_ORIGIN, to_bytes};
use serde_json::{Value, json};
use tiny_http::{BadHead, Rejected};

/// Longest request target answered; longer ones get 414.
pub(crate) const MAX_TARGET: usize = 8 * 1024;
/// Longest request line read (method, target and version): a longer one gets 414 from the HTTP
/// reader, without being read whole. Room for the longest target answered and its method.
pub(crate) const MAX_REQUEST_LINE: usize = MAX_TARGET + 64;
/// Most request header bytes answered; more get 431 (the reader counts whole header lines,
/// the router names and values).
pub(crate) const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Most request headers answered; more get 431.
pub(crate) const MAX_HEADERS: usize = 100;

/// The HTTP reader of `gen serve`: the limits above, and its refusals answered in the API's
/// error format (JSON, any origin, never cached) with the bodies of [`rejected`].
pub(crate) fn http_reader() -> tiny_http::Reader {
    let header = |(name, value): (&str, &str)| {
        tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("a valid header")
    };
    tiny_http::Reader {
        max_request_line: MAX_REQUEST_LINE,
        max_header_bytes: MAX_HEADER_BYTES,
        max_headers: MAX_HEADERS,
        headers: REFUSAL_HEADERS.into_iter().map(header).collect(),
        words: |rejection| to_bytes(&rejected(rejection)),
    }
}

/// The headers of the HTTP reader's refusals, sent before any header of the request is read (so
/// no deploy header): the API's error format, any origin, never cached. The edge handlers send
/// the same ones with their early 414 (`hosts/edge.rs`, `reader_headers`).
pub(crate) const REFUSAL_HEADERS: [(&str, &str); 3] = [
    ("Content-Type", crate::tree::layout::JSON_MEDIA_TYPE),
    ("Access-Control-Allow-Origin", ALLOW_ORIGIN),
    ("Cache-Control", "no-store"),
];

/// The body of the HTTP reader's answer to a request head it refuses (the status is
/// [`Rejected::status`]).
pub(crate) fn rejected(rejection: Rejected) -> Value {
    let detail = match rejection {
        Rejected::RequestLineTooLong => too_large("the request line is too long"),
        Rejected::HeadersTooLarge => too_large("the request headers are too large"),
        Rejected::TooManyHeaders => too_large("the request has too many headers"),
        Rejected::BadRequest(bad) => bad_head(bad).to_string(),
        Rejected::VersionNotSupported => {
            "this server speaks HTTP/1.0 and HTTP/1.1 only: send the request as HTTP/1.1".to_string()
        }
    };
    json!({ "detail": detail })
}

/// A refusal for size: `what`, then the limits.
fn too_large(what: &str) -> String {
    format!(
        "{what}: this server reads request lines of at most {MAX_REQUEST_LINE} bytes and at most {MAX_HEADERS} \
         headers of {MAX_HEADER_BYTES} bytes in all"
    )
}

/// Why a head that cannot be read safely is refused, and what to send instead.
fn bad_head(bad: BadHead) -> &'static str {
    match bad {
        BadHead::NotAscii => {
            "the request head holds a byte that is not ASCII: send the target percent-encoded and header values in ASCII"
        }
        BadHead::ControlInRequestLine => {
            "the request line holds a control character (NUL, CR or another): send printable ASCII"
        }
        BadHead::ControlInHeader => {
            "a request header holds a control character (NUL, CR or another): send printable ASCII"
        }
        BadHead::FoldedHeader => {
            "a request header line starts with a space (obsolete line folding): send each header on one line"
        }
        BadHead::LengthNotANumber => "the request's Content-Length is not a number of bytes: send one",
        BadHead::LengthsDiffer => "the request has two Content-Length headers that differ: send one",
        BadHead::LengthAndTransferEncoding => "the request has both Content-Length and Transfer-Encoding: send one",
        BadHead::NoHost => "an HTTP/1.1 request must have a Host header: send one (e.g. Host: 127.0.0.1:8080)",
        BadHead::TwoHosts => "the request has more than one Host header: send one",
    }
}

/// 414 for a request target longer than `max` bytes (`length`: its length in bytes).
pub(crate) fn target_too_long(length: impl std::fmt::Display, max: usize) -> Value {
    json!({ "detail": format!(
        "the request target is {length} bytes long; this server answers targets of at most {max} bytes"
    ) })
}

/// 431 for a request with too many headers or header bytes.
pub(crate) fn headers_too_large(count: usize, bytes: usize, max_count: usize, max_bytes: usize) -> Value {
    json!({ "detail": format!(
        "the request has {count} headers, {bytes} bytes; this server answers at most {max_count} headers, \
         {max_bytes} bytes in all"
    ) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The status each refusal must have, written out here (not read from the reader): a new
    /// kind does not compile until it is added.
    fn expected_status(rejection: Rejected) -> u16 {
        match rejection {
            Rejected::RequestLineTooLong => 414,
            Rejected::HeadersTooLarge | Rejected::TooManyHeaders => 431,
            Rejected::BadRequest(
                BadHead::NotAscii
                | BadHead::ControlInRequestLine
                | BadHead::ControlInHeader
                | BadHead::FoldedHeader
                | BadHead::LengthNotANumber
                | BadHead::LengthsDiffer
                | BadHead::LengthAndTransferEncoding
                | BadHead::NoHost
                | BadHead::TwoHosts,
            ) => 400,
            Rejected::VersionNotSupported => 505,
        }
    }

    #[test]
    fn every_rejection_is_worded_once_with_its_status() {
        let mut details = std::collections::BTreeSet::new();
        for rejection in Rejected::ALL {
            assert_eq!(rejection.status(), expected_status(rejection), "{rejection:?}");
            let body = rejected(rejection);
            assert_eq!(body.as_object().map(|o| o.len()), Some(1), "{rejection:?}: {body}");
            let detail = body["detail"].as_str().unwrap_or_else(|| panic!("{rejection:?}: {body}"));
            assert!(detail.contains(": "), "{rejection:?} says what went wrong, then what to do: {detail}");
            assert!(details.insert(detail.to_string()), "{rejection:?} is worded as another refusal: {detail}");
            assert_eq!((http_reader().words)(rejection), to_bytes(&body), "{rejection:?}");
        }
        // every kind is listed: 9 ways to be a bad request, and four others
        assert_eq!(details.len(), 13);
        let limits = rejected(Rejected::TooManyHeaders)["detail"].as_str().unwrap().to_string();
        for limit in [MAX_REQUEST_LINE, MAX_HEADERS, MAX_HEADER_BYTES] {
            assert!(limits.contains(&format!(" {limit} ")), "{limits} names {limit}");
        }
    }

    #[test]
    fn the_reader_reads_the_limits_the_router_answers() {
        let reader = http_reader();
        assert_eq!(
            (reader.max_request_line, reader.max_header_bytes, reader.max_headers),
            (MAX_REQUEST_LINE, MAX_HEADER_BYTES, MAX_HEADERS)
        );
        // the longest target answered fits the request line with its method and version
        assert!(MAX_TARGET + "OPTIONS  HTTP/1.1".len() <= MAX_REQUEST_LINE);
    }
}
