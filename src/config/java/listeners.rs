//! The ports and protocols the server listens with: gRPC, Netty, HTTP and its credentials.

use super::mapper::Mapper;
use super::BASIC_CREDENTIALS_KEY;
use crate::config::ConfigError;

impl Mapper {
    pub(super) fn map_listeners(&mut self) -> Result<(), ConfigError> {
        if let Some((e, port)) = self.port("rss.rpc.server.port")? {
            self.config.grpc_port = port;
            self.set_origin("grpc_port", &e);
        }
        if let Some((e, port)) = self.port("rss.jetty.http.port")? {
            self.config.metrics.http_port = port;
            self.set_origin("metrics.http_port", &e);
        }
        if let Some(e) = self.string(BASIC_CREDENTIALS_KEY) {
            self.config.metrics.basic_credentials = Some(crate::config::Secret(e.value.clone()));
            self.set_origin("metrics.basic_credentials", &e);
        }
        let server_type = self.choice("rss.rpc.server.type", &["GRPC", "GRPC_NETTY"])?;
        match self.int("rss.server.netty.port", i64::from(i32::MIN)..=65535)? {
            // 0.9 turns the plane on for any port >= 0, off for a negative one.
            Some((e, port)) => {
                self.config.netty_port = port.max(-1) as i32;
                self.set_origin("netty_port", &e);
            }
            None => {
                if let Some((e, kind)) = server_type {
                    self.config.netty_port = if kind == 0 { -1 } else { 17000 };
                    self.set_origin("netty_port", &e);
                }
            }
        }
        if let Some((e, timeout)) =
            self.positive_duration("rss.client.netty.client.connection.timeout.ms", 1)?
        {
            self.config.limits.idle_timeout = timeout;
            self.set_origin("limits.idle_timeout", &e);
        }
        if let Some((e, size)) = self.positive_size("rss.rpc.message.max.size")? {
            self.config.limits.max_request_size = size;
            self.set_origin("limits.max_request_size", &e);
        }
        Ok(())
    }
}
