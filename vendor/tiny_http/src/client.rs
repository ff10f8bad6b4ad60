use ascii::AsciiString;

use std::io::Error as IoError;
use std::io::Result as IoResult;
use std::io::{BufReader, BufWriter, ErrorKind, Read};

use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{HTTPVersion, Method};
use crate::util::RefinedTcpStream;
use crate::util::{SequentialReader, SequentialReaderBuilder, SequentialWriterBuilder};
use crate::Request;

/// A ClientConnection is an object that will store a socket to a client
/// and return Request objects.
pub struct ClientConnection {
    // address of the client
    remote_addr: IoResult<Option<SocketAddr>>,

    // sequence of Readers to the stream, so that the data is not read in
    //  the wrong order
    source: SequentialReaderBuilder<BufReader<RefinedTcpStream>>,

    // sequence of Writers to the stream, to avoid writing response #2 before
    //  response #1
    sink: SequentialWriterBuilder<BufWriter<RefinedTcpStream>>,

    // Reader to read the next header from
    next_header_source: SequentialReader<BufReader<RefinedTcpStream>>,

    // set to true if we know that the previous request is the last one
    no_more_requests: bool,

    // true if the connection goes through SSL
    secure: bool,

    // gen patch: set through a request's `ConnectionCloser`: read no further request
    closing: Arc<AtomicBool>,

    // gen patch: how long a whole request head may take from its first byte (the socket's
    // receive timeout, when one is set)
    head_time: Option<Duration>,

    // gen patch: the limits of a request head, and how a refused one is answered
    reader: Reader,
}

/// Error that can happen when reading a request.
#[derive(Debug)]
enum ReadError {
    WrongRequestLine,
    WrongHeader(HTTPVersion),
    /// the client sent an unrecognized `Expect` header
    ExpectationFailed(HTTPVersion),
    ReadIoError(IoError),
    /// gen patch: a head refused (too large, or one that cannot be read safely, e.g.
    /// conflicting lengths): answered as the [`Reader`] words it, and the connection closed.
    Refused(Rejected),
}

/// gen patch: why the reader refused a request head. The answer's status is
/// [`Rejected::status`]; its body is the [`Reader`]'s to word (`Reader::words`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejected {
    /// 414: the request line is longer than `Reader::max_request_line` (it is not read whole).
    RequestLineTooLong,
    /// 431: a header line runs past `Reader::max_header_bytes` in all (it is not read whole).
    HeadersTooLarge,
    /// 431: more than `Reader::max_headers` headers, or more than `Reader::max_header_bytes`.
    TooManyHeaders,
    /// 400: a head that cannot be read safely.
    BadRequest(BadHead),
    /// 505: an HTTP version above 1.1.
    VersionNotSupported,
}

/// gen patch: a request head that cannot be read safely (answered 400).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadHead {
    /// A byte above 127 (tiny_http keeps heads as ASCII).
    NotAscii,
    /// A control character other than a tab in the request line.
    ControlInRequestLine,
    /// A control character other than a tab in a header line.
    ControlInHeader,
    /// A header line that starts with a space or tab (obsolete line folding, RFC 9112 §5.2).
    FoldedHeader,
    /// A `Content-Length` that is not a plain number.
    LengthNotANumber,
    /// Two `Content-Length` headers that differ.
    LengthsDiffer,
    /// A `Content-Length` beside a `Transfer-Encoding`.
    LengthAndTransferEncoding,
    /// An HTTP/1.1 request without `Host` (RFC 9112 §3.2).
    NoHost,
    /// More than one `Host`.
    TwoHosts,
}

impl Rejected {
    /// Every kind of refusal.
    pub const ALL: [Rejected; 13] = [
        Rejected::RequestLineTooLong,
        Rejected::HeadersTooLarge,
        Rejected::TooManyHeaders,
        Rejected::BadRequest(BadHead::NotAscii),
        Rejected::BadRequest(BadHead::ControlInRequestLine),
        Rejected::BadRequest(BadHead::ControlInHeader),
        Rejected::BadRequest(BadHead::FoldedHeader),
        Rejected::BadRequest(BadHead::LengthNotANumber),
        Rejected::BadRequest(BadHead::LengthsDiffer),
        Rejected::BadRequest(BadHead::LengthAndTransferEncoding),
        Rejected::BadRequest(BadHead::NoHost),
        Rejected::BadRequest(BadHead::TwoHosts),
        Rejected::VersionNotSupported,
    ];

