//! `gen check`: validate the data folder, write nothing.

use crate::cli::CheckArgs;
use anyhow::Result;

pub(crate) fn execute(args: CheckArgs) -> Result<()> {
    let dataset = genapi::check(&args.data)?;
    super::say(&format!(
        "{}: {} resources, {} records, no problems",
        args.data.display(),
        dataset.resources.len(),
        dataset.record_count()
    ));
    Ok(())
}
