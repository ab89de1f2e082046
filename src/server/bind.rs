//! Start-up, phase 1: every port is bound before anything else starts, so a taken port or an
//! unreadable keystore stops the server before it touches a data path, and (with `takeover`)
//! clients queue in the new process's backlog while the old one drains. The ports make the
//! server id, which everything after names its files and heartbeats by.

use std::net::{IpAddr, SocketAddr};

use tokio::net::TcpListener;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::http::HttpsListener;
use crate::listen::listen;
use crate::tasks::heartbeat::Identity;

/// The bound ports and who they make this server.
pub(super) struct Bound {
    pub grpc: TcpListener,
    pub grpc_addr: SocketAddr,
    /// `None` when `netty_port = -1`.
    pub netty: Option<(TcpListener, SocketAddr)>,
    pub http: TcpListener,
    pub http_addr: SocketAddr,
    pub https: Option<HttpsListener>,
    /// `<ip>-<grpcPort>[-<nettyPort>]`.
    pub server_id: String,
    /// What the heartbeats report.
    pub identity: Identity,
}

/// Binds gRPC, Netty (unless off), HTTP and HTTPS (when configured).
pub(super) fn bind(config: &Config) -> Result<Bound> {
    let bind: SocketAddr = SocketAddr::new(
        config
            .bind_ip
            .parse::<IpAddr>()
            .map_err(|e| Error::Startup(format!("bind_ip {:?}: {e}", config.bind_ip)))?,
        config.grpc_port,
    );
    let takeover = config.recovery.takeover;
    let listener = listen(bind, "gRPC", takeover)?;
    let grpc_addr = listener
        .local_addr()
        .map_err(|e| Error::Startup(format!("local address of {bind}: {e}")))?;
    let netty_listener = match u16::try_from(config.netty_port) {
        // -1: the plane is off.
        Err(_) => None,
        Ok(port) => {
            let bind = SocketAddr::new(bind.ip(), port);
            let listener = listen(bind, "Netty", takeover)?;
            let addr = listener
                .local_addr()
                .map_err(|e| Error::Startup(format!("local address of {bind}: {e}")))?;
            Some((listener, addr))
        }
    };
    let netty_addr = netty_listener.as_ref().map(|(_, addr)| *addr);
    let ip = config
        .worker_ip
        .clone()
        .unwrap_or_else(crate::listen::host_ip);
    let server_id = match netty_addr {
        Some(netty) => format!("{ip}-{}-{}", grpc_addr.port(), netty.port()),
        None => format!("{ip}-{}", grpc_addr.port()),
    };

    let http_listener = crate::http::bind(
        SocketAddr::new(bind.ip(), config.metrics.http_port),
        takeover,
    )?;
    let http_addr = http_listener
        .local_addr()
        .map_err(|e| Error::Startup(format!("local address of the HTTP port: {e}")))?;
    // Key material before anything else starts, so a bad keystore stops start-up at once.
    let https = crate::http::bind_https(config.metrics.https.as_ref(), bind.ip(), takeover)?;
    let mut transport_tags = vec![crate::tasks::heartbeat::TAG_GRPC.to_owned()];
    if netty_addr.is_some() {
        transport_tags.push(crate::tasks::heartbeat::TAG_GRPC_NETTY.to_owned());
    }
    let identity = Identity {
        server_id: server_id.clone(),
        ip,
        grpc_port: grpc_addr.port(),
        netty_port: netty_addr.map_or(0, |a| a.port()),
        jetty_port: http_addr.port(),
        transport_tags,
        tags: config.tags.clone(),
        start_time_ms: crate::clock::now_ms(),
    };
    Ok(Bound {
        grpc: listener,
        grpc_addr,
        netty: netty_listener,
        http: http_listener,
        http_addr,
        https,
        server_id,
        identity,
    })
}
