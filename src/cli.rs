//! The command line: what users read in `gen --help`.

use clap::{Parser, Subcommand};
use genapi::hosts::{Edge, Host};
use genapi::paging::LinkStyle;
use std::path::PathBuf;

/// Turns a folder of reference-data records into a prebuilt, read-only JSON API that any
/// static host can serve, and serves it locally.
#[derive(Debug, Parser)]
#[command(name = "gen", version, propagate_version = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Check the records in the data folder and write the whole API tree.
    ///
    /// A rebuild renders only what changed and writes only the files whose bytes change, each
    /// renamed over its old copy, manifest.json last. A build that fails writes nothing; the
    /// next build repairs one that was killed. Files the tree does not list (.nojekyll, CNAME)
    /// are kept.
    #[command(after_help = "Examples:
  gen build                                    data/ -> out/, for gen serve's default address
  gen build --base-url https://api.example.org for the address clients will use
  gen build --links path --gzip                for object storage; .gz copies for nginx/Caddy
  SOURCE_DATE_EPOCH=0 gen build                record a fixed build date in meta
  gen build --verify                           trust nothing of the index: read every file, repair

meta's deploy_date is SOURCE_DATE_EPOCH, else the time of the last git commit that touched the
data folder (when nothing under it is uncommitted), else the build's clock: fresh clones of one
commit build the same bytes.

Exit status: 0 built (or already up to date), 1 problems in the data, 2 any other error.
The data format: docs/data.md")]
    Build(BuildArgs),
    /// Check the records in the data folder without writing anything.
    ///
    /// Reports every problem as `path: json-location: message`, then a count; exits with
    /// status 1 when there are problems.
    #[command(after_help = "Examples:
  gen check                    check data/
  gen check --data my-data     check another folder

Exit status: 0 no problems, 1 problems in the data, 2 any other error.")]
    Check(CheckArgs),
    /// Import published data into a data folder.
    #[command(subcommand)]
    Import(ImportSource),
    /// Print a ready configuration for a static host (nginx, caddy) or an edge handler
    /// (cloudflare, deno, node) serving a built tree.
    #[command(after_help = "Examples:
  gen config nginx --listen 0.0.0.0:80 > /etc/nginx/conf.d/gen.conf && nginx -t && nginx -s reload
  gen config caddy --listen :80 > /etc/caddy/Caddyfile
  gen config cloudflare > worker.js     a Worker; wrangler.toml:
                                          main = \"worker.js\"
                                          compatibility_date = \"2025-01-01\"
                                          [[r2_buckets]]
                                          binding = \"TREE\"
                                          bucket_name = \"<the bucket gen publish wrote>\"
                                        or, for a tree at an HTTP(S) url:  [vars]  ORIGIN = \"https://...\"
                                        then: npx wrangler deploy
  gen config cloudflare --project api   a Worker project in api/ (worker.js, wrangler.toml, README.md);
                                        try it: cd api && npm install &&
                                          npx wrangler r2 bulk put gen-tree --local --filename tree-files.json &&
                                          npx wrangler dev
  gen config deno > handler.js          Deno Deploy / Netlify Edge Functions; set ORIGIN
  gen config deno --project deno-api    a Deno project in deno-api/ (main.js, deno.json); try it: deno task serve
  gen config node > handler.mjs         Lambda@Edge (origin request), Cloud Functions, Firebase; ORIGIN
  gen config cloudfront > function.js   a CloudFront Function (viewer request, cloudfront-js-2.0):
                                        rewrites to the tree's files in S3; pages it holds only
The edge handlers answer every request as `gen serve --keep-urls` does (any limit and offset);
--listen does not apply to them.

