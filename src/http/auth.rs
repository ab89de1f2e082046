//! The guard in front of the HTTP endpoints that change the server's state (decommission,
//! runtime reconfiguration) or spend its CPU and memory (profiles). The rest of the port stays
//! open, as Uniffle's Jetty port is, because dashboards and scrapers read it without
//! credentials.
//!
//! Two kinds of credentials, either of which opens the guard when it is configured:
//! - `metrics.admin_token` (or env `SPILLWAY_ADMIN_TOKEN`) as `Authorization: Bearer <token>`;
//! - `metrics.basic_credentials` (the Java server's `rss.http.basic.authorizationCredentials`)
//!   as `Authorization: Basic <credentials>`, compared as written, exactly as Java's
//!   `AuthorizationRequestFilter` compares them (it decodes nothing). A server.conf that sets
//!   them keeps its operators' scripts working unchanged.
//!
//! With either configured, every caller, loopback included, must present one: credentials are
//! the only thing that tells a local operator from another process on a shared host. With none
//! configured the endpoints answer loopback peers only, so a server on `0.0.0.0` is not one
//! unauthenticated POST away from being decommissioned by anyone on the network (Java leaves
//! them open then; we differ on purpose).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus::IntCounterVec;

use crate::config::{Config, ENV_ADMIN_TOKEN};
use crate::metrics::Metrics;

/// Why a request was refused; the value of the counter's `reason` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// Credentials are configured and the request carries none of a configured kind.
    NoToken,
    /// Credentials are configured and the request carries different ones.
    BadToken,
    /// No token is configured and the peer is not on loopback (or unknown).
    NotLoopback,
}

impl Refusal {
    const ALL: [Refusal; 3] = [Refusal::NoToken, Refusal::BadToken, Refusal::NotLoopback];

    fn reason(self) -> &'static str {
        match self {
            Refusal::NoToken => "no_token",
            Refusal::BadToken => "bad_token",
            Refusal::NotLoopback => "not_loopback",
        }
    }

    fn response(self, auth: &AdminAuth) -> Response {
        match self {
            Refusal::NoToken | Refusal::BadToken if auth.token.is_none() => {
                // Basic only: Java's answer, word for word, so its clients' checks still match.
                unauthorized(r#"Basic realm="spillway""#, "Authentication Failed")
            }
            Refusal::NoToken => unauthorized(
                r#"Bearer realm="spillway""#,
                "this endpoint needs the header `Authorization: Bearer <admin token>` \
                 (metrics.admin_token / SPILLWAY_ADMIN_TOKEN)\n",
            ),
            Refusal::BadToken => unauthorized(
                r#"Bearer realm="spillway", error="invalid_token""#,
                "the credentials are neither the admin token (metrics.admin_token / \
                 SPILLWAY_ADMIN_TOKEN) nor the Basic credentials\n",
            ),
            Refusal::NotLoopback => (
                StatusCode::FORBIDDEN,
                format!(
                    "this endpoint answers loopback clients only while no admin token is set: \
                     set metrics.admin_token or {ENV_ADMIN_TOKEN} on the server and send \
                     `Authorization: Bearer <token>`\n"
                ),
            )
                .into_response(),
        }
    }
}

fn unauthorized(challenge: &'static str, body: &'static str) -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, challenge)],
        body,
    )
        .into_response()
}

/// The policy of one server, shared by every protected route.
pub(super) struct AdminAuth {
    /// Kept as bytes: the comparison is over bytes anyway.
    token: Option<Box<[u8]>>,
    /// Java's `rss.http.basic.authorizationCredentials`, as written.
    basic: Option<Box<[u8]>>,
    denied: IntCounterVec,
}

impl AdminAuth {
    /// The policy `config` asks for. Logs the mode once, since the server builds its router
    /// once, so an operator can tell from the start-up log whether remote admin calls can work.
    pub(super) fn new(config: &Config, metrics: &Metrics) -> Self {
        let denied = metrics.admin_denied().clone();
        // Every reason from the start, so a rate() over the family has a baseline of 0.
        for r in Refusal::ALL {
            denied.with_label_values(&[r.reason()]);
        }
        let token = config
            .metrics
            .admin_token
            .as_deref()
            .map(|t| t.as_bytes().into());
        let basic = config
            .metrics
            .basic_credentials
            .as_deref()
            .map(|c| c.as_bytes().into());
        let auth = AdminAuth {
            token,
            basic,
            denied,
        };
        auth.announce(&config.bind_ip);
        auth
    }

