//! `gen config <host>`: print a host's configuration for a built tree.

use crate::cli::ConfigArgs;
use anyhow::Result;

pub fn execute(args: ConfigArgs) -> Result<()> {
    let config = genapi::hosts::render_config(args.host.into(), &args.dir, &args.listen, args.max_age)?;
    super::emit(super::To::Stdout, 0, &config, false);
    Ok(())
}
