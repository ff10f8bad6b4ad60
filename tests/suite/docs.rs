//! The documentation keeps up with the command line: every flag of every subcommand's
//! `--help` is named in README.md or docs/, and every subcommand's help has examples.

use crate::common;

use common::*;
use std::collections::{BTreeMap, BTreeSet};

const SUBCOMMANDS: [&[&str]; 7] =
    [&["build"], &["check"], &["serve"], &["config"], &["import", "api-data"], &["import", "table"], &["publish"]];

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

/// Every `.rs` file under `src/`, by module path (`build/index/codec` for
/// `src/build/index/codec.rs`; `lib`, the library's root, is `[]`), with its path and its text,
/// whole but for its test items (see [`without_test_items`]).
fn source_files() -> BTreeMap<Vec<String>, (String, String)> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    for entry in walkdir::WalkDir::new(&src) {
        let path = entry.unwrap().into_path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = path.strip_prefix(&src).unwrap().with_extension("");
        let mut module: Vec<String> = rel.iter().map(|part| part.to_string_lossy().into_owned()).collect();
        if module == ["lib"] {
            module.clear(); // the library's root; main.rs, the binary's, is a file like the others
        }
        let code = without_test_items(&std::fs::read_to_string(&path).unwrap());
        files.insert(module, (rel.display().to_string(), code));
    }
    files
}

/// Which chars of Rust source `text` are code: not in a comment, a string (plain, byte or raw)
/// or a char literal. A `'` starts a char literal when it is one char or an escape long
/// (`'{'`, `'\''`, `'\u{7d}'`), and is a lifetime or a label otherwise.
fn code_chars(text: &[char]) -> Vec<bool> {
    let mut code = vec![true; text.len()];
    let at = |i: usize| text.get(i).copied().unwrap_or('\0');
    let word = |i: usize| i > 0 && (text[i - 1].is_alphanumeric() || text[i - 1] == '_');
    let mut i = 0;
    while i < text.len() {
        let start = i;
        i = match (text[i], at(i + 1)) {
            ('/', '/') => (i..text.len()).find(|&j| text[j] == '\n').unwrap_or(text.len()),
            ('/', '*') => {
                let (mut depth, mut j) = (0, i);
                loop {
                    match (at(j), at(j + 1)) {
                        ('\0', _) => break j,
                        ('/', '*') => (depth, j) = (depth + 1, j + 2),
                        ('*', '/') if depth == 1 => break j + 2,
                        ('*', '/') => (depth, j) = (depth - 1, j + 2),
                        _ => j += 1,
                    }
                }
            }
            ('r', '"' | '#') | ('b', 'r')
                if !word(i) && {
                    let open = if text[i] == 'b' { i + 2 } else { i + 1 };
                    let hashes = (open..text.len()).take_while(|&j| text[j] == '#').count();
                    at(open + hashes) == '"'
                } =>
            {
                let open = if text[i] == 'b' { i + 2 } else { i + 1 };
                let hashes = (open..text.len()).take_while(|&j| text[j] == '#').count();
                let body = open + hashes + 1;
                let closes = |j: usize| text[j] == '"' && (1..=hashes).all(|k| at(j + k) == '#');
                (body..text.len()).find(|&j| closes(j)).map_or(text.len(), |j| j + 1 + hashes)
            }
            ('"', _) => {
                let mut j = i + 1;
                while j < text.len() && text[j] != '"' {
                    j += if text[j] == '\\' { 2 } else { 1 };
                }
                j + 1
            }
            ('\'', '\\') => (i + 3..text.len()).find(|&j| text[j] == '\'').map_or(text.len(), |j| j + 1),
            ('\'', _) if at(i + 2) == '\'' => i + 3,
            _ => i + 1,
        }
        .min(text.len());
        if i > start + 1 {
            code[start..i].iter_mut().for_each(|c| *c = false);
        }
    }
    code
}

