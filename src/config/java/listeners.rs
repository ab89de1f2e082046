//! The ports and protocols the server listens with: gRPC, Netty, HTTP and its credentials.

use super::mapper::Mapper;
use super::BASIC_CREDENTIALS_KEY;
use crate::config::{ConfigError, HttpsConfig, Secret};

impl Mapper {
    pub(super) fn map_listeners(&mut self) -> Result<(), ConfigError> {
        self.map_base_listeners()?;
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
        self.map(
            "rss.client.netty.client.connection.timeout.ms",
            Self::positive_millis,
            "limits.idle_timeout",
            |c, v| c.limits.idle_timeout = v,
        )?;
        self.map(
            "rss.rpc.message.max.size",
            Self::positive_size,
            "limits.max_request_size",
            |c, v| c.limits.max_request_size = v,
        )
    }
}

impl Mapper {
    /// What the Java server and coordinator alike read for their listeners (`RssBaseConf`'s
    /// ports; `JettyServer` and `AuthorizationRequestFilter` are common code): the gRPC and
    /// HTTP ports, and for the Jetty port the Basic credentials and HTTPS.
    pub(super) fn map_base_listeners(&mut self) -> Result<(), ConfigError> {
        self.map("rss.rpc.server.port", Self::port, "grpc_port", |c, v| {
            c.grpc_port = v
        })?;
        self.map(
            "rss.jetty.http.port",
            Self::port,
            "metrics.http_port",
            |c, v| c.metrics.http_port = v,
        )?;
        self.map(
            BASIC_CREDENTIALS_KEY,
            Self::text,
            "metrics.basic_credentials",
            |c, v| c.metrics.basic_credentials = Some(Secret(v)),
        )?;
        self.map_https()
    }

    /// Jetty's HTTPS connector: with `rss.jetty.ssl.enable` the port and the keystore path are
    /// required (Java fails start-up on either missing); without it the other keys are warned.
    fn map_https(&mut self) -> Result<(), ConfigError> {
        const ENABLE: &str = "rss.jetty.ssl.enable";
        let enabled = self.boolean(ENABLE)?;
        let port = self.port("rss.jetty.https.port")?;
        let path = self.string("rss.jetty.ssl.keystore.path");
        let password = self.string("rss.jetty.ssl.keystore.password");
        let key_password = self.string("rss.jetty.ssl.keymanager.password");
        let Some((enable, true)) = enabled else {
            let set = port.iter().map(|(e, _)| e);
            for e in set.chain(&path).chain(&password).chain(&key_password) {
                self.ignore(e, "rss.jetty.ssl.enable is not true");
            }
            return Ok(());
        };
        let required =
            |key: &str| ConfigError::new(key, format!("is required with {} = true", enable.key));
        let (port_entry, port) = port.ok_or_else(|| required("rss.jetty.https.port"))?;
        let path = path.ok_or_else(|| required("rss.jetty.ssl.keystore.path"))?;
        self.config.metrics.https = Some(HttpsConfig {
            port,
            cert_path: None,
            key_path: None,
            keystore_path: Some(path.value.clone().into()),
            keystore_password: password.as_ref().map(|e| Secret(e.value.clone())),
            key_password: key_password.as_ref().map(|e| Secret(e.value.clone())),
        });
        self.set_origin("metrics.https.port", &port_entry);
        self.set_origin("metrics.https.keystore_path", &path);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::from_properties;

    #[test]
    fn jetty_ssl_keys_map_to_https_beside_http() {
        let c = from_properties(
            "rss.jetty.http.port 19998\nrss.jetty.ssl.enable true\nrss.jetty.https.port 19443\n\
             rss.jetty.ssl.keystore.path /etc/rss/server.p12\n\
             rss.jetty.ssl.keystore.password s3cret\nrss.jetty.ssl.truststore.password s3cret\n\
             rss.reconfigure.interval.sec 30\n",
            None,
        )
        .unwrap();
        assert_eq!(c.config.metrics.http_port, 19998);
        let https = c.config.metrics.https.as_ref().unwrap();
        assert_eq!(https.port, 19443);
        assert_eq!(
            https.keystore_path.as_deref(),
            Some(std::path::Path::new("/etc/rss/server.p12"))
        );
        assert_eq!(https.keystore_password.as_deref(), Some("s3cret"));
        assert_eq!(https.key_password, None);
        assert_eq!(c.config.reconfigure_interval, Duration::from_secs(30));
        // The trust store is never consulted: warned with its reason.
        assert!(
            c.ignored
                .iter()
                .any(|i| i.starts_with("rss.jetty.ssl.truststore.password (")),
            "{:?}",
            c.ignored
        );
    }

    #[test]
    fn ssl_keys_without_enable_are_warned_and_enable_needs_port_and_keystore() {
        let c = from_properties(
            "rss.jetty.https.port 19443\nrss.jetty.ssl.keystore.path /k.p12\n",
            None,
        )
        .unwrap();
        assert_eq!(c.config.metrics.https, None);
        assert_eq!(
            c.ignored,
            [
                "rss.jetty.https.port (rss.jetty.ssl.enable is not true)",
                "rss.jetty.ssl.keystore.path (rss.jetty.ssl.enable is not true)"
            ]
        );
        let e = from_properties(
            "rss.jetty.ssl.enable true\nrss.jetty.ssl.keystore.path /k.p12\n",
            None,
        )
        .unwrap_err();
        assert_eq!(e.key, "rss.jetty.https.port");
        let e = from_properties("rss.jetty.ssl.enable TRUE\nrss.jetty.https.port 1\n", None)
            .unwrap_err();
        assert_eq!(e.key, "rss.jetty.ssl.keystore.path");
        // A port clash is reported under the Java key that set it.
        let e = from_properties(
            "rss.jetty.ssl.enable true\nrss.jetty.https.port 19998\n\
             rss.jetty.ssl.keystore.path /k.p12\n",
            None,
        )
        .unwrap_err();
        assert_eq!(e.key, "rss.jetty.https.port", "{e}");
        let e = from_properties("rss.reconfigure.interval.sec 0\n", None).unwrap_err();
        assert_eq!(e.key, "rss.reconfigure.interval.sec");
    }
}
