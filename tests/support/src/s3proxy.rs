//! An S3 server for tests that checks request signatures: S3Proxy (Maven Central,
//! `org.gaul:s3proxy`, installed into `tests/s3/target` by `tests/s3/install.sh --s3proxy`),
//! on its filesystem backend, started on 127.0.0.1 on a free port. moto accepts any
//! signature, so a wrong secret passes there; S3Proxy answers it `403
//! SignatureDoesNotMatch`, as S3 and every S3-compatible store do.
//!
//! Std only, like the moto launcher beside it (whose start helpers it shares). The JVM runs under a `bash` that kills it when this
//! process's end of its stdin closes. Anything that keeps it from starting panics: a test that needs it fails,
//! it never skips.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::Mutex;
use std::time::Duration;

use crate::s3server::{answers_http, project_dir, spawn_tied};

/// The access key S3Proxy knows.
pub const ACCESS_KEY: &str = "spillway-access";
/// The secret that belongs to [`ACCESS_KEY`].
pub const SECRET_KEY: &str = "spillway-right-secret";

/// A JVM's cold start with the jar's 40 MB of classes: 2-5 s; far more on a loaded machine.
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// How [`start_with`] sets the server up; the default is what [`start`] starts.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Also serve HTTPS, with a certificate of a CA made for this server ([`S3Proxy::tls`]).
    pub tls: bool,
    /// `s3proxy.v4-max-non-chunked-request-size`: the largest signed payload (SigV4, not
    /// chunked) the server takes; larger ones are refused with `MaxMessageLengthExceeded`
    /// before it would hash them. An `UNSIGNED-PAYLOAD` request is not limited, so a small
    /// value shows whether a client hashed its payload. Default: S3Proxy's (32 MiB).
    pub max_signed_payload: Option<u64>,
    /// Log every request it serves (S3Proxy's debug level), for [`S3Proxy::requests`]: what a
    /// test counts to show that nothing asked the store.
    pub log_requests: bool,
}

/// The HTTPS side of a server started with [`Options::tls`].
pub struct Tls {
    /// `https://127.0.0.1:<port>`.
    pub endpoint: String,
    /// The PEM certificate of the CA that signed the server's: what a client must trust (for
    /// the spillway binary, `SSL_CERT_FILE`).
    pub ca_pem: PathBuf,
}

/// A running S3Proxy; stopped when dropped (or when the test process exits).
pub struct S3Proxy {
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    /// HTTPS, when started with [`Options::tls`].
    pub tls: Option<Tls>,
    /// Where the server logs.
    pub log: PathBuf,
    /// The backend's directory: a bucket is a folder in it.
    pub data: PathBuf,
    /// The run's directory (data, log, certificates): removed when the server stops, unless
    /// the thread is panicking (a failed test keeps the log to read).
    base: PathBuf,
    child: Mutex<Child>,
}

/// Starts a server of its own; panics when it cannot.
pub fn start() -> S3Proxy {
    try_start().unwrap_or_else(|e| panic!("{e}"))
}

/// Starts a server of its own; panics when it cannot.
pub fn start_with(opts: &Options) -> S3Proxy {
    try_start_with(opts).unwrap_or_else(|e| panic!("{e}"))
}

/// Starts a server of its own, or says why it could not.
pub fn try_start() -> Result<S3Proxy, String> {
    try_start_with(&Options::default())
}

fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("free port: {e}"))
}