    /// The status the refusal is answered with.
    pub fn status(self) -> u16 {
        match self {
            Rejected::RequestLineTooLong => 414,
            Rejected::HeadersTooLarge | Rejected::TooManyHeaders => 431,
            Rejected::BadRequest(_) => 400,
            Rejected::VersionNotSupported => 505,
        }
    }
}

/// gen patch: how the reader reads a request head, and how it answers one it refuses: with
/// [`Rejected::status`], `headers`, `Connection: close` and the body `words` gives, then the
/// connection is closed.
#[derive(Debug, Clone)]
pub struct Reader {
    /// Longest request line read (method, target and version): longer ones get 414 without
    /// being read whole.
    pub max_request_line: usize,
    /// Most bytes of header lines read; more get 431 without being read whole.
    pub max_header_bytes: usize,
    /// Most header lines read; more get 431.
    pub max_headers: usize,
    /// The headers of the answer to a refused head (besides `Connection: close` and those
    /// tiny_http always writes).
    pub headers: Vec<crate::Header>,
    /// The body of the answer to a refused head.
    pub words: fn(Rejected) -> Vec<u8>,
}

impl Default for Reader {
    /// 8 KiB and 64 bytes of request line, 100 headers of 16 KiB in all, and empty answers.
    fn default() -> Reader {
        Reader {
            max_request_line: 8 * 1024 + 64,
            max_header_bytes: 16 * 1024,
            max_headers: 100,
            headers: Vec::new(),
            words: |_| Vec::new(),
        }
    }
}

impl ClientConnection {
    /// Creates a new `ClientConnection` that takes ownership of the `TcpStream`.
    ///
    /// gen patch: `reader` bounds the request heads read and words the refusals.
    pub fn new(
        write_socket: RefinedTcpStream,
        mut read_socket: RefinedTcpStream,
        reader: Reader,
    ) -> ClientConnection {
        let remote_addr = read_socket.peer_addr();
        let secure = read_socket.secure();
        let head_time = read_socket.read_timeout();

        let mut source = SequentialReaderBuilder::new(BufReader::with_capacity(1024, read_socket));
        let first_header = source.next().unwrap();

        ClientConnection {
            source,
            sink: SequentialWriterBuilder::new(BufWriter::with_capacity(1024, write_socket)),
            remote_addr,
            next_header_source: first_header,
            no_more_requests: false,
            secure,
            closing: Arc::new(AtomicBool::new(false)),
            head_time,
            reader,
        }
    }