Run it again, and reload, after every build that changes the tree: it carries the build's deploy
date and hash (sent as headers) and each resource's count. Details: docs/deploy.md")]
    Config(ConfigArgs),
    /// Serve a built tree at http://<addr>/api/v2/, answering like the public API.
    ///
    /// Urls lead to the address served on (--keep-urls: the tree's own bytes), browsers get an
    /// HTML view with links, and --watch rebuilds the tree whenever the data changes.
    #[command(after_help = serve_examples())]
    Serve(ServeArgs),
    /// Upload a built tree to object storage (S3 and S3-compatible stores, GCS, Azure) or a
    /// folder, sending only what changed.
    ///
    /// Compares the tree's manifest with the one on the target (by content hash, not by time, so
    /// a fresh clone that rebuilds unchanged data uploads nothing). Records and page files go
    /// first, then list roots, meta and openapi.json, manifest.json last; objects of removed
    /// files are deleted only after that. Only objects a published manifest listed are ever
    /// deleted. The tree is checked against its manifest first, and .gz siblings are not
    /// uploaded. Credentials and region come from the environment (AWS_ACCESS_KEY_ID,
    /// AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL; GOOGLE_APPLICATION_CREDENTIALS;
    /// AZURE_STORAGE_ACCOUNT_NAME, AZURE_STORAGE_ACCOUNT_KEY).
    #[command(after_help = "Examples:
  gen build --links path --base-url https://api.example.org
  gen publish s3://my-bucket                            AWS S3, keys from the environment
  gen publish s3://bucket/api --endpoint http://127.0.0.1:8333    an S3-compatible store
  gen publish s3://my-bucket --dry-run                  print the plan, change nothing
  gen publish s3://my-bucket --changed-urls purge.txt   the urls to purge from the CDN
  gen publish file:///srv/www/api                       a local folder

Exit status: 0 published (or already up to date), 2 any error (nothing deleted).
Details: docs/deploy.md")]
    Publish(PublishArgs),
}

/// The examples under `gen serve --help`.
fn serve_examples() -> String {
    let root = genapi::tree::layout::root_url(&format!("http://{}", genapi::config::DEFAULT_ADDR));
    format!(
        "Examples:
  gen serve                               out/ at {root}
  gen serve --addr 127.0.0.1:0 --quiet    any free port (printed first), no request log
  gen serve --dir site --max-age 60
  gen serve --watch                       rebuild from data/ on every change, serve each new tree
  gen serve --keep-urls                   the tree's own bytes, links to its base URL

A new `gen build` into the served folder is picked up without a restart. Details: docs/serve.md"
    )
}

