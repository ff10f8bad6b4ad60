//! Writes a synthetic tree in the public API's published layout (the `api-data` repository:
//! `api/v2/<segment>/index.json` lists and `api/v2/<segment>/<id>/index.json` records, pretty
//! JSON with sorted keys and root-relative urls), for benchmarks at any size.
//!
//! ```sh
//! cargo run --release --example synth -- --records 100000 --record-kb 4 --out target/synth
//! gen import api-data target/synth --out target/synth-data
//! ```
//!
//! The shape follows the published data: a few small resources (languages, types, version
//! groups), large ones that refer to them and to each other, localized names, record sizes
//! spread over two orders of magnitude around the mean, the `pokemon` records' `encounters`
//! sub-documents (a top-level array, linked by a url without trailing slash), and a `meta`
//! singleton. The same arguments always give the same bytes.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};

struct Args {
    records: usize,
    record_kb: f64,
    out: PathBuf,
}

fn parse_args() -> Args {
    let mut args = Args { records: 10_000, record_kb: 4.0, out: PathBuf::from("target/synth") };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        match flag.as_str() {
            "--records" => args.records = value.parse().unwrap_or_else(|_| usage("--records takes a number")),
            "--record-kb" => args.record_kb = value.parse().unwrap_or_else(|_| usage("--record-kb takes a number")),
            "--out" => args.out = PathBuf::from(value),
            _ => usage(&format!("unknown flag {flag}")),
        }
    }
    args
}

fn usage(message: &str) -> ! {
    eprintln!("error: {message}\nusage: synth [--records N] [--record-kb KB] [--out DIR]");
    std::process::exit(2)
}

/// A small deterministic generator (xorshift64*), so runs are reproducible without a crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// A factor spread log-uniformly over [1/8, 8], mean about 2.4: record sizes vary like the
    /// published ones (a few hundred bytes to over 100 KB).
    fn size_factor(&mut self) -> f64 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        (2f64.ln() * (6.0 * u - 3.0)).exp() / 2.4
    }
}

const LANGUAGES: [&str; 10] = ["ja-hrkt", "roomaji", "ko", "zh-hant", "fr", "de", "es", "it", "en", "ja"];
const SMALL: [(&str, usize); 3] = [("language", 10), ("type", 18), ("version-group", 27)];

fn reference(segment: &str, name: &str, id: usize) -> Value {
    json!({"name": name, "url": format!("/api/v2/{segment}/{id}/")})
}

fn names(label: &str) -> Value {
    LANGUAGES
        .iter()
        .enumerate()
        .map(|(i, lang)| json!({"language": reference("language", lang, i + 1), "name": format!("{label} ({lang}) — ü")}))
        .collect()
}