    /// gen patch: ends the connection without waiting on the client. The sending side is shut
    /// down first, so that nothing left in a buffer is written (a client that does not read
    /// would hold the thread again) and the client sees the end of the answer. What the client
    /// still sends (the rest of a body) is then read and dropped for a short, bounded while: a
    /// socket closed with unread data sends a reset, which can destroy the answer before the
    /// client reads it. Then the socket is shut down both ways.
    fn shut_down(&mut self) {
        const LINGER: Duration = Duration::from_secs(1);
        const LINGER_BYTES: usize = 1 << 20;
        self.sink.with_inner(|writer| {
            writer.get_ref().shut_down_sending();
            writer.get_ref().set_read_timeout(Some(Duration::from_millis(250)));
        });
        let deadline = Instant::now() + LINGER;
        let mut buffer = [0u8; 16 * 1024];
        let mut drained = 0;
        while drained < LINGER_BYTES && Instant::now() < deadline {
            match self.next_header_source.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
        self.sink.with_inner(|writer| writer.get_ref().shut_down());
    }

    /// true if the connection is HTTPS
    pub fn secure(&self) -> bool {
        self.secure
    }

    /// gen patch: the answer to a refused head, as the reader words it; it closes the
    /// connection.
    fn refusal(&self, rejected: Rejected) -> crate::Response<std::io::Cursor<Vec<u8>>> {
        let mut response = crate::Response::from_data((self.reader.words)(rejected))
            .with_status_code(crate::StatusCode(rejected.status()));
        for header in &self.reader.headers {
            response.add_header(header.clone());
        }
        let close = crate::Header::from_bytes(&b"Connection"[..], &b"close"[..]).expect("a valid header");
        response.with_header(close)
    }

    /// Reads the next line from self.next_header_source.
    ///
    /// Reads until `CRLF` is reached. The next read will start
    ///  at the first byte of the new line.
    ///
    /// gen patch: a bare `LF` ends a line too (RFC 9112 §2.2 lets a recipient accept it), so
    /// a head written with `\n` alone is answered at once instead of waiting for a `CRLF` that
    /// never comes. A `CR` elsewhere stays in the line, where [`has_control`] refuses it.
    ///
    /// gen patch: `deadline` is when the whole head must have arrived; it is set when the first
    /// byte of the head arrives (before that, the socket's receive timeout bounds the wait).
    fn read_next_line(
        &mut self,
        limit: usize,
        deadline: &mut Option<Instant>,
    ) -> IoResult<AsciiString> {
        let mut buf = Vec::new();
        let mut prev_byte_was_cr = false;

        loop {
            // gen patch: stop at `limit` bytes instead of reading a line of any length.
            if buf.len() > limit.saturating_add(1) {
                return Err(IoError::new(ErrorKind::OutOfMemory, "line too long"));
            }
            let byte = self.next_header_source.by_ref().bytes().next();

            let byte = match byte {
                Some(b) => b?,
                None => return Err(IoError::new(ErrorKind::ConnectionAborted, "Unexpected EOF")),
            };
            // gen patch: a head sent a byte at a time, each within the receive timeout, is cut
            // off when the whole head has taken longer than that timeout.
            match (*deadline, self.head_time) {
                (None, Some(time)) => *deadline = Some(Instant::now() + time),
                (Some(deadline), _) if Instant::now() > deadline => {
                    return Err(IoError::new(ErrorKind::TimedOut, "the request head took too long"));
                }
                _ => {}
            }

            if byte == b'\n' {
                if prev_byte_was_cr {
                    buf.pop(); // removing the '\r'
                }
                return AsciiString::from_ascii(buf)
                    .map_err(|_| IoError::new(ErrorKind::InvalidInput, "Header is not in ASCII"));
            }

            prev_byte_was_cr = byte == b'\r';

            buf.push(byte);
        }
    }

    /// Reads a request from the stream.
    /// Blocks until the header has been read.
    fn read(&mut self) -> Result<Request, ReadError> {
        let mut deadline = None;
        let (method, path, version, headers) = {
            // reading the request line
            let (method, path, version) = {
                let max = self.reader.max_request_line;
                let line = self.read_next_line(max, &mut deadline).map_err(|e| match e.kind() {
                    ErrorKind::OutOfMemory => ReadError::Refused(Rejected::RequestLineTooLong),
                    ErrorKind::InvalidInput => bad(BadHead::NotAscii),
                    _ => ReadError::ReadIoError(e),
                })?;
                // gen patch: no control characters in the request line.
                if has_control(line.as_bytes()) {
                    return Err(bad(BadHead::ControlInRequestLine));
                }

                parse_request_line(
                    line.as_str().trim(), // TODO: remove this conversion
                )?
            };

            // getting all headers
            let headers = {
                let mut headers = Vec::new();
                let mut header_bytes = 0;
                loop {
                    let room = self.reader.max_header_bytes.saturating_sub(header_bytes);
                    let line = self.read_next_line(room, &mut deadline).map_err(|e| match e.kind() {
                        ErrorKind::OutOfMemory => ReadError::Refused(Rejected::HeadersTooLarge),
                        ErrorKind::InvalidInput => bad(BadHead::NotAscii),
                        _ => ReadError::ReadIoError(e),
                    })?;

                    if line.is_empty() {
                        break;
                    };
                    check_field_line(line.as_bytes())?;
                    header_bytes += line.len();
                    if headers.len() >= self.reader.max_headers
                        || header_bytes > self.reader.max_header_bytes
                    {
                        return Err(ReadError::Refused(Rejected::TooManyHeaders));
                    }
                    headers.push(match FromStr::from_str(line.as_str().trim()) {
                        // TODO: remove this conversion
                        Ok(h) => h,
                        _ => return Err(ReadError::WrongHeader(version)),
                    });
                }

                headers
            };
            check_framing(&headers)?;
            check_host(&version, &headers)?;

            (method, path, version, headers)
        };

        // building the writer for the request
        let writer = self.sink.next().unwrap();

        // follow-up for next potential request
        let mut data_source = self.source.next().unwrap();
        std::mem::swap(&mut self.next_header_source, &mut data_source);

        // building the next reader
        let request = crate::request::new_request(
            self.secure,
            method,
            path,
            version.clone(),
            headers,
            *self.remote_addr.as_ref().unwrap(),
            data_source,
            writer,
            self.closing.clone(),
        )
        .map_err(|e| {
            use crate::request;
            match e {
                request::RequestCreationError::CreationIoError(e) => ReadError::ReadIoError(e),
                request::RequestCreationError::ExpectationFailed => {
                    ReadError::ExpectationFailed(version)
                }
            }
        })?;

        // return the request
        Ok(request)
    }
}

impl Iterator for ClientConnection {
    type Item = Request;