/// Runs `openssl` with `args` in `dir`; the error names the step and carries its stderr.
fn openssl(dir: &std::path::Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .map_err(|e| format!("run openssl {}: {e}", args[0]))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "openssl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A CA and a server certificate it signed for 127.0.0.1, packed with the server's key as the
/// PKCS#12 keystore Jetty loads: `(ca.pem, keystore.p12)` in `dir`.
fn test_certificates(dir: &std::path::Path) -> Result<(PathBuf, PathBuf), String> {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "7",
        "-subj",
        "/CN=spillway test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    openssl(dir, &ca)?;
    let mut csr = vec!["req"];
    csr.extend(ec);
    csr.extend([
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    openssl(dir, &csr)?;
    std::fs::write(
        dir.join("server.ext"),
        "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n\
         extendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n",
    )
    .map_err(|e| format!("server.ext: {e}"))?;
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "7",
            "-extfile",
            "server.ext",
            "-out",
            "server.pem",
        ],
    )?;
    openssl(
        dir,
        &[
            "pkcs12",
            "-export",
            "-in",
            "server.pem",
            "-inkey",
            "server.key",
            "-name",
            "s3proxy",
            "-out",
            "keystore.p12",
            "-passout",
            "pass:spillway-test",
        ],
    )?;
    Ok((dir.join("ca.pem"), dir.join("keystore.p12")))
}

/// Starts a server of its own as `opts` say, or says why it could not.
pub fn try_start_with(opts: &Options) -> Result<S3Proxy, String> {
    let dir = project_dir();
    let status = Command::new("bash")
        .arg(dir.join("install.sh"))
        .arg("--s3proxy")
        .status()
        .map_err(|e| format!("run tests/s3/install.sh --s3proxy: {e}"))?;
    if !status.success() {
        return Err(format!("tests/s3/install.sh --s3proxy failed: {status}"));
    }
    let jar = std::fs::read_dir(dir.join("target"))
        .map_err(|e| format!("tests/s3/target: {e}"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("s3proxy-") && n.ends_with(".jar"))
        })
        .ok_or("no s3proxy jar in tests/s3/target after install.sh")?;
    let port = free_port()?;
    let base = std::env::temp_dir().join(format!("spillway-s3proxy-{}-{port}", std::process::id()));
    let data = base.join("data");
    std::fs::create_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
    let mut conf = format!(
        "s3proxy.endpoint=http://127.0.0.1:{port}\n\
         s3proxy.authorization=aws-v2-or-v4\n\
         s3proxy.identity={ACCESS_KEY}\n\
         s3proxy.credential={SECRET_KEY}\n\
         jclouds.provider=filesystem\n\
         jclouds.filesystem.basedir={}\n",
        data.display()
    );
    if let Some(max) = opts.max_signed_payload {
        conf.push_str(&format!("s3proxy.v4-max-non-chunked-request-size={max}\n"));
    }
    let tls = if opts.tls {
        let (ca_pem, keystore) = test_certificates(&base)?;
        let tls_port = free_port()?;
        // Jetty starts both connectors together, so the plain port answering below means the
        // HTTPS one is up too.
        conf.push_str(&format!(
            "s3proxy.secure-endpoint=https://127.0.0.1:{tls_port}\n\
             s3proxy.keystore-path={}\n\
             s3proxy.keystore-password=spillway-test\n",
            keystore.display()
        ));
        Some(Tls {
            endpoint: format!("https://127.0.0.1:{tls_port}"),
            ca_pem,
        })
    } else {
        None
    };
    let props = base.join("s3proxy.conf");
    std::fs::write(&props, conf).map_err(|e| format!("{}: {e}", props.display()))?;
    let log = base.join("s3proxy.log");
    let command = format!(
        "{}java -Xmx256m -XX:TieredStopAtLevel=1 -jar {} --properties {}",
        if opts.log_requests {
            "LOG_LEVEL=debug "
        } else {
            ""
        },
        jar.display(),
        props.display()
    );
    let child = spawn_tied(&command, &log).map_err(|e| format!("start S3Proxy: {e}"))?;
    if !answers_http(port, START_TIMEOUT) {
        return Err(format!(
            "S3Proxy did not answer on port {port} within {START_TIMEOUT:?}; log {}",
            log.display()
        ));
    }
    Ok(S3Proxy {
        endpoint: format!("http://127.0.0.1:{port}"),
        tls,
        log,
        data,
        base,
        child: Mutex::new(child),
    })
}

impl S3Proxy {
    /// The requests served so far, as `METHOD path` (`PUT /bucket/key`), in order; only with
    /// [`Options::log_requests`] (S3Proxy logs each one at debug level as it handles it).
    pub fn requests(&self) -> Vec<String> {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        log.lines()
            .filter_map(|l| l.split_once("request: Request(").map(|(_, r)| r))
            .filter_map(|r| {
                let (method, url) = r.split_once(' ')?;
                let url = url.split(')').next()?;
                let path = url
                    .splitn(4, '/')
                    .nth(3)
                    .map_or("/".to_owned(), |p| format!("/{p}"));
                Some(format!("{method} {path}"))
            })
            .collect()
    }

    /// Creates `bucket` (a folder of the filesystem backend; no signed request needed).
    pub fn create_bucket(&self, bucket: &str) {
        std::fs::create_dir_all(self.data.join(bucket)).expect("create the bucket's folder");
    }

    /// Deletes `bucket` with everything in it: requests for it answer `NoSuchBucket`.
    pub fn delete_bucket(&self, bucket: &str) {
        std::fs::remove_dir_all(self.data.join(bucket)).expect("remove the bucket's folder");
    }

    /// The s3a settings of a client of this server, with `secret` as `fs.s3a.secret.key`.
    pub fn s3a_conf(&self, secret: &str) -> Vec<(String, String)> {
        self.s3a_conf_at(&self.endpoint, secret)
    }

    /// [`S3Proxy::s3a_conf`] against `endpoint` (the HTTPS one, say).
    pub fn s3a_conf_at(&self, endpoint: &str, secret: &str) -> Vec<(String, String)> {
        [
            ("fs.s3a.endpoint", endpoint),
            ("fs.s3a.path.style.access", "true"),
            ("fs.s3a.access.key", ACCESS_KEY),
            ("fs.s3a.secret.key", secret),
            ("fs.s3a.endpoint.region", "us-east-1"),
            ("fs.s3a.retry.limit", "1"),
            ("fs.s3a.retry.interval", "50ms"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }
}

impl Drop for S3Proxy {
    fn drop(&mut self) {
        let child = self.child.get_mut().unwrap_or_else(|p| p.into_inner());
        // Closing stdin ends the wrapper's `read`, which kills the JVM.
        drop(child.stdin.take());
        let _ = child.wait();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.base);
        }
    }
}