    /// `bind_ip` is where the HTTP port listens (it shares the gRPC port's address).
    fn announce(&self, bind_ip: &str) {
        if self.token.is_some() || self.basic.is_some() {
            tracing::info!(
                mode = "credentials",
                bearer = self.token.is_some(),
                basic = self.basic.is_some(),
                "HTTP admin endpoints (decommission, profiles, reconfiguration) require credentials: `Authorization: Bearer <admin token>` or `Authorization: Basic \
                 <rss.http.basic.authorizationCredentials>`"
            );
            return;
        }
        tracing::info!(
            mode = "loopback",
            "HTTP admin endpoints (decommission, profiles, reconfiguration) answer loopback clients only: no admin token is set"
        );
        let private = bind_ip
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.to_canonical().is_loopback());
        if !private {
            tracing::warn!(
                bind_ip,
                "the HTTP port listens beyond loopback and no admin token is set: remote \
                 decommission and profile calls are refused; set {ENV_ADMIN_TOKEN} (or \
                 metrics.admin_token) to allow them with a bearer token"
            );
        }
    }

    /// `None` when the request may pass. `peer` is `None` when the server was not started with
    /// connect info; that fails closed rather than trusting an unknown peer.
    pub(super) fn check(&self, peer: Option<SocketAddr>, headers: &HeaderMap) -> Option<Refusal> {
        if self.token.is_none() && self.basic.is_none() {
            return match peer {
                Some(p) if is_loopback(p.ip()) => None,
                _ => Some(Refusal::NotLoopback),
            };
        }
        let presented = [
            (self.token.as_deref(), credentials(headers, b"bearer")),
            (self.basic.as_deref(), credentials(headers, b"basic")),
        ];
        let mut refusal = Refusal::NoToken;
        for (expected, given) in presented {
            match (expected, given) {
                (Some(expected), Some(given)) if same_token(expected, given) => return None,
                (Some(_), Some(_)) => refusal = Refusal::BadToken,
                _ => {}
            }
        }
        Some(refusal)
    }
}

/// Middleware on the protected routes (see the module doc).
pub(super) async fn require_admin(
    State(auth): State<Arc<AdminAuth>>,
    req: Request,
    next: Next,
) -> Response {
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    let Some(refusal) = auth.check(peer, req.headers()) else {
        return next.run(req).await;
    };
    auth.denied.with_label_values(&[refusal.reason()]).inc();
    // The presented token is never logged: a near-miss may be a real token of another server.
    tracing::warn!(
        peer = %peer.map_or_else(|| "unknown".to_owned(), |p| p.to_string()),
        method = %req.method(),
        path = req.uri().path(),
        reason = refusal.reason(),
        "admin request refused"
    );
    refusal.response(&auth)
}

/// The credentials of an `Authorization: <scheme> <credentials>` header (`scheme` in lower
/// case; matched case-insensitively, as RFC 7235 has it); `None` without the header or with
/// another scheme.
fn credentials<'h>(headers: &'h HeaderMap, scheme: &[u8]) -> Option<&'h [u8]> {
    let value = headers.get(header::AUTHORIZATION)?.as_bytes();
    let split = value.iter().position(|&b| b == b' ')?;
    let (given, rest) = value.split_at(split);
    if !given.eq_ignore_ascii_case(scheme) {
        return None;
    }
    Some(rest.trim_ascii())
}

/// Equality whose running time depends on the expected token's length only, never on how many
/// leading bytes the presented one gets right, so the token cannot be guessed byte by byte from
/// response times.
fn same_token(expected: &[u8], presented: &[u8]) -> bool {
    let mut diff = u8::from(expected.len() != presented.len());
    for (i, &e) in expected.iter().enumerate() {
        let p = presented.get(i).copied().unwrap_or(!e);
        // black_box: keeps the optimiser from ending the loop at the first difference.
        diff = std::hint::black_box(diff | (e ^ p));
    }
    diff == 0
}

