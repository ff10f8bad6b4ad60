//! `genapi`: turns a folder of reference-data records into a prebuilt, read-only JSON API
//! (the shape of pokeapi.co), and serves it.
//!
//! The modules, in the order of the calls:
//! - [`build`]: `data/` → the tree, in named steps (docs/builds.md): open what the previous
//!   build left → load what changed → decide `UpToDate | Partial | Full` → plan every document
//!   → render those that need it → write them (staged, then committed) → record the index.
//! - [`serve`]: the preview server over a built tree; [`hosts`]: nginx and Caddy
//!   configurations for it; [`import`]: the published data into a data folder; [`publish`]: the
//!   tree onto object storage, uploading only what changed.
//! - The vocabulary they share: [`config`] (the data folder's settings and names), [`tree`]
//!   (the built tree: where each document lives, its manifest, reading it), [`paging`],
//!   `search` (`?q=`), `bulk` (bulk-data files), `json`, [`problem`], `answers`, `staging`, [`fsutil`], [`date`], [`progress`], [`message`] (the one sink of every
//!   message, which the binary sets).

/// Formats a message and sends it through the binary's sink ([`message::say`]): the library's
/// only way to tell the user something.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::message::say(&format!($($arg)*))
    };
}

// The pipeline.
pub mod data;
pub mod build;

// Its uses: preview, host configurations, import, publish.
pub mod serve;
pub mod hosts;
pub mod import;
pub mod publish;

// The vocabulary they share.
pub mod config;
pub mod tree;
pub mod archive;
pub mod paging;
mod search;
mod filters;
mod bulk;
mod json;
pub mod problem;
mod answers;
mod staging;
pub mod fsutil;
pub mod date;
pub mod progress;
pub mod message;

/// The program and version, as written into what it makes (the tree's manifest, the build's
/// state): a file another gen wrote is known as such.
pub(crate) const GENERATOR: &str = concat!("gen ", env!("CARGO_PKG_VERSION"));

pub use build::{BuildOptions, BuildSummary, build, check};
