//! One thin module per subcommand: arguments in, a library call, a line out.

pub mod build;
pub mod check;
pub mod config;
pub mod import;
pub mod serve;