/// Rust source `text` without its test items, each blanked to empty lines (so that line numbers
/// hold): an item under `#[cfg(test)]` (in code, not in a comment or a string) runs from that
/// attribute to the `}` matching its first `{`, or to its `;` or `,` if that comes first (`mod
/// tests;`, a `use`, a field), or to the `}` of the block around it. Everything else is kept: code
/// after a test module, and between two.
fn without_test_items(text: &str) -> String {
    const ATTRIBUTE: &str = "#[cfg(test)]";
    let chars: Vec<char> = text.chars().collect();
    let code = code_chars(&chars);
    let attribute: Vec<char> = ATTRIBUTE.chars().collect();
    let mut dropped = vec![false; chars.len()];
    let mut i = 0;
    while i < chars.len() {
        if !(code[i] && chars[i..].starts_with(&attribute)) {
            i += 1;
            continue;
        }
        let start = i;
        // the item's header is read to its end or its body's `{`, whose `}` is then matched
        let (mut depth, mut braces) = (0i32, 0i32);
        i += attribute.len();
        while i < chars.len() {
            let (c, arrow) = (chars[i], i > 0 && matches!(chars[i - 1], '-' | '='));
            i += 1;
            match (code[i - 1], c) {
                (false, _) => {}
                (true, '{') => braces += 1,
                (true, '}') if braces > 1 => braces -= 1,
                (true, '}') if braces == 1 => break,
                (true, '}') => {
                    i -= 1; // the end of the block around the item, not the item's
                    break;
                }
                _ if braces > 0 => {}
                (true, '(' | '[' | '<') => depth += 1,
                (true, ')' | ']') => depth -= 1,
                (true, '>') if !arrow => depth -= 1,
                (true, ';' | ',') if depth == 0 => break,
                _ => {}
            }
        }
        dropped[start..i].iter_mut().for_each(|d| *d = true);
    }
    chars.iter().zip(&dropped).filter(|(c, d)| !**d || **c == '\n').map(|(c, _)| c).collect()
}

/// Issue 50: the house rules read a file whole but for its test items. The old reader stopped at
/// a file's first `#[cfg(test)]`, so a function after a test module (or after a test-only method
/// in an `impl`) was never checked.
#[test]
fn the_house_rules_read_whole_files_but_their_test_items() {
    let source = r####"//! A file.
pub fn before() {}
#[cfg(test)]
use std::collections::BTreeMap;
pub struct Held {
    kept: u32,
    #[cfg(test)]
    counted: u32
}
impl Held {
    #[cfg(test)]
    fn held<'a>(&'a self, _: &'a str) -> char { '{' }
    pub fn kept_method(&self) -> u32 { self.kept }
}
#[cfg(test)]
mod vectors;
// a comment naming #[cfg(test)] { is kept
pub const RAW: &str = r#"#[cfg(test)] } "#;
#[cfg(test)]
mod tests {
    use super::*;
    /* a } in a comment, /* nested */ } */
    #[test]
    fn test_one() {
        let (text, c, escaped) = ("}}", '}', '\'');
        assert!(generic::<u8, Vec<u8>>(|| 1).len() < 2, "{text}{c}{escaped}");
    }
    #[cfg(test)]
    fn generic<A, B: From<Vec<A>>>(make: impl Fn() -> A) -> B where A: Copy { vec![make()].into() }
}
pub fn after() {}
#[cfg(test)]
pub(crate) fn test_helper() -> u64 { 7 }
pub fn last() {}
"####;
    let read = without_test_items(source);
    assert_eq!(read.lines().count(), source.lines().count(), "the lines are kept, blanked:\n{read}");
    for kept in [
        "pub fn before() {}",
        "kept: u32,",
        "pub fn kept_method",
        "// a comment naming #[cfg(test)] { is kept",
        r##"pub const RAW: &str = r#"#[cfg(test)] } "#;"##,
        "pub fn after() {}",
        "pub fn last() {}",
    ] {
        assert!(read.lines().any(|line| line.trim().starts_with(kept)), "`{kept}` is kept:\n{read}");
    }
    for dropped in
        ["BTreeMap", "counted", "fn held", "mod vectors", "mod tests", "fn test_one", "fn generic", "test_helper"]
    {
        assert!(!read.contains(dropped), "`{dropped}` is a test item:\n{read}");
    }
    assert_eq!(read.lines().find(|line| line.trim() == "}"), Some("}"), "the struct's `}}` is kept:\n{read}");
    // and each file of src/, so read, is still whole: its code's braces balance
    for (rel, code) in source_files().values() {
        let chars: Vec<char> = code.chars().collect();
        let braces =
            |brace: char| chars.iter().zip(code_chars(&chars)).filter(|(c, code)| **c == brace && *code).count();
        assert_eq!(braces('{'), braces('}'), "src/{rel}.rs, without its test items, has unbalanced braces");
    }
}

