//! The HTML view of `gen serve`, seen by a real headless Chromium (Debian's `chromium`,
//! installed by `make test` when missing): the DOM it builds from the root, a list, a record
//! and a 404, where links lead, what following them reaches, that data stays text, and
//! screenshots in light and dark mode (into `target/browser/`). JSON clients are checked to
//! get the tree's bytes untouched.

use crate::common;
use crate::serve_support;

use common::TempDir;
use serve_support::*;
use std::collections::{BTreeSet, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a browser sends with a navigation (Chromium's `Accept`).
const BROWSER: &str =
    "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8";

/// Text in the data that must never become markup.
const SCRIPT: &str = "<script>document.title='owned'</script>";
const IMG: &str = "<img src=x onerror=alert(1)>";

/// The synthetic data plus `label`, whose record holds markup in a plain string and in a
/// sub-document (also under a `name` key there, which sub-documents do not check).
fn site(label: &str) -> Site {
    let site = Site { tmp: TempDir::new(label) };
    write_data(&site.data(), &[20, 50], 0);
    let record = serde_json::json!({ "id": 1, "name": "marked", "text": SCRIPT, "note": IMG });
    let sub = serde_json::json!({ "name": SCRIPT, "inner": { "html": IMG, "item": { "name": "item-1", "url": "/api/v2/item/1/" } } });
    common::write_files(
        &site.data(),
        &[("label/1.json", record.to_string()), ("label/1/detail.json", sub.to_string())],
    );
    site.build(&["--base-url", "https://api.example.org"]);
    site
}

/// Chromium, or `None` under the tests' skip policy (`common::heavy`, `common::unavailable`).
fn chromium() -> Option<PathBuf> {
    common::heavy("it needs chromium")?;
    ["chromium", "chromium-browser", "google-chrome"].into_iter().find_map(common::find_tool).or_else(|| {
        common::unavailable("chromium", "run `make test`, which installs it (tests/tools/install-hosts.sh)")
    })
}

/// A headless Chromium run with a new empty profile; returns its stdout.
fn run_chromium(browser: &Path, args: &[&str]) -> String {
    let profile = TempDir::new("chromium-profile");
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut text).ok();
        text
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium {args:?} did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap()
}

/// The DOM Chromium builds for `url`.
fn dom(browser: &Path, url: &str) -> String {
    let dom = run_chromium(browser, &["--dump-dom", url]);
    assert!(dom.contains("</html>"), "chromium dumped no DOM for {url}: {dom:.500}");
    dom
}

/// Every `<a href>` of a DOM: (href with `&amp;` decoded, id attribute).
fn links(dom: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for tag in dom.split("<a ").skip(1) {
        let tag = &tag[..tag.find('>').unwrap_or(tag.len())];
        let attr = |name: &str| {
            let start = tag.find(&format!("{name}=\""))? + name.len() + 2;
            let end = tag[start..].find('"')? + start;
            Some(tag[start..end].replace("&amp;", "&"))
        };
        if let Some(href) = attr("href") {
            out.push((href, attr("id")));
        }
    }
    out
}

fn link_with_id(dom: &str, id: &str) -> Option<String> {
    links(dom).into_iter().find(|(_, i)| i.as_deref() == Some(id)).map(|(href, _)| href)
}

/// The `/api/v2/...` hrefs of a page (the view links root-relative, on whatever host the
/// browser used).
fn paths(dom: &str) -> Vec<String> {
    links(dom).into_iter().map(|(href, _)| href).filter(|href| href.starts_with("/api/")).collect()
}

#[test]
fn chromium_sees_links_pages_and_text() {
    let Some(browser) = chromium() else { return };
    let site = site("browser");
    let server = Server::start_preview(&site.out(), &["--quiet"]);
    let origin = format!("http://{}", server.addr);

    // The root page links the index, every resource, meta and openapi.json, all on this server.
    let root = dom(&browser, &format!("{origin}/"));
    let hrefs: BTreeSet<String> = links(&root).into_iter().map(|(h, _)| h).collect();
    for segment in ["berry", "item", "label", "note"] {
        assert!(hrefs.contains(&format!("/api/v2/{segment}/")), "root lacks {segment}: {hrefs:?}");
    }
    for path in ["/api/v2/", "/api/v2/meta/", "/api/v2/openapi.json"] {
        assert!(hrefs.contains(path), "root lacks {path}: {hrefs:?}");
    }

    // A list: its count, its entries as links, previous and next leading to the right pages.
    let list = dom(&browser, &format!("{origin}/api/v2/item/?offset=20&limit=20"));
    assert!(list.contains("<strong>130</strong>"), "the count: {list:.2000}");
    let entries = entries("item", 0);
    let expected_paths = |offset: usize| -> Vec<String> {
        entries[offset..offset + 20].iter().map(|(_, id)| format!("/api/v2/item/{id}/")).collect()
    };
    let shown: Vec<String> =
        paths(&list).into_iter().filter(|p| p.split('/').count() == 6 && !p.contains('?')).collect();
    assert_eq!(shown, expected_paths(20), "entries 21-40 as links");
    let next = link_with_id(&list, "next").expect("a next button");
    let previous = link_with_id(&list, "previous").expect("a previous button");
    assert_eq!(next, "/api/v2/item/?offset=40&limit=20");
    assert_eq!(previous, "/api/v2/item/?offset=0&limit=20");
    let next_page = dom(&browser, &format!("{origin}{next}"));
    let shown: Vec<String> =
        paths(&next_page).into_iter().filter(|p| p.split('/').count() == 6 && !p.contains('?')).collect();
    assert_eq!(shown, expected_paths(40), "next leads to entries 41-60");
    let back = link_with_id(&next_page, "previous").unwrap();
    let first = dom(&browser, &format!("{origin}{previous}"));
    assert!(link_with_id(&first, "previous").is_none(), "the first page has no previous link");
    assert_eq!(back, "/api/v2/item/?offset=20&limit=20");
    // The limit/offset box submits to the list.
    assert!(list.contains("action=\"/api/v2/item/\""), "{list:.3000}");
    assert!(list.contains("name=\"limit\"") && list.contains("name=\"offset\""));

    // A record: every url is a link to this server (root-relative); breadcrumbs lead up.
    let record = dom(&browser, &format!("{origin}/api/v2/berry/2/"));
    let record_links = links(&record);
    assert!(record_links.iter().all(|(href, _)| href.starts_with('/') && !href.starts_with("//")), "{record_links:?}");
    assert!(record_links.iter().any(|(href, _)| href == "/api/v2/item/2/"), "{record_links:?}");
    for crumb in ["/", "/api/v2/", "/api/v2/berry/"] {
        assert!(record_links.iter().any(|(href, _)| href == crumb), "crumb {crumb}");
    }

    // Markup in the data stays text, in a record and in a sub-document.
    for path in ["/api/v2/label/1/", "/api/v2/label/marked/detail/"] {
        let page = dom(&browser, &format!("{origin}{path}"));
        assert!(!page.contains("<script") && !page.contains("<img"), "{path} made markup of data: {page}");
        assert!(page.contains("&lt;script&gt;"), "{path} shows the text: {page}");
        assert!(!page.contains("<title>owned"), "{path}");
    }
    let detail = dom(&browser, &format!("{origin}/api/v2/label/1/detail/"));
    assert!(links(&detail).iter().any(|(href, _)| href == "/api/v2/item/1/"));

    // A 404: the same page with the message; the status stays 404.
    let missing = dom(&browser, &format!("{origin}/api/v2/item/99999/"));
    assert!(missing.contains("item has no record with id or name"), "{missing:.3000}");
    let response = server.get_with("/api/v2/item/99999/", &[BROWSER]);
    assert_eq!(response.status, 404);
    assert_eq!(response.header("Content-Type"), Some("text/html; charset=utf-8"));
    let bad = server.get_with("/api/v2/item/?limit=abc", &[BROWSER]);
    assert_eq!(bad.status, 400);
    assert!(bad.text().contains("limit=&quot;abc&quot; is not a number"), "{}", bad.text());

    // Screenshots, light and dark, for people to look at.
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/browser");
    std::fs::create_dir_all(&shots).unwrap();
    for (name, path) in [
        ("root", "/"),
        ("list", "/api/v2/item/?offset=20&limit=5"),
        ("record", "/api/v2/berry/2/"),
        ("error", "/api/v2/item/99999/"),
    ] {
        let mut sizes = Vec::new();
        for (mode, extra) in [("light", None), ("dark", Some("--force-dark-mode"))] {
            let file = shots.join(format!("{name}-{mode}.png"));
            let _ = std::fs::remove_file(&file);
            let mut args = vec!["--window-size=1100,800".to_string(), format!("--screenshot={}", file.display())];
            args.extend(extra.map(str::to_string));
            args.push(format!("{origin}{path}"));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run_chromium(&browser, &args);
            let png = std::fs::read(&file).unwrap_or_else(|e| panic!("no screenshot {}: {e}", file.display()));
            assert!(png.starts_with(b"\x89PNG") && png.len() > 5000, "{}", file.display());
            sizes.push(png);
        }
        assert_ne!(sizes[0], sizes[1], "{name}: dark mode looks different from light mode");
    }
}

#[test]
fn following_links_from_the_root_reaches_every_resource() {
    let site = site("crawl");
    let server = Server::start_preview(&site.out(), &["--quiet"]);
    let mut seen: HashSet<String> = HashSet::new();
    let mut queue = VecDeque::from(["/".to_string()]);
    while let Some(path) = queue.pop_front() {
        if !seen.insert(path.clone()) {
            continue;
        }
        let response = server.get_with(&path, &[BROWSER]);
        assert_eq!(response.status, 200, "{path} (linked from a page)");
        if response.header("Content-Type") != Some("text/html; charset=utf-8") {
            continue;
        }
        let page = response.text();
        for (href, _) in links(&page) {
            assert!(href.starts_with('/') && !href.starts_with("//"), "{path} links elsewhere: {href}");
            let target = href.as_str();
            if !seen.contains(target) && !target.contains("format=json") {
                queue.push_back(target.to_string());
            }
        }
        assert!(seen.len() < 2000, "the crawl does not end");
    }
    for segment in ["berry", "item", "label", "note"] {
        assert!(seen.contains(&format!("/api/v2/{segment}/")), "{segment} unreachable");
        for (_, id) in if segment == "label" { vec![(None, 1)] } else { entries(segment, 0) } {
            assert!(seen.contains(&format!("/api/v2/{segment}/{id}/")), "/api/v2/{segment}/{id}/ unreachable");
        }
    }
    for path in ["/api/v2/", "/api/v2/meta/", "/api/v2/openapi.json"] {
        assert!(seen.contains(path), "{path} unreachable");
    }
}

#[test]
fn json_clients_get_the_trees_bytes() {
    let site = site("json-clients");
    let server = Server::start(&site.out(), &[]);
    let json_accepts = [
        None,
        Some("Accept: */*"),
        Some("Accept: application/json"),
        Some("Accept: application/json, text/plain, */*"),
        Some("Accept: text/html;q=0.5, application/json"),
    ];
    for (target, file) in [
        ("/api/v2/", "api/v2/index.json"),
        ("/api/v2/item/?offset=20&limit=20", "api/v2/item/_pages/20/20/index.json"),
        ("/api/v2/label/1/", "api/v2/label/1/index.json"),
    ] {
        let expected = site.file(file);
        for accept in json_accepts {
            let headers: Vec<&str> = accept.into_iter().collect();
            let response = server.get_with(target, &headers).expect(200);
            assert_eq!(response.body, expected, "{target} {accept:?}");
            assert_eq!(response.header("Content-Type"), Some("application/json; charset=utf-8"));
        }
        let sep = if target.contains('?') { '&' } else { '?' };
        let response = server.get_with(&format!("{target}{sep}format=json"), &[BROWSER]).expect(200);
        assert_eq!(response.body, expected, "{target} ?format=json in a browser");
        let html = server.get_with(target, &[BROWSER]).expect(200);
        assert_eq!(html.header("Content-Type"), Some("text/html; charset=utf-8"));
        assert_eq!(html.header("Cache-Control"), Some("no-store"));
        assert!(html.header("ETag").is_none());
    }
    // `/` stays a JSON 404 for JSON clients.
    let response = server.get("/");
    assert_eq!(response.status, 404);
    assert_eq!(response.header("Content-Type"), Some("application/json; charset=utf-8"));
    // The index page lists meta and openapi.json; the JSON index does not.
    let page = server.get_with("/api/v2/", &[BROWSER]).expect(200).text();
    assert!(page.contains("/api/v2/meta/\"") && page.contains("/api/v2/openapi.json\""));
    let index = server.get("/api/v2/").expect(200).json();
    assert!(index.get("meta").is_none() && index.get("openapi.json").is_none());
}

/// A headless Chromium driven over the DevTools protocol (`--remote-debugging-pipe`: commands
/// on its descriptor 3, answers on 4, each a JSON text ended by a NUL), for what `--dump-dom`
/// cannot do: submit a form and follow a link as a user does, under the page's own CSP.
struct Tab {
    child: std::process::Child,
    commands: std::process::ChildStdin,
    answers: std::sync::mpsc::Receiver<serde_json::Value>,
    session: String,
    next_id: u64,
    _profile: TempDir,
}

impl Tab {
    /// Chromium with one tab opened at `url`.
    fn open(browser: &Path, url: &str) -> Tab {
        let profile = TempDir::new("chromium-devtools");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg("exec \"$0\" \"$@\" 3<&0 4>&1 </dev/null >/dev/null")
            .arg(browser)
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-pipe"])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromium starts");
        let commands = child.stdin.take().unwrap();
        let mut pipe = std::io::BufReader::new(child.stdout.take().unwrap());
        let (sender, answers) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut message = Vec::new();
            while std::io::BufRead::read_until(&mut pipe, 0, &mut message).is_ok_and(|n| n > 0) {
                message.pop();
                if let Ok(value) = serde_json::from_slice(&message)
                    && sender.send(value).is_err()
                {
                    return;
                }
                message.clear();
            }
        });
        let mut tab = Tab { child, commands, answers, session: String::new(), next_id: 0, _profile: profile };
        let targets = tab.call("Target.getTargets", serde_json::json!({}));
        let page = targets["targetInfos"]
            .as_array()
            .and_then(|targets| targets.iter().find(|t| t["type"] == "page"))
            .unwrap_or_else(|| panic!("no page in {targets}"))["targetId"]
            .clone();
        let attached = tab.call("Target.attachToTarget", serde_json::json!({ "targetId": page, "flatten": true }));
        tab.session = attached["sessionId"].as_str().expect("a session").to_string();
        tab
    }

    /// Sends one command (to the tab once attached) and waits for its result.
    fn call(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        self.try_call(method, params).unwrap_or_else(|answer| panic!("{method}: {answer}"))
    }

    /// [`Tab::call`], with an error answer returned, not a panic (a page navigating away while
    /// an expression runs in it answers one).
    fn try_call(&mut self, method: &str, params: serde_json::Value) -> Result<serde_json::Value, serde_json::Value> {
        self.next_id += 1;
        let mut command = serde_json::json!({ "id": self.next_id, "method": method, "params": params });
        if !self.session.is_empty() {
            command["sessionId"] = self.session.clone().into();
        }
        let mut bytes = command.to_string().into_bytes();
        bytes.push(0);
        std::io::Write::write_all(&mut self.commands, &bytes).expect("chromium takes commands");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let answer = self.answers.recv_timeout(left).unwrap_or_else(|e| panic!("{method}: no answer: {e}"));
            if answer["id"] == self.next_id {
                return match answer.get("error") {
                    Some(_) => Err(answer),
                    None => Ok(answer["result"].clone()),
                };
            }
        }
    }

    /// The value of a JavaScript expression in the tab (run by DevTools, which the page's CSP
    /// does not govern; what the expression makes the page do, it does).
    fn eval(&mut self, expression: &str) -> serde_json::Value {
        let result =
            self.call("Runtime.evaluate", serde_json::json!({ "expression": expression, "returnByValue": true }));
        result["result"]["value"].clone()
    }

    /// Waits until the tab shows `url`, loaded. An expression asked while the page navigates
    /// is answered "Inspected target navigated or closed": not yet.
    fn shows(&mut self, url: &str) -> bool {
        let expression =
            serde_json::json!({ "expression": "location.href + ' ' + document.readyState", "returnByValue": true });
        eventually(Duration::from_secs(60), || {
            self.try_call("Runtime.evaluate", expression.clone())
                .is_ok_and(|result| result["result"]["value"] == format!("{url} complete").as_str())
        })
    }
}

