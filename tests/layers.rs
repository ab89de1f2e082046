//! The library's layers point one way only: from the network down to the bytes, as the list in
//! `src/lib.rs` ("Layers") orders them. This test reads the `crate::…` paths of the non-test
//! code of every top-level module and fails when one reaches a module on its own line or above,
//! naming the file and line. The list in `src/lib.rs` is the test's list: a module missing from
//! it (or listed but gone) fails too, so a new module has to be given its place.
//!
//! Inside the modules, files do not go in circles either: every path a file names (`crate::…`,
//! `super::…`, `self::…`, a child module's name, `use` groups expanded) is resolved to the file
//! of the deepest module it reaches, and the graph of files must have no cycle. A `pub use` of a
//! child's item counts as using that child, so a child must import a sibling's item from the
//! sibling, not through the parent.

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

/// A file's module path (`src/a/b.rs` and `src/a/b/mod.rs` are `a::b`; `src/lib.rs` is the
/// root).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// `use` trees expanded to whole paths: `a::{b::c, d}` is `a::b::c` and `a::d`.
fn expand_use(tree: &str, prefix: &str, out: &mut Vec<String>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head = tree[..open].trim().trim_end_matches("::");
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let base = if prefix.is_empty() {
            head.to_owned()
        } else if head.is_empty() {
            prefix.to_owned()
        } else {
            format!("{prefix}::{head}")
        };
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand_use(&inner[start..i], &base, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand_use(&inner[start..], &base, out);
    } else if !tree.is_empty() {
        let path = tree.split(" as ").next().unwrap_or(tree).trim();
        if path == "self" {
            out.push(prefix.to_owned());
        } else if prefix.is_empty() {
            out.push(path.to_owned());
        } else {
            out.push(format!("{prefix}::{path}"));
        }
    }
}

/// The module paths `code` (in module `me`, declaring the child modules `children`) names,
/// each as written: `crate::…`, `super::…`, `self::…` or `<child>::…`.
fn named_paths(code: &str, children: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    // `use` statements first (their groups need expanding), then the paths in the code.
    let mut without_uses = String::new();
    while let Some(at) = rest.find("use ") {
        let starts_item = rest[..at]
            .chars()
            .last()
            .is_none_or(|c| c.is_whitespace() || c == ';' || c == '}' || c == '{');
        let Some(end) = rest[at..].find(';') else {
            break;
        };
        if starts_item {
            without_uses.push_str(&rest[..at]);
            expand_use(&rest[at + 4..at + end], "", &mut out);
        } else {
            without_uses.push_str(&rest[..at + end + 1]);
        }
        rest = &rest[at + end + 1..];
    }
    without_uses.push_str(rest);
    let bytes = without_uses.as_bytes();
    let is_ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if is_ident(bytes[i]) && (i == 0 || !(is_ident(bytes[i - 1]) || bytes[i - 1] == b':')) {
            let start = i;
            while i < bytes.len() && (is_ident(bytes[i]) || bytes[i] == b':') {
                i += 1;
            }
            let path = without_uses[start..i].trim_end_matches(':');
            let first = path.split("::").next().unwrap_or("");
            let anchored = matches!(first, "crate" | "super" | "self") || children.contains(first);
            if anchored && path.contains("::") {
                out.push(path.to_owned());
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The file a path written in module `me` reaches: the deepest module on it that has a file.
fn resolve(
    path: &str,
    me: &[String],
    me_is_dir: bool,
    files: &BTreeMap<Vec<String>, PathBuf>,
) -> Option<PathBuf> {
    let mut parts = path.split("::").map(str::trim).filter(|p| !p.is_empty());
    let mut at: Vec<String> = match parts.next()? {
        "crate" => Vec::new(),
        "self" => me.to_vec(),
        "super" => {
            let mut up = me.to_vec();
            up.pop();
            up
        }
        child => {
            let mut down = me.to_vec();
            down.push(child.to_owned());
            down
        }
    };
    let _ = me_is_dir;
    let mut best = files.get(&at).cloned();
    for part in parts {
        if part == "super" {
            at.pop();
        } else {
            at.push(part.to_owned());
        }
        if let Some(f) = files.get(&at) {
            best = Some(f.clone());
        }
    }
    best
}

/// Groups of files that reach each other (strongly connected, more than one file).
fn file_cycles(src: &Path, skip: &BTreeSet<String>) -> Vec<Vec<String>> {
    let mut all = Vec::new();
    rust_files(src, &mut all);
    all.sort();
    let tests = test_only_files(&all);
    let files: Vec<PathBuf> = all
        .into_iter()
        .filter(|f| !tests.contains(f))
        .filter(|f| {
            let m = module_of(src, f);
            m.first().is_none_or(|top| !skip.contains(top)) && !f.ends_with("main.rs")
        })
        .collect();
    let by_module: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .map(|f| (module_of(src, f), f.clone()))
        .collect();
    let index: BTreeMap<&PathBuf, usize> = files.iter().enumerate().map(|(i, f)| (f, i)).collect();
    let mut edges: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); files.len()];
    for (i, f) in files.iter().enumerate() {
        let code = non_test(&std::fs::read_to_string(f).expect("read source"));
        let children: BTreeSet<String> = code
            .lines()
            .filter_map(|l| {
                let l = l.trim();
                let decl = l
                    .strip_prefix("pub mod ")
                    .or_else(|| l.strip_prefix("pub(crate) mod "))
                    .or_else(|| l.strip_prefix("mod "))?;
                decl.strip_suffix(';').map(str::to_owned)
            })
            .collect();
        let me = module_of(src, f);
        let is_dir = f.ends_with("mod.rs") || f.ends_with("lib.rs");
        for path in named_paths(&code, &children) {
            if let Some(target) = resolve(&path, &me, is_dir, &by_module) {
                if let Some(&j) = index.get(&target) {
                    if j != i {
                        edges[i].insert(j);
                    }
                }
            }
        }
    }
    // Tarjan's strongly connected components.
    struct Tarjan<'a> {
        edges: &'a [BTreeSet<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: usize) {
            self.index[v] = Some(self.next);
            self.low[v] = self.next;
            self.next += 1;
            self.stack.push(v);
            self.on_stack[v] = true;
            for &w in self.edges[v].iter() {
                match self.index[w] {
                    None => {
                        self.visit(w);
                        self.low[v] = self.low[v].min(self.low[w]);
                    }
                    Some(iw) if self.on_stack[w] => self.low[v] = self.low[v].min(iw),
                    Some(_) => {}
                }
            }
            if Some(self.low[v]) == self.index[v] {
                let mut group = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack[w] = false;
                    group.push(w);
                    if w == v {
                        break;
                    }
                }
                if group.len() > 1 {
                    self.out.push(group);
                }
            }
        }
    }
    let mut t = Tarjan {
        edges: &edges,
        index: vec![None; files.len()],
        low: vec![0; files.len()],
        on_stack: vec![false; files.len()],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..files.len() {
        if t.index[v].is_none() {
            t.visit(v);
        }
    }
    t.out
        .into_iter()
        .map(|g| {
            let mut names: Vec<String> = g
                .into_iter()
                .map(|i| {
                    files[i]
                        .strip_prefix(src)
                        .unwrap_or(&files[i])
                        .display()
                        .to_string()
                })
                .collect();
            names.sort();
            names
        })
        .collect()
}