/// The files of `src/` that `file` (at `module`) names: `crate::a::b`, `super::x`, and the
/// items of `use crate::{a, b}` and `use super::{x, y}` groups, in code or in doc comments
/// (a doc link is a dependency a reader follows too). A parent naming its own child module is
/// not counted: that is how Rust declares modules.
fn named_files(
    module: &[String],
    code: &str,
    files: &BTreeMap<Vec<String>, (String, String)>,
) -> BTreeSet<Vec<String>> {
    let resolve = |path: Vec<String>| -> Option<Vec<String>> {
        (1..=path.len()).rev().map(|n| path[..n].to_vec()).find(|candidate| files.contains_key(candidate))
    };
    let mut named = BTreeSet::new();
    for (at, _) in code.match_indices("crate::").chain(code.match_indices("super::")) {
        if at > 0 && code[..at].ends_with("super::") {
            continue; // the middle of super::super::
        }
        let mut base: Vec<String> = Vec::new();
        let mut rest = &code[at..];
        if rest.starts_with("super::") {
            let mut up = 0;
            while let Some(r) = rest.strip_prefix("super::") {
                up += 1;
                rest = r;
            }
            base = module[..module.len().saturating_sub(up)].to_vec();
        } else {
            rest = &rest["crate::".len()..];
        }
        let leading = |text: &str| -> Vec<String> {
            let end = text.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(text.len());
            text[..end].split("::").filter(|s| !s.is_empty()).map(str::to_string).collect()
        };
        let paths: Vec<Vec<String>> = match rest.strip_prefix('{') {
            Some(group) => {
                let (mut depth, mut items, mut start) = (0, Vec::new(), 0);
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            items.push(&group[start..i]);
                            break;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            items.push(&group[start..i]);
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
                items.into_iter().map(|item| leading(item.trim())).collect()
            }
            None => vec![leading(rest)],
        };
        for path in paths {
            let mut full = base.clone();
            full.extend(path);
            if let Some(target) = resolve(full) {
                let parent_of_child = target.len() == module.len() + 1 && target.starts_with(module);
                if target != module && !parent_of_child {
                    named.insert(target);
                }
            }
        }
    }
    named
}