impl Drop for Tab {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_view_works_when_opened_as_localhost() {
    let Some(browser) = chromium() else { return };
    let site = site("localhost");
    let server = Server::start_preview(&site.out(), &["--quiet"]);
    let port = server.addr.rsplit(':').next().unwrap();
    let origin = format!("http://localhost:{port}");
    let mut tab = Tab::open(&browser, &format!("{origin}/api/v2/item/?offset=20&limit=20"));
    assert!(tab.shows(&format!("{origin}/api/v2/item/?offset=20&limit=20")), "the list does not load");

    // The page form, filled in and submitted as a user does: allowed by the page's CSP
    // (`form-action 'self'`), it shows the page asked for, still on localhost.
    tab.eval("document.querySelector('input[name=offset]').value = '40'; document.querySelector('form.page button').click(); true");
    let submitted = format!("{origin}/api/v2/item/?limit=20&offset=40");
    assert!(tab.shows(&submitted), "the form did not lead to {submitted}: {}", tab.eval("location.href"));
    let count = tab.eval("document.querySelector('.count').textContent");
    assert_eq!(count, "130 in all · entries 41–60");

    // A link (next) and a breadcrumb, followed by a click.
    tab.eval("document.getElementById('next').click(); true");
    assert!(tab.shows(&format!("{origin}/api/v2/item/?offset=60&limit=20")), "{}", tab.eval("location.href"));
    tab.eval("document.querySelector('.crumbs a:last-of-type').click(); true");
    assert!(tab.shows(&format!("{origin}/api/v2/")), "{}", tab.eval("location.href"));
}

impl Tab {
    /// The value of a JavaScript expression that may be a promise, awaited; an exception's
    /// description when it throws.
    fn eval_await(&mut self, expression: &str) -> Result<serde_json::Value, String> {
        let params = serde_json::json!({ "expression": expression, "returnByValue": true, "awaitPromise": true });
        let result = self.call("Runtime.evaluate", params);
        match result.get("exceptionDetails") {
            Some(details) => Err(details["exception"]["description"].as_str().unwrap_or("an exception").to_string()),
            None => Ok(result["result"]["value"].clone()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The public API's browser client, pokeapi-js-wrapper 2.x, unchanged

/// The package folder of pokeapi-js-wrapper 2.x (installed under target/npm by `make test`), or
/// `None` under the tests' skip policy.
fn js_client() -> Option<PathBuf> {
    common::heavy("it needs chromium and pokeapi-js-wrapper")?;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/npm/node_modules/pokeapi-js-wrapper");
    let package: Option<serde_json::Value> =
        std::fs::read(dir.join("package.json")).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok());
    match package.as_ref().and_then(|p| p["version"].as_str()) {
        Some(version) if version.starts_with("2.") => Some(dir),
        _ => common::unavailable(
            "pokeapi-js-wrapper 2.x (npm)",
            "run `make test`, which installs it (sh tests/tools/install-js-client.sh)",
        ),
    }
}

/// Serves `page` at `/` and the files under `dir` at their paths, on a loopback port of its own
/// (another origin than the API's, as a web app's is), until the test ends; returns its origin.
fn static_origin(dir: PathBuf, page: String) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = std::io::BufReader::new(&stream);
            let mut line = String::new();
            let _ = std::io::BufRead::read_line(&mut reader, &mut line);
            let mut header = String::new();
            while std::io::BufRead::read_line(&mut reader, &mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            let path = line.split(' ').nth(1).unwrap_or("/").to_string();
            let (status, kind, body) = match path.as_str() {
                "/" => ("200 OK", "text/html", page.clone().into_bytes()),
                _ if path.contains("..") => ("404 Not Found", "text/plain", Vec::new()),
                _ => match std::fs::read(dir.join(path.trim_start_matches('/'))) {
                    Ok(bytes) if path.ends_with(".js") => ("200 OK", "text/javascript", bytes),
                    Ok(bytes) if path.ends_with(".json") => ("200 OK", "application/json", bytes),
                    _ => ("404 Not Found", "text/plain", Vec::new()),
                },
            };
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let mut stream = &stream;
            let _ = std::io::Write::write_all(&mut stream, head.as_bytes());
            let _ = std::io::Write::write_all(&mut stream, &body);
        }
    });
    origin
}

/// A JSON answer of the client without the `meta` it adds to what it caches.
fn without_meta(mut value: serde_json::Value) -> serde_json::Value {
    value.as_object_mut().map(|object| object.remove("meta"));
    value
}

/// What the client is pointed at: `gen serve`, or the Cloudflare handler in workerd in front of
/// a bare store.
trait ClientApi {
    /// `host:port`.
    fn addr(&self) -> String;
    /// How many requests have reached the server, or the store behind the handler, so far.
    fn asked(&self) -> usize;
    /// Puts the tree just rebuilt in place live, as a deploy does.
    fn deploy(&mut self, out: &Path, date: &str);
}

impl ClientApi for Server {
    fn addr(&self) -> String {
        self.addr.clone()
    }

