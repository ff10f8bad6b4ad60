//! The one way the library speaks to a user: every note, warning and progress line goes through
//! the sink the binary sets at start ([`set_sink`]), as the `log` crate's logger is set; the
//! library itself prints nothing. Without a sink (a library caller, unit tests) messages go
//! nowhere. A message is one text as the user reads it, its prefix included (`note: `,
//! `warning: `, `gen serve: `). What a script reads from stdout (the address `gen serve` bound)
//! goes through the second sink, [`set_output`], which the binary also sets.

use std::sync::OnceLock;

/// Where messages go: called with each message's text.
pub(crate) type Sink = fn(&str);

static SINK: OnceLock<Sink> = OnceLock::new();

/// Sets where every message goes, once (a second call changes nothing).
pub fn set_sink(sink: Sink) {
    let _ = SINK.set(sink);
}

/// Sends `text` to the sink, if one is set.
pub(crate) fn say(text: &str) {
    if let Some(sink) = SINK.get() {
        sink(text);
    }
}

/// Where a command's output goes (stdout, for scripts): called with each line, it reports a
/// failed write.
pub(crate) type Output = fn(&str) -> std::io::Result<()>;

static OUTPUT: OnceLock<Output> = OnceLock::new();

/// Sets where a command's output lines go, once (a second call changes nothing).
pub fn set_output(output: Output) {
    let _ = OUTPUT.set(output);
}

/// Sends the output line `text` (without its newline) to the output sink, if one is set.
pub(crate) fn output(text: &str) -> std::io::Result<()> {
    OUTPUT.get().map_or(Ok(()), |output| output(text))
}