/// Issue 28: no import circle between files of `src/`: a type two files share has one home
/// below both (e.g. the serve cache's items in `serve/item.rs`, the error schemas the OpenAPI
/// document quotes in `answers.rs`).
#[test]
fn no_import_circle_between_files_of_src() {
    let files = source_files();
    let graph: BTreeMap<&Vec<String>, BTreeSet<Vec<String>>> =
        files.iter().map(|(module, (_, code))| (module, named_files(module, code, &files))).collect();
    assert!(graph.values().map(BTreeSet::len).sum::<usize>() > 100, "the references are found: {graph:?}");
    // Depth-first from each file: a path back to a file on the current path is a circle.
    fn visit<'g>(
        at: &'g Vec<String>,
        graph: &'g BTreeMap<&Vec<String>, BTreeSet<Vec<String>>>,
        path: &mut Vec<&'g Vec<String>>,
        done: &mut BTreeSet<&'g Vec<String>>,
    ) -> Option<Vec<String>> {
        if let Some(from) = path.iter().position(|p| *p == at) {
            return Some(path[from..].iter().chain([&at]).map(|m| m.join("/")).collect());
        }
        if !done.insert(at) {
            return None;
        }
        path.push(at);
        for next in &graph[at] {
            let Some((next, _)) = graph.get_key_value(next) else { continue };
            if let Some(circle) = visit(next, graph, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        if let Some(circle) = visit(module, &graph, &mut Vec::new(), &mut done) {
            panic!("an import circle between files of src/: {}", circle.join(" -> "));
        }
    }
}

/// Issue 28: every file of `src/` opens with a comment saying what it is, and none holds more
/// than 400 lines of code (non-blank, non-comment, its test items left out: see
/// [`source_files`]) unless its opening comment says why (a table, a template).
#[test]
fn every_file_of_src_says_what_it_is_and_stays_short_or_says_why() {
    let mut long = Vec::new();
    for (rel, code) in source_files().values() {
        assert!(code.starts_with("//!"), "src/{rel}.rs does not open with a //! comment saying what it is");
        let lines = code.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("//")).count();
        let opening: String = code.lines().take_while(|l| l.starts_with("//!")).collect::<Vec<_>>().join("\n");
        if lines > 400 && !opening.contains("lines of code") {
            long.push(format!("src/{rel}.rs has {lines} lines of code"));
        }
    }
    assert!(
        long.is_empty(),
        "split these files, or say at their top why they are long (\"... lines of code: ...\"): {long:#?}"
    );
}

/// Issue 38: every function of `src/` is at most 80 lines long, from its `fn` line to its
/// closing brace (test items left out): a long template or table is split into parts
/// with names that say what each holds.
#[test]
fn every_function_of_src_stays_short() {
    let mut long = Vec::new();
    for (rel, code) in source_files().values() {
        let lines: Vec<&str> = code.lines().collect();
        for (start, line) in lines.iter().enumerate() {
            let Some((indent, name)) = function_start(line) else { continue };
            let closing = format!("{indent}}}");
            let Some(length) = lines[start..].iter().position(|l| *l == closing) else { continue };
            let place = format!("src/{rel}.rs: {name}");
            if length + 1 > 80 {
                long.push(format!("{place} (line {}) is {} lines long", start + 1, length + 1));
            }
        }
    }
    assert!(long.is_empty(), "split these functions into parts of 80 lines or fewer: {long:#?}");
}

/// Every `.js` file under `src/` (the edge handler's rooms, origin.js, the host wrappers, the
/// CloudFront Function), with its path from `src/` and its text.
fn javascript_files() -> BTreeMap<String, String> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    for entry in walkdir::WalkDir::new(&src) {
        let path = entry.unwrap().into_path();
        if path.extension().is_some_and(|e| e == "js") {
            let rel = path.strip_prefix(&src).unwrap().display().to_string();
            files.insert(rel, std::fs::read_to_string(&path).unwrap());
        }
    }
    files
}

/// The lines of code of a JavaScript file, as for Rust: non-blank and not comment, a comment
/// being a line that starts with `//` or lies in a `/* ... */` block (a JSDoc comment).
fn javascript_code_lines(text: &str) -> usize {
    let mut in_block = false;
    let mut count = 0;
    for line in text.lines().map(str::trim) {
        if in_block || line.starts_with("/*") {
            in_block = !line.contains("*/");
        } else if !line.is_empty() && !line.starts_with("//") {
            count += 1;
        }
    }
    count
}

/// Issue 50: the house rules hold for the JavaScript of `src/` as for its Rust: every `.js` file
/// opens with a `//` comment saying what it is and holds at most 400 lines of code (non-blank,
/// non-comment: see [`javascript_code_lines`]). The edge handler is one module printed from
/// several files (src/hosts/edge.rs), each of which is held to the rule.
#[test]
fn every_javascript_file_of_src_says_what_it_is_and_stays_short() {
    let files = javascript_files();
    assert!(files.len() >= 9, "the JavaScript files are found: {:?}", files.keys());
    for (rel, text) in &files {
        assert!(text.starts_with("// "), "src/{rel} does not open with a // comment saying what it is");
        let lines = javascript_code_lines(text);
        assert!(lines <= 400, "src/{rel} has {lines} lines of code, more than 400: split it along its Rust rooms");
    }
}

