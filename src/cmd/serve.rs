//! `gen serve`: serve a built tree locally.

use crate::cli::ServeArgs;
use anyhow::Result;

pub fn execute(args: ServeArgs) -> Result<()> {
    genapi::serve::run(genapi::serve::ServeOptions { dir: args.dir, addr: args.addr, quiet: args.quiet })
}
