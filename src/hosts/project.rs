//! `gen config cloudflare|deno --project DIR`: a ready project folder around the edge handler,
//! runnable locally with the host's own tool (`npx wrangler dev`, `deno task serve`) against the
//! built tree, and deployable as it is.
//!
//! The generated files (the handler, the list of the tree's files, the README, `deno.json`) are
//! written anew each time, as the handler must be after a build that changes counts; the files
//! that hold the user's own settings (`wrangler.toml`: the bucket, routes; `package.json`) are
//! written only when missing.
//!
//! A folder holds one project: one that holds the other kind's (its settings file or its
//! handler: [`marks`]) is refused, saying so. The project names the tree by its path from the
//! project folder (`../out`), never by this machine's absolute path.

use super::{Edge, Site, edge};
use anyhow::{Context, Result, bail};
use std::path::Path;

/// The R2 bucket name the Cloudflare project starts with, locally and in `wrangler.toml`.
const BUCKET: &str = "gen-tree";
/// The Workers compatibility date the handler is tested with (tests/tools/miniflare-run.mjs).
const COMPATIBILITY_DATE: &str = "2025-01-01";
/// The wrangler release the tests run (tests/tools/edge-runtimes.sh): the last on Node 20.
const WRANGLER_VERSION: &str = "4.56.0";

/// What [`write_project`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectReport {
    /// Files written, by name.
    pub written: Vec<String>,
    /// Files left as they were (they hold the user's settings), by name.
    pub kept: Vec<String>,
    /// The commands that run the project locally, from the folder it is in, one a line.
    pub run_locally: String,
}

/// One file of a project.
struct ProjectFile {
    name: &'static str,
    text: String,
    /// Holds the user's settings: written only when missing.
    keep: bool,
}

/// Writes into `project` (created if needed) a project for `edge` (Cloudflare or Deno) serving
/// the tree in `dir`, documents cached for `max_age` seconds.
pub fn write_project(edge: Edge, dir: &Path, max_age: u64, project: &Path) -> Result<ProjectReport> {
    if let Edge::Node | Edge::Cloudfront = edge {
        bail!(
            "--project writes a Cloudflare Worker or a Deno project (`gen config cloudflare|deno --project DIR`); \
             for this host, print the handler to a file: `gen config {} > FILE`",
            if edge == Edge::Node { "node" } else { "cloudfront" }
        );
    }
    refuse_other_kind(edge, project)?;
    let site = Site::new(dir, crate::config::DEFAULT_ADDR, max_age)?;
    let module = edge::module(&site, edge)?;
    std::fs::create_dir_all(project)
        .with_context(|| format!("cannot create the project folder {}", project.display()))?;
    let tree = tree_from(project, dir)?;
    let (files, run_locally) =
        if edge == Edge::Cloudflare { cloudflare(&tree, &site, module)? } else { deno(&tree, module) };
    let mut report = ProjectReport { written: Vec::new(), kept: Vec::new(), run_locally };
    for file in files {
        let path = project.join(file.name);
        if file.keep && path.exists() {
            report.kept.push(file.name.to_string());
            continue;
        }
        std::fs::write(&path, file.text).with_context(|| format!("cannot write {}", path.display()))?;
        report.written.push(file.name.to_string());
    }
    Ok(report)
}

/// The files that say a folder holds a project of `edge`'s kind: the host tool's settings, or
/// the handler gen writes there.
fn marks(edge: Edge) -> &'static [&'static str] {
    if edge == Edge::Cloudflare {
        &["wrangler.toml", "wrangler.json", "wrangler.jsonc", "worker.js"]
    } else {
        &["deno.json", "deno.jsonc", "main.js"]
    }
}

/// Refuses a `project` folder that holds the other kind's project: writing `edge`'s there would
/// overwrite its README.md and mix two projects in one folder.
fn refuse_other_kind(edge: Edge, project: &Path) -> Result<()> {
    let (other, kind, asked, host) = if edge == Edge::Cloudflare {
        (Edge::Deno, "a Deno project", "a Cloudflare Worker project", "cloudflare")
    } else {
        (Edge::Cloudflare, "a Cloudflare Worker project", "a Deno project", "deno")
    };
    let found: Vec<&str> =
        marks(other).iter().copied().filter(|name| project.join(name).symlink_metadata().is_ok()).collect();
    if !found.is_empty() {
        bail!(
            "the folder {dir} holds {kind} ({found}): writing {asked} there would overwrite its README.md and mix \
             two projects in one folder. Write it into another folder (`gen config {host} --project OTHER-FOLDER`), \
             or remove {dir} first if you no longer need what it holds",
            dir = project.display(),
            found = found.join(", "),
        );
    }
    Ok(())
}