/// Issue 50: every JavaScript function of `src/` is at most 80 lines long, as a Rust one is. A
/// function is a `function name(` line (with `export` and `async` before it) or an arrow
/// function assigned to a name (`const name = (...) => {`, `const name = async (...) => {`), at
/// any indentation; it runs to the first line after it that is its indentation and `}` (`};` for
/// an arrow). One-line arrows (`const min = (a, b) => ...;`) are one line.
#[test]
fn every_javascript_function_of_src_stays_short() {
    let mut long = Vec::new();
    let mut found = 0;
    for (rel, text) in javascript_files() {
        let lines: Vec<&str> = text.lines().collect();
        for (start, line) in lines.iter().enumerate() {
            let Some((indent, name, arrow)) = javascript_function_start(line) else { continue };
            found += 1;
            let closing = if arrow { format!("{indent}}};") } else { format!("{indent}}}") };
            let Some(length) = lines[start..].iter().position(|l| *l == closing) else {
                long.push(format!("src/{rel}: {name} (line {}) has no closing `{closing}`", start + 1));
                continue;
            };
            if length + 1 > 80 {
                long.push(format!("src/{rel}: {name} (line {}) is {} lines long", start + 1, length + 1));
            }
        }
    }
    assert!(found >= 60, "only {found} JavaScript functions found: is the scan right?");
    assert!(long.is_empty(), "split these functions into parts of 80 lines or fewer: {long:#?}");
}

/// The indentation and name of a JavaScript function whose body opens on `line`, and whether it
/// is an arrow function (see [`every_javascript_function_of_src_stays_short`]); `None` for any
/// other line, and for a one-line arrow.
fn javascript_function_start(line: &str) -> Option<(&str, &str, bool)> {
    let code = line.trim_start();
    let indent = &line[..line.len() - code.len()];
    let name_of = |rest: &'_ str| -> Option<String> {
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$').collect();
        (!name.is_empty()).then_some(name)
    };
    let unqualified = code.trim_start_matches("export ").trim_start_matches("async ");
    if let Some(rest) = unqualified.strip_prefix("function ") {
        let name = name_of(rest)?;
        let at = line.find(&format!("function {name}"))? + "function ".len();
        return line.trim_end().ends_with('{').then_some((indent, &line[at..at + name.len()], false));
    }
    let rest = code.strip_prefix("const ").or_else(|| code.strip_prefix("let "))?;
    let name = name_of(rest)?;
    let value = rest[name.len()..].trim_start().strip_prefix('=')?.trim_start();
    let value = value.strip_prefix("async ").unwrap_or(value);
    let parameter =
        value.split_once(" => {").map(|(p, _)| p).filter(|p| p.chars().all(|c| c.is_alphanumeric() || c == '_'));
    let is_arrow = (value.starts_with('(') && value.contains(") => {")) || parameter.is_some_and(|p| !p.is_empty());
    let at = line.find(&name)?;
    (is_arrow && line.trim_end().ends_with('{')).then_some((indent, &line[at..at + name.len()], true))
}

/// The indentation and name of a function whose body opens on `line` (`fn name(` with its
/// qualifiers); `None` for any other line, and for a signature without a body.
fn function_start(line: &str) -> Option<(&str, &str)> {
    let code = line.trim_start();
    let indent = &line[..line.len() - code.len()];
    let after = code.split_once("fn ").filter(|(before, _)| {
        before.split_whitespace().all(|w| w.starts_with("pub") || ["async", "const", "unsafe"].contains(&w))
    })?;
    let name = after.1.split(|c: char| !(c.is_alphanumeric() || c == '_')).next()?;
    (!name.is_empty() && !line.trim_end().ends_with(';')).then_some((indent, name))
}

