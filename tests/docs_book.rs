//! The manual builds as a book operators can browse offline: `mdbook build docs` (mdBook from
//! `tests/docs/install.sh`) turns every page of `docs/SUMMARY.md` into an HTML page with its
//! headings, and every page of docs/ is in the summary. The test fails, never skips, when
//! mdBook is missing.

use std::path::Path;
use std::process::Command;

#[test]
fn the_manual_builds_as_a_book_with_every_page() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mdbook = root.join("tests/docs/target/bin/mdbook");
    assert!(
        mdbook.exists(),
        "no mdBook at {} (run `bash tests/docs/install.sh`)",
        mdbook.display()
    );
    let summary = std::fs::read_to_string(root.join("docs/SUMMARY.md")).expect("docs/SUMMARY.md");
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let path = entry.expect("entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".md") && name != "SUMMARY.md" {
            assert!(
                summary.contains(&format!("({name})")),
                "docs/{name} is not in docs/SUMMARY.md, so the book leaves it out"
            );
        }
    }
    let out = tempfile::TempDir::new().unwrap();
    let run = Command::new(&mdbook)
        .arg("build")
        .arg(root.join("docs"))
        .arg("--dest-dir")
        .arg(out.path())
        .output()
        .expect("run mdbook");
    assert!(
        run.status.success(),
        "mdbook build failed:\n{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    for (page, heading) in [
        ("operating.html", "Operating"),
        ("object-storage.html", "object storage"),
        ("compatibility.html", "java-keys:begin"),
        ("reliability.html", "Chaos soak"),
    ] {
        let html = std::fs::read_to_string(out.path().join(page))
            .unwrap_or_else(|e| panic!("{page} not built: {e}"));
        assert!(html.contains(heading), "{page} lacks {heading:?}");
    }
    assert!(out.path().join("index.html").exists(), "no index page");
}