#[derive(Debug, clap::Args)]
pub(crate) struct BuildArgs {
    /// Folder holding the records: <segment>/<id>.json, plus gen.json settings.
    #[arg(long, default_value = "data", value_name = "DIR")]
    pub data: PathBuf,
    /// Folder to write the tree to (a symbolic link is followed; another gen build or import
    /// into it waits for this one).
    #[arg(long, default_value = "out", value_name = "DIR")]
    pub out: PathBuf,
    /// Scheme and host the tree will be served from, e.g. https://api.example.org
    /// [default: base_url in gen.json, else http://127.0.0.1:8080]
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// How list pages link to the next and previous page: `query` (?offset=&limit=, as the
    /// public API) or `path` (the page files, for hosts that ignore query strings).
    #[arg(long, value_enum, default_value_t = Links::Query, value_name = "STYLE")]
    pub links: Links,
    /// Indent the JSON (compact by default).
    #[arg(long)]
    pub pretty: bool,
    /// Also write a gzip-compressed `.gz` beside every document, for hosts that serve them.
    #[arg(long)]
    pub gzip: bool,
    /// Trust nothing of the build index: read every data file and every file of the tree, and
    /// rewrite each file that is not what the data makes (for a tree or an index changed by
    /// hand; see docs/builds.md).
    #[arg(long)]
    pub verify: bool,
    /// Write the API as an archive (a root and a few content-named parts, read by byte ranges;
    /// docs/archive.md) in place of the tree; a rebuild writes only the change.
    #[arg(long)]
    pub archive: bool,
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// Folder holding the records.
    #[arg(long, default_value = "data", value_name = "DIR")]
    pub data: PathBuf,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Folder holding the tree written by `gen build`.
    #[arg(long, default_value = "out", value_name = "DIR")]
    pub dir: PathBuf,
    /// Address to listen on: HOST:PORT, [IPv6]:PORT, or :PORT for every interface (as `gen
    /// config --listen`); port 0 picks a free port (the bound address is printed first).
    #[arg(long, default_value = genapi::config::DEFAULT_ADDR, value_name = "HOST:PORT")]
    pub addr: String,
    /// Do not log one line per request.
    #[arg(long, short)]
    pub quiet: bool,
    /// How long clients and caches may reuse a document: `Cache-Control: public, max-age=SECS`
    /// (`meta` is always `no-cache`).
    #[arg(long, default_value_t = genapi::hosts::DEFAULT_MAX_AGE, value_name = "SECS")]
    pub max_age: u64,
    /// Close connections that send nothing for this long.
    #[arg(long, default_value_t = 60, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub idle_timeout: u64,
    /// Answer with the tree's own bytes. By default every url that starts with the tree's base
    /// URL is made to start with the address served on, so that links work in the preview.
    #[arg(long)]
    pub keep_urls: bool,
    /// Most memory, in MiB, for documents and lists read from the tree (each read on first
    /// request and checked against the manifest, then kept while used); as much again for the
    /// lists too large to keep while they are used, and for the HTML view's pages. A document
    /// too large to keep is sent from its file, a piece at a time; a read or render larger than
    /// the whole budget goes alone, and a request that waits 10 s for room is answered 503
    /// (docs/serve.md).
    #[arg(long, default_value_t = genapi::serve::DEFAULT_CACHE_MB, value_name = "MB", value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub cache_mb: u64,
    /// Rebuild the tree from --data whenever anything in it changes, and serve each new build
    /// at once; a build with problems prints them and keeps the last good tree served.
    #[arg(long)]
    pub watch: bool,
    /// Folder holding the records, for --watch.
    #[arg(long, default_value = "data", value_name = "DIR", requires = "watch")]
    pub data: PathBuf,
}

