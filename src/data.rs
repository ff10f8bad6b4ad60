//! The data folder as input: what its paths mean ([`data_path`]), its files found ([`walk`])
//! and listed with their stamps against the previous build's ([`listing`], [`watched`]), its
//! settings read ([`settings`]), each record's own shape checked ([`validate`]) and loaded
//! ([`load`], [`table`], `assemble`) into the [`dataset`] every later step reads, read again
//! when rendered ([`second_read`]), under one memory budget for the parallel reads
//! ([`parse_budget`]). What a build recorded of the data files ([`recorded`], the data table of
//! the build index) is the previous build's for the next listing and load.
//! Import writes the data folder through this module; the build reads it through it.
//!
//! The house: `import → data → build → tree ← serve, publish, hosts`. Nothing here reaches
//! into the build.

// The grammar: what a path of the data folder is.
pub(crate) mod data_path;

// The files: walked, and listed with their stamps.
pub(crate) mod walk;
pub(crate) mod listing;
pub(crate) mod watched;

// Load: each record's own shape checked, into the dataset.
pub(crate) mod validate;
pub(crate) mod settings;
pub mod load;
mod assemble;
pub(crate) mod table;
pub(crate) mod dataset;

// What a build recorded of the data folder, the previous build's for the next one.
pub mod recorded;

// Reading the data's bytes: the memory budget, and the second read that checks its hash.
pub(crate) mod parse_budget;
pub(crate) mod second_read;

// When git last committed each file: the dates of a build of committed data.
pub(crate) mod commit_dates;
