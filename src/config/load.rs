//! Where the start-up config comes from: the file (TOML or a Java `server.conf` /
//! `coordinator.conf`), the Uniffle operator's environment, then Spillway's own variables.

use std::path::{Path, PathBuf};

use super::{
    java, non_empty_env, operator, Config, ConfigError, DEFAULT_CONFIG_FILE, ENV_WORKER_CONFIG_PATH,
};

impl Config {
    /// The config file a start-up reads, with the origin errors name: `path` (`--config`), else
    /// env `WORKER_CONFIG_PATH`, else the Uniffle operator's `server.conf`
    /// ([`operator::default_config_file`]: `$RSS_CONF_DIR`, then the mount if present), else
    /// [`DEFAULT_CONFIG_FILE`] if present; `None`: the built-in defaults.
    pub fn source(
        path: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<(&'static str, PathBuf)> {
        match path {
            Some(path) => Some(("--config", path.to_path_buf())),
            None => non_empty_env(env, ENV_WORKER_CONFIG_PATH)
                .map(|path| (ENV_WORKER_CONFIG_PATH, PathBuf::from(path)))
                .or_else(|| operator::default_config_file(env, &|p| p.exists()))
                .or_else(|| {
                    let file = Path::new(DEFAULT_CONFIG_FILE);
                    file.exists()
                        .then(|| (DEFAULT_CONFIG_FILE, file.to_path_buf()))
                }),
        }
    }

    /// Loads the startup config: called once by `main`.
    ///
    /// The file is [`Config::source`]'s; none: the built-in defaults. Then the Uniffle
    /// operator's env applies ([`operator`]: ports and quorum where the file sets none,
    /// `XMX_SIZE` as the heap a Java file's ratios size the buffers from, `RSS_IP`), then env
    /// `WORKER_IP` (if non-empty) replaces `worker_ip`, and the result is validated. `env` looks
    /// a variable up, so tests pass a map instead of touching the process environment.
    pub fn load(
        path: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let source = Self::source(path, env);
        let heap = operator::heap_size(env)?;
        let mut file_sets = operator::FileSets::default();
        let mut config = match &source {
            Some((origin, path)) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    ConfigError::new(*origin, format!("cannot read {}: {e}", path.display()))
                })?;
                file_sets = operator::FileSets::of(&text, java::is_java_file(path, &text));
                java::parse_config_file(path, &text, heap).map_err(|mut e| {
                    e.reason = format!("{} (in {})", e.reason, path.display());
                    e
                })?
            }
            None => Config::default(),
        };
        config.source_path = source.map(|(_, path)| path);
        // The operator's env first: Spillway's own WORKER_IP then wins over RSS_IP.
        operator::apply_env(&mut config, env, file_sets)?;
        config.apply_env(env);
        config.validate()?;
        Ok(config)
    }
}
