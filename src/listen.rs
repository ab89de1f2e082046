//! Binding the listening ports (gRPC, Netty, HTTP), with what an upgrade under running jobs
//! needs from them.

use std::net::SocketAddr;

use tokio::net::TcpListener;

use crate::error::{Error, Result};

/// Binds a listener with `SO_REUSEPORT` and the system's full backlog. Reuse lets an upgraded
/// process bind the same ports while the old one still drains (`takeover`): new connections
/// then wait in the new process's backlog instead of being refused, and only one of the two
/// ever serves (the state lock). Without `takeover` the port is first bound plainly, so a
/// port another process listens on is refused as usual rather than silently shared.
pub fn listen(addr: SocketAddr, what: &str, takeover: bool) -> Result<TcpListener> {
    let fail = |e: std::io::Error| Error::Startup(format!("cannot bind {what} port {addr}: {e}"));
    let socket = |reuse: bool| -> std::io::Result<tokio::net::TcpSocket> {
        let s = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()
        } else {
            tokio::net::TcpSocket::new_v6()
        }?;
        s.set_reuseaddr(true)?;
        s.set_reuseport(reuse)?;
        Ok(s)
    };
    let mut addr = addr;
    if !takeover {
        let probe = socket(false).map_err(fail)?;
        probe.bind(addr).map_err(fail)?;
        // Port 0: keep the port the kernel picked.
        addr = probe.local_addr().map_err(fail)?;
        drop(probe);
    }
    let s = socket(true).map_err(fail)?;
    s.bind(addr).map_err(fail)?;
    s.listen(listen_backlog()).map_err(fail)
}

/// The system's largest accept queue (`net.core.somaxconn`), asked of `listen(2)` so a burst of
/// connects is never dropped by a smaller queue of our choosing; 4096 when it cannot be read.
fn listen_backlog() -> u32 {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .filter(|&v| v > 0)
        .unwrap_or(4096)
}

/// The host's first non-loopback IPv4 address by its name, else 127.0.0.1.
pub fn host_ip() -> String {
    let name = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default();
    std::net::ToSocketAddrs::to_socket_addrs(&(name.as_str(), 0))
        .into_iter()
        .flatten()
        .map(|a| a.ip())
        .find(|ip| ip.is_ipv4() && !ip.is_loopback())
        .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))
        .to_string()
}
