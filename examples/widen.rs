//! Widens a `synth` data folder imported as NDJSON (bench/scale.py's `data-1m-ndjson`) into one
//! `--times` as large, written as NDJSON directly: copy k of each record of the large tables
//! (`creature`, `creature-species`, `move`, `creature.encounters`) has its id, its name and every
//! reference to those tables shifted by k times the table's largest id; the small tables
//! (languages, types, version groups) and `gen.json` are copied once. `synth` writes a file per record
//! before the import (3.2 inodes a record): at 10M records more inodes than this disk has.
//!
//! cargo run --release --example widen -- --from target/bench/data-1m-ndjson --times 10 --out <dir>

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;

/// The large tables: file, the name prefix of their records, the url segment.
const TABLES: [(&str, &str, &str); 3] = [
    ("creature", "creature-", "creature"),
    ("creature-species", "species-", "creature-species"),
    ("move", "move-", "move"),
];

fn main() {
    let (mut from, mut times, mut out) = (PathBuf::new(), 10u64, PathBuf::new());
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| usage(&format!("{flag} takes a value")));
        match flag.as_str() {
            "--from" => from = PathBuf::from(value),
            "--times" => times = value.parse().unwrap_or_else(|_| usage("--times takes a number")),
            "--out" => out = PathBuf::from(value),
            _ => usage(&format!("unknown flag {flag}")),
        }
    }
    std::fs::create_dir_all(&out).unwrap_or_else(|e| usage(&format!("cannot make {}: {e}", out.display())));
    // a copy's ids start past the largest id of the table (ids are not 1..=N: synth's creatures
    // go to 1,060,000 for 600,000 records)
    let sizes: Vec<u64> = TABLES.iter().map(|(file, ..)| largest_id(&from.join(format!("{file}.ndjson")))).collect();
    for entry in std::fs::read_dir(&from).unwrap_or_else(|e| usage(&format!("cannot read {}: {e}", from.display()))) {
        let path = entry.expect("a listing").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        let table = name.strip_suffix(".ndjson").map(|t| t.trim_end_matches(".encounters"));
        let own = table.and_then(|t| TABLES.iter().position(|(file, ..)| *file == t));
        let copies = if own.is_some() { times } else { 1 };
        let mut output = BufWriter::with_capacity(1 << 20, File::create(out.join(&name)).expect("an output file"));
        for k in 0..copies {
            let input = BufReader::with_capacity(1 << 20, File::open(&path).expect("an input file"));
            for line in input.split(b'\n') {
                let line = line.expect("a line");
                let shifted = if k == 0 { line } else { shift(&line, k, &sizes, own) };
                output.write_all(&shifted).expect("writing");
                output.write_all(b"\n").expect("writing");
            }
        }
        output.flush().expect("writing");
    }
}

fn usage(message: &str) -> ! {
    eprintln!("error: {message}\nusage: widen --from DIR --times N --out DIR");
    std::process::exit(2)
}

/// The largest number after an `"id":` in the file.
fn largest_id(path: &std::path::Path) -> u64 {
    let input = BufReader::new(File::open(path).unwrap_or_else(|e| usage(&format!("{}: {e}", path.display()))));
    let mut largest = 0;
    for line in input.split(b'\n') {
        let line = line.expect("a line");
        for (at, _) in line.windows(5).enumerate().filter(|(_, w)| *w == b"\"id\":") {
            let digits = line[at + 5..].iter().take_while(|b| b.is_ascii_digit()).count();
            if let Ok(id) = std::str::from_utf8(&line[at + 5..at + 5 + digits]).unwrap_or("").parse::<u64>() {
                largest = largest.max(id);
            }
        }
    }
    largest
}

/// `line` with every id, name and url of a large table shifted by `k` times its largest id; `own` is
/// the table whose record the line is (its `"id":` is shifted by that table's size).
fn shift(line: &[u8], k: u64, sizes: &[u64], own: Option<usize>) -> Vec<u8> {
    let mut anywhere: Vec<(Vec<u8>, usize)> = own.map(|own| (b"\"id\":".to_vec(), own)).into_iter().collect();
    let mut named = Vec::new();
    for (i, (_, prefix, segment)) in TABLES.iter().enumerate() {
        anywhere.push((format!("/api/v2/{segment}/").into_bytes(), i));
        named.push((prefix.as_bytes().to_vec(), i));
    }
    let mut out = Vec::with_capacity(line.len() + 64);
    let mut at = 0;
    'scan: while at < line.len() {
        if matches!(line[at], b'"' | b'/' | b'c' | b's' | b'm') {
            let boundary = at == 0 || !(line[at - 1].is_ascii_alphanumeric() || line[at - 1] == b'-');
            let named = named.iter().filter(|_| boundary);
            for (pattern, table) in anywhere.iter().chain(named) {
                let digits_at = at + pattern.len();
                if line[at..].starts_with(pattern) && line.get(digits_at).is_some_and(u8::is_ascii_digit) {
                    let end = digits_at + line[digits_at..].iter().take_while(|b| b.is_ascii_digit()).count();
                    let number: u64 =
                        std::str::from_utf8(&line[digits_at..end]).expect("digits").parse().expect("a number");
                    out.extend_from_slice(pattern);
                    out.extend_from_slice((number + k * sizes[*table]).to_string().as_bytes());
                    at = end;
                    continue 'scan;
                }
            }
        }
        out.push(line[at]);
        at += 1;
    }
    out
}