#[test]
fn no_two_files_of_the_library_reach_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let main_rs = std::fs::read_to_string(root.join("src/main.rs")).expect("read src/main.rs");
    let skip: BTreeSet<String> = main_rs
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod "))
        .map(|l| l.trim_end_matches(';').to_owned())
        .collect();
    let cycles = file_cycles(&root.join("src"), &skip);
    assert!(
        cycles.is_empty(),
        "files that reach each other (move what they share into a file of its own):\n{cycles:#?}"
    );
}

#[test]
fn a_file_cycle_is_caught_through_re_exports_and_groups() {
    let dir = tempfile::TempDir::new().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod a;\npub mod b;\n").unwrap();
    // a/mod.rs re-exports its child; the child takes an item of a/mod.rs: a circle.
    std::fs::write(
        src.join("a/mod.rs"),
        "mod child;\npub use child::Thing;\npub struct Shared;\n",
    )
    .unwrap();
    std::fs::write(src.join("a/child.rs"), "use crate::{a::Shared, b};\n").unwrap();
    // b is used, and uses nothing back.
    std::fs::write(src.join("b.rs"), "pub fn f() {}\n").unwrap();
    let cycles = file_cycles(src, &BTreeSet::new());
    assert_eq!(
        cycles,
        vec![vec!["a/child.rs".to_owned(), "a/mod.rs".to_owned()]]
    );
    // Importing from the defining file instead breaks it.
    std::fs::write(src.join("a/shared.rs"), "pub struct Shared;\n").unwrap();
    std::fs::write(
        src.join("a/mod.rs"),
        "mod child;\nmod shared;\npub use child::Thing;\n",
    )
    .unwrap();
    std::fs::write(src.join("a/child.rs"), "use super::shared::Shared;\n").unwrap();
    assert!(file_cycles(src, &BTreeSet::new()).is_empty());
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
