//! One thin module per subcommand: arguments in, a library call, a line out.

pub(crate) mod build;
pub(crate) mod check;
pub(crate) mod config;
pub(crate) mod import;
pub(crate) mod import_table;
pub(crate) mod publish;
pub(crate) mod serve;

/// Whether a command shows progress: not with `-q`, and only when stderr is a terminal (a log
/// file or a pipe gets the summary line alone).
pub(crate) fn progress_wanted(quiet: bool) -> bool {
    use std::io::IsTerminal as _;
    !quiet && std::io::stderr().is_terminal()
}

/// Where a line goes.
#[derive(Clone, Copy)]
pub(crate) enum To {
    Stdout,
    Stderr,
}

/// Writes `text` (and a newline when `newline`); when the reader has gone (`gen check | head
/// -1`), ends gen at once and quietly with `status`, as Unix tools do, instead of panicking.
pub(crate) fn emit(to: To, status: u8, text: &str, newline: bool) {
    use std::io::Write as _;
    let result = match to {
        To::Stdout => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|()| if newline { out.write_all(b"\n") } else { Ok(()) })
                .and_then(|()| out.flush())
        }
        To::Stderr => {
            let mut out = std::io::stderr().lock();
            out.write_all(text.as_bytes()).and_then(|()| if newline { out.write_all(b"\n") } else { Ok(()) })
        }
    };
    if result.is_err() {
        // A closed pipe, or an output that cannot be written: nothing more can be said.
        std::process::exit(status.into());
    }
}

/// A line on stdout (status 0 if the reader has gone).
pub(crate) fn say(text: &str) {
    emit(To::Stdout, 0, text, true);
}
