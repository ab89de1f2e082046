//! The shuffle server's composition root, in phases (as neon's pageserver starts):
//!
//! 1. [`bind`]: every port, and the server id they make;
//! 2. [`build`]: config → components, each built once, nothing served;
//! 3. [`run`]: every task started on the one task tracker;
//! 4. [`running`]: the handle, and the ordered shutdown ([`Running::shutdown`]).
//!
//! [`coordinator_process`] is the other composition root: the coordinator-only process.

mod bind;
mod build;
pub mod coordinator_process;
mod run;
mod running;

pub use running::{Running, ShutdownReport};

use crate::config::Config;
use crate::error::Result;

/// Builds the server from `config` and starts serving.
pub async fn start(config: Config) -> Result<Running> {
    let bound = bind::bind(&config)?;
    let parts = build::build(&config, &bound).await?;
    run::run(config, bound, parts)
}
