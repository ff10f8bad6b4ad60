//! Configurations for static hosts (nginx, Caddy) that serve a built tree.

use anyhow::Result;
use std::path::Path;

/// A static host `gen config` can configure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Host {
    Nginx,
    Caddy,
}

/// The configuration for `host` serving the tree in `dir` on `listen`.
pub fn config(host: Host, dir: &Path, listen: &str) -> Result<String> {
    anyhow::bail!("gen config {host:?} is not written yet ({}, {listen})", dir.display())
}
