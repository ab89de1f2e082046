//! HTTPS on the metrics port's twin (`[metrics.https]`, Java's `rss.jetty.ssl.*`): served beside
//! HTTP from a PEM pair or a PKCS#12 keystore made by `openssl`, with the admin guard still
//! seeing the peer; a JKS keystore and a wrong password stop start-up with the key named.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use spillway::config::{HttpsConfig, Secret};
use spillway::server;
use tempfile::TempDir;

/// A self-signed certificate for `localhost`: (cert PEM path, key PEM path, cert PEM).
fn self_signed(dir: &Path) -> (PathBuf, PathBuf, String) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert_pem = ck.cert.pem();
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, &cert_pem).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    (cert, key, cert_pem)
}

fn https(port: u16) -> HttpsConfig {
    HttpsConfig {
        port,
        cert_path: None,
        key_path: None,
        keystore_path: None,
        keystore_password: None,
        key_password: None,
    }
}

/// A client that trusts only `cert_pem` and sends `localhost` to `addr`.
fn client(cert_pem: &str, addr: std::net::SocketAddr) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(cert_pem.as_bytes()).unwrap())
        .resolve("localhost", addr)
        .build()
        .unwrap()
}

async fn get_metrics(client: &reqwest::Client, port: u16) -> serde_json::Value {
    let r = client
        .get(format!("https://localhost:{port}/metrics/server"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    serde_json::from_str(&r.text().await.unwrap()).unwrap()
}

#[tokio::test]
async fn pem_certificate_serves_the_same_endpoints_over_https_beside_http() {
    let dir = TempDir::new().unwrap();
    let (cert, key, cert_pem) = self_signed(dir.path());
    let s = common::start(1, |c| {
        let mut h = https(0);
        h.cert_path = Some(cert);
        h.key_path = Some(key);
        c.metrics.https = Some(h);
    })
    .await;
    let addr = s.running.https_addr.expect("HTTPS listens");
    assert_ne!(addr.port(), s.running.http_addr.port());
    let tls = client(&cert_pem, addr);
    let json = get_metrics(&tls, addr.port()).await;
    assert!(
        json["metrics"].as_array().is_some_and(|m| !m.is_empty()),
        "{json}"
    );
    // HTTP stays, as Jetty keeps its HTTP connector.
    let plain = reqwest::get(format!("http://{}/metrics/server", s.running.http_addr))
        .await
        .unwrap();
    assert_eq!(plain.status(), 200);
    // The admin guard sees the peer through TLS: loopback without credentials passes.
    let r = tls
        .post(format!(
            "https://localhost:{}/api/shuffleServer/confOps/update",
            addr.port()
        ))
        .header("content-type", "application/json")
        .body(r#"{"update": {"audit.rpc_exclude": "appHeartbeat"}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // A client that does not trust the certificate fails the handshake.
    let untrusting = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .resolve("localhost", addr)
        .build()
        .unwrap();
    assert!(untrusting
        .get(format!("https://localhost:{}/metrics", addr.port()))
        .send()
        .await
        .is_err());
    s.running.shutdown().await;
}

#[tokio::test]
async fn pkcs12_keystore_written_by_openssl_is_loaded() {
    let dir = TempDir::new().unwrap();
    let (cert, key, cert_pem) = self_signed(dir.path());
    let p12 = dir.path().join("server.p12");
    let out = Command::new("openssl")
        .args([
            "pkcs12",
            "-export",
            "-name",
            "spillway",
            "-passout",
            "pass:changeit",
        ])
        .arg("-in")
        .arg(&cert)
        .arg("-inkey")
        .arg(&key)
        .arg("-out")
        .arg(&p12)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The wrong password stops start-up, naming the key.
    let disks = [TempDir::new().unwrap()];
    let mut config = common::test_config(&disks);
    let mut h = https(0);
    h.keystore_path = Some(p12.clone());
    h.keystore_password = Some(Secret("wrong".into()));
    config.metrics.https = Some(h.clone());
    let err = server::start(config)
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("metrics.https.keystore_path"), "{err}");

    let s = common::start(1, |c| {
        h.keystore_password = Some(Secret("changeit".into()));
        c.metrics.https = Some(h);
    })
    .await;
    let addr = s.running.https_addr.unwrap();
    get_metrics(&client(&cert_pem, addr), addr.port()).await;
    s.running.shutdown().await;
}

#[tokio::test]
async fn jks_keystore_is_refused_with_the_keytool_command() {
    let dir = TempDir::new().unwrap();
    let jks = dir.path().join("server.jks");
    // JKS magic, version 2, no entries.
    std::fs::write(&jks, [0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2, 0, 0, 0, 0]).unwrap();
    let disks = [TempDir::new().unwrap()];
    let mut config = common::test_config(&disks);
    let mut h = https(0);
    h.keystore_path = Some(jks.clone());
    config.metrics.https = Some(h);
    let err = server::start(config)
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("metrics.https.keystore_path"), "{err}");
    assert!(
        err.contains(&format!(
            "keytool -importkeystore -srcstoretype JKS -srckeystore {} -deststoretype PKCS12",
            jks.display()
        )),
        "{err}"
    );
}