#[derive(Debug, clap::Args)]
pub(crate) struct PublishArgs {
    /// Where to publish: s3://BUCKET[/PREFIX], gs://BUCKET[/PREFIX], az://CONTAINER[/PREFIX] or
    /// file:///PATH.
    #[arg(value_name = "TARGET")]
    pub target: String,
    /// Folder holding the tree written by `gen build` (or the archive of `gen build --archive`).
    #[arg(long, default_value = "out", value_name = "DIR")]
    pub dir: PathBuf,
    /// S3-compatible endpoint, e.g. http://127.0.0.1:8333 (path-style requests; plain HTTP is
    /// allowed for an http:// endpoint) [default: AWS_ENDPOINT_URL, else AWS].
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// `Cache-Control: public, max-age=SECS` on every object (manifest.json and meta get
    /// `no-cache`).
    #[arg(long, default_value_t = genapi::hosts::DEFAULT_MAX_AGE, value_name = "SECS")]
    pub max_age: u64,
    /// Requests in flight at once.
    #[arg(long, short, default_value_t = 32, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=512))]
    pub jobs: u16,
    /// Retries of a request that fails with a server error or a timeout, with backoff.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub retries: u16,
    /// Print what would be uploaded and deleted (counts and the first paths), change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// List the target and compare every object's content, even when it holds a manifest, so
    /// that a damaged or hand-edited bucket is repaired.
    #[arg(long)]
    pub verify: bool,
    /// Write the public urls of the objects that changed or were deleted to FILE, one a line
    /// (for a CDN purge).
    #[arg(long, value_name = "FILE")]
    pub changed_urls: Option<PathBuf>,
    /// Publish a tree built with --links query all the same. Refused by default: a store
    /// ignores query strings, so a client following `next` gets page one again forever. Only
    /// for a target behind a host that answers ?offset=&limit= itself.
    #[arg(long)]
    pub allow_query_links: bool,
    /// Take over the lock (`.gen-publish.lock`) another publish to this target left: only when
    /// that publish is known to be over (killed, or its machine gone). The lock says who took
    /// it and when.
    #[arg(long)]
    pub take_over_lock: bool,
    /// For an archive: how long a part no root names any more stays on the target, counted from
    /// the publish that stopped naming it, so that readers in flight still find theirs (`30m`,
    /// `1h`, `2d`, `0s`).
    #[arg(long, default_value = "1h", value_name = "DURATION", value_parser = genapi::publish::parse_grace)]
    pub grace: std::time::Duration,
    /// Print nothing but errors (no progress bar, no summary).
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ImportSource {
    /// Import the public API's published static tree (a checkout of the api-data repository).
    ///
    /// Reads SRC/api/v2/<segment>/index.json (the full list, in its order) and
    /// SRC/api/v2/<segment>/<id>/index.json (records, and sub-documents under them), and writes
    /// one data folder that `gen build` turns back into the same API.
    #[command(after_help = "Examples:
  gen import api-data api-data/data --out data     a checkout of PokeAPI/api-data
  gen import api-data api-data/data --keep-segment-names --out data
  gen import api-data api-data/data --layout ndjson --out data     one table a resource

Then `gen build --data data`. Details: the README's \"Self-host the public dataset\".")]
    #[command(name = "api-data")]
    ApiData(ImportApiDataArgs),
    /// Import a CSV file (with a header row), a JSON array or NDJSON as one resource.
    #[command(after_help = "Examples:
  gen import table countries.csv --resource country --key alpha_3 --name name --label name --out data
  gen import table currencies.json --resource currency --key code --ref country=country:alpha_3

Ids given with --key are kept in DATA/.ids/<resource>.json for the next import. Then
`gen build --data data`. Details: docs/data.md, \"Your own data in ten minutes\".")]
    Table(ImportTableArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct ImportTableArgs {
    /// The source: a .csv file (a header row), a .json array of objects, or .ndjson (.jsonl).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The resource to write: its path segment (lower-case letters, digits and '-').
    #[arg(long, value_name = "SEGMENT")]
    pub resource: String,
    /// Data folder to write into (created if absent); the resource's records in it are replaced.
    #[arg(long, default_value = "data", value_name = "DIR")]
    pub out: PathBuf,
    /// The source's format, when its extension does not say.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<TableFormat>,
    /// The integer field that is each record's id (a positive integer, each once).
    #[arg(long, value_name = "FIELD")]
    pub id: Option<String>,
    /// The field that names each record (e.g. a code): ids are given to its values and kept in
    /// DATA/.ids/<resource>.json, so the next import keeps them.
    #[arg(long, value_name = "FIELD")]
    pub key: Option<String>,
    /// The field each record's name is made from (`Côte d'Ivoire` → `cote-divoire`).
    #[arg(long, value_name = "FIELD")]
    pub name: Option<String>,
    /// The field whose text is kept in the record's `names`, where `?q=` finds it.
    #[arg(long, value_name = "FIELD")]
    pub label: Option<String>,
    /// The language of --label's names entries.
    #[arg(long, default_value = "en", value_name = "CODE")]
    pub label_language: String,
    /// Fields' types, FIELD=int|number|bool|string,... (else a CSV cell's type is inferred).
    #[arg(long, value_name = "FIELD=TYPE,...")]
    pub types: Vec<String>,
    /// A field holding another resource's key, made a reference: FIELD=SEGMENT:KEYFIELD.
    #[arg(long = "ref", value_name = "FIELD=SEGMENT:KEYFIELD")]
    pub refs: Vec<String>,
    /// How the resource is written: `files` (a file a record) or `ndjson` (one table).
    #[arg(long, value_enum, default_value_t = DataLayout::Files, value_name = "LAYOUT")]
    pub layout: DataLayout,
}

/// `--format` of `gen import table`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TableFormat {
    /// Comma-separated values with a header row.
    Csv,
    /// A JSON array of objects.
    Json,
    /// One JSON object a line.
    Ndjson,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ImportApiDataArgs {
    /// Folder holding api/v2/ in the published layout (e.g. a clone of PokeAPI/api-data, its data/ folder).
    #[arg(value_name = "SRC")]
    pub src: PathBuf,
    /// Data folder to write (must be empty or absent unless --force; never SRC, a folder
    /// holding it, or a folder inside it).
    #[arg(long, default_value = "data", value_name = "DIR")]
    pub out: PathBuf,
    /// Keep the published segment names (pokemon, pokemon-form, ...) instead of the neutral
    /// ones (creature, creature-form, ...), for clients that hard-code them.
    #[arg(long)]
    pub keep_segment_names: bool,
    /// Import into a data folder that is not empty: the folders of the imported segments and
    /// gen.json's "external" are replaced; everything else (other segments, your own files,
    /// the other settings) is kept, and listed. A folder that holds SRC or lies inside it is
    /// always refused.
    #[arg(long)]
    pub force: bool,
    /// How each resource is written: `files`, a folder of one file per record (what people edit
    /// by hand), or `ndjson`, one table per resource, `<segment>.ndjson`, a record a line
    /// (docs/data.md).
    #[arg(long, value_enum, default_value_t = DataLayout::Files, value_name = "LAYOUT")]
    pub layout: DataLayout,
}

/// The layout of a data folder written by `gen import`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum DataLayout {
    /// `<segment>/<id>.json`, one file per record.
    Files,
    /// `<segment>.ndjson`, one record a line.
    Ndjson,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ConfigArgs {
    /// The host to configure.
    #[arg(value_enum)]
    pub host: HostArg,
    /// Folder holding the tree written by `gen build` (made absolute in the config).
    #[arg(long, default_value = "out", value_name = "DIR")]
    pub dir: PathBuf,
    /// Address the host listens on: HOST:PORT, [IPv6]:PORT, or :PORT for every interface.
    #[arg(long, default_value = genapi::config::DEFAULT_ADDR, value_name = "HOST:PORT")]
    pub listen: String,
    /// How long clients and caches may reuse a document: `Cache-Control: public, max-age=SECS`
    /// (the same default as `gen serve`; `meta` is always `no-cache`).
    #[arg(long, default_value_t = genapi::hosts::DEFAULT_MAX_AGE, value_name = "SECS")]
    pub max_age: u64,
    /// Write a ready project into DIR instead of printing (cloudflare, deno): the handler, its
    /// configuration (wrangler.toml, deno.json) and a README; `npx wrangler dev` or
    /// `deno task serve` in DIR runs it on the local tree.
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
}

/// `--links`: the command line's names for [`LinkStyle`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Links {
    /// `<base>/api/v2/<segment>/?offset=O&limit=L`, as the public API writes them.
    Query,
    /// `<base>/api/v2/<segment>/_pages/L/O/`: the page files themselves, for hosts that ignore
    /// query strings (object storage).
    Path,
}