    fn asked(&self) -> usize {
        self.log().matches("GET /api/").count()
    }

    fn deploy(&mut self, _out: &Path, date: &str) {
        // gen serve picks a rebuild up by itself
        assert!(eventually(Duration::from_secs(10), || self.get("/api/v2/meta/").json()["deploy_date"] == date));
    }
}

/// The Cloudflare handler (`gen config cloudflare`) in workerd (through miniflare), reading the
/// tree from a bare static store over HTTP (its `ORIGIN`), on a port it keeps across deploys.
struct CloudflareHandler {
    node: PathBuf,
    runtimes: PathBuf,
    store: Server,
    reads: PathBuf,
    port: u16,
    worker: Option<Server>,
    files: TempDir,
}

impl CloudflareHandler {
    /// `None` under the tests' skip policy when Node or miniflare is missing.
    fn start(out: &Path) -> Option<CloudflareHandler> {
        let node = common::find_tool("node").or_else(|| common::unavailable("node", "install Node 18 or later"))?;
        let runtimes = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/edge-runtimes");
        if !runtimes.join("node_modules/miniflare/package.json").is_file() {
            return common::unavailable(
                "miniflare",
                "run `make test`, which installs it (tests/tools/edge-runtimes.sh)",
            );
        }
        let files = TempDir::new("js-client-worker");
        let reads = files.join("reads");
        std::fs::write(&reads, "").unwrap();
        let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tools");
        let port = common::free_port();
        let child = Command::new(&node)
            .arg(tools.join("static-origin.mjs"))
            .arg(out)
            .arg(port.to_string())
            .arg(&reads)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let store =
            Server::adopt("store", child, &format!("127.0.0.1:{port}"), &reads, TempDir::new("js-client-store"));
        assert!(eventually(Duration::from_secs(20), || common::http_request(&store.addr, "GET", "/api/v2/", &[])
            .is_ok_and(|r| r.status == 200)));
        let mut handler =
            CloudflareHandler { node, runtimes, store, reads, port: common::free_port(), worker: None, files };
        handler.start_worker(out);
        Some(handler)
    }