/// The tree's folder `dir` as the project folder `project` reaches it: its path from there
/// (`../out`, `./out`), both folders' links resolved, so that the project names no absolute
/// path of this machine and keeps working wherever the two are moved together.
fn tree_from(project: &Path, dir: &Path) -> Result<String> {
    let resolve =
        |p: &Path| std::fs::canonicalize(p).with_context(|| format!("cannot resolve the folder {}", p.display()));
    let (from, to) = (resolve(project)?, resolve(dir)?);
    let common = from.components().zip(to.components()).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = from.components().skip(common).map(|_| "..").collect();
    for part in to.components().skip(common) {
        parts.push(part.as_os_str().to_str().with_context(|| format!("the folder {} is not UTF-8", to.display()))?);
    }
    let path = match parts.first() {
        None => ".".to_string(),
        Some(&"..") => parts.join("/"),
        Some(_) => format!("./{}", parts.join("/")),
    };
    if !super::is_plain(&path) {
        bail!(
            "the tree's path from the project, {path}, cannot be written into the project (it holds a quote, \
             backslash, $, brace, backtick, ;, # or a control character): move the tree or the project to a plainer path"
        );
    }
    Ok(path)
}

/// The Worker project: `worker.js`, `wrangler.toml` (R2 binding `TREE`), `package.json` (wrangler
/// pinned), `tree-files.json` (every file of the tree, by its path from the project folder, for
/// `wrangler r2 bulk put`), `README.md`; `tree` is the tree's path from the project folder.
fn cloudflare(tree: &str, site: &Site, module: String) -> Result<(Vec<ProjectFile>, String)> {
    // an archive's files are its root and parts (the root last), a tree's every file
    let paths: Vec<&String> = match &site.archive {
        Some(archive) => archive.files.iter().collect(),
        None => site.manifest.files.keys().collect(),
    };
    let entries: Vec<serde_json::Value> =
        paths.iter().map(|path| serde_json::json!({"key": path, "file": format!("{tree}/{path}")})).collect();
    let listing = serde_json::to_string_pretty(&entries).context("the tree's file list serialises")? + "\n";
    let wrangler = format!(
        "# `gen config cloudflare --project` for the tree in {tree}. gen writes this file only when it is\n\
         # missing: it is yours (the bucket, routes, a custom domain).\n\
         name = \"gen-api\"\n\
         main = \"worker.js\"\n\
         compatibility_date = \"{COMPATIBILITY_DATE}\"\n\n\
         # the tree, keyed by its paths, as `gen publish` writes it; locally, wrangler's own R2 store\n\
         # (README.md). To read the tree over HTTP instead, remove this and set [vars] ORIGIN = \"https://...\"\n\
         [[r2_buckets]]\n\
         binding = \"TREE\"\n\
         bucket_name = \"{BUCKET}\"\n"
    );
    let package = format!(
        "{{\n  \"name\": \"gen-api\",\n  \"private\": true,\n  \"type\": \"module\",\n  \
         \"devDependencies\": {{\n    \"wrangler\": \"{WRANGLER_VERSION}\"\n  }}\n}}\n"
    );
    let fill = format!("npx wrangler r2 bulk put {BUCKET} --local --filename tree-files.json");
    let run = format!("npm install\n{fill}\nnpx wrangler dev");
    let readme = format!(
        "# A Cloudflare Worker for the tree in `{tree}` (from this folder)\n\n\
         Written by `gen config cloudflare --project`. `worker.js` answers every request as\n\
         `gen serve --keep-urls` does (any `?limit=&offset=`, `?q=`, filters), reading the tree's\n\
         files from the R2 bucket bound as `TREE` (`wrangler.toml`).\n\n\
         ## Run it locally\n\n\
         ```sh\n\
         npm install          # wrangler {WRANGLER_VERSION}, the release gen is tested with (Node 20 or later)\n\
         {fill}\n\
         npx wrangler dev     # http://localhost:8787/api/v2/\n\
         ```\n\n\
         The second line copies every file of the tree (`tree-files.json` lists them: each one's key, and\n\
         its path from this folder) into wrangler's local R2 store, `.wrangler/state`, under the bucket name in\n\
         `wrangler.toml`. Nothing leaves the machine.\n\n\
         ## Deploy\n\n\
         ```sh\n\
         gen publish --allow-query-links s3://BUCKET --endpoint https://ACCOUNT.r2.cloudflarestorage.com\n\
         # set bucket_name = \"BUCKET\" in wrangler.toml, then\n\
         npx wrangler deploy\n\
         ```\n\n\
         and a route or custom domain for `api.example.org/api/v2/*`.\n\n\
         ## After a rebuild\n\n\
         The tree's counts, page sizes and deploy headers are baked into `worker.js`: after every build\n\
         that changes the tree, run `gen config cloudflare --project` on this folder again (it rewrites\n\
         `worker.js`, `tree-files.json` and this README, and keeps `wrangler.toml` and `package.json`),\n\
         fill the local store again, and deploy. More: docs/deploy.md in gen.\n"
    );
    let files = vec![
        ProjectFile { name: "worker.js", text: module, keep: false },
        ProjectFile { name: "tree-files.json", text: listing, keep: false },
        ProjectFile { name: "wrangler.toml", text: wrangler, keep: true },
        ProjectFile { name: "package.json", text: package, keep: true },
        ProjectFile { name: "README.md", text: readme, keep: false },
    ];
    Ok((files, run))
}