impl From<Links> for LinkStyle {
    fn from(links: Links) -> LinkStyle {
        match links {
            Links::Query => LinkStyle::Query,
            Links::Path => LinkStyle::Path,
        }
    }
}

/// `gen config`'s HOST: the command line's names for [`Host`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HostArg {
    Nginx,
    Caddy,
    /// A Cloudflare Worker module reading the R2 binding TREE, or the base url in ORIGIN.
    Cloudflare,
    /// Deno Deploy and Netlify Edge Functions, reading the base url (or file:// folder) in ORIGIN.
    Deno,
    /// Node: AWS Lambda@Edge (origin request), Google Cloud Functions and Firebase, plain Node.
    Node,
    /// A CloudFront Function (viewer request) that rewrites requests to the tree's files in S3.
    Cloudfront,
}

impl From<HostArg> for Host {
    fn from(host: HostArg) -> Host {
        match host {
            HostArg::Nginx => Host::Nginx,
            HostArg::Caddy => Host::Caddy,
            HostArg::Cloudflare => Host::Edge(Edge::Cloudflare),
            HostArg::Deno => Host::Edge(Edge::Deno),
            HostArg::Node => Host::Edge(Edge::Node),
            HostArg::Cloudfront => Host::Edge(Edge::Cloudfront),
        }
    }
}
