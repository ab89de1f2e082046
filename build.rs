//! Generates the Uniffle gRPC types from `proto/rss.proto` into `OUT_DIR`.
//!
//! `protoc` comes from the `protoc-bin-vendored` crate unless `PROTOC` is already set, so a
//! clean machine needs nothing installed. Block payloads are generated as `bytes::Bytes` so the
//! server can slice them without copying.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os("PROTOC").is_none() {
        let protoc = protoc_bin_vendored::protoc_bin_path()?;
        // SAFETY-free: build scripts are single-threaded, and this only affects our own process.
        std::env::set_var("PROTOC", protoc);
    }
    println!("cargo:rerun-if-changed=proto/rss.proto");
    tonic_prost_build::configure()
        .bytes(".")
        .build_client(true)
        .build_server(true)
        .compile_protos(&["proto/rss.proto"], &["proto"])?;
    Ok(())
}
