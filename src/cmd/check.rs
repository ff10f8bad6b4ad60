//! `gen check`: validate the data folder, write nothing.

use crate::cli::CheckArgs;
use anyhow::Result;

pub fn execute(args: CheckArgs) -> Result<()> {
    let dataset = genapi::check(&args.data).map_err(|e| {
        // `check` writes nothing, so the build's "nothing was written" line would mislead.
        match e.downcast::<genapi::problem::Problems>() {
            Ok(problems) => {
                super::emit(super::To::Stderr, 1, &problems.to_string(), true);
                std::process::exit(1);
            }
            Err(e) => e,
        }
    })?;
    super::say(&format!(
        "{}: {} resources, {} records, no problems",
        args.data.display(),
        dataset.resources.len(),
        dataset.record_count()
    ));
    Ok(())
}
