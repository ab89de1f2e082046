//! The manual holds together: every relative link in README.md and docs/*.md names a file or
//! folder that exists, and every `#anchor` names a heading of the page it points to (GitHub's
//! anchors: lowercase, spaces to `-`, punctuation dropped). Links to the web are not followed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// GitHub's anchor for a heading: lowercase; letters, digits, `-` and `_` kept; spaces become
/// `-`; everything else dropped.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown page's headings (outside code blocks); a repeated heading gets
/// `-1`, `-2`… as on GitHub.
fn anchors(page: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_code = false;
    for line in page.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let base = anchor_of(&line[hashes..]);
            let mut name = base.clone();
            let mut n = 0;
            while out.contains(&name) {
                n += 1;
                name = format!("{base}-{n}");
            }
            out.insert(name);
        }
    }
    out
}

/// The targets of `[text](target)` links outside code blocks and inline code, with their
/// line numbers.
fn links(page: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_code = false;
    for (n, line) in page.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        // Inline code may hold `](` that is no link.
        let text: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = text.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else {
                break;
            };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            out.push((n + 1, target.to_owned()));
            rest = &after[end..];
        }
    }
    out
}

/// Every broken relative link of the Markdown files in `pages`, as `page:line: target (why)`.
fn broken(root: &Path, pages: &[PathBuf]) -> Vec<String> {
    let mut out = Vec::new();
    for page in pages {
        let text = std::fs::read_to_string(page).expect("read page");
        let dir = page.parent().expect("page folder");
        let shown = page
            .strip_prefix(root)
            .unwrap_or(page)
            .display()
            .to_string();
        for (line, target) in links(&text) {
            if target.is_empty()
                || target.contains("://")
                || target.starts_with("mailto:")
                || target.starts_with('<')
            {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                page.clone()
            } else {
                dir.join(file)
            };
            if !path.exists() {
                out.push(format!("{shown}:{line}: {target} (no such file)"));
                continue;
            }
            if let Some(anchor) = anchor {
                if path.extension().is_some_and(|e| e == "md") {
                    let page_text = std::fs::read_to_string(&path).expect("read target");
                    if !anchors(&page_text).contains(anchor) {
                        out.push(format!("{shown}:{line}: {target} (no such heading)"));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn every_relative_link_and_anchor_of_the_manual_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    pages.sort();
    assert!(pages.len() > 5, "{pages:?}");
    let found = broken(root, &pages);
    assert!(found.is_empty(), "broken links:\n{}", found.join("\n"));
}

#[test]
fn a_broken_link_or_anchor_is_caught() {
    let dir = tempfile::TempDir::new().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(
        root.join("docs/a.md"),
        "# Page A\n\n## Chaos soak (`spillway-bench soak`)\n\n\
         [ok](b.md#part-two) [ok](#page-a) [ok](#chaos-soak-spillway-bench-soak) \
         [web](https://example.com/x) `[not](a link)`\n\
         [gone](missing.md) [bad anchor](b.md#nowhere)\n\
         ```\n[in code](nowhere.md)\n```\n",
    )
    .unwrap();
    std::fs::write(root.join("docs/b.md"), "# B\n\n## Part two\n").unwrap();
    let found = broken(root, &[root.join("docs/a.md")]);
    assert_eq!(
        found,
        vec![
            "docs/a.md:6: missing.md (no such file)".to_owned(),
            "docs/a.md:6: b.md#nowhere (no such heading)".to_owned(),
        ]
    );
}
