//! Documents too large for the cache (over half of `--cache-mb`), sent from their file a piece
//! at a time, and the least a client must read while an answer is sent to it.
//!
//! Such a document is never held whole: each answer opens the file (without following links),
//! reads it once to check it against the manifest's hash and to measure the body it sends (its
//! urls rebased, as [`super::tree::rebase`] does), then reads it again as it writes it, [`PIECE`]
//! bytes at a time. So an answer holds two pieces, whatever the document's size and however
//! slowly its client reads, and no answer waits for room that another holds. The second read
//! is checked too: its last piece is sent only once every byte read hashes to what the manifest
//! says, so a file changed in place meanwhile cuts the answer short (the client sees fewer bytes
//! than `Content-Length`), and never sends other bytes whole.
//!
//! A client must read at least [`MIN_RATE`] bytes a second, measured over every
//! [`RATE_WINDOW`], while a body larger than a single write is sent to it ([`MinRate`]); one that
//! reads less is cut off. A client that reads nothing is cut off sooner, by the send timeout.

use super::tree::{ServedTree, Unserved};
use crate::tree::layout::API_PREFIX;
use crate::tree::layout::is_bulk_file;
use crate::tree::listing::{MAX_DOCUMENT_BYTES, Unservable};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes read from a file, and written to a connection, at a time.
pub(crate) const PIECE: usize = 64 << 10;

/// The least a client must read, in bytes a second, while a large body is sent to it.
pub(crate) const MIN_RATE: u64 = 32 << 10;

/// How long the rate of [`MIN_RATE`] is measured over.
pub(crate) const RATE_WINDOW: Duration = Duration::from_secs(10);

/// Where a streamed body's bytes are: a file of a tree, or a document stored in an archive's
/// part (one gzip member, decompressed as it is read).
#[derive(Debug)]
pub(crate) enum Body {
    /// The whole file.
    File(File),
    /// The gzip member of `length` bytes at `offset` in the part `file`.
    Member {
        /// The part.
        file: File,
        /// Where the stored document starts.
        offset: u64,
        /// Its stored length.
        length: u64,
    },
}

/// Reads a file from `at` on by positional reads (answers in parallel share one open file).
struct ReadAt<'a> {
    file: &'a File,
    at: u64,
}

impl Read for ReadAt<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(buffer, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

impl Body {
    /// A reader of the body's bytes from its start (decompressed, for an archive's document).
    fn reader(&self) -> Box<dyn Read + '_> {
        match self {
            Body::File(file) => Box::new(ReadAt { file, at: 0 }),
            Body::Member { file, offset, length } => {
                Box::new(flate2::read::GzDecoder::new(ReadAt { file, at: *offset }.take(*length)))
            }
        }
    }
}

/// A listed file too large for the cache, open, checked and measured, sent from the file.
#[derive(Debug)]
pub struct Streamed {
    file: Body,
    /// The hash the manifest gives the file.
    hash: blake3::Hash,
    /// The base URL the tree was built with, and the one its urls are rebased on.
    rebase: Option<(String, String)>,
    /// Bytes of the body sent.
    pub(crate) len: u64,
    /// Strong ETag of the body sent: its BLAKE3 hash, quoted.
    pub(crate) etag: String,
    /// True for a bulk-data file: sent as it is (gzip, `application/x-ndjson`, immutable).
    pub(crate) bulk: bool,
}

impl ServedTree {
    /// The document at `key` when the tree lists it and it is too large for the cache: open,
    /// checked and measured, to be sent from its file ([`Streamed::send`]).
    pub(crate) fn streamed(&self, key: &str) -> Option<Result<Arc<Streamed>, Unserved>> {
        let (path, hash) = match self.file_of(key) {
            Ok(found) => found?,
            Err(unserved) => return Some(Err(unserved)),
        };
        // a document in the cache is small enough; only the others are looked at on disk
        if self.cache.get(&super::item::Key::Doc(*hash.as_bytes())).is_some() {
            return None;
        }
        if self.cache.would_hold(self.size_of(&path)) {
            return None;
        }
        let rebase =
            (self.base_url != self.built_base_url).then(|| (self.built_base_url.clone(), self.base_url.clone()));
        let opened = self.open_body(&path).and_then(|body| Streamed::open(body, hash, rebase));
        Some(opened.map(Arc::new).map_err(|e| self.unserved(&path, &e)))
    }

