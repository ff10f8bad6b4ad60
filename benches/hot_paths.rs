//! Micro-benchmarks of the hot paths, on std alone (`cargo bench --bench hot_paths`): rendering
//! a record (parse, check and rewrite its references, serialise), rendering a page, routing a
//! request, and deciding a whole answer from a loaded tree. Each is timed in batches; the
//! table shows the median and spread of the batches, per operation.

use genapi::build::render::Renderer;
use genapi::paging::{self, LinkStyle, Page};
use genapi::serve::respond::{Request, decide};
use genapi::serve::route::route;
use genapi::serve::tree::ServedTree;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Times `op` in 15 batches of `per_batch` calls; returns nanoseconds per call (min, median, max).
fn time(per_batch: u32, mut op: impl FnMut()) -> (f64, f64, f64) {
    for _ in 0..per_batch.min(100) {
        op(); // warm up
    }
    let mut batches: Vec<f64> = (0..15)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..per_batch {
                op();
            }
            start.elapsed().as_nanos() as f64 / f64::from(per_batch)
        })
        .collect();
    batches.sort_by(f64::total_cmp);
    (batches[0], batches[7], batches[14])
}

fn row(label: &str, (min, median, max): (f64, f64, f64), extra: &str) {
    println!("{label:<52} {:>10.0} {:>10.0} {:>10.0}  {extra}", min, median, max);
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let data = root.join("data");
    let (dataset, problems) = genapi::data::load::load(&data);
    assert!(problems.is_empty(), "the default data has problems: run `gen check`");
    println!("{:<52} {:>10} {:>10} {:>10}", "ns per operation", "min", "median", "max");

    // The largest record of the default data: the most references to check and rewrite.
    let all = &dataset;
    let (segment, record) = dataset
        .resources
        .iter()
        .flat_map(|(segment, r)| r.records.iter().map(move |r| (segment, r)))
        .max_by_key(|(segment, r)| std::fs::metadata(all.record_file(segment, r.id)).map(|m| m.len()).unwrap_or(0))
        .expect("a record");
    let largest: PathBuf = all.record_file(segment, record.id);
    let size = std::fs::metadata(&largest).unwrap().len();
    let renderer = Renderer { dataset: &dataset, base_url: "https://api.example.org", pretty: false };
    let source = all.record_source(segment, record);
    let timing = time(200, || {
        black_box(renderer.render_file(&source).unwrap());
    });
    let rate = size as f64 / timing.1 * 1e9 / 1e6;
    row("render a record (read, parse, check, rewrite, write)", timing, &format!("{size} B, {rate:.0} MB/s"));

    // A page of 50 from a list of 10,000 entries, as build and serve render it.
    let entries: Vec<Vec<u8>> = (0..10_000)
        .map(|i| paging::render_entry(Some(&format!("entry-{i}")), &format!("https://x/api/v2/thing/{i}/"), false))
        .collect();
    let list_url = "https://x/api/v2/thing/";
    let timing = time(20_000, || {
        let page = Page { offset: 5_000, limit: 50 };
        let link = |p: Option<Page>| p.map(|p| paging::page_url(list_url, p, LinkStyle::Query));
        let mut out = Vec::with_capacity(4096);
        let (next, previous) = (link(page.next(10_000)), link(page.previous()));
        paging::render_page(
            &mut out,
            10_000,
            next.as_deref(),
            previous.as_deref(),
            &entries[page.range(10_000)],
            false,
        );
        black_box(out);
    });
    row("render a page of 50 (of 10,000 entries)", timing, "");

    // 10,007 entries: the aligned pages and the shrunken last page (502 pages; every page
    // that links reach, the earlier rule, was 22,775); 10,000 entries: 500 pages.
    for (count, label) in
        [(10_007, "plan the pages of 10,007 entries, limit 20"), (10_000, "plan the pages of 10,000 entries, limit 20")]
    {
        let pages = paging::precomputed_pages(count, 20, paging::LinkStyle::Query).len();
        let timing = time(20, || {
            black_box(paging::precomputed_pages(count, 20, paging::LinkStyle::Query));
        });
        row(label, timing, &format!("{pages} pages"));
    }

    let targets = [
        "/api/v2/berry/1/",
        "/api/v2/Berry/CHERI",
        "/api/v2/berry/?limit=50&offset=100",
        "/api/v2/berry/?offset=3&limit=abc",
        "/api/v2/%2e%2e/etc/passwd",
    ];
    let timing = time(200_000, || {
        for target in targets {
            black_box(route(black_box(target)));
        }
    });
    row("route a request target (mean of 5 kinds)", (timing.0 / 5.0, timing.1 / 5.0, timing.2 / 5.0), "");

    // Whole answers from a loaded tree of the default data.
    let out = std::env::temp_dir().join(format!("gen-bench-tree-{}", std::process::id()));
    genapi::build(&data, &out, &genapi::BuildOptions::default(), &Default::default()).expect("the default data builds");
    // documents are read on first use, into a cache large enough to keep them all
    let tree = ServedTree::load(&out, std::sync::Arc::new(genapi::serve::cache::Cache::new(64 << 20))).unwrap();
    for (label, target) in [
        ("answer a record by name, gzip", "/api/v2/berry/cheri/"),
        ("answer a precomputed page", "/api/v2/berry/?limit=50&offset=50"),
        ("answer a computed page (cached after the first)", "/api/v2/berry/?limit=7&offset=3"),
        ("answer a 404", "/api/v2/berry/nowhere/"),
    ] {
        let request = Request { method: "GET", target, accept_encoding: Some("gzip, br"), ..Request::default() };
        let timing = time(100_000, || {
            black_box(decide(&tree, &request));
        });
        row(label, timing, "");
    }
    let _ = std::fs::remove_dir_all(&out);
}
