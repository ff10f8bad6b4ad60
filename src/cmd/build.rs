//! `gen build`: data/ → out/.

use crate::cli::BuildArgs;
use anyhow::Result;
use genapi::progress::Progress;
use std::time::Instant;

pub(crate) fn execute(args: BuildArgs) -> Result<()> {
    let started = Instant::now();
    let source_date_epoch = genapi::date::source_date_epoch()?;
    let options = genapi::BuildOptions {
        base_url: args.base_url,
        links: Some(args.links.into()),
        pretty: args.pretty,
        gzip: args.gzip,
        source_date_epoch,
        verify: args.verify,
        archive: args.archive,
        watched: None,
    };
    let progress = Progress::new(super::progress_wanted(args.quiet), "writing", "documents");
    let summary = genapi::build(&args.data, &args.out, &options, &progress);
    progress.finish();
    let summary = summary?;
    if !args.quiet && args.verify && !args.archive {
        let report = &summary.report;
        super::say(&format!(
            "verified {} against {}: every data file and every file of the tree read; {} files rewritten \
             (the manifest always), {} already right, in {:.2} s",
            args.out.display(),
            args.data.display(),
            report.written,
            report.files - report.written,
            started.elapsed().as_secs_f64()
        ));
    } else if !args.quiet && summary.up_to_date {
        super::say(&format!(
            "{} is up to date: {} resources, {} records (0 written) in {:.2} s",
            args.out.display(),
            summary.resources,
            summary.records,
            started.elapsed().as_secs_f64()
        ));
    } else if !args.quiet && args.archive {
        let report = &summary.report;
        super::say(&format!(
            "built {} resources, {} records: an archive of {} files ({} written, {} unchanged), {:.1} MB in {:.2} s \
             → {}",
            summary.resources,
            summary.records,
            report.files,
            report.written,
            report.files.saturating_sub(report.written),
            report.bytes as f64 / 1e6,
            started.elapsed().as_secs_f64(),
            args.out.display()
        ));
    } else if !args.quiet {
        let report = &summary.report;
        super::say(&format!(
            "built {} resources, {} records: {} files ({} written, {} unchanged), {:.1} MB stored (hard links \
             counted once) in {:.2} s → {}",
            summary.resources,
            summary.records,
            report.files,
            report.written,
            report.files - report.written,
            report.bytes as f64 / 1e6,
            started.elapsed().as_secs_f64(),
            args.out.display()
        ));
    }
    Ok(())
}