    /// Prints the handler for the tree in `out` and starts it (stopping the one before).
    fn start_worker(&mut self, out: &Path) {
        self.worker = None;
        let worker = self.files.join("worker.js");
        let printed = common::run(&["config", "cloudflare", "--dir", out.to_str().unwrap()]).ok().stdout();
        std::fs::write(&worker, printed).unwrap();
        let log = self.files.join("worker.log");
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(&self.node)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tools/miniflare-run.mjs"))
            .arg(&self.runtimes)
            .arg(&worker)
            .arg(self.port.to_string())
            .arg("origin")
            .arg(format!("http://{}", self.store.addr))
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap();
        let addr = format!("127.0.0.1:{}", self.port);
        let worker = Server::adopt("workerd", child, &addr, &log, TempDir::new("js-client-workerd"));
        let root = std::fs::read(out.join("api/v2/index.json")).unwrap();
        let ready = eventually(Duration::from_secs(60), || {
            common::http_request(&addr, "GET", "/api/v2/", &[]).is_ok_and(|r| r.status == 200 && r.body == root)
        });
        assert!(ready, "the worker did not answer: {}", worker.log());
        self.worker = Some(worker);
    }
}

impl ClientApi for CloudflareHandler {
    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn asked(&self) -> usize {
        std::fs::read_to_string(&self.reads).unwrap().lines().count()
    }

