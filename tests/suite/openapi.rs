//! The OpenAPI document `gen build` writes (`api/v2/openapi.json`), checked by real tools from
//! PyPI, installed into `target/pyvenv` by `tests/tools/python-venv.sh`:
//!
//! - every document of the tree (records by id and by name, sub-documents, pages, root, meta)
//!   validates against the schema of its path, with `jsonschema` (2020-12, formats asserted),
//!   over the default data and over the imported fixture (`../shared/fixtures/api-data`);
//! - the document is valid OpenAPI 3.1, by `openapi-spec-validator`;
//! - `schemathesis`, run against `gen serve` with the document, finds no server error and no
//!   response that breaks the document (status codes, content types, bodies).
//!
//! `make test` installs the tools; without them these tests fail under `CI`, else skip saying so.

use crate::common;
use crate::serve_support;

use common::*;
use serde_json::Value;
use serve_support::Server;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const OPENAPI: &str = "api/v2/openapi.json";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The virtual environment with the Python tools (`target/pyvenv`, or `GEN_PYVENV`), which
/// `make test` installs with `tests/tools/python-venv.sh`; `None` under the tests' skip policy
/// when it is not there. The test never installs it itself.
fn venv() -> Option<&'static Path> {
    static VENV: OnceLock<Option<PathBuf>> = OnceLock::new();
    heavy("it needs the Python tools (jsonschema, schemathesis)")?;
    VENV.get_or_init(|| {
        let venv = std::env::var_os("GEN_PYVENV").map_or_else(|| repo().join("target/pyvenv"), PathBuf::from);
        if venv.join("bin/python").is_file() {
            Some(venv)
        } else {
            unavailable(
                &format!("the Python tools of the OpenAPI tests ({})", venv.display()),
                "run `make test`, or `sh tests/tools/python-venv.sh` (Python 3 with venv, and PyPI)",
            )
        }
    })
    .as_deref()
}

/// Runs a program of the virtual environment (`bin/<program>`) and asserts success; returns
/// stdout. On failure the command and both outputs are shown.
fn tool(venv: &Path, program: &str, args: &[&str]) -> String {
    let mut command = Command::new(venv.join("bin").join(program));
    command.args(args).current_dir(repo());
    let output = command.output().unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{program} {} failed ({}):\n--- stdout\n{stdout}--- stderr\n{stderr}",
        args.join(" "),
        output.status
    );
    eprintln!("{program} {}:\n{stdout}", args.join(" "));
    stdout
}

fn python_script(venv: &Path, script: &str, args: &[&str]) -> String {
    let path = repo().join("tests/tools").join(script);
    let mut all = vec![path.to_str().unwrap()];
    all.extend_from_slice(args);
    tool(venv, "python", &all)
}

/// Validates the document and every document of the tree against it.
fn check_tree(venv: &Path, tree: &Path) {
    let openapi = tree.join(OPENAPI);
    python_script(venv, "check_openapi.py", &[openapi.to_str().unwrap()]);
    let report = python_script(venv, "validate_tree.py", &[tree.to_str().unwrap()]);
    // every file of the manifest was validated, none skipped
    let manifest = read_json(&tree.join("manifest.json"));
    let documents = manifest["files"].as_object().unwrap().len();
    let total = format!("{documents} documents valid against");
    assert!(report.lines().any(|l| l.starts_with(&total)), "expected {documents} documents: {report}");
}

/// The validation above is not vacuous: a record whose value breaks its inferred schema, and
/// a reference url that is not a URI, are found and named.
#[test]
fn a_document_that_breaks_its_schema_is_reported() {
    let Some(venv) = venv() else { return };
    let tmp = TempDir::new("openapi-broken");
    sample_data(&tmp.join("data"));
    let out = tmp.join("out");
    build(&tmp.join("data"), &out, &[]).ok();
    let record = out.join("api/v2/berry/7/index.json");
    let mut value = read_json(&record);
    value["size"] = Value::String("7.5".into());
    value["firmness"]["url"] = Value::String("firmness 3".into());
    std::fs::remove_file(&record).unwrap(); // a hard link shared with berry-7: replace, not modify
    std::fs::write(&record, serde_json::to_vec(&value).unwrap()).unwrap();
    let script = repo().join("tests/tools/validate_tree.py");
    let output = Command::new(venv.join("bin/python")).arg(&script).arg(&out).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("api/v2/berry/7/index.json: at /size: '7.5' is not of type 'number'"), "{stderr}");
    assert!(stderr.contains("api/v2/berry/7/index.json: at /firmness/url: 'firmness 3' is not a 'uri'"), "{stderr}");
    assert!(!stderr.contains("berry/8/"), "{stderr}");
}