/// 127.0.0.0/8, `::1`, and loopback written as an IPv4-mapped IPv6 address (what a dual-stack
/// listener on `::` reports for an IPv4 loopback client).
fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(auth: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(v) = auth {
            h.insert(header::AUTHORIZATION, v.parse().unwrap());
        }
        h
    }

    fn policy(token: Option<&str>) -> AdminAuth {
        with_basic(token, None)
    }

    fn with_basic(token: Option<&str>, basic: Option<&str>) -> AdminAuth {
        AdminAuth {
            token: token.map(|t| t.as_bytes().into()),
            basic: basic.map(|b| b.as_bytes().into()),
            denied: IntCounterVec::new(prometheus::Opts::new("t", "t"), &["reason"]).unwrap(),
        }
    }

    /// Asserts what `auth` decides for each (peer, `Authorization` header, refusal) case.
    fn assert_checks(
        auth: &AdminAuth,
        cases: &[(Option<SocketAddr>, Option<&str>, Option<Refusal>)],
    ) {
        for (peer, header, want) in cases {
            let got = auth.check(*peer, &headers(*header));
            assert_eq!(&got, want, "{peer:?} {header:?}");
        }
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token(b"0123456789abcdef", b"0123456789abcdef"));
        assert!(!same_token(b"0123456789abcdef", b"0123456789abcdeF"));
        assert!(!same_token(b"0123456789abcdef", b"0123456789abcde"));
        assert!(!same_token(b"0123456789abcdef", b"0123456789abcdef0"));
        assert!(!same_token(b"0123456789abcdef", b""));
        // A shorter presented token padded with what would match must still fail.
        assert!(!same_token(b"ab", b"a"));
    }

    #[test]
    fn loopback_forms() {
        for ip in ["127.0.0.1", "127.9.8.7", "::1", "::ffff:127.0.0.1"] {
            assert!(is_loopback(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["10.0.0.1", "0.0.0.0", "::", "::ffff:10.0.0.1", "fe80::1"] {
            assert!(!is_loopback(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn bearer_header_forms() {
        let bearer = |h: &str| credentials(&headers(Some(h)), b"bearer").map(<[u8]>::to_vec);
        assert_eq!(credentials(&headers(None), b"bearer"), None);
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
        assert_eq!(bearer("Bearer abc"), Some(b"abc".to_vec()));
        assert_eq!(bearer("bearer  abc "), Some(b"abc".to_vec()));
        assert_eq!(
            credentials(&headers(Some("Basic dXNlcjpwdw==")), b"basic"),
            Some(&b"dXNlcjpwdw=="[..])
        );
    }

    #[test]
    fn basic_credentials_beside_the_token() {
        let local: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let remote: SocketAddr = "10.1.2.3:1".parse().unwrap();
        let basic = "dXNlcjpzZWNyZXQ=";
        let right: &str = &format!("Basic {basic}");
        // Basic only: loopback needs them too, and the right ones open it from anywhere.
        let java = with_basic(None, Some(basic));
        let cases = [
            (Some(local), None, Some(Refusal::NoToken)),
            (
                Some(local),
                Some("Basic dXNlcjpvdGhlcg=="),
                Some(Refusal::BadToken),
            ),
            (Some(remote), Some(right), None),
            // A bearer header means nothing when no token is configured.
            (
                Some(local),
                Some("Bearer dXNlcjpzZWNyZXQ="),
                Some(Refusal::NoToken),
            ),
        ];
        assert_checks(&java, &cases);
        // Both: either one passes.
        let token = "0123456789abcdef";
        let both = with_basic(Some(token), Some(basic));
        let bearer: &str = &format!("Bearer {token}");
        let cases = [
            (Some(remote), Some(right), None),
            (Some(remote), Some(bearer), None),
            (Some(remote), Some("Basic x"), Some(Refusal::BadToken)),
        ];
        assert_checks(&both, &cases);
    }

    #[test]
    fn decisions() {
        let local: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:1".parse().unwrap();
        let remote: SocketAddr = "10.1.2.3:1".parse().unwrap();
        let open = [
            (Some(local), None, None),
            (Some(mapped), None, None),
            (Some(remote), None, Some(Refusal::NotLoopback)),
            (None, None, Some(Refusal::NotLoopback)),
        ];
        assert_checks(&policy(None), &open);

        let token = "0123456789abcdef";
        let right: &str = &format!("Bearer {token}");
        let closed = [
            (Some(local), None, Some(Refusal::NoToken)),
            (
                Some(local),
                Some("Bearer 0123456789abcdeX"),
                Some(Refusal::BadToken),
            ),
            (Some(local), Some(right), None),
            (Some(remote), Some(right), None),
            (None, Some(right), None),
        ];
        assert_checks(&policy(Some(token)), &closed);
    }
}