/// Issue 38: the library never prints nor ends the process: its messages go through the one
/// sink the binary sets (`say!`, src/message.rs), and exit codes are decided in src/main.rs.
/// Issue 50: nor does it write to stderr itself (`gen serve`'s access log went straight there),
/// nor ask what stderr is (whether to draw progress is the binary's call).
#[test]
fn the_library_never_prints_nor_exits() {
    for (module, (rel, code)) in source_files() {
        if module.first().is_some_and(|m| ["main", "cli", "cmd"].contains(&m.as_str())) {
            continue; // the binary
        }
        for banned in
            ["eprintln!", "eprint!", "println!", "process::exit", "io::stdout()", "io::stderr()", "std::io::stderr"]
        {
            assert!(
                !code.contains(banned),
                "src/{rel}.rs uses {banned}: the library sends messages through say! and output lines through \
                 message::output (src/message.rs), and returns errors; only src/main.rs decides an exit code"
            );
        }
    }
}

/// Issue 48: `cargo install` without `--locked` ignores `Cargo.lock`, pulls newer crates than the
/// project tests, and recompiles everything: every `cargo install` the docs show is `--locked`.
#[test]
fn every_cargo_install_in_the_docs_is_locked() {
    let docs = docs();
    let installs: Vec<&str> = docs.lines().filter(|line| line.contains("cargo install")).collect();
    assert!(!installs.is_empty(), "no `cargo install` found in README.md or docs/: is the scan right?");
    for line in installs {
        for (at, _) in line.match_indices("cargo install") {
            let command = line[at..].split(['`', '#']).next().unwrap_or_default();
            assert!(
                command.split_whitespace().any(|word| word == "--locked"),
                "`{command}` in README.md or docs/ has no --locked: it would ignore Cargo.lock\n{line}"
            );
        }
    }
}

/// The guide: the quick start is exactly two commands from a fresh clone, one that builds the
/// default tree and one that runs every test.
#[test]
fn the_quick_start_is_two_commands_build_and_test() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let section = readme.split("## Quick start").nth(1).expect("README.md has a Quick start section");
    let block = section.split("```sh\n").nth(1).and_then(|rest| rest.split("```").next()).expect("a sh block");
    let commands: Vec<&str> = block.lines().map(|line| line.split('#').next().unwrap().trim()).collect();
    assert_eq!(commands, ["make build", "make test"], "the quick start's commands:\n{block}");
    let makefile = std::fs::read_to_string(root.join("Makefile")).unwrap();
    for target in ["build:", "test:"] {
        assert!(makefile.lines().any(|line| line.starts_with(target)), "the Makefile has no {target} target");
    }
}

/// Issue 35: the README stays a front page (details belong in docs/).
#[test]
fn the_readme_stays_a_front_page_of_at_most_250_lines() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let lines = std::fs::read_to_string(root.join("README.md")).unwrap().lines().count();
    assert!(lines <= 250, "README.md has {lines} lines: move details into docs/ (at most 250)");
}