    fn deploy(&mut self, out: &Path, _date: &str) {
        // the handler's facts (the deploy headers among them) are baked: printed again
        self.start_worker(out);
    }
}

/// A tree with the public API's header names, as `gen import api-data --keep-segment-names`
/// records them (the client reads `X-PokeAPI-Deploy-Date`), built at `date` with `step`'s data.
fn client_site_build(site: &Site, step: i64, date: &str) {
    write_data(&site.data(), &[20, 50], step);
    let path = site.data().join("gen.json");
    let mut config: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    config["deploy_headers"] = serde_json::json!({"date": "X-PokeAPI-Deploy-Date", "hash": "X-PokeAPI-Hash"});
    std::fs::write(&path, config.to_string()).unwrap();
    let status = common::gen_bin()
        .env("SOURCE_DATE_EPOCH", date)
        .args(["build", "--quiet", "--data", site.data().to_str().unwrap(), "--out", site.out().to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// The public API's browser client, unchanged, in Chromium, against `api`: list, get, cache,
/// `invalidateCache()` across a deploy. `reference` is `gen serve` on the same tree: what the
/// client must get.
fn check_js_client(browser: &Path, client: PathBuf, site: &Site, api: &mut dyn ClientApi, reference: &Server) {
    let page = format!(
        "<!doctype html><meta charset=\"utf-8\"><title>client</title><script type=\"module\">\n\
         import {{ Pokedex }} from '/src/index.js';\n\
         Pokedex.init({{ protocol: 'http', hostName: '{}', cache: true }})\n\
         .then(p => {{ window.P = p; window.ready = 'yes'; }}, e => {{ window.ready = String(e); }});\n\
         </script>",
        api.addr()
    );
    let origin = static_origin(client, page);
    let mut tab = Tab::open(browser, &format!("{origin}/"));
    assert!(eventually(Duration::from_secs(60), || tab.eval("window.ready || ''") != ""), "the client did not load");
    assert_eq!(tab.eval("window.ready"), "yes");

    // list: the whole list (the client's default, ?limit=100000&offset=0) and pages the tree
    // holds a file for or not
    for (call, target) in [
        ("P.getBerriesList()", "/api/v2/berry/?limit=100000&offset=0"),
        ("P.getBerriesList({limit: 3, offset: 2})", "/api/v2/berry/?limit=3&offset=2"),
        ("P.getItemsList({limit: 50, offset: 100})", "/api/v2/item/?limit=50&offset=100"),
    ] {
        let got = tab.eval_await(call).unwrap_or_else(|e| panic!("{call}: {e}"));
        assert_eq!(without_meta(got), reference.get(target).expect(200).json(), "{call}");
    }

    // get: by id and by name
    let (name, id) = entries("berry", 0)[0].clone();
    let name = name.unwrap();
    let record = reference.get(&format!("/api/v2/berry/{id}/")).expect(200).json();
    assert_eq!(without_meta(tab.eval_await(&format!("P.getBerryByName({id})")).unwrap()), record);
    assert_eq!(without_meta(tab.eval_await(&format!("P.getBerryByName('{name}')")).unwrap()), record);

    // cache: each answer stored with the deploy date the server's header gave (read across
    // origins: exposed), and answered again without asking the server
    assert_eq!(tab.eval_await("P.getCacheLength()").unwrap(), 5);
    let asked = api.asked();
    assert!(asked >= 1);
    let again = tab.eval_await(&format!("P.getBerryByName({id})")).unwrap();
    assert_eq!(again["meta"]["deploy_date"], common::TEST_EPOCH.parse::<i64>().unwrap(), "{again}");
    assert_eq!(api.asked(), asked, "a cached answer was asked again");

    // invalidateCache(): nothing goes while the tree is the same deploy
    assert_eq!(tab.eval_await("P.invalidateCache()"), Ok(serde_json::Value::Bool(true)));
    assert_eq!(tab.eval_await("P.getCacheLength()").unwrap(), 5);
    // a new deploy (other data, a later date): every answer cached before it goes, and the
    // next call asks the server and gets the new data
    let later = (common::TEST_EPOCH.parse::<i64>().unwrap() + 1000).to_string();
    client_site_build(site, 1, &later);
    api.deploy(&site.out(), &later);
    assert_eq!(tab.eval_await("P.invalidateCache()"), Ok(serde_json::Value::Bool(true)));
    assert_eq!(tab.eval_await("P.getCacheLength()").unwrap(), 0);
    // (a url asked before may come back from the browser's own HTTP cache, `max-age`, with its
    // old date: the next invalidateCache() drops it again; a new one reaches the server)
    let asked = api.asked();
    let fresh = tab.eval_await("P.getItemsList({limit: 50, offset: 101})").unwrap();
    assert_eq!(fresh["count"], 131, "{fresh}");
    assert_eq!(fresh["results"][29]["name"], "item-131", "{fresh}");
    assert_eq!(fresh["meta"]["deploy_date"], later.parse::<i64>().unwrap());
    assert!(api.asked() > asked, "the new page was not asked for");
    assert_eq!(tab.eval_await("P.getCacheLength()").unwrap(), 1);
}

#[test]
fn the_public_apis_browser_client_lists_gets_caches_and_invalidates() {
    let Some(browser) = chromium() else { return };
    let Some(client) = js_client() else { return };
    let site = Site { tmp: TempDir::new("js-client") };
    client_site_build(&site, 0, common::TEST_EPOCH);
    // The default `--max-age` (a day) on documents: `meta` alone is `no-cache`, or the
    // browser's own HTTP cache would answer the client's second read of it and
    // `invalidateCache()` would not see a new deploy for a day.
    let mut server = Server::start_with(&site.out(), &[], None);
    let reference = Server::start_with(&site.out(), &["--quiet"], None);
    check_js_client(&browser, client, &site, &mut server, &reference);
}

#[test]
fn the_public_apis_browser_client_works_through_the_cloudflare_handler() {
    let Some(browser) = chromium() else { return };
    let Some(client) = js_client() else { return };
    let site = Site { tmp: TempDir::new("js-client-edge") };
    client_site_build(&site, 0, common::TEST_EPOCH);
    let Some(mut handler) = CloudflareHandler::start(&site.out()) else { return };
    let reference = Server::start_with(&site.out(), &["--quiet"], None);
    check_js_client(&browser, client, &site, &mut handler, &reference);
}

// ---------------------------------------------------------------------------------------------
// The HTML view keeps its state: forms and links clicked in Chromium through puppeteer-core

/// puppeteer-core's install folder (target/puppeteer, by tests/tools/install-puppeteer.sh) and
/// Node, or `None` under the tests' skip policy.
fn puppeteer() -> Option<(PathBuf, PathBuf)> {
    common::heavy("it needs chromium and puppeteer-core")?;
    let node = common::find_tool("node").or_else(|| common::unavailable("node", "install Node 18 or later"))?;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/puppeteer");
    if !dir.join("node_modules/puppeteer-core/package.json").is_file() {
        return common::unavailable(
            "puppeteer-core (npm)",
            "run `make test`, which installs it (sh tests/tools/install-puppeteer.sh)",
        );
    }
    Some((node, dir))
}

/// A creature: (id, types); its name is `c-<id>`, its generation `generation-<id % 3 + 1>`,
/// its stage `13 - id` (1 to 12: `9` and `10` both taken).
const KINDS: [(i64, &[&str]); 12] = [
    (1, &["fire"]),
    (2, &["fire", "flying"]),
    (3, &["grass"]),
    (4, &["fire"]),
    (5, &["water"]),
    (6, &["fire", "flying"]),
    (7, &["bug"]),
    (8, &["fire"]),
    (9, &["grass", "flying"]),
    (10, &["fire", "flying"]),
    (11, &["fire"]),
    (12, &["fire", "water"]),
];

/// The value a creature takes for a filter (`type` is checked with `contains`).
fn takes(id: i64, types: &[&str], field: &str, value: &str) -> bool {
    match field {
        "type" => types.contains(&value),
        "generation" => format!("generation-{}", id % 3 + 1) == value,
        "stage" => (13 - id).to_string() == value,
        _ => unreachable!("{field}"),
    }
}

/// The names of the creatures whose name contains `q` and that take every filter, in id order.
fn matching(q: &str, filters: &[(&str, &str)]) -> Vec<String> {
    KINDS
        .iter()
        .filter(|(id, types)| format!("c-{id}").contains(q) && filters.iter().all(|(f, v)| takes(*id, types, f, v)))
        .map(|(id, _)| format!("c-{id}"))
        .collect()
}

/// Runs tests/tools/click-view.mjs: what the page at `url` showed before the first step and
/// after each click.
fn click_through(
    node: &Path,
    dir: &Path,
    browser: &Path,
    url: &str,
    steps: serde_json::Value,
) -> Vec<serde_json::Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tools/click-view.mjs");
    let output = Command::new(node)
        .arg(script)
        .arg(dir)
        .arg(browser)
        .arg(url)
        .arg(steps.to_string())
        .stdin(Stdio::null())
        .output()
        .expect("node runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "click-view.mjs failed: {stderr}");
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)))
}

/// A list page the HTML view should show: (url, q, filters, offset), page size 2.
type Shown<'a> = (String, &'a str, Vec<(&'a str, &'a str)>, usize);

