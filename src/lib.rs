//! `genapi`: turns a folder of reference-data records into a prebuilt, read-only JSON API
//! (the shape of pokeapi.co), and serves it.
//!
//! - [`build`]: the build pipeline, `data/` → the tree, in its stages: `load` (data/ → an index
//!   of ids and names, each record's own shape checked by `validate`) → `plan` (every document
//!   and path of the tree, pure) → `render` (references checked and made absolute; the OpenAPI
//!   document from what rendering saw) → `write` (what changed staged beside the tree, then
//!   committed). The build `index` kept beside the tree tells what changed since the previous
//!   build (docs/builds.md).
//! - [`serve`]: the preview server; [`hosts`]: nginx and Caddy configurations; [`import`]: the
//!   published data into a data folder; [`publish`]: the tree onto object storage, uploading
//!   only what changed.
//! - The vocabulary they share: [`config`] (settings and names), [`paging`], [`manifest`],
//!   [`json`], [`problem`], [`answers`], [`staging`], [`fsutil`], [`date`].

pub mod answers;
pub mod build;
pub mod config;
pub mod date;
pub mod fsutil;
pub mod hosts;
pub mod import;
pub mod json;
pub mod manifest;
pub mod paging;
pub mod problem;
pub mod publish;
pub mod serve;
pub mod staging;

pub use build::{BuildOptions, BuildSummary, build, check};

/// The program and version, as written into trees.
pub const GENERATOR: &str = concat!("gen ", env!("CARGO_PKG_VERSION"));
