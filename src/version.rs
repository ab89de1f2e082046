//! What this build is, as heartbeats and the coordinator's REST API report it.

/// The crate version reported as `version`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The commit reported as `gitCommitId`: set by `build.rs` when git (or `GIT_COMMIT`) was
/// available at build time.
pub const GIT_COMMIT: &str = match option_env!("SPILLWAY_GIT_COMMIT") {
    Some(commit) => commit,
    None => "unknown",
};