    /// Blocks until the next Request is available.
    /// Returns None when no new Requests will come from the client.
    fn next(&mut self) -> Option<Request> {
        use crate::{Response, StatusCode};

        // the client sent a "connection: close" header in this previous request
        //  or is using HTTP 1.0, meaning that no new request will come
        if self.no_more_requests {
            return None;
        }
        // gen patch: a request asked for the connection to end.
        if self.closing.load(Ordering::Acquire) {
            self.shut_down();
            return None;
        }

        loop {
            let rq = match self.read() {
                Err(ReadError::WrongRequestLine) => {
                    let writer = self.sink.next().unwrap();
                    let response = Response::new_empty(StatusCode(400));
                    response
                        .raw_print(writer, HTTPVersion(1, 1), &[], false, None)
                        .ok();
                    return None; // we don't know where the next request would start,
                                 // se we have to close
                }

                Err(ReadError::WrongHeader(ver)) => {
                    let writer = self.sink.next().unwrap();
                    let response = Response::new_empty(StatusCode(400));
                    response.raw_print(writer, ver, &[], false, None).ok();
                    return None; // we don't know where the next request would start,
                                 // se we have to close
                }

                Err(ReadError::ReadIoError(ref err)) if err.kind() == ErrorKind::TimedOut => {
                    // request timeout
                    let writer = self.sink.next().unwrap();
                    let response = Response::new_empty(StatusCode(408));
                    response
                        .raw_print(writer, HTTPVersion(1, 1), &[], false, None)
                        .ok();
                    return None; // closing the connection
                }

                Err(ReadError::ExpectationFailed(ver)) => {
                    let writer = self.sink.next().unwrap();
                    let response = Response::new_empty(StatusCode(417));
                    response.raw_print(writer, ver, &[], true, None).ok();
                    return None; // TODO: should be recoverable, but needs handling in case of body
                }

                Err(ReadError::Refused(rejected)) => {
                    // gen patch: answer as the reader words it and close: the rest of the head
                    // is never read.
                    let writer = self.sink.next().unwrap();
                    self.refusal(rejected)
                        .raw_print(writer, HTTPVersion(1, 1), &[], false, None)
                        .ok();
                    return None;
                }

                Err(ReadError::ReadIoError(_)) => return None,

                Ok(rq) => rq,
            };

            // checking HTTP version
            if *rq.http_version() > (1, 1) {
                // gen patch: the answer goes through the request's own writer. Asking the sink
                // for the next writer waited, forever, for this request's writer to be released
                // (it is, only when `rq` is dropped): the connection got no answer and held its
                // thread. The answer is in gen's error format.
                let mut writer = rq.into_writer();
                self.refusal(Rejected::VersionNotSupported)
                    .raw_print(&mut writer, HTTPVersion(1, 1), &[], false, None)
                    .ok();
                writer.flush().ok();
                drop(writer);
                // gen patch: close instead of reading on (what follows is not HTTP/1): the
                // answer is flushed, then the sending side shut down and what the client still
                // sends (an HTTP/2 preface's rest) drained briefly, so no reset destroys it.
                self.shut_down();
                return None;
            }

            // updating the status of the connection
            let connection_header = rq
                .headers()
                .iter()
                .find(|h| h.field.equiv("Connection"))
                .map(|h| h.value.as_str());

            let lowercase = connection_header.map(|h| h.to_ascii_lowercase());

            match lowercase {
                Some(ref val) if val.contains("close") => self.no_more_requests = true,
                Some(ref val) if val.contains("upgrade") => self.no_more_requests = true,
                Some(ref val)
                    if !val.contains("keep-alive") && *rq.http_version() == HTTPVersion(1, 0) =>
                {
                    self.no_more_requests = true
                }
                None if *rq.http_version() == HTTPVersion(1, 0) => self.no_more_requests = true,
                _ => (),
            };

            // returning the request
            return Some(rq);
        }
    }
}

/// gen patch: refuses the request-smuggling shapes: two `Content-Length` headers that differ,
/// one that is not a plain number, or a `Content-Length` beside a `Transfer-Encoding`. Where the body ends is ambiguous, so
/// the connection cannot be read on.
fn check_framing(headers: &[crate::Header]) -> Result<(), ReadError> {
    let mut lengths = headers
        .iter()
        .filter(|h| h.field.equiv("Content-Length"))
        .map(|h| h.value.as_str().trim());
    let first = lengths.next();
    if let Some(first) = first {
        if first.is_empty() || !first.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad(BadHead::LengthNotANumber));
        }
        if lengths.any(|other| other != first) {
            return Err(bad(BadHead::LengthsDiffer));
        }
        if headers.iter().any(|h| h.field.equiv("Transfer-Encoding")) {
            return Err(bad(BadHead::LengthAndTransferEncoding));
        }
    }
    Ok(())
}

