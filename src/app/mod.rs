//! Per-app state: what each app and shuffle has registered and reported on this server.

pub mod block_ids;
