//! The library's layers point one way only: from the network down to the bytes, as the list in
//! `src/lib.rs` ("Layers") orders them. This test reads the `crate::…` paths of the non-test
//! code of every top-level module and fails when one reaches a module on its own line or above,
//! naming the file and line. The list in `src/lib.rs` is the test's list: a module missing from
//! it (or listed but gone) fails too, so a new module has to be given its place.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const BEGIN: &str = "<!-- layers:begin -->";
const END: &str = "<!-- layers:end -->";

/// Module name → its line in the list (1 is the top).
fn layers(lib_rs: &str) -> BTreeMap<String, usize> {
    let start = lib_rs
        .find(BEGIN)
        .expect("src/lib.rs has the layers begin marker");
    let end = lib_rs
        .find(END)
        .expect("src/lib.rs has the layers end marker");
    let mut out = BTreeMap::new();
    for line in lib_rs[start..end].lines() {
        let Some(text) = line.trim_start().strip_prefix("//!") else {
            continue;
        };
        let text = text.trim_start();
        // "<n>. a, b: what they are" starts a line; continuation lines are indented.
        let Some((n, rest)) = text.split_once(". ") else {
            continue;
        };
        let Ok(n) = n.parse::<usize>() else {
            continue;
        };
        let names = rest.split(':').next().unwrap_or("");
        for name in names.split(',') {
            let name = name.trim();
            if !name.is_empty() {
                assert!(
                    out.insert(name.to_owned(), n).is_none(),
                    "{name} is listed twice"
                );
            }
        }
    }
    out
}

/// The modules `lib_rs` declares.
fn declared(lib_rs: &str) -> BTreeSet<String> {
    lib_rs
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';').trim().to_owned())
        .collect()
}

