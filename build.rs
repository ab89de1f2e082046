//! Generates the Uniffle gRPC types from `proto/rss.proto` into `OUT_DIR`.
//!
//! `protoc` comes from the `protoc-bin-vendored` crate unless `PROTOC` is already set, so a
//! clean machine needs nothing installed. Block payloads are generated as `bytes::Bytes` so the
//! server can slice them without copying.
//!
//! It also records the commit being built as `SPILLWAY_GIT_COMMIT` (reported in coordinator
//! heartbeats): `GIT_COMMIT` from the environment if set, else `git rev-parse --short HEAD`;
//! without either (a source tarball, no git installed) nothing is set and the server reports
//! "unknown". This never fails the build.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os("PROTOC").is_none() {
        let protoc = protoc_bin_vendored::protoc_bin_path()?;
        // SAFETY-free: build scripts are single-threaded, and this only affects our own process.
        std::env::set_var("PROTOC", protoc);
    }
    println!("cargo:rerun-if-changed=proto/rss.proto");
    git_commit();
    tonic_prost_build::configure()
        .bytes(".")
        .build_client(true)
        .build_server(true)
        .compile_protos(&["proto/rss.proto"], &["proto"])?;
    Ok(())
}

/// Sets `SPILLWAY_GIT_COMMIT` when the commit can be found; silent otherwise.
fn git_commit() {
    println!("cargo:rerun-if-env-changed=GIT_COMMIT");
    if let Some(commit) = std::env::var("GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
    {
        println!("cargo:rustc-env=SPILLWAY_GIT_COMMIT={}", commit.trim());
        return;
    }
    let Some(commit) = git(&["rev-parse", "--short", "HEAD"]) else {
        return;
    };
    println!("cargo:rustc-env=SPILLWAY_GIT_COMMIT={commit}");
    // Rebuild when HEAD moves: watch HEAD, the branch it points to and packed-refs, but only
    // files that exist (a missing path would make cargo rerun this script on every build).
    let mut watch = vec![git(&["rev-parse", "--git-path", "HEAD"])];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch.push(git(&["rev-parse", "--git-path", &branch]));
    }
    watch.push(git(&["rev-parse", "--git-path", "packed-refs"]));
    for path in watch.into_iter().flatten() {
        if std::path::Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}

/// Runs git and returns its trimmed stdout, or `None` on any failure.
fn git(args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}
