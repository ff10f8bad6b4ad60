//! `gen serve`: answers API requests from an in-memory index of a built tree.

use anyhow::Result;
use std::path::PathBuf;

/// Settings of the server.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub dir: PathBuf,
    pub addr: String,
    pub quiet: bool,
}

/// Runs the server until interrupted.
pub fn run(options: ServeOptions) -> Result<()> {
    anyhow::bail!("gen serve is not written yet ({})", options.dir.display())
}
