//! `gen`: parses the command line, runs the subcommand, prints fatal errors once.
//!
//! Exit status: 0 success, 1 problems found in the data, 2 any other error.

mod cli;
mod cmd;

use clap::Parser;
use std::process::ExitCode;

/// Large blocks (the index's tables, a build's per-document vectors: tens of MB at 200k records)
/// go back to the system when freed. glibc's default raises its mmap threshold after the
/// first such block is freed, and later ones then stay in the heap once freed: a one-line edit
/// of 200k NDJSON records peaked at 234 MB of RSS for 181 MB of heap, and at 190 MB with the
/// threshold held (BENCHMARKS.md, "Scale by the change").
fn give_back_large_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; called first thing, before any thread.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    give_back_large_blocks();
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