/// Checks what click-view.mjs saw on one page against `shown` and the data: the url, the
/// heading and status line, the entries and count, the active `q` and filters, the forms'
/// fields and the filters' values (counts of the whole list, marked when active, in order).
fn check_page(page: &serde_json::Value, (url, q, filters, offset): &Shown) {
    let list = "/api/v2/creature/";
    let context = format!("{url}: {page}");
    assert_eq!(page["url"], url.as_str(), "{context}");
    assert_eq!(page["h1"], url.as_str(), "the heading shows the request with its query: {context}");
    assert!(page["status"].as_str().unwrap().starts_with(&format!("GET {url} · 200")), "{context}");
    let matches = matching(q, filters);
    let shown: Vec<&String> = matches.iter().skip(*offset).take(2).collect();
    assert_eq!(page["entries"], serde_json::json!(shown), "{context}");
    let range = match shown.len() {
        0 => "no entries".to_string(),
        1 => format!("entry {}", offset + 1),
        n => format!("entries {}–{}", offset + 1, offset + n),
    };
    // good English: "1 of 12 matches", "2 of 12 match"
    let verb = if matches.len() == 1 { "matches" } else { "match" };
    assert_eq!(page["count"], format!("{} of 12 {verb} · {range}", matches.len()), "{context}");
    // what is active, each marked; the forms carry the rest
    let mut active: Vec<String> = Vec::new();
    if !q.is_empty() {
        active.push(format!("name contains “{q}”"));
    }
    active.extend(filters.iter().map(|(f, v)| format!("{f} = {v}")));
    assert_eq!(page["active"], serde_json::json!(active), "{context}");
    assert_eq!(page["clear"], format!("{list}?limit=2"), "{context}");
    let hidden: Vec<serde_json::Value> = filters.iter().map(|(f, v)| serde_json::json!(["hidden", f, v])).collect();
    let mut search_form = vec![serde_json::json!(["search", "q", q]), serde_json::json!(["hidden", "limit", "2"])];
    search_form.extend(hidden.iter().cloned());
    assert_eq!(page["search_form"], serde_json::json!(search_form), "{context}");
    let mut page_form =
        vec![serde_json::json!(["number", "limit", "2"]), serde_json::json!(["number", "offset", offset.to_string()])];
    if !q.is_empty() {
        page_form.push(serde_json::json!(["hidden", "q", q]));
    }
    page_form.extend(hidden);
    assert_eq!(page["page_form"], serde_json::json!(page_form), "{context}");
    // every value with its count in the whole list (so said), marked when active; numbers
    // in numeric order
    for (field, values) in [
        ("generation", (1..=3).map(|g| format!("generation-{g}")).collect::<Vec<_>>()),
        ("stage", (1..=12).map(|s| s.to_string()).collect()),
        ("type", ["bug", "fire", "flying", "grass", "water"].map(String::from).to_vec()),
    ] {
        let line = &page["values"][field];
        let note = line["note"].as_str().unwrap_or_default();
        assert!(note.contains("records of the whole list, not of the current matches"), "{field} on {context}");
        let how = if field == "type" { "adds to the current ones" } else { "replaces the current one" };
        assert!(note.contains(how), "{field} on {context}");
        let want: Vec<serde_json::Value> = values
            .iter()
            .map(|value| {
                let count = KINDS.iter().filter(|(id, types)| takes(*id, types, field, value)).count();
                let active = filters.contains(&(field, value.as_str()));
                serde_json::json!({"value": value, "active": active, "count": format!("({count})")})
            })
            .collect();
        assert_eq!(line["shown"], serde_json::json!(want), "{field} on {context}");
    }
}