    /// The bulk-data file at `key` when the tree lists it: always sent from its file, whatever
    /// its size, and as it is (its urls are not rebased: its bytes are gzip, and its name is
    /// their hash).
    pub(crate) fn streamed_bulk(&self, key: &str) -> Option<Result<Arc<Streamed>, Unserved>> {
        let (path, hash) = match self.file_of(key) {
            Ok(Some(found)) if is_bulk_file(&found.0) => found,
            Ok(_) => return None,
            Err(unserved) => return Some(Err(unserved)),
        };
        let opened = self.open_body(&path).and_then(|body| Streamed::open(body, hash, None));
        let opened = opened.map(|stream| Streamed { bulk: true, ..stream });
        Some(opened.map(Arc::new).map_err(|e| self.unserved(&path, &e)))
    }
}

impl Streamed {
    /// Opens the listed file `path` in `dir` (without following links).
    pub(crate) fn open_file(dir: &std::path::Path, path: &str) -> Result<Body, Unservable> {
        let not_read = |e: &dyn std::fmt::Display| Unservable::NotRead(e.to_string());
        let tree = crate::tree::dir::TreeDir::open(dir).map_err(|e| not_read(&e))?;
        tree.open_file(path, MAX_DOCUMENT_BYTES).map(Body::File).map_err(|e| not_read(&e))
    }

    /// Reads `file` once: refused unless its bytes hash to `hash`.
    fn open(file: Body, hash: blake3::Hash, rebase: Option<(String, String)>) -> Result<Streamed, Unservable> {
        let not_read = |e: &dyn std::fmt::Display| Unservable::NotRead(e.to_string());
        let mut streamed = Streamed { file, hash, rebase, len: 0, etag: String::new(), bulk: false };
        let (mut sent, mut len) = (blake3::Hasher::new(), 0u64);
        let read = streamed
            .each_piece(|piece| {
                sent.update(piece);
                len += piece.len() as u64;
                Ok(())
            })
            .map_err(|e| not_read(&e))?;
        if read != hash {
            return Err(Unservable::Changed);
        }
        streamed.len = len;
        streamed.etag = format!("\"{}\"", sent.finalize().to_hex());
        Ok(streamed)
    }

    /// Reads the file from its start, [`PIECE`] bytes at a time, handing each piece of the body
    /// (rebased) to `each`; returns the hash of the bytes read.
    fn each_piece(&self, mut each: impl FnMut(&[u8]) -> io::Result<()>) -> io::Result<blake3::Hash> {
        let mut hasher = blake3::Hasher::new();
        let mut rebaser = self.rebase.as_ref().map(|(from, to)| Rebaser::new(from, to));
        let (mut buffer, mut rebased) = (vec![0u8; PIECE], Vec::new());
        let mut offset = 0u64;
        let mut reader = self.file.reader();
        loop {
            let n = match reader.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            offset += n as u64;
            if offset > MAX_DOCUMENT_BYTES {
                return Err(io::Error::other("the file grew past 1 GiB while it was read"));
            }
            hasher.update(&buffer[..n]);
            match &mut rebaser {
                Some(rebaser) => {
                    rebased.clear();
                    rebaser.feed(&buffer[..n], &mut rebased);
                    each(&rebased)?;
                }
                None => each(&buffer[..n])?,
            }
        }
        if let Some(rebaser) = &mut rebaser {
            rebased.clear();
            rebaser.finish(&mut rebased);
            each(&rebased)?;
        }
        Ok(hasher.finalize())
    }

