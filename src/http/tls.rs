//! HTTPS on the HTTP side port's twin, as Java's Jetty does it: with `rss.jetty.ssl.enable`
//! Jetty adds a second connector on `rss.jetty.https.port` that serves the same resources, and
//! the plain HTTP connector stays (`JettyServer.addHttpsConnector`). Spillway does the same with
//! `[metrics.https]`: one router, two listeners.
//!
//! The key material is read once at start-up; a file that cannot be used stops start-up with
//! the key to fix named:
//! - PEM: `cert_path` (the chain, leaf first) and `key_path` (PKCS#8, PKCS#1 or SEC1), or one
//!   `keystore_path` file holding both;
//! - PKCS#12 (`.p12`/`.pfx`, what `keytool` writes by default since JDK 9) at `keystore_path`,
//!   opened with `keystore_password`;
//! - JKS (the JDK 8 default, magic `FE ED FE ED`) has no open implementation worth trusting
//!   with a server key, so it is refused with the `keytool` command that converts it.
//!
//! Handshakes run on their own tasks, bounded in number and time, so a client that opens a
//! connection and never speaks cannot hold up the others; only finished handshakes reach the
//! router (through [`TlsListener`], which axum serves like a TCP listener).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::config::HttpsConfig;

/// A handshake not finished within this is dropped (Jetty's default idle timeout bounds it
/// there).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handshakes in progress at once; beyond it a new connection is closed at once.
const MAX_HANDSHAKES: usize = 256;

/// The magic number a JKS keystore starts with.
const JKS_MAGIC: [u8; 4] = [0xFE, 0xED, 0xFE, 0xED];

/// A certificate chain and its key, as rustls takes them.
struct KeyMaterial {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

/// The rustls server config `https` describes; the error names the config key at fault.
pub fn server_config(https: &HttpsConfig) -> Result<Arc<rustls::ServerConfig>, String> {
    let material = match (&https.keystore_path, &https.cert_path, &https.key_path) {
        (Some(path), None, None) => load_keystore(
            path,
            https.keystore_password.as_deref().unwrap_or(""),
            https.key_password.as_deref(),
        )
        .map_err(|e| format!("metrics.https.keystore_path {}: {e}", path.display()))?,
        (None, Some(cert), Some(key)) => KeyMaterial {
            chain: pem_chain(cert)
                .map_err(|e| format!("metrics.https.cert_path {}: {e}", cert.display()))?,
            key: PrivateKeyDer::from_pem_file(key)
                .map_err(|e| format!("metrics.https.key_path {}: {e}", key.display()))?,
        },
        _ => {
            return Err("metrics.https: set either keystore_path, or cert_path and key_path".into())
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("metrics.https: {e}"))?
        .with_no_client_auth()
        .with_single_cert(material.chain, material.key)
        .map_err(|e| format!("metrics.https: the certificate and key do not fit together: {e}"))?;
    // The router speaks HTTP/1.1 only, as Jetty's SSL connector is set up.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

fn pem_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let chain = CertificateDer::pem_file_iter(path)
        .map_err(|e| e.to_string())?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    if chain.is_empty() {
        return Err("no CERTIFICATE block".into());
    }
    Ok(chain)
}

/// Reads the file Java's `rss.jetty.ssl.keystore.path` names: PKCS#12, or PEM with the chain
/// and the key in one file; JKS is refused with the conversion command.
fn load_keystore(
    path: &Path,
    password: &str,
    key_password: Option<&str>,
) -> Result<KeyMaterial, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    if bytes.starts_with(&JKS_MAGIC) {
        let shown = path.display();
        return Err(format!(
            "this is a JKS keystore, which Spillway does not read; convert it to PKCS#12 \
             (keeping the same password) with\n  keytool -importkeystore -srcstoretype JKS \
             -srckeystore {shown} -deststoretype PKCS12 -destkeystore {shown}.p12\nand point \
             the keystore path at {shown}.p12"
        ));
    }
    if bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        let chain = CertificateDer::pem_slice_iter(&bytes)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        if chain.is_empty() {
            return Err("a PEM keystore needs the certificate chain beside the key".into());
        }
        let key = PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| e.to_string())?;
        return Ok(KeyMaterial { chain, key });
    }
    if key_password.is_some_and(|k| k != password) {
        // keytool itself refuses different store and key passwords for PKCS12 stores.
        return Err(
            "a PKCS#12 keystore has one password: the key password must equal the keystore \
             password (or be unset)"
                .into(),
        );
    }
    let store = p12_keystore::KeyStore::from_pkcs12(
        &bytes,
        password,
        p12_keystore::Pkcs12ImportPolicy::Strict,
    )
    .map_err(|e| format!("not a PKCS#12 keystore this password opens ({e})"))?;
    let (alias, entry) = store
        .private_key_chain()
        .ok_or("the PKCS#12 keystore holds no private key with its certificate")?;
    tracing::info!(alias, "HTTPS key loaded from the PKCS#12 keystore");
    let chain = entry
        .certs()
        .iter()
        .map(|c| CertificateDer::from(c.as_der().to_vec()))
        .collect();
    let key = PrivateKeyDer::try_from(entry.key().as_der().to_vec())
        .map_err(|e| format!("the keystore's private key: {e}"))?;
    Ok(KeyMaterial { chain, key })
}

/// A listener that hands axum connections whose TLS handshake has finished.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Starts accepting on `listener`; handshakes stop with `stop`.
    pub fn new(
        listener: TcpListener,
        config: Arc<rustls::ServerConfig>,
        stop: CancellationToken,
    ) -> std::io::Result<TlsListener> {
        let local = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(MAX_HANDSHAKES);
        tokio::spawn(accept_loop(listener, TlsAcceptor::from(config), tx, stop));
        Ok(TlsListener { ready, local })
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
    stop: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        let (tcp, peer) = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "HTTPS accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            tracing::debug!(%peer, "too many TLS handshakes in progress; connection closed");
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => {
                    let _ = ready.send((tls, peer)).await;
                }
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        });
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The accept loop stopped (shutdown): nothing more will come, and axum's graceful
            // shutdown ends the serve loop.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