/// gen patch: a refused head that cannot be read safely.
fn bad(head: BadHead) -> ReadError {
    ReadError::Refused(Rejected::BadRequest(head))
}

/// gen patch: true when `bytes` hold a control character other than a tab (RFC 9110 §5.5:
/// NUL, CR and LF are never valid in a field value; the others are not either).
fn has_control(bytes: &[u8]) -> bool {
    bytes.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f)
}

/// gen patch: refuses a header line that holds a control character (a NUL, a bare CR), and
/// an obsolete line folding (a line that starts with a space or tab, RFC 9112 §5.2), which
/// tiny_http read as a header of its own.
fn check_field_line(line: &[u8]) -> Result<(), ReadError> {
    if has_control(line) {
        return Err(bad(BadHead::ControlInHeader));
    }
    if line.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
        return Err(bad(BadHead::FoldedHeader));
    }
    Ok(())
}

/// gen patch: RFC 9112 §3.2: an HTTP/1.1 request without a `Host` header, or any request with
/// more than one, is answered 400.
fn check_host(version: &HTTPVersion, headers: &[crate::Header]) -> Result<(), ReadError> {
    match headers.iter().filter(|h| h.field.equiv("Host")).count() {
        0 if *version == HTTPVersion(1, 1) => Err(bad(BadHead::NoHost)),
        0 | 1 => Ok(()),
        _ => Err(bad(BadHead::TwoHosts)),
    }
}


/// Parses a "HTTP/1.1" string.
fn parse_http_version(version: &str) -> Result<HTTPVersion, ReadError> {
    let (major, minor) = match version {
        "HTTP/0.9" => (0, 9),
        "HTTP/1.0" => (1, 0),
        "HTTP/1.1" => (1, 1),
        "HTTP/2.0" => (2, 0),
        "HTTP/3.0" => (3, 0),
        _ => return Err(ReadError::WrongRequestLine),
    };

    Ok(HTTPVersion(major, minor))
}

/// Parses the request line of the request.
/// eg. GET / HTTP/1.1
fn parse_request_line(line: &str) -> Result<(Method, String, HTTPVersion), ReadError> {
    let mut parts = line.split(' ');

    let method = parts.next().and_then(|w| w.parse().ok());
    let path = parts.next().map(ToOwned::to_owned);
    let version = parts.next().and_then(|w| parse_http_version(w).ok());

    method
        .and_then(|method| Some((method, path?, version?)))
        .ok_or(ReadError::WrongRequestLine)
}

#[cfg(test)]
mod test {
    #[test]
    fn test_parse_request_line() {
        let (method, path, ver) = super::parse_request_line("GET /hello HTTP/1.1").unwrap();

        assert!(method == crate::Method::Get);
        assert!(path == "/hello");
        assert!(ver == crate::common::HTTPVersion(1, 1));

        assert!(super::parse_request_line("GET /hello").is_err());
        assert!(super::parse_request_line("qsd qsd qsd").is_err());
    }
}