/// `code` without comments and without its test module (`#[cfg(test)] mod … {`, which by
/// convention closes the file).
fn non_test(code: &str) -> String {
    let mut kept: String = code
        .lines()
        .map(|l| match l.find("//") {
            // A `//` inside a string literal (a URL) is rare in the paths that matter here,
            // and cutting such a line only drops text after it.
            Some(at) => &l[..at],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut search = 0;
    while let Some(at) = kept[search..].find("#[cfg(test)]") {
        let at = search + at;
        let after = kept[at + "#[cfg(test)]".len()..].trim_start();
        if after.starts_with("mod ") && !after.split('\n').next().unwrap_or("").contains(';') {
            kept.truncate(at);
            break;
        }
        search = at + 1;
    }
    kept
}

/// The top-level modules `code` names after `crate::`, with their line numbers; grouped
/// imports (`use crate::{a::X, b}`) count each group member.
fn referenced(code: &str) -> Vec<(String, usize)> {
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    let mut search = 0;
    while let Some(at) = code[search..].find("crate::") {
        let at = search + at;
        search = at + "crate::".len();
        // `spillway_crate::` or `$crate::` are other things.
        if at > 0 {
            let before = code.as_bytes()[at - 1];
            if before.is_ascii_alphanumeric() || before == b'_' || before == b'$' {
                continue;
            }
        }
        let rest = &code[search..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut part = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 0 || (c == ',' && depth == 1) {
                    let name = ident(&part);
                    if !name.is_empty() {
                        out.push((name, line_of(at)));
                    }
                    part.clear();
                    if depth == 0 {
                        break;
                    }
                } else {
                    part.push(c);
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                out.push((name, line_of(at)));
            }
        }
    }
    out
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Files declared as test modules (`#[cfg(test)] mod x;` → `x.rs` beside the declaring file
/// or in its folder).
fn test_only_files(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for f in files {
        let code = std::fs::read_to_string(f).expect("read source");
        let dir = if f
            .file_name()
            .is_some_and(|n| n == "mod.rs" || n == "lib.rs")
        {
            f.parent().expect("parent").to_path_buf()
        } else {
            f.with_extension("")
        };
        let mut lines = code.lines().map(str::trim).peekable();
        while let Some(line) = lines.next() {
            if line == "#[cfg(test)]" {
                if let Some(decl) = lines.peek().and_then(|l| l.strip_prefix("mod ")) {
                    if let Some(name) = decl.strip_suffix(';') {
                        out.insert(dir.join(format!("{name}.rs")));
                        out.insert(dir.join(name).join("mod.rs"));
                    }
                }
            }
        }
    }
    out
}

/// Every reference from a module to one on its own line or above, as `file:line: a -> b`.
fn violations(
    src: &Path,
    layers: &BTreeMap<String, usize>,
    skip: &BTreeSet<String>,
) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let tests = test_only_files(&files);
    let mut out = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(src).expect("under src");
        let top = rel
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .unwrap_or("")
            .trim_end_matches(".rs")
            .to_owned();
        if skip.contains(&top) || tests.contains(f) {
            continue;
        }
        let Some(&mine) = layers.get(&top) else {
            continue;
        };
        let code = non_test(&std::fs::read_to_string(f).expect("read source"));
        for (name, line) in referenced(&code) {
            if name == top {
                continue;
            }
            if let Some(&theirs) = layers.get(&name) {
                if theirs <= mine {
                    out.push(format!(
                        "{}:{line}: {top} (line {mine}) -> {name} (line {theirs})",
                        rel.display()
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn the_library_layers_point_down() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib_rs = std::fs::read_to_string(root.join("src/lib.rs")).expect("read src/lib.rs");
    let layers = layers(&lib_rs);
    let modules = declared(&lib_rs);
    let listed: BTreeSet<String> = layers.keys().cloned().collect();
    assert_eq!(
        listed, modules,
        "every module of src/lib.rs has its line in the layer list, and only those"
    );
    // The binary's own modules (`src/main.rs`'s `mod x;`) are not part of the library.
    let main_rs = std::fs::read_to_string(root.join("src/main.rs")).expect("read src/main.rs");
    let mut skip: BTreeSet<String> = main_rs
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod "))
        .map(|l| l.trim_end_matches(';').to_owned())
        .collect();
    skip.extend(["main".to_owned(), "lib".to_owned()]);
    let found = violations(&root.join("src"), &layers, &skip);
    assert!(
        found.is_empty(),
        "modules reaching a module on their own line or above (src/lib.rs \"Layers\"):\n{}",
        found.join("\n")
    );
}

#[test]
fn an_upward_reference_is_caught_wherever_it_is_written() {
    let dir = tempfile::TempDir::new().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("low")).unwrap();
    std::fs::write(
        src.join("high.rs"),
        "use crate::low::X;\nuse crate::{low, mid::Y};\n",
    )
    .unwrap();
    std::fs::write(
        src.join("low/mod.rs"),
        "//! uses crate::high in a comment only\n\
         use crate::{mid::{a, b}, other};\n\
         fn f() { let _ = crate::high::Z; }\n\
         #[cfg(test)]\nmod tests;\n\
         #[cfg(test)]\nmod inline {\n    use crate::high::T;\n}\n",
    )
    .unwrap();
    std::fs::write(src.join("low/tests.rs"), "use crate::high::Only;\n").unwrap();
    std::fs::write(src.join("mid.rs"), "use crate::mid::Self_;\n").unwrap();
    let lib = "//! <!-- layers:begin -->\n//! 1. high: top\n//! 2. mid, other: middle\n\
               //!    (continued)\n//! 3. low: bottom\n//! <!-- layers:end -->\n";
    let layers = layers(lib);
    assert_eq!(layers.len(), 4, "{layers:?}");
    let found = violations(src, &layers, &BTreeSet::new());
    assert_eq!(
        found,
        vec![
            "low/mod.rs:2: low (line 3) -> mid (line 2)".to_owned(),
            "low/mod.rs:2: low (line 3) -> other (line 2)".to_owned(),
            "low/mod.rs:3: low (line 3) -> high (line 1)".to_owned(),
        ],
        "comments, test modules and test files are not code; grouped imports count"
    );
}