/// The Rust functions the edge handler and the CloudFront Function name as the counterparts of
/// their own: each row of their header tables (`//   jsFunction  src/file.rs rust_function`; one
/// table in each file of the handler, which are printed as one module), and each
/// `src/file.rs `rust_function`` in their comments. Both sides of a row must exist (the
/// JavaScript function in the file of the row), and every Rust function named must be defined in
/// the file named, outside its test items.
#[test]
fn the_edge_handlers_name_rust_counterparts_that_exist() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let rust: BTreeMap<String, String> =
        source_files().into_values().map(|(rel, code)| (format!("src/{rel}.rs"), code)).collect();
    let defines = |file: &str, name: &str| {
        let source = rust.get(file).map(String::as_str).unwrap_or_default();
        source.contains(&format!("fn {name}(")) || source.contains(&format!("fn {name}<"))
    };
    let handler = ["handler", "route", "list", "paging", "reply"].map(|room| format!("src/hosts/edge/{room}.js"));
    let (mut handler_rows, mut handler_named) = (0, 0);
    for js in handler.iter().map(String::as_str).chain(["src/hosts/edge/cloudfront.js"]) {
        let text = std::fs::read_to_string(root.join(js)).unwrap();
        let rows: Vec<Vec<&str>> = text
            .lines()
            .filter_map(|line| line.strip_prefix("//   "))
            .map(|row| row.split_whitespace().collect::<Vec<_>>())
            .filter(|row| row.len() == 3 && row[1].starts_with("src/") && row[1].ends_with(".rs"))
            .collect();
        assert!(!rows.is_empty(), "{js}: its header table of Rust counterparts has no rows");
        assert!(js.ends_with("handler.js") || rows.len() >= 4, "{js}: its table has {} rows", rows.len());
        for row in &rows {
            let (function, file, rust) = (row[0], row[1], row[2]);
            assert!(text.contains(&format!("function {function}(")), "{js} lists {function}, which it does not define");
            assert!(defines(file, rust), "{js}: {function}'s counterpart {file} `{rust}` is no function of {file}");
        }
        let mut named = 0;
        for (at, _) in text.match_indices("src/") {
            let rest = &text[at..];
            let Some(end) = rest.find(".rs").filter(|&end| !rest[..end].contains(char::is_whitespace)) else {
                continue;
            };
            let after = rest[end + 3..].trim_start_matches(',').trim_start_matches(' ');
            let Some(name) = after.strip_prefix('`').and_then(|a| a.split('`').next()) else { continue };
            if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                named += 1;
                let file = &rest[..end + 3];
                assert!(defines(file, name), "{js} names {file} `{name}`, which is no function of {file}");
            }
        }
        if !js.ends_with("cloudfront.js") {
            handler_rows += rows.len();
            handler_named += named;
        }
    }
    assert!(handler_rows >= 30, "the handler's tables have {handler_rows} rows: is the scan right?");
    assert!(handler_named >= 5, "only {handler_named} references found in the handler: is the scan right?");
}

/// A session the docs show: a fenced block marked `console`, in README.md or docs/. Each line
/// `$ COMMAND` is a command, run by `sh` in a scratch folder that holds a copy of the default
/// data as `data/`, with the `gen` under test first on PATH; the lines after it, up to the next
/// command, are its output (stdout and stderr together), line for line. In an output line, `…`
/// stands for any text of one character or more (a time, a port). A `gen serve` runs until it
/// has printed the lines shown, then is stopped; any other command runs to its end, and prints
/// exactly the lines shown.
struct Session {
    at: String,
    steps: Vec<(String, Vec<String>)>,
}

fn sessions() -> Vec<Session> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<_> = std::fs::read_dir(root.join("docs")).unwrap().map(|e| e.unwrap().path()).collect();
    docs.sort();
    files.extend(docs.into_iter().filter(|path| path.extension().is_some_and(|e| e == "md")));
    let mut sessions = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.strip_prefix(root).unwrap().display().to_string();
        // the session, and the indentation of its fence (a block in a list item is indented)
        let mut current: Option<(Session, usize)> = None;
        for (n, line) in text.lines().enumerate() {
            let indent = line.len() - line.trim_start().len();
            match current.as_mut() {
                None if line.trim() == "```console" => {
                    current = Some((Session { at: format!("{name}:{}", n + 1), steps: Vec::new() }, indent))
                }
                None => {}
                Some(_) if line.trim_start().starts_with("```") => sessions.extend(current.take().map(|(s, _)| s)),
                Some((session, indent)) => match line.get(*indent..).unwrap_or_default().strip_prefix("$ ") {
                    Some(command) => session.steps.push((command.to_string(), Vec::new())),
                    None => match session.steps.last_mut() {
                        Some((_, output)) => output.push(line.get(*indent..).unwrap_or_default().to_string()),
                        None => panic!("{}: output before any `$ ` command", session.at),
                    },
                },
            }
        }
    }
    sessions
}