    /// Writes the body to `out`, reading the file again: the last piece only once every byte
    /// read is checked (see the module's doc).
    pub(crate) fn send(&self, out: &mut dyn Write) -> io::Result<()> {
        let (mut held, mut written) = (Vec::with_capacity(PIECE), 0u64);
        let read = self.each_piece(|piece| {
            if !piece.is_empty() {
                out.write_all(&held)?;
                written += held.len() as u64;
                held.clear();
                held.extend_from_slice(piece);
            }
            Ok(())
        })?;
        if read != self.hash || written + held.len() as u64 != self.len {
            return Err(io::Error::other("the file changed since it was checked: the answer is cut short"));
        }
        out.write_all(&held)
    }
}

/// [`super::tree::rebase`] over a body read a piece at a time: the same bytes out. What may be
/// the start of a url to rebase is carried over to the next piece.
struct Rebaser<'a> {
    from: &'a [u8],
    to: &'a [u8],
    carry: Vec<u8>,
}

impl<'a> Rebaser<'a> {
    fn new(from: &'a str, to: &'a str) -> Rebaser<'a> {
        Rebaser { from: from.as_bytes(), to: to.as_bytes(), carry: Vec::new() }
    }

    /// Rebases what can be told of `input` into `out`.
    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let mut body = std::mem::take(&mut self.carry);
        body.extend_from_slice(input);
        let done = self.scan(&body, out, false);
        body.drain(..done);
        self.carry = body;
    }

    /// Rebases what is left into `out`.
    fn finish(&mut self, out: &mut Vec<u8>) {
        let body = std::mem::take(&mut self.carry);
        self.scan(&body, out, true);
    }

    /// As [`super::tree::rebase`]; unless `last`, stops before a quote whose url may go on in
    /// the next piece, and returns where it stopped.
    fn scan(&self, body: &[u8], out: &mut Vec<u8>, last: bool) -> usize {
        let lookahead = 1 + self.from.len() + API_PREFIX.len();
        let (mut copied, mut i) = (0, 0);
        while let Some(quote) = memchr::memchr(b'"', &body[i..]) {
            let at = i + quote;
            if !last && at + lookahead > body.len() {
                out.extend_from_slice(&body[copied..at]);
                return at;
            }
            let start = at + 1;
            i = start;
            let Some(rest) = body[start..].strip_prefix(self.from) else { continue };
            if !(rest.starts_with(API_PREFIX.as_bytes()) || rest.starts_with(b"\"")) {
                continue;
            }
            out.extend_from_slice(&body[copied..start]);
            out.extend_from_slice(self.to);
            copied = start + self.from.len();
            i = copied;
        }
        out.extend_from_slice(&body[copied..]);
        body.len()
    }
}

/// A connection's writer that cuts off a client reading less than [`MIN_RATE`] bytes a second
/// over a [`RATE_WINDOW`] (what the socket accepted, after its buffers filled). Each write is
/// at most [`PIECE`] bytes, so that the rate is checked as the body goes.
pub(crate) struct MinRate<W> {
    inner: W,
    window: Duration,
    since: Instant,
    bytes: u64,
}

impl<W: Write> MinRate<W> {
    pub(crate) fn new(inner: W) -> MinRate<W> {
        MinRate::measured_over(inner, RATE_WINDOW)
    }

    fn measured_over(inner: W, window: Duration) -> MinRate<W> {
        MinRate { inner, window, since: Instant::now(), bytes: 0 }
    }
}