#[test]
fn default_data_validates_against_its_document() {
    let Some(venv) = venv() else { return };
    let tmp = TempDir::new("openapi-default");
    build(&repo().join("data"), &tmp.join("out"), &[]).ok();
    check_tree(venv, &tmp.join("out"));
}

#[test]
fn imported_fixture_validates_against_its_document() {
    let Some(fixture) = fixture() else { return };
    let Some(venv) = venv() else { return };
    let tmp = TempDir::new("openapi-fixture");
    let data = tmp.join("data");
    run(&["import", "api-data", fixture.to_str().unwrap(), "--out", data.to_str().unwrap()]).ok();
    build(&data, &tmp.join("out"), &[]).ok();
    check_tree(venv, &tmp.join("out"));
}

#[test]
fn sample_data_with_sub_documents_validates_against_its_document() {
    let Some(venv) = venv() else { return };
    let tmp = TempDir::new("openapi-sample");
    sample_data(&tmp.join("data"));
    build(&tmp.join("data"), &tmp.join("out"), &[]).ok();
    check_tree(venv, &tmp.join("out"));
}

/// What the document says without any Python: where it is, its server, one path per served
/// form of every resource of the manifest, a schema for each, and the document is listed in
/// the manifest like every other file.
#[test]
fn document_describes_the_tree() {
    let tmp = TempDir::new("openapi-shape");
    sample_data(&tmp.join("data"));
    let out = tmp.join("out");
    run(&[
        "build",
        "--data",
        tmp.join("data").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--base-url",
        "https://api.example.org/data",
    ])
    .ok();
    let doc = read_json(&out.join(OPENAPI));
    let manifest = read_json(&out.join("manifest.json"));
    assert!(manifest["files"][OPENAPI].is_string(), "the manifest lists {OPENAPI}");
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["servers"][0]["url"], "https://api.example.org/data");
    let paths = doc["paths"].as_object().unwrap();
    for path in ["/api/v2/", "/api/v2/meta/", "/api/v2/creature/{id}/encounters/"] {
        assert!(paths.contains_key(path), "{path}");
    }
    for segment in manifest["resources"].as_object().unwrap().keys() {
        for path in [format!("/api/v2/{segment}/"), format!("/api/v2/{segment}/{{id}}/")] {
            let schema = &paths[&path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"];
            let pointer = schema.as_str().unwrap_or_else(|| panic!("{path}: no 200 schema")).trim_start_matches('#');
            assert!(doc.pointer(pointer).is_some(), "{path}: {pointer} does not resolve");
        }
    }
    // the berry schema knows what the data holds: `size` is written 1.5, 2.5, ... (a number),
    // `firmness` a reference, every key present in every berry
    let berry = &doc["components"]["schemas"]["Berry"];
    assert_eq!(berry["properties"]["size"]["type"], "number");
    assert_eq!(berry["properties"]["id"]["type"], "integer");
    assert_eq!(berry["properties"]["firmness"]["$ref"], "#/components/schemas/Reference");
    let mut required: Vec<&str> = berry["required"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
    required.sort();
    assert_eq!(required, ["effect", "firmness", "id", "item", "name", "size"]);
    // effect has no names: its id is an integer only, its list entries `{"url"}`
    let effect_id = &doc["paths"]["/api/v2/effect/{id}/"]["get"]["parameters"][0]["$ref"];
    let param = doc.pointer(effect_id.as_str().unwrap().trim_start_matches('#')).unwrap();
    assert_eq!(param["schema"], serde_json::json!({"type": "integer"}));
    // the root lists resources only (issue 48): the bulk-data index is named by meta's
    // `bulk_data` and the root answer's Link header, and has a path of its own
    let schemas = &doc["components"]["schemas"];
    assert!(schemas["Root"]["properties"].get("bulk-data").is_none(), "{}", schemas["Root"]);
    assert!(!schemas["Root"]["required"].as_array().unwrap().contains(&"bulk-data".into()));
    assert_eq!(schemas["Meta"]["properties"]["bulk_data"]["format"], "uri");
    assert!(schemas["Meta"]["required"].as_array().unwrap().contains(&"bulk_data".into()));
    let link = &paths["/api/v2/"]["get"]["responses"]["200"]["headers"]["Link"]["description"];
    assert!(link.as_str().unwrap().contains(r#"</api/v2/bulk-data/>; rel="bulk-data""#), "{link}");
    assert_eq!(paths["/api/v2/bulk-data/"]["get"]["operationId"], "getBulkData");
}

/// Longest a schemathesis run may take before the test fails.
const SCHEMATHESIS_LIMIT: Duration = Duration::from_secs(420);

/// Runs schemathesis against `gen serve` on the tree built from `data`: it generates requests
/// for every operation of the document (ids, names, limits and offsets, valid and invalid) and
/// checks every response against the document. `examples` bounds the cases per operation.
fn schemathesis(venv: &Path, data: &Path, examples: u32) {
    let tmp = TempDir::new("openapi-schemathesis");
    let out = tmp.join("out");
    build(data, &out, &[]).ok();
    let server = Server::start(&out, &[]);
    let url = format!("http://{}", server.addr);
    let openapi = out.join(OPENAPI);
    let report = tmp.join("junit.xml");
    let log = tmp.join("schemathesis.log");
    let examples = examples.to_string();
    let args = [
        "run",
        openapi.to_str().unwrap(),
        "--url",
        &url,
        "--checks",
        "not_a_server_error,response_schema_conformance,status_code_conformance,content_type_conformance",
        "--phases",
        "examples,coverage,fuzzing",
        "--max-examples",
        &examples,
        "--seed",
        "20260101",
        "--generation-database",
        "none",
        "--request-timeout",
        "10",
        "--no-color",
        "--report",
        "junit",
        "--report-junit-path",
        report.to_str().unwrap(),
    ];
    let started = Instant::now();
    // run in the temporary folder: schemathesis and hypothesis keep caches in the working folder
    let mut child = Command::new(venv.join("bin/schemathesis"))
        .args(args)
        .current_dir(tmp.path())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::from(std::fs::File::options().append(true).open(&log).unwrap()))
        .spawn()
        .expect("schemathesis starts");
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > SCHEMATHESIS_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    let command = format!("schemathesis {}", args.join(" "));
    match status {
        Some(status) if status.success() => eprintln!("{command}: passed in {:.0?}\n{output}", started.elapsed()),
        Some(status) => panic!("{command} failed ({status}):\n{output}"),
        None => panic!("{command} took longer than {SCHEMATHESIS_LIMIT:?}:\n{output}"),
    }
    // every operation of the document was exercised
    let doc: Value = read_json(&openapi);
    let junit = std::fs::read_to_string(&report).unwrap();
    for path in doc["paths"].as_object().unwrap().keys() {
        assert!(junit.contains(&format!("\"GET {path}\"")), "schemathesis did not test GET {path}:\n{junit}");
    }
    assert!(!junit.contains("<failure") && !junit.contains("<error"), "{junit}");
}

/// The sample data has every shape: sub-documents, a nameless resource, ids -1 and 0, sparse
/// ids, a list longer than several pages.
#[test]
fn schemathesis_on_sample_data_finds_no_response_that_breaks_the_document() {
    let Some(venv) = venv() else { return };
    let tmp = TempDir::new("openapi-sample-data");
    sample_data(tmp.path());
    schemathesis(venv, tmp.path(), 100);
}

/// The default data: real records of 36 resources.
#[test]
fn schemathesis_on_default_data_finds_no_response_that_breaks_the_document() {
    let Some(venv) = venv() else { return };
    schemathesis(venv, &repo().join("data"), 40);
}