fn write(path: &Path, value: &Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut bytes = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut serializer = serde_json::Serializer::with_formatter(&mut bytes, formatter);
    serde::Serialize::serialize(value, &mut serializer).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn write_list(root: &Path, segment: &str, entries: &[(usize, String)]) {
    let results: Vec<Value> = entries.iter().map(|(id, name)| reference(segment, name, *id)).collect();
    let list = json!({"count": results.len(), "next": null, "previous": null, "results": results});
    write(&root.join(segment).join("index.json"), &list);
}

fn main() {
    let args = parse_args();
    let root = args.out.join("api/v2");
    let _ = std::fs::remove_dir_all(&args.out);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut index = serde_json::Map::new();

    for (segment, count) in SMALL {
        let mut entries = Vec::new();
        for id in 1..=count {
            let name = if segment == "language" { LANGUAGES[id - 1].to_string() } else { format!("{segment}-{id}") };
            write(
                &root.join(segment).join(id.to_string()).join("index.json"),
                &json!({"id": id, "name": name, "names": names(&name)}),
            );
            entries.push((id, name));
        }
        write_list(&root, segment, &entries);
        index.insert(segment.into(), Value::String(format!("/api/v2/{segment}/")));
    }

    // The large resources share the records: species and moves a fifth each, pokemon the rest.
    let species = (args.records / 5).max(1);
    let moves = (args.records / 5).max(1);
    let pokemon = args.records.saturating_sub(species + moves).max(1);
    let target = args.record_kb * 1024.0;
    let version_group = |rng: &mut Rng| {
        let id = rng.below(27) as usize + 1;
        reference("version-group", &format!("version-group-{id}"), id)
    };

    // pokemon: ids 1.. and, like the published data, a block of alternate forms from 10001
    // (or the next power of ten above the regular ids, for large trees).
    let alternates = pokemon / 10;
    let regular = pokemon - alternates;
    let first_alternate = 10usize.pow(regular.max(1).ilog10() + 1).max(10_000) + 1;
    let ids: Vec<usize> = (1..=regular).chain(first_alternate..first_alternate + alternates).collect();
    let creature = |n: usize| reference("pokemon", &format!("creature-{n}"), ids[n - 1]);

    let mut entries = Vec::new();
    for id in 1..=species {
        let name = format!("species-{id}");
        let mut record = json!({
            "id": id, "name": name, "names": names(&name), "base_happiness": 50, "capture_rate": 45,
            "gender_rate": (id % 9) as i64 - 1, "is_baby": false, "has_gender_differences": id % 3 == 0,
            "evolves_from_species": if id > 1 && id % 3 != 1 { reference("pokemon-species", &format!("species-{}", id - 1), id - 1) } else { Value::Null },
            "varieties": [{"is_default": true, "pokemon": creature((id - 1) % pokemon + 1)}],
        });
        let size = (target * rng.size_factor()) as usize;
        let mut flavor = Vec::new();
        let mut bytes = 1500;
        while bytes < size {
            let text = format!("Entry {} for species {id}: a made-up description of moderate length.", flavor.len());
            bytes += text.len() + 150;
            flavor.push(json!({"flavor_text": text, "language": reference("language", "en", 9), "version": version_group(&mut rng)}));
        }
        record["flavor_text_entries"] = Value::Array(flavor);
        write(&root.join("pokemon-species").join(id.to_string()).join("index.json"), &record);
        entries.push((id, name));
    }
    write_list(&root, "pokemon-species", &entries);

    let mut entries = Vec::new();
    for id in 1..=moves {
        let name = format!("move-{id}");
        let type_id = id % 18 + 1;
        let mut record = json!({
            "id": id, "name": name, "names": names(&name), "accuracy": if id % 7 == 0 { Value::Null } else { json!(100) },
            "power": (id % 150) as u64, "pp": 5 * (id % 8 + 1), "priority": 0,
            "type": reference("type", &format!("type-{type_id}"), type_id), "effect_chance": Value::Null,
        });
        let size = (target * rng.size_factor()) as usize;
        let mut learned = Vec::new();
        let mut bytes = 1200;
        while bytes < size {
            let p = rng.below(pokemon as u64) as usize + 1;
            learned.push(creature(p));
            bytes += 70;
        }
        record["learned_by_pokemon"] = Value::Array(learned);
        write(&root.join("move").join(id.to_string()).join("index.json"), &record);
        entries.push((id, name));
    }
    write_list(&root, "move", &entries);

    // pokemon, in id order, each with an encounters sub-document.
    let mut entries = Vec::new();
    for (n, &id) in ids.iter().enumerate() {
        let name = format!("creature-{}", n + 1);
        let species_id = n % species + 1;
        let mut record = json!({
            "id": id, "name": name, "base_experience": 64, "height": 7, "weight": 69.5, "is_default": id < 10_000,
            "order": n + 1, "species": reference("pokemon-species", &format!("species-{species_id}"), species_id),
            "location_area_encounters": format!("/api/v2/pokemon/{id}/encounters"),
            "sprites": {"front_default": format!("https://raw.githubusercontent.com/PokeAPI/sprites/master/sprites/pokemon/{id}.png"), "back_default": Value::Null},
            "types": [{"slot": 1, "type": reference("type", &format!("type-{}", id % 18 + 1), id % 18 + 1)}],
        });
        let size = (target * rng.size_factor()) as usize;
        let mut learned = Vec::new();
        let mut bytes = 1000;
        while bytes < size {
            let m = rng.below(moves as u64) as usize + 1;
            learned.push(json!({
                "move": reference("move", &format!("move-{m}"), m),
                "version_group_details": [{"level_learned_at": rng.below(100), "version_group": version_group(&mut rng)}],
            }));
            bytes += 260;
        }
        record["moves"] = Value::Array(learned);
        let dir = root.join("pokemon").join(id.to_string());
        write(&dir.join("index.json"), &record);
        let encounters: Vec<Value> = (0..(id % 3))
            .map(|k| json!({"chance": 5 * (k + 1), "version_details": [{"max_chance": 10, "version": version_group(&mut rng)}]}))
            .collect();
        write(&dir.join("encounters/index.json"), &Value::Array(encounters));
        entries.push((id, name));
    }
    write_list(&root, "pokemon", &entries);

    for segment in ["pokemon-species", "move", "pokemon"] {
        index.insert(segment.into(), Value::String(format!("/api/v2/{segment}/")));
    }
    // referred to but not held, like the published subset's neighbours
    index.insert("move-learn-method".into(), Value::String("/api/v2/move-learn-method/".into()));
    write(&root.join("index.json"), &Value::Object(index));
    write(&root.join("meta/index.json"), &json!({"deploy_date": "0", "hash": "synthetic", "tag": null}));
    eprintln!(
        "wrote {} records ({species} species, {moves} moves, {} creatures with encounters) to {}",
        species + moves + ids.len() + 55,
        ids.len(),
        args.out.display()
    );
}
