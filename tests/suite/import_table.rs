//! `gen import table`: the worked example of docs/data.md ("Your own data in ten minutes"), its
//! commands read from the page, run on a CSV file and on a JSON array, then on newer releases
//! (ids kept, new keys given new ids, removed ids never given again), built and served; and bad
//! sources, each named at its line or JSON location with the data folder left byte for byte.

use crate::common;
use crate::serve_support::Server;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

const CURRENCIES_CSV: &str = "code,name,minor_unit
EUR,Euro,2
XOF,CFA franc BCEAO,0
USD,US dollar,2
";

const CURRENCIES_JSON: &str = r#"[
  {"code": "EUR", "name": "Euro", "minor_unit": 2},
  {"code": "XOF", "name": "CFA franc BCEAO", "minor_unit": 0},
  {"code": "USD", "name": "US dollar", "minor_unit": 2}
]
"#;

/// The JSON array's second release: USD gone, GBP new, the rows in another order.
const CURRENCIES_JSON_2: &str = r#"[
  {"code": "XOF", "name": "CFA franc BCEAO", "minor_unit": 0},
  {"code": "GBP", "name": "Pound sterling", "minor_unit": 2},
  {"code": "EUR", "name": "Euro", "minor_unit": 2}
]
"#;

const COUNTRIES_CSV: &str = "alpha_3,name,numeric,currency,population_m,landlocked
FRA,France,250,EUR,68.4,false
CIV,Côte d'Ivoire,384,XOF,31.2,false
USA,United States,840,USD,335.0,false
AND,Andorra,020,EUR,0.08,true
";

/// The second release: USA gone, DEU new, the rows in another order.
const COUNTRIES_CSV_2: &str = "alpha_3,name,numeric,currency,population_m,landlocked
AND,Andorra,020,EUR,0.08,true
DEU,Germany,276,EUR,84.7,false
CIV,Côte d'Ivoire,384,XOF,31.9,false
FRA,France,250,EUR,68.6,false
";

/// The third release: DEU, the highest id given, gone again; ITA new.
const COUNTRIES_CSV_3: &str = "alpha_3,name,numeric,currency,population_m,landlocked
AND,Andorra,020,EUR,0.08,true
CIV,Côte d'Ivoire,384,XOF,31.9,false
FRA,France,250,EUR,68.6,false
ITA,Italy,380,EUR,58.9,false
";

/// docs/data.md's section "Your own data in ten minutes".
fn section() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/data.md");
    let text = std::fs::read_to_string(path).unwrap();
    let start = text.find("## Your own data in ten minutes").expect("docs/data.md has the section");
    let rest = &text[start..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].to_string()
}

/// The lines of the section's fenced blocks of `language` (`sh`, `json`, `text`), block by block.
fn blocks(section: &str, language: &str) -> Vec<String> {
    let fence = format!("```{language}\n");
    section.split(&fence).skip(1).map(|block| block.split("```").next().unwrap().to_string()).collect()
}

/// The section's shell commands starting with `prefix`, each split into words (quotes removed).
fn commands(prefix: &str) -> Vec<Vec<String>> {
    let lines: Vec<String> = blocks(&section(), "sh").iter().flat_map(|b| b.lines().map(str::to_string)).collect();
    let found: Vec<Vec<String>> = lines
        .iter()
        .filter(|line| line.starts_with(prefix))
        .map(|line| line.split_whitespace().map(|w| w.trim_matches('\'').to_string()).collect())
        .collect();
    assert!(!found.is_empty(), "docs/data.md's example has no command starting with {prefix:?}");
    found
}

/// The import command of the example that reads `file`.
fn import_command(file: &str) -> Vec<String> {
    let found = commands("gen import table").into_iter().find(|words| words[3] == file);
    found.unwrap_or_else(|| panic!("docs/data.md's example imports no {file}"))
}

/// Runs `gen ARGS` (the words after `gen`) in the folder `dir`, as the user would.
fn run_in(dir: &Path, words: &[String]) -> Run {
    assert_eq!(words[0], "gen");
    let output = gen_bin().current_dir(dir).args(&words[1..]).output().expect("the gen binary runs");
    Run { args: words[1..].to_vec(), output }
}

/// The `words` of a command with the argument `from` replaced by `to`.
fn with_arg(words: &[String], from: &str, to: &str) -> Vec<String> {
    words.iter().map(|w| if w == from { to.to_string() } else { w.clone() }).collect()
}

