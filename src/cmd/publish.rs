//! `gen publish`: out/ → object storage.

use crate::cli::PublishArgs;
use anyhow::Result;
use genapi::publish::{PublishOptions, PublishSummary};

pub(crate) fn execute(args: PublishArgs) -> Result<()> {
    let options = PublishOptions {
        dir: args.dir,
        target: args.target,
        endpoint: args.endpoint,
        max_age: args.max_age,
        jobs: args.jobs.into(),
        retries: args.retries.into(),
        dry_run: args.dry_run,
        verify: args.verify,
        changed_urls: args.changed_urls,
        allow_query_links: args.allow_query_links,
        take_over_lock: args.take_over_lock,
        progress: !args.dry_run && super::progress_wanted(args.quiet),
        grace: args.grace,
    };
    let summary = genapi::publish::publish(&options)?;
    if args.dry_run {
        super::say(&dry_run_text(&summary, &options.target));
    } else if !args.quiet {
        super::say(&summary_text(&summary, &options.target));
        if let Some(note) = folder_urls_note(&options.dir) {
            super::emit(super::To::Stderr, 0, &note, true);
        }
    }
    Ok(())
}

/// After a publish of a `--links path` tree: its links are folder urls, which a bare bucket
/// answers with its own error or an empty object, not the folder's `index.json`; what to do.
fn folder_urls_note(dir: &std::path::Path) -> Option<String> {
    let manifest = genapi::tree::manifest::Manifest::read(dir).ok()?;
    let settings = &manifest.settings;
    if settings.links != genapi::paging::LinkStyle::Path {
        return None;
    }
    let example = manifest.resources.keys().next().map_or("<resource>", String::as_str);
    Some(format!(
        "note: the tree's links are folder urls ({base}/api/v2/{example}/_pages/20/20/), and a bare bucket answers a \
         folder url with an error or an empty object, not the folder's index.json. Serve it with one of:\n  \
         website hosting, index document index.json (`aws s3 website s3://BUCKET/ --index-document index.json`; \
         GCS: `gcloud storage buckets update gs://BUCKET --web-main-page-suffix=index.json`)\n  \
         a CDN rule that maps a folder url to its index.json\n  \
         an edge handler in front of the bucket (`gen config cloudflare|deno|node`)\n\
         docs/deploy.md begins with which build and which host answer what.",
        base = settings.base_url
    ))
}

/// The one-line summary of a publish.
fn summary_text(summary: &PublishSummary, target: &str) -> String {
    let plan = &summary.plan;
    if plan.is_empty() && summary.repaired == 0 {
        return format!(
            "{target} is up to date: {} objects unchanged, nothing uploaded{} in {:.2} s",
            plan.unchanged,
            listed(summary),
            summary.seconds
        );
    }
    format!(
        "published to {target}: {} uploaded ({:.1} MB), {} unchanged, {} deleted{}{}{} in {:.2} s",
        plan.uploads.len(),
        summary.bytes as f64 / 1e6,
        plan.unchanged,
        plan.deletes.len(),
        kept(summary),
        listed(summary),
        repaired(summary),
        summary.seconds
    )
}

/// An archive's parts no root names, kept until their grace ends, if any.
fn kept(summary: &PublishSummary) -> String {
    match summary.kept() {
        0 => String::new(),
        n => format!(", {n} part{} no root names kept until its grace ends (--grace)", if n == 1 { "" } else { "s" }),
    }
}

fn listed(summary: &PublishSummary) -> String {
    match summary.listed_because {
        Some(why) => format!(" (every object compared: {why})"),
        None => String::new(),
    }
}

/// The objects the second look repaired, if any.
fn repaired(summary: &PublishSummary) -> String {
    match summary.repaired {
        0 => String::new(),
        n => format!(
            "; then {n} repaired that the unfinished publish it replaced wrote meanwhile (looked at again at the end)"
        ),
    }
}

/// What `--dry-run` prints: counts and the first paths of each kind.
fn dry_run_text(summary: &PublishSummary, target: &str) -> String {
    const SHOWN: usize = 5;
    let plan = &summary.plan;
    let mut text = format!(
        "dry run, nothing changed: publishing to {target} would upload {}, leave {} unchanged and delete {}{}",
        plan.uploads.len(),
        plan.unchanged,
        plan.deletes.len(),
        listed(summary)
    );
    for (what, paths) in [("upload", &plan.uploads), ("delete", &plan.deletes)] {
        for path in paths.iter().take(SHOWN) {
            text.push_str(&format!("\n  {what} {path}"));
        }
        if paths.len() > SHOWN {
            text.push_str(&format!("\n  ... and {} more to {what}", paths.len() - SHOWN));
        }
    }
    text
}
