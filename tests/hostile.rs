//! Hostile clients against `gen serve`: garbage, unsupported protocol versions, TLS and HTTP/2
//! openings, bad methods. Each gets a 4xx or 505 answer, or its connection closed, and the
//! server keeps answering everyone else.

mod common;
mod serve_support;

use serve_support::{Server, Site};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// What the server did with one hostile opening.
fn outcome(server: &Server, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    stream.write_all(bytes).unwrap();
    // the idle timeout (1 s) closes connections that will never be a request
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut answer = Vec::new();
    match stream.read_to_end(&mut answer) {
        Ok(_) | Err(_) if answer.is_empty() => "closed".to_string(),
        _ => String::from_utf8_lossy(&answer).lines().next().unwrap_or_default().to_string(),
    }
}

#[test]
fn garbage_and_unsupported_protocols_are_refused_and_survived() {
    let site = Site::new("hostile", &[20], &[]);
    let server = Server::start(&site.out(), &["--idle-timeout", "1"]);
    let cases: &[(&str, &[u8])] = &[
        ("binary garbage", b"\x00\xff\xfe\r\n\r\n"),
        ("a line of garbage", b"GARBAGE\r\n\r\n"),
        ("HTTP/9.9", b"GET /api/v2/ HTTP/9.9\r\nHost: x\r\n\r\n"),
        ("HTTP/2.0 request line", b"GET /api/v2/ HTTP/2.0\r\nHost: x\r\n\r\n"),
        ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
        ("TLS client hello", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\x00\x00\x00\x00"),
        ("HTTP/0.9", b"GET /api/v2/\r\n\r\n"),
        ("a bad header line", b"GET /api/v2/ HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n"),
        ("an unknown method", b"BREW /api/v2/ HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("a method in lower case", b"get /api/v2/ HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("DELETE", b"DELETE /api/v2/item/1/ HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("CONNECT", b"CONNECT example.org:443 HTTP/1.1\r\nHost: example.org\r\n\r\n"),
    ];
    for (label, bytes) in cases {
        let outcome = outcome(&server, bytes);
        let refused = outcome == "closed" || outcome.starts_with("HTTP/1.1 4") || outcome.starts_with("HTTP/1.1 505");
        assert!(refused, "{label}: {outcome:?}");
        // and the server still answers a well-formed request at once
        server.get("/api/v2/item/1/").expect(200);
    }
    assert_eq!(outcome(&server, b"BREW /api/v2/ HTTP/1.1\r\nHost: x\r\n\r\n"), "HTTP/1.1 405 Method Not Allowed");
}