/// A data folder's ids file: key → id.
fn ids(dir: &Path, segment: &str) -> BTreeMap<String, i64> {
    let file = read_json(&dir.join(format!("data/.ids/{segment}.json")));
    file["ids"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_i64().unwrap())).collect()
}

/// The section with its white space made single spaces (the docs wrap lines anywhere).
fn flat_section() -> String {
    section().split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Builds the example's data folder with the page's build command and serves it with the page's
/// serve command (on a free port): checks both commands are the page's.
fn build_and_serve(dir: &Path) -> Server {
    let build = commands("gen build");
    assert_eq!(build.len(), 1);
    run_in(dir, &build[0]).ok();
    let serve = commands("gen serve");
    assert_eq!(serve[0], ["gen", "serve", "--dir", "out"]);
    Server::start_preview(&dir.join("out"), &["--quiet"])
}

/// The names of a served list's entries, in order.
fn list_names(server: &Server, target: &str) -> Vec<String> {
    let list = server.get(target).expect(200).json();
    list["results"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn the_worked_example_runs_from_the_docs_on_a_csv_and_keeps_ids_across_releases() {
    let docs = section();
    for file in [CURRENCIES_CSV, COUNTRIES_CSV, CURRENCIES_JSON] {
        assert!(docs.contains(file), "docs/data.md's example does not show this file as the test runs it:\n{file}");
    }
    let tmp = TempDir::new("import-table-csv");
    std::fs::write(tmp.join("currencies.csv"), CURRENCIES_CSV).unwrap();
    std::fs::write(tmp.join("countries.csv"), COUNTRIES_CSV).unwrap();
    let countries = import_command("countries.csv");
    let mut said = run_in(tmp.path(), &import_command("currencies.csv")).ok().stdout();
    said += &run_in(tmp.path(), &countries).ok().stdout();
    let shown = blocks(&docs, "text").concat();
    for line in said.lines() {
        assert!(shown.contains(line), "the import said {line:?}, which docs/data.md does not show");
    }
    // ids are given in row order from 1 (docs/data.md)
    let first = ids(tmp.path(), "country");
    let expected: BTreeMap<String, i64> =
        [("FRA", 1), ("CIV", 2), ("USA", 3), ("AND", 4)].map(|(k, id)| (k.to_string(), id)).into();
    assert_eq!(first, expected);
    {
        let server = build_and_serve(tmp.path());
        let targets: Vec<String> = commands("curl")
            .iter()
            .map(|words| words.last().unwrap().strip_prefix("http://127.0.0.1:8080").unwrap().to_string())
            .collect();
        assert_eq!(list_names(&server, &targets[0]), ["france", "cote-divoire", "united-states", "andorra"]);
        let record = server.get(&targets[1]).expect(200).text();
        let shown: Value = serde_json::from_str(blocks(&docs, "json")[0].trim()).unwrap();
        let origin = format!("http://{}", server.addr);
        let served: Value = serde_json::from_str(&record.replace(&origin, "http://127.0.0.1:8080")).unwrap();
        assert_eq!(served, shown, "docs/data.md shows another record than the server answers");
        let raw: Value = serde_json::from_str(&record).unwrap();
        assert_eq!(raw["currency"]["url"], format!("{origin}/api/v2/currency/2/"));
        // the query matches the label only: the name `cote-divoire` has no apostrophe
        assert_eq!(list_names(&server, &targets[2]), ["cote-divoire"]);
        assert!(list_names(&server, "/api/v2/country/?q=germany").is_empty());
        assert_eq!(list_names(&server, "/api/v2/currency/?q=cfa%20franc"), ["cfa-franc-bceao"]);
    }
    // release 2: same command; kept keys keep their ids, the new key gets a new one
    std::fs::write(tmp.join("countries.csv"), COUNTRIES_CSV_2).unwrap();
    let said = run_in(tmp.path(), &countries).ok().stdout();
    let flat = flat_section();
    assert!(flat.contains(said.lines().nth(1).unwrap()), "docs/data.md does not show release 2's line:\n{said}");
    let second = ids(tmp.path(), "country");
    for (key, id) in &first {
        assert_eq!(second[key], *id, "{key} changed its id");
    }
    assert_eq!(second["DEU"], 5, "a new key's id is above the highest ever given");
    assert!(!tmp.join("data/country/3.json").exists(), "the removed key's record is gone");
    {
        let server = build_and_serve(tmp.path());
        assert_eq!(list_names(&server, "/api/v2/country/"), ["france", "cote-divoire", "andorra", "germany"]);
        assert_eq!(server.get("/api/v2/country/5/").expect(200).json()["alpha_3"], "DEU");
        server.get("/api/v2/country/3/").expect(404);
        assert_eq!(server.get("/api/v2/country/2/").expect(200).json()["population_m"].to_string(), "31.9");
    }
    // release 3: the highest id's key removed; its id is not given again either
    std::fs::write(tmp.join("countries.csv"), COUNTRIES_CSV_3).unwrap();
    run_in(tmp.path(), &countries).ok();
    let third = ids(tmp.path(), "country");
    assert_eq!((third["ITA"], third["DEU"], third["USA"], third.len()), (6, 5, 3, 6));
    let files: Vec<String> = read_tree(&tmp.join("data/country")).into_keys().collect();
    assert_eq!(files, ["1.json", "2.json", "4.json", "6.json"]);
}

#[test]
fn the_worked_example_runs_on_a_json_array_and_keeps_ids_across_releases() {
    let tmp = TempDir::new("import-table-json");
    std::fs::write(tmp.join("currencies.json"), CURRENCIES_JSON).unwrap();
    std::fs::write(tmp.join("countries.csv"), COUNTRIES_CSV).unwrap();
    let currencies = import_command("currencies.json");
    run_in(tmp.path(), &currencies).ok();
    let first = ids(tmp.path(), "currency");
    run_in(tmp.path(), &import_command("countries.csv")).ok();
    {
        let server = build_and_serve(tmp.path());
        assert_eq!(list_names(&server, "/api/v2/currency/"), ["euro", "cfa-franc-bceao", "us-dollar"]);
        let xof = server.get(&format!("/api/v2/currency/{}/", first["XOF"])).expect(200).json();
        assert_eq!((xof["code"].as_str(), xof["minor_unit"].to_string()), (Some("XOF"), "0".to_string()));
        assert_eq!(list_names(&server, "/api/v2/currency/?q=BCEAO"), ["cfa-franc-bceao"]);
    }
    // countries first drop USA (the only one that refers to USD), then currencies drop USD
    std::fs::write(tmp.join("countries.csv"), COUNTRIES_CSV_2).unwrap();
    run_in(tmp.path(), &import_command("countries.csv")).ok();
    std::fs::write(tmp.join("currencies.json"), CURRENCIES_JSON_2).unwrap();
    let said = run_in(tmp.path(), &currencies).ok().stdout();
    assert!(said.contains("USD 3"), "the import names the removed key and its reserved id:\n{said}");
    let second = ids(tmp.path(), "currency");
    for (key, id) in &first {
        assert_eq!(second[key], *id, "{key} changed its id");
    }
    assert_eq!(second["GBP"], first.values().max().unwrap() + 1);
    let server = build_and_serve(tmp.path());
    assert_eq!(list_names(&server, "/api/v2/currency/"), ["euro", "cfa-franc-bceao", "pound-sterling"]);
    server.get(&format!("/api/v2/currency/{}/", first["USD"])).expect(404);
    let civ = server.get("/api/v2/country/cote-divoire/").expect(200).json();
    assert_eq!(civ["currency"]["url"], format!("http://{}/api/v2/currency/{}/", server.addr, second["XOF"]));
}

#[test]
fn the_ndjson_layout_builds_the_same_records_and_replaces_the_folder() {
    let tmp = TempDir::new("import-table-layout");
    std::fs::write(tmp.join("currencies.csv"), CURRENCIES_CSV).unwrap();
    let currencies = import_command("currencies.csv");
    run_in(tmp.path(), &currencies).ok();
    build(&tmp.join("data"), &tmp.join("files"), &["--quiet"]).ok();
    let mut tables = currencies.clone();
    tables.extend(["--layout".to_string(), "ndjson".to_string()]);
    run_in(tmp.path(), &tables).ok();
    assert!(!tmp.join("data/currency").exists(), "the folder layout is replaced");
    let table = std::fs::read_to_string(tmp.join("data/currency.ndjson")).unwrap();
    assert_eq!(table.lines().count(), 3);
    build(&tmp.join("data"), &tmp.join("tables"), &["--quiet"]).ok();
    for id in 1..=3 {
        let rel = format!("api/v2/currency/{id}/index.json");
        assert_eq!(
            std::fs::read(tmp.join("files").join(&rel)).unwrap(),
            std::fs::read(tmp.join("tables").join(&rel)).unwrap()
        );
    }
    run_in(tmp.path(), &currencies).ok();
    assert!(!tmp.join("data/currency.ndjson").exists() && tmp.join("data/currency/1.json").exists());
}

/// A data folder holding the example's first release.
fn example_data(label: &str) -> TempDir {
    let tmp = TempDir::new(label);
    std::fs::write(tmp.join("currencies.csv"), CURRENCIES_CSV).unwrap();
    std::fs::write(tmp.join("countries.csv"), COUNTRIES_CSV).unwrap();
    run_in(tmp.path(), &import_command("currencies.csv")).ok();
    run_in(tmp.path(), &import_command("countries.csv")).ok();
    tmp
}

/// Imports `text` as `file` with the example's countries command (its file swapped, `extra`
/// added): it must fail with `code`, say `expected`, and leave the data folder as it was.
fn refused(tmp: &TempDir, file: &str, text: &str, extra: &[&str], code: i32, expected: &[&str]) {
    std::fs::write(tmp.join(file), text).unwrap();
    let before = read_tree(&tmp.join("data"));
    let mut words = with_arg(&import_command("countries.csv"), "countries.csv", file);
    words.extend(extra.iter().map(|w| w.to_string()));
    let run = run_in(tmp.path(), &words).fails_with(code);
    for want in expected {
        assert!(run.stderr().contains(want), "expected {want:?} in:\n{}", run.stderr());
    }
    assert!(read_tree(&tmp.join("data")) == before, "a failed import changed the data folder: {}", words.join(" "));
    assert!(!tmp.join("data/.gen-import-country").exists());
}

#[test]
fn bad_csv_rows_are_named_at_their_line_and_nothing_is_written() {
    let tmp = example_data("import-table-bad-csv");
    let head = "alpha_3,name,numeric,currency,population_m,landlocked\n";
    let bad_int = format!("{head}FRA,France,250,EUR,68.4,false\nCIV,Côte d'Ivoire,38x,XOF,31.2,false\n");
    let int = ["countries.csv:3: column \"numeric\": \"38x\" is not an integer (--types int)", "1 problem found"];
    refused(&tmp, "countries.csv", &bad_int, &["--types", "numeric=int"], 1, &int);
    let collision =
        format!("{head}FRA,France,250,EUR,68.4,false\nCIV,Côte d'Ivoire,384,XOF,1,false\nFRX,FRANCE,1,EUR,2,false\n");
    let names = ["countries.csv:4: column \"name\": the name \"france\" (from \"FRANCE\") is the name of line 2 too"];
    refused(&tmp, "countries.csv", &collision, &[], 1, &names);
    let unknown = format!("{head}FRA,France,250,EUR,68.4,false\nCIV,Côte d'Ivoire,384,XXX,31.2,false\n");
    let reference = ["countries.csv:3: column \"currency\": no record of currency has \"code\" \"XXX\""];
    refused(&tmp, "countries.csv", &unknown, &[], 1, &reference);
    let ragged = format!("{head}FRA,France,250,EUR,68.4,false\nCIV,Côte d'Ivoire,384,XOF,31.2,false,extra\n");
    refused(&tmp, "countries.csv", &ragged, &[], 1, &["countries.csv:3: -: malformed CSV: this row has 7 fields"]);
    let twice = format!("{head}FRA,France,250,EUR,68.4,false\nFRA,Frankreich,250,EUR,68.4,false\n");
    refused(
        &tmp,
        "countries.csv",
        &twice,
        &[],
        1,
        &["countries.csv:3: column \"alpha_3\": the key \"FRA\" is the key of line 2 too"],
    );
    // a value over several lines (quoted) puts the next row at its own line
    let quoted = format!("{head}FRA,\"France\nmetropolitan\",250,EUR,68.4,false\nCIV,Côte d'Ivoire,384,XXX,1,false\n");
    refused(&tmp, "countries.csv", &quoted, &[], 1, &["countries.csv:4: column \"currency\""]);
    let clash = "id,alpha_3,name,currency\n1,FRA,France,EUR\n";
    refused(&tmp, "countries.csv", clash, &[], 1, &["countries.csv:2: column \"id\": the source has a field \"id\""]);
    let reserved = with_arg(&import_command("countries.csv"), "country", "meta");
    let run = run_in(tmp.path(), &reserved).fails_with(2);
    assert!(run.stderr().contains("--resource \"meta\": a resource cannot be named so"), "{}", run.stderr());
    let mut no_key = import_command("countries.csv");
    no_key.retain(|w| w != "--key" && w != "alpha_3");
    let run = run_in(tmp.path(), &no_key).fails_with(2);
    assert!(run.stderr().contains("pass --id FIELD") && run.stderr().contains("--key FIELD"), "{}", run.stderr());
}

#[test]
fn bad_json_and_ndjson_are_named_at_their_location_and_nothing_is_written() {
    let tmp = example_data("import-table-bad-json");
    let row = |code: &str| format!(r#"{{"alpha_3": "{code}", "name": "N{code}", "currency": "EUR"}}"#);
    let syntax = format!("[{},\n {}\n {}]", row("FRA"), row("CIV"), row("AND"));
    refused(&tmp, "countries.json", &syntax, &[], 1, &["countries.json: line 3, column 2: invalid JSON"]);
    let not_object = format!("[{}, 3]", row("FRA"));
    refused(&tmp, "countries.json", &not_object, &[], 1, &["countries.json: $[1]: a record is a JSON object, not"]);
    let no_key = format!(r#"[{}, {{"name": "x", "currency": "EUR"}}]"#, row("FRA"));
    refused(
        &tmp,
        "countries.json",
        &no_key,
        &[],
        1,
        &["countries.json: $[1].alpha_3: the key field \"alpha_3\" is missing"],
    );
    let ndjson = format!("{}\n{}\n{{\"alpha_3\": \"AND\"\n", row("FRA"), row("CIV"));
    refused(&tmp, "countries.ndjson", &ndjson, &[], 1, &["countries.ndjson:3:", "invalid JSON"]);
    let unknown = format!("{}\n\n{}\n", row("FRA"), row("CIV").replace("EUR", "XXX"));
    refused(&tmp, "countries.ndjson", &unknown, &[], 1, &["countries.ndjson:3: $.currency: no record of currency"]);
    let ids = "[{\"n\": 1, \"name\": \"a\"}, {\"n\": \"x\", \"name\": \"b\"}, {\"n\": 1, \"name\": \"c\"}]";
    std::fs::write(tmp.join("other.json"), ids).unwrap();
    let before = read_tree(&tmp.join("data"));
    let words: Vec<String> = "gen import table other.json --resource other --id n --name name --out data"
        .split(' ')
        .map(str::to_string)
        .collect();
    let run = run_in(tmp.path(), &words).fails_with(1);
    for want in [
        "other.json: $[1].n: the id (--id n) is \"x\": an id is a positive integer",
        "other.json: $[2].n: the id 1 is the id of $[0] too",
    ] {
        assert!(run.stderr().contains(want), "expected {want:?} in:\n{}", run.stderr());
    }
    assert!(read_tree(&tmp.join("data")) == before);
}

#[test]
fn ndjson_with_integer_ids_types_and_a_reference_to_itself() {
    let tmp = TempDir::new("import-table-ndjson");
    let lines = [
        r#"{"n": 10, "code": "EU", "label": "Europe", "zip": 75001, "parent": null, "area": "1e5"}"#,
        r#"{"n": 7, "code": "FR", "label": "Île-de-France", "zip": 75002, "parent": "EU", "area": "12.0"}"#,
    ];
    std::fs::write(tmp.join("regions.txt"), lines.join("\n")).unwrap();
    let args = "import table regions.txt --format ndjson --resource region --id n --name label --label label \
                --label-language fr --types zip=string,area=number --ref parent=region:code --out data";
    let output = gen_bin().current_dir(tmp.path()).args(args.split_whitespace()).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(!tmp.join("data/.ids").exists(), "--id keeps no ids file");
    let record = read_json(&tmp.join("data/region/7.json"));
    assert_eq!(record["id"], 7);
    assert_eq!(record["name"], "ile-de-france");
    assert_eq!(record["names"], serde_json::json!([{"name": "Île-de-France", "language": {"name": "fr"}}]));
    assert_eq!(record["zip"], "75002");
    assert_eq!(record["parent"], serde_json::json!({"name": "europe", "url": "/api/v2/region/10/"}));
    let text = std::fs::read_to_string(tmp.join("data/region/10.json")).unwrap();
    assert!(text.contains("\"area\": 1e5") && text.contains("\"parent\": null"), "{text}");
    build(&tmp.join("data"), &tmp.join("out"), &["--quiet"]).ok();
    let served = read_json(&tmp.join("out/api/v2/region/ile-de-france/index.json"));
    assert_eq!(served["parent"]["url"], "http://127.0.0.1:8080/api/v2/region/10/");
}
