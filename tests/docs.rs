//! The documentation keeps up with the command line: every flag of every subcommand's
//! `--help` is named in README.md or docs/, and every subcommand's help has examples.

mod common;

use common::*;
use std::collections::BTreeSet;

const SUBCOMMANDS: [&[&str]; 6] =
    [&["build"], &["check"], &["serve"], &["config"], &["import", "api-data"], &["publish"]];

/// The long flags a help text lists (`--data <DIR>` → `--data`), but `--help` and `--version`.
fn flags(help: &str) -> BTreeSet<String> {
    help.lines()
        .map(str::trim_start)
        .filter(|line| line.starts_with('-'))
        .flat_map(|line| line.split([' ', ',', '=']).filter(|w| w.starts_with("--")).map(str::to_string))
        .filter(|flag| flag != "--help" && flag != "--version")
        .collect()
}

fn docs() -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut text = std::fs::read_to_string(root.join("README.md")).unwrap();
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            text.push_str(&std::fs::read_to_string(path).unwrap());
        }
    }
    text
}

#[test]
fn every_flag_is_documented_and_every_help_has_examples() {
    let docs = docs();
    let mut seen = 0;
    for args in SUBCOMMANDS {
        let mut all = args.to_vec();
        all.push("--help");
        let help = run(&all).ok().stdout();
        assert!(help.contains("Examples:"), "gen {} --help has no examples:\n{help}", args.join(" "));
        for flag in flags(&help) {
            seen += 1;
            assert!(docs.contains(&flag), "gen {} {flag} is in --help but not in README.md or docs/", args.join(" "));
        }
    }
    assert!(seen >= 15, "only {seen} flags found: is the help parsed right?");
}
