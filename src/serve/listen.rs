//! The listening socket, and the socket options every connection inherits from it.
//!
//! tiny_http accepts connections itself and sets no option on them. On Linux an accepted
//! socket inherits the listener's `TCP_NODELAY`, `SO_RCVTIMEO` and `SO_SNDTIMEO`, so they are
//! set once, here, on the listener:
//! - `TCP_NODELAY`: without it a response written in two pieces waits for the client's delayed
//!   ACK (~40 ms per keep-alive request);
//! - the receive timeout closes connections idle for longer than `--idle-timeout` (tiny_http
//!   never does), and bounds how long a client may take to send a request;
//! - the send timeout bounds how long a connection's thread waits on a client that does not
//!   read: then the connection is closed.
//!
//! The receive timeout also applies to `accept` on the listener: after that long without a new
//! connection tiny_http's accept thread gets `EAGAIN` and ends; the supervisor starts another.

use anyhow::{Result, anyhow};
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Longest wait on a client that does not read its response (the idle timeout when shorter).
pub(crate) const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// Binds `addr` (`HOST:PORT`, `[IPv6]:PORT`, `:PORT` or `PORT`) with options for `idle_timeout`; errors say what to do.
pub(crate) fn bind(addr: &str, idle_timeout: Duration) -> Result<TcpListener> {
    // the forms `gen config --listen` takes too; port 0 picks a free port
    let (host, port) = crate::config::parse_listen(addr).ok_or_else(|| {
        anyhow!(
            "--addr {addr:?} is not HOST:PORT (e.g. 127.0.0.1:8080, [::1]:8080, 0.0.0.0:8080, or :8080 for every \
             interface; port 0 picks a free port)"
        )
    })?;
    let host = if host.is_empty() { "0.0.0.0" } else { host.as_str() };
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| anyhow!("--addr {addr:?}: cannot resolve {host:?} ({e}): use an address such as 127.0.0.1"))?
        .collect();
    let mut last = None;
    for socket_addr in &addrs {
        match TcpListener::bind(socket_addr) {
            Ok(listener) => {
                set_inherited_options(&listener, idle_timeout)
                    .map_err(|e| anyhow!("cannot set socket options on {socket_addr}: {e}"))?;
                return Ok(listener);
            }
            Err(e) => last = Some((socket_addr, e)),
        }
    }
    let Some((socket_addr, e)) = last else { return Err(anyhow!("--addr {addr:?} names no address")) };
    let hint = match e.kind() {
        ErrorKind::AddrInUse => "the port is in use (another `gen serve`?): stop that program, or choose another \
                                  port, e.g. --addr 127.0.0.1:0 for any free one"
            .to_string(),
        ErrorKind::PermissionDenied => {
            "permission denied: ports below 1024 need privileges; choose a port above 1023, \
                                         e.g. --addr 127.0.0.1:8080"
                .to_string()
        }
        ErrorKind::AddrNotAvailable => "this machine has no such address: use 127.0.0.1, or 0.0.0.0 for every \
                                         interface"
            .to_string(),
        _ => e.to_string(),
    };
    Err(anyhow!("cannot listen on {socket_addr}: {hint}"))
}

/// Sets the options accepted sockets inherit (see the module documentation).
fn set_inherited_options(listener: &TcpListener, idle_timeout: Duration) -> std::io::Result<()> {
    use std::os::fd::{AsRawFd, FromRawFd};
    // std sets these options only on streams; the calls are plain setsockopt on the descriptor,
    // which works on a listening socket too.
    // SAFETY: the descriptor is the listener's and stays open for the whole block; ManuallyDrop
    // keeps the borrowed TcpStream from closing it.
    let socket = std::mem::ManuallyDrop::new(unsafe { TcpStream::from_raw_fd(listener.as_raw_fd()) });
    socket.set_nodelay(true)?;
    socket.set_read_timeout(Some(idle_timeout))?;
    socket.set_write_timeout(Some(SEND_TIMEOUT.min(idle_timeout)))?;
    Ok(())
}

/// Raises the soft limit on open files to the hard limit (as Go programs do at start): each
/// connection takes two descriptors in tiny_http, and the common soft limit of 1024 would end
/// at ~500 connections. Returns the limit now in force, when known.
#[cfg(unix)]
#[allow(clippy::unnecessary_cast)] // rlim_t is u64 on Linux, not on every unix
pub(crate) fn raise_open_files_limit() -> Option<u64> {
    // Above this Linux refuses (fs.nr_open's default); "unlimited" is capped to it.
    const CAP: libc::rlim_t = 1 << 20;
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `limit` is a valid, writable rlimit struct for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    let wanted = limit.rlim_max.min(CAP);
    if wanted > limit.rlim_cur {
        let raised = libc::rlimit { rlim_cur: wanted, rlim_max: limit.rlim_max };
        // SAFETY: `raised` is a valid rlimit struct for the call.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Some(wanted as u64);
        }
    }
    Some(limit.rlim_cur as u64)
}

#[cfg(not(unix))]
pub(crate) fn raise_open_files_limit() -> Option<u64> {
    None
}
