//! `gen serve`: serve a built tree locally.

use crate::cli::ServeArgs;
use anyhow::Result;
use std::time::Duration;

pub(crate) fn execute(args: ServeArgs) -> Result<()> {
    genapi::serve::run(genapi::serve::ServeOptions {
        dir: args.dir,
        addr: args.addr,
        quiet: args.quiet,
        max_age: args.max_age,
        idle_timeout: Duration::from_secs(args.idle_timeout),
        keep_urls: args.keep_urls,
        watch: args.watch.then_some(args.data),
        cache_bytes: usize::try_from(args.cache_mb << 20).unwrap_or(usize::MAX),
    })
}