/// True when `actual` is `expected`, each `…` of it standing for one character or more.
fn sample_matches(expected: &str, actual: &str) -> bool {
    match expected.split_once('…') {
        None => expected == actual,
        Some((head, rest)) => actual.strip_prefix(head).is_some_and(|tail| {
            tail.char_indices()
                .skip(1)
                .map(|(at, _)| at)
                .chain([tail.len()])
                .any(|at| !tail.is_empty() && sample_matches(rest, &tail[at..]))
        }),
    }
}

/// Runs `command` in `dir` as [`Session`] says, and returns its output lines: all of them, or
/// for a `gen serve` the first `wanted`.
fn run_sample(dir: &std::path::Path, command: &str, wanted: usize) -> Vec<String> {
    use std::io::BufRead;
    let gen_dir = std::path::Path::new(env!("CARGO_BIN_EXE_gen")).parent().unwrap();
    let path = format!("{}:{}", gen_dir.display(), std::env::var("PATH").unwrap_or_default());
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("exec 2>&1\nexec {command}"))
        .current_dir(dir)
        .env("PATH", path)
        .env("SOURCE_DATE_EPOCH", TEST_EPOCH)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if lines_tx.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    let serve = command.starts_with("gen serve");
    let mut got = Vec::new();
    // a generous limit, for a loaded machine: a session that hangs fails instead of hanging
    while !(serve && got.len() >= wanted) {
        match lines.recv_timeout(std::time::Duration::from_secs(120)) {
            Ok(line) => got.push(line),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("`{command}` printed only {got:?} in 120 s"),
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    got
}

/// Issue 48: the sample output in the docs drifted from what gen prints (17 resources and
/// 3,016 documents where the default data gives 36 and 2,240). Every session the docs show is
/// run on the default data, each line compared with what the real binary prints.
#[test]
fn the_sessions_the_docs_show_print_what_they_show() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
    let sessions = sessions();
    assert!(sessions.len() >= 3, "only {} console sessions found: is the scan right?", sessions.len());
    for session in sessions {
        let tmp = TempDir::new("docs-session");
        let status = std::process::Command::new("cp").arg("-R").arg(&data).arg(tmp.join("data")).status().unwrap();
        assert!(status.success(), "cannot copy {}", data.display());
        for (command, expected) in &session.steps {
            let got = run_sample(tmp.path(), command, expected.len());
            let same = got.len() == expected.len() && expected.iter().zip(&got).all(|(e, g)| sample_matches(e, g));
            assert!(
                same,
                "{}: `{command}` prints, line for line:\n{}\nbut the docs show:\n{}",
                session.at,
                got.join("\n"),
                expected.join("\n")
            );
        }
    }
}

/// The lines gen prints that a doc may show, at the start of a line: each must be in a
/// `console` session (run above), never in a block no test runs.
#[test]
fn the_docs_show_gen_output_only_in_sessions_the_tests_run() {
    let starts = ["built ", "serving ", "urls in the answers ", "gen serve: ", "http://127.0.0.1:"];
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    files.extend(std::fs::read_dir(root.join("docs")).unwrap().map(|e| e.unwrap().path()));
    for file in files.into_iter().filter(|path| path.extension().is_some_and(|e| e == "md")) {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut block: Option<bool> = None; // inside a fenced block: whether it is a session
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                block = match block {
                    None => Some(line.trim() == "```console"),
                    Some(_) => None,
                };
                continue;
            }
            let shown = line.trim_start();
            let output = starts.iter().any(|start| shown.starts_with(start))
                || [" is up to date: ", " found in the data"].iter().any(|said| shown.contains(said));
            assert!(
                block != Some(false) || !output,
                "{}:{}: gen's output outside a ```console session, which no test runs: {line}",
                file.display(),
                n + 1
            );
        }
    }
}
