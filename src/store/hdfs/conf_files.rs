//! The Hadoop conf directory as the HDFS client reads it (`HADOOP_CONF_DIR`, else
//! `$HADOOP_HOME/etc/hadoop`: `core-site.xml` and `hdfs-site.xml`), read here too so that a file
//! that does not parse stops the server at start-up with the file named, instead of failing
//! every flush later with an XML error that names no file.

use std::path::{Path, PathBuf};

/// The files the client reads, in its order (a later definition of a key wins).
const FILES: [&str; 2] = ["core-site.xml", "hdfs-site.xml"];

/// The directory the client reads its conf files from, and the variable that named it.
pub fn conf_dir() -> Option<(PathBuf, &'static str)> {
    match std::env::var_os("HADOOP_CONF_DIR") {
        Some(d) if !d.is_empty() => Some((PathBuf::from(d), "HADOOP_CONF_DIR")),
        _ => std::env::var_os("HADOOP_HOME")
            .filter(|h| !h.is_empty())
            .map(|h| (Path::new(&h).join("etc/hadoop"), "HADOOP_HOME")),
    }
}

/// Every `<property>` of the conf files in `dir` as (name, value), in file order; a file that
/// is missing is skipped (as the client does), one that cannot be read or parsed is an error
/// naming it, with the parser's line and column.
pub fn read(dir: &Path) -> Result<Vec<(String, String)>, String> {
    let mut items = Vec::new();
    for name in FILES {
        let path = dir.join(name);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("{} cannot be read: {e}", path.display())),
        };
        // Hadoop's own files carry a DOCTYPE-free header, but operators' often have one;
        // the client parses with DTDs allowed, so do we.
        let opts = roxmltree::ParsingOptions {
            allow_dtd: true,
            ..Default::default()
        };
        let doc = roxmltree::Document::parse_with_options(&text, opts)
            .map_err(|e| format!("{} does not parse as XML: {e}", path.display()))?;
        for p in doc.descendants().filter(|n| n.has_tag_name("property")) {
            let field = |tag: &str| {
                p.children()
                    .find(|c| c.has_tag_name(tag))
                    .and_then(|c| c.text())
                    .map(|t| t.trim().to_owned())
            };
            if let (Some(k), Some(v)) = (field("name"), field("value")) {
                items.push((k, v));
            }
        }
    }
    Ok(items)
}

/// The start-up check: the conf directory's files parse. Errors name the variable, the file
/// and where it broke.
pub fn check() -> Result<(), String> {
    let Some((dir, var)) = conf_dir() else {
        return Ok(());
    };
    if !dir.is_dir() {
        tracing::warn!(dir = %dir.display(), var, "the Hadoop conf directory does not exist: HDFS clients use built-in defaults");
        return Ok(());
    }
    read(&dir).map(|_| ()).map_err(|e| {
        format!(
            "{var}={}: {e}. The HDFS client reads this file for every remote path; correct it, \
             or point {var} at a directory whose files parse",
            dir.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_files_and_names_the_one_that_does_not_parse() {
        let dir = tempfile::TempDir::new().unwrap();
        std::fs::write(
            dir.path().join("core-site.xml"),
            "<?xml version=\"1.0\"?>\n<!DOCTYPE configuration>\n<configuration><property><name>fs.defaultFS</name><value>hdfs://nn</value></property></configuration>",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("hdfs-site.xml"),
            "<configuration><property><name>dfs.nameservices</name><value>ns</value></property></configuration>",
        )
        .unwrap();
        let items = read(dir.path()).unwrap();
        assert_eq!(
            items,
            vec![
                ("fs.defaultFS".to_owned(), "hdfs://nn".to_owned()),
                ("dfs.nameservices".to_owned(), "ns".to_owned())
            ]
        );
        std::fs::write(
            dir.path().join("hdfs-site.xml"),
            "<configuration><property><name>x</name></propert></configuration>",
        )
        .unwrap();
        let e = read(dir.path()).unwrap_err();
        assert!(e.contains("hdfs-site.xml does not parse"), "{e}");
        assert!(e.contains("1:"), "with the position: {e}");
    }
}
