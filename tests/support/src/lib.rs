//! Launchers of the real services Spillway's tests run against, each on 127.0.0.1 and tied to
//! the test process's life: a MiniDFSCluster ([`minicluster`]), moto ([`s3server`]) and
//! S3Proxy, which checks signatures ([`s3proxy`]). Each installs what it needs through the
//! project's own scripts under `tests/` and panics when it cannot start: a test that needs
//! one fails, it never skips.

use std::path::PathBuf;

pub mod minicluster;
pub mod s3proxy;
pub mod s3server;

/// The repository's root (the server package), where `tests/hdfs` and `tests/s3` live.
pub fn repo_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}
