//! The client network stall: for `--fault-hold`, every packet to or from one server's
//! client-facing ports (gRPC and Netty, on [`CLIENT_IP`](super::netns::CLIENT_IP)) is
//! dropped, then the drop rules are removed.
//!
//! This kernel has no `sch_netem` (and no `prio` qdisc), so the stall is made of iptables
//! DROP rules in the soak's own namespace instead of a netem delay. A dropped segment is a
//! real stall, not a refusal: the sender's TCP retransmits with a doubling timeout, calls in
//! flight hang, and new connections wait in SYN retries, until the rules go and a retransmit
//! gets through (up to one backed-off timeout after the stall). The rules sit in INPUT, which
//! every loopback packet passes once: dropping in OUTPUT would fail the sender's write with
//! EPERM at once, an error rather than a stall.
//!
//! Only the client address is matched: the servers' heartbeats to the coordinators (on
//! 127.0.0.1, the same ports for the two servers that embed one) and the soak's own probes
//! and metrics scrapes go on, as on a network where one server's client-facing link stalls.
//! The rules are only ever added in the soak's own namespace (the fault is not scheduled
//! otherwise), so the host's firewall is never touched.

use std::net::IpAddr;
use std::time::Duration;

use anyhow::Context;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

/// The iptables rule specs (after `-A`/`-D INPUT`) that drop both directions of `ports`.
fn rules(ip: IpAddr, ports: &[u16]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for port in ports {
        let port = port.to_string();
        for (addr, dir) in [("-d", "--dport"), ("-s", "--sport")] {
            out.push(
                ["-p", "tcp", addr, &ip.to_string(), dir, &port, "-j", "DROP"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
            );
        }
    }
    out
}

async fn iptables(op: &str, spec: &[String]) -> anyhow::Result<()> {
    let out = Command::new("iptables")
        .args(["-w", op, "INPUT"])
        .args(spec)
        .output()
        .await
        .context("running iptables")?;
    anyhow::ensure!(
        out.status.success(),
        "iptables {op} INPUT {}: {}: {}",
        spec.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

/// Checks that iptables works here, so a soak that will stall the network fails at its start
/// rather than at its first stall.
pub async fn probe() -> anyhow::Result<()> {
    let out = Command::new("iptables")
        .args(["-w", "-S", "INPUT"])
        .output()
        .await
        .context("running iptables (needed for the network stall fault; pass --no-netns to run without it)")?;
    anyhow::ensure!(
        out.status.success(),
        "iptables -S INPUT: {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

/// Drops `ports` on `ip` for `hold` (less when `stop` is cancelled), then removes the rules.
/// An error when a rule could not be added or removed; every rule added is removed either way.
pub async fn hold(
    ip: IpAddr,
    ports: &[u16],
    hold: Duration,
    stop: &CancellationToken,
) -> anyhow::Result<()> {
    let specs = rules(ip, ports);
    let mut added = 0;
    let mut result = Ok(());
    for spec in &specs {
        match iptables("-A", spec).await {
            Ok(()) => added += 1,
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    if result.is_ok() {
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = tokio::time::sleep(hold) => {}
        }
    }
    for spec in &specs[..added] {
        if let Err(e) = iptables("-D", spec).await {
            result = result.and(Err(e));
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_directions_of_every_port_on_the_client_address_only() {
        let ip: IpAddr = "127.0.0.2".parse().unwrap();
        let r = rules(ip, &[1000, 2000]);
        let joined: Vec<String> = r.iter().map(|s| s.join(" ")).collect();
        assert_eq!(
            joined,
            [
                "-p tcp -d 127.0.0.2 --dport 1000 -j DROP",
                "-p tcp -s 127.0.0.2 --sport 1000 -j DROP",
                "-p tcp -d 127.0.0.2 --dport 2000 -j DROP",
                "-p tcp -s 127.0.0.2 --sport 2000 -j DROP",
            ]
        );
    }
}
