//! The integration tests, one binary (as mdBook's `tests/testsuite/`): one link of the library,
//! a module per feature, and the shared helpers once. Each module runs the real `gen` binary on
//! temporary folders (see `common`); `cargo test --release -- <module>::` runs one feature.

// Shared helpers.
mod common;
mod fault_proxy;
mod parity;
mod serve_support;

// One module per feature.
mod archive;
mod archive_build;
mod archive_bulk;
mod browser;
mod build;
mod bulk;
mod check;
mod default_data;
mod docs;
mod edge;
mod facts;
mod filters;
mod fuzz;
mod hostile;
mod hosts;
mod ignored;
mod import;
mod import_table;
mod incremental;
mod killed;
mod openapi;
mod publish;
mod publish_archive;
mod search;
mod serve;
mod serve_archive;
mod state;
mod tree_files;
mod view;
mod watch;