/// The Deno project: `main.js` and `deno.json`, whose `serve` task runs it on the local tree,
/// `tree` (its path from the project folder, where `deno task` runs).
fn deno(tree: &str, module: String) -> (Vec<ProjectFile>, String) {
    // a plain path (`tree_from` refuses quotes, so it can be single-quoted); Deno reads it, and
    // allows reading only it, from the working directory
    let serve = format!("ORIGIN='{tree}' deno run --allow-net --allow-env --allow-read='{tree}' main.js");
    let config = serde_json::json!({ "tasks": { "serve": serve } });
    let config = serde_json::to_string_pretty(&config).expect("deno.json serialises") + "\n";
    let readme = format!(
        "# A Deno server for the tree in `{tree}` (from this folder)\n\n\
         Written by `gen config deno --project`. `main.js` answers every request as\n\
         `gen serve --keep-urls` does (any `?limit=&offset=`, `?q=`, filters), reading the tree's\n\
         files from `ORIGIN`: the HTTP(S) base url of a bucket or static host holding them, or the\n\
         tree's folder (a path such as `../out`, or a `file:///PATH` url).\n\n\
         ## Run it locally\n\n\
         ```sh\n\
         deno task serve      # the tree in {tree}, on http://127.0.0.1:8000/api/v2/ (HOST, PORT)\n\
         ```\n\n\
         It listens on this machine only; `HOST=0.0.0.0 deno task serve` listens on every interface.\n\n\
         ## Deploy\n\n\
         ```sh\n\
         gen publish s3://BUCKET --allow-query-links     # or any store with a public url\n\
         deployctl deploy --project=api --env=ORIGIN=https://BUCKET.s3.REGION.amazonaws.com main.js\n\
         ```\n\n\
         For Netlify, copy `main.js` to `netlify/edge-functions/api.js` and set `ORIGIN` in the site's\n\
         environment.\n\n\
         ## After a rebuild\n\n\
         The tree's counts, page sizes and deploy headers are baked into `main.js`: after every build\n\
         that changes the tree, run `gen config deno --project` on this folder again (it rewrites\n\
         every file here) and deploy. More: docs/deploy.md in gen.\n"
    );
    let files = vec![
        ProjectFile { name: "main.js", text: module, keep: false },
        ProjectFile { name: "deno.json", text: config, keep: false },
        ProjectFile { name: "README.md", text: readme, keep: false },
    ];
    (files, "deno task serve".to_string())
}