impl<W: Write> Write for MinRate<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(&buf[..buf.len().min(PIECE)])?;
        self.bytes += n as u64;
        let elapsed = self.since.elapsed();
        if elapsed >= self.window {
            if (self.bytes as f64) < MIN_RATE as f64 * elapsed.as_secs_f64() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the client read {} bytes in {:.0} s, less than {} KiB/s: cut off",
                        self.bytes,
                        elapsed.as_secs_f64(),
                        MIN_RATE >> 10
                    ),
                ));
            }
            (self.since, self.bytes) = (Instant::now(), 0);
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rebasing_piece_by_piece_gives_the_bytes_of_a_whole_rebase() {
        let from = "https://api.example.org";
        let to = "http://127.0.0.1:9";
        let mut body = Vec::new();
        for i in 0..300 {
            let url = match i % 5 {
                0 => format!("\"{from}/api/v2/berry/{i}/\""),
                1 => format!("\"{from}\""),
                2 => format!("\"{from}/docs/{i}\""),
                3 => format!("\"see {from}/api/v2/x/\""),
                _ => format!("\"{from}.evil/api/v2/\""),
            };
            body.extend_from_slice(format!("{{\"a\":{url},\"n\":{i}}},").as_bytes());
        }
        let whole = super::super::tree::rebase(&body, from, to).unwrap();
        for piece in [1, 2, 3, 7, 23, 24, 25, 64, 1000, body.len()] {
            let mut rebaser = Rebaser::new(from, to);
            let mut out = Vec::new();
            for chunk in body.chunks(piece) {
                rebaser.feed(chunk, &mut out);
            }
            rebaser.finish(&mut out);
            assert!(out == whole, "pieces of {piece} bytes");
        }
    }

    #[test]
    fn a_file_changed_in_place_after_its_check_is_cut_short() {
        let dir = std::env::temp_dir().join(format!("gen-stream-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("api/v2/x")).unwrap();
        let path = "api/v2/x/index.json";
        let body = format!("{{\"url\": \"https://a.test/api/v2/x/\", \"text\": \"{}\"}}", "y".repeat(300_000));
        std::fs::write(dir.join(path), &body).unwrap();
        let hash = blake3::hash(body.as_bytes());
        let rebase = Some(("https://a.test".to_string(), "http://127.0.0.1:9".to_string()));
        let open =
            |rebase: Option<(String, String)>| Streamed::open(Streamed::open_file(&dir, path).unwrap(), hash, rebase);
        let streamed = open(rebase.clone()).unwrap();
        let expected = super::super::tree::rebase(body.as_bytes(), "https://a.test", "http://127.0.0.1:9").unwrap();
        assert_eq!(streamed.len, expected.len() as u64);
        assert_eq!(streamed.etag, format!("\"{}\"", blake3::hash(&expected).to_hex()));
        let mut sent = Vec::new();
        streamed.send(&mut sent).unwrap();
        assert!(sent == expected, "the body sent is the whole rebase");
        // the same length, other bytes, written into the open file
        let edit = std::fs::OpenOptions::new().write(true).open(dir.join(path)).unwrap();
        edit.write_all_at(b"z", 200_000).unwrap();
        let mut sent = Vec::new();
        assert!(streamed.send(&mut sent).is_err());
        assert!(sent.len() < expected.len(), "the last piece is not sent");
        assert!(matches!(open(rebase), Err(Unservable::Changed)));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A writer that accepts `per_write` bytes a call, taking `pause` for it.
    struct Slow {
        per_write: usize,
        pause: Duration,
    }

    impl Write for Slow {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            std::thread::sleep(self.pause);
            Ok(buf.len().min(self.per_write))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_client_reading_below_the_minimum_rate_is_cut_off() {
        let mut fast = MinRate::new(Slow { per_write: PIECE, pause: Duration::ZERO });
        fast.write_all(&vec![0u8; 4 << 20]).unwrap();
        // 1 KiB every 100 ms is 10 KiB/s: cut off once a window has passed
        let slow = Slow { per_write: 1 << 10, pause: Duration::from_millis(100) };
        let mut slow = MinRate::measured_over(slow, Duration::from_secs(1));
        let error = slow.write_all(&vec![0u8; 1 << 20]).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert!(error.to_string().contains("less than 32 KiB/s"), "{error}");
    }
}