#[test]
fn the_html_view_keeps_the_query_and_filters_through_its_forms_and_links() {
    let Some(browser) = chromium() else { return };
    let Some((node, dir)) = puppeteer() else { return };
    let site = Site { tmp: TempDir::new("html-state") };
    let config = r#"{"base_url": "https://api.example.org", "page_sizes": [2],
        "filters": {"creature": {"type": "types[].type.name", "generation": "generation.name", "stage": "stage"}}}"#;
    let mut files = vec![("gen.json".to_string(), config.to_string())];
    for (id, types) in KINDS {
        let types: Vec<_> = types.iter().map(|t| serde_json::json!({"slot": 1, "type": {"name": t}})).collect();
        let record = serde_json::json!({"id": id, "name": format!("c-{id}"), "types": types,
            "generation": {"name": format!("generation-{}", id % 3 + 1)}, "stage": 13 - id});
        files.push((format!("creature/{id}.json"), record.to_string()));
    }
    let files: Vec<(&str, String)> = files.iter().map(|(p, t)| (p.as_str(), t.clone())).collect();
    common::write_files(&site.data(), &files);
    site.build(&[]);
    let server = Server::start_preview(&site.out(), &["--quiet"]);
    let list = "/api/v2/creature/";
    let start = format!("{list}?type=fire&limit=2");
    let steps = serde_json::json!([
        // the search box, filled in and submitted: keeps the page size and the filter
        {"fill": "form.search input[name=q]", "text": "c-1"},
        {"click": "form.search button"},
        // the page form: keeps q and the filter
        {"fill": "form.page input[name=offset]", "text": "2"},
        {"click": "form.page button"},
        // a value of a field a record takes several of: added
        {"click": "p.filters[data-field=type] > a::-p-text(flying)"},
        // q removed by its own link
        {"click": "#active .chip:first-child a.remove"},
        // a value of a field a record takes one of: set, then replaced
        {"click": "p.filters[data-field=generation] > a::-p-text(generation-3)"},
        {"click": "p.filters[data-field=generation] > a::-p-text(generation-2)"},
        // an active value removed from the values' line
        {"click": "p.filters[data-field=type] a.remove[aria-label='remove type = fire']"},
        {"click": "#clear"},
    ]);
    let seen = click_through(&node, &dir, &browser, &format!("http://{}{start}", server.addr), steps);
    // each page shown, as the rules in docs/serve.md make them
    let expected: [Shown; 8] = [
        (start.clone(), "", vec![("type", "fire")], 0),
        (format!("{list}?q=c-1&limit=2&type=fire"), "c-1", vec![("type", "fire")], 0),
        (format!("{list}?limit=2&offset=2&q=c-1&type=fire"), "c-1", vec![("type", "fire")], 2),
        (format!("{list}?limit=2&q=c-1&type=fire&type=flying"), "c-1", vec![("type", "fire"), ("type", "flying")], 0),
        (format!("{list}?limit=2&type=fire&type=flying"), "", vec![("type", "fire"), ("type", "flying")], 0),
        (
            format!("{list}?limit=2&type=fire&type=flying&generation=generation-3"),
            "",
            vec![("type", "fire"), ("type", "flying"), ("generation", "generation-3")],
            0,
        ),
        (
            format!("{list}?limit=2&type=fire&type=flying&generation=generation-2"),
            "",
            vec![("type", "fire"), ("type", "flying"), ("generation", "generation-2")],
            0,
        ),
        (
            format!("{list}?limit=2&type=flying&generation=generation-2"),
            "",
            vec![("type", "flying"), ("generation", "generation-2")],
            0,
        ),
    ];
    for (page, shown) in seen.iter().zip(&expected) {
        check_page(page, shown);
    }
    assert_eq!(seen.len(), expected.len() + 1, "{seen:?}");
    // clear all: the whole list, with the page size kept, nothing active
    let cleared = seen.last().unwrap();
    assert_eq!(cleared["url"], format!("{list}?limit=2"));
    assert_eq!(cleared["count"], "12 in all · entries 1–2");
    assert_eq!(cleared["active"], serde_json::json!([]));
    assert_eq!(cleared["clear"], serde_json::Value::Null);
    assert_eq!(cleared["entries"], serde_json::json!(["c-1", "c-2"]));
}

/// Issue 48 item 4: the boxes fit their text, as Chromium lays them out: the search box holds
/// `Salamèche` and a longer search whole (it was 6rem wide, whatever its value), and an error's
/// long detail wraps inside its box (it ran off it).
#[test]
fn the_search_box_and_the_error_box_fit_their_text_in_chromium() {
    let Some(browser) = chromium() else { return };
    let Some((node, dir)) = puppeteer() else { return };
    let site = site("html-boxes");
    let server = Server::start(&site.out(), &[]);
    for q in ["Salam%C3%A8che", "Dracaufeu%20Salam%C3%A8che%20Reptincel"] {
        let url = format!("http://{}/api/v2/item/?q={q}", server.addr);
        let seen = click_through(&node, &dir, &browser, &url, serde_json::json!([]));
        assert_eq!(seen[0]["fits"]["search"], true, "{q}: {}", seen[0]);
    }
    // a 404 whose detail names a long unbroken segment
    let url = format!("http://{}/api/v2/{}/", server.addr, "x".repeat(180));
    let seen = click_through(&node, &dir, &browser, &url, serde_json::json!([]));
    assert_eq!(seen[0]["fits"]["error"], true, "{}", seen[0]);
}
