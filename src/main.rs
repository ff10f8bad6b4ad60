//! `gen`: parses the command line, runs the subcommand, prints fatal errors once.
//!
//! Exit status: 0 success, 1 problems found in the data, 2 any other error.

mod cli;
mod cmd;

use clap::Parser;
use std::process::ExitCode;

/// The allocator: mimalloc, whose per-thread heaps do not keep what one thread freed from the
/// next (glibc's arenas held about 50 MB that way at 1M records; BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Freed memory goes back to the system at once (and is never mapped as huge pages: the
/// `no_thp` feature, Cargo.toml): a fresh build of 1M records peaked at 605 MB
/// of RSS with mimalloc's defaults, 531 MB with these (docs/benchmarks/issue-49-archive.md).
fn give_back_freed_memory() {
    // mimalloc's option number: `mi_option_e` in include/mimalloc.h of the version 3 that
    // Cargo.lock pins (libmimalloc-sys 0.1.49)
    const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    // SAFETY: set first thing, before any thread is started (mi_option_set is not
    // thread safe); it only changes when freed memory is given back.
    unsafe {
        libmimalloc_sys::mi_option_set(PURGE_DELAY, 0);
    }
}

fn main() -> ExitCode {
    give_back_freed_memory();
    let cli = cli::Cli::parse();
    // Every message of the library (notes, warnings, gen serve's lines and access log) goes to
    // stderr, a line in one write (lines of several threads never mix); a stderr that cannot be
    // written (a closed pipe) is no reason to stop serving, so the error is dropped.
    genapi::message::set_sink(|text| {
        use std::io::Write as _;
        let line = format!("{text}\n");
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    });
    genapi::message::set_output(|text| {
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{text}")?;
        stdout.flush()
    });
    // `check` writes nothing, so the build's "nothing was written" line would mislead there.
    let writes = !matches!(cli.command, cli::Command::Check(_));
    let result = match cli.command {
        cli::Command::Build(args) => cmd::build::execute(args),
        cli::Command::Check(args) => cmd::check::execute(args),
        cli::Command::Import(cli::ImportSource::ApiData(args)) => cmd::import::execute(args),
        cli::Command::Import(cli::ImportSource::Table(args)) => cmd::import_table::execute(args),
        cli::Command::Config(args) => cmd::config::execute(args),
        cli::Command::Serve(args) => cmd::serve::execute(args),
        cli::Command::Publish(args) => cmd::publish::execute(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if let Some(problems) = e.downcast_ref::<genapi::problem::Problems>() {
                let mut text = problems.to_string();
                if writes {
                    text.push_str("\nerror: nothing was written; fix the problems above and run again");
                }
                cmd::emit(cmd::To::Stderr, 1, &text, true);
                ExitCode::from(1)
            } else {
                cmd::emit(cmd::To::Stderr, 2, &format!("error: {e:#}"), true);
                ExitCode::from(2)
            }
        }
    }
}
