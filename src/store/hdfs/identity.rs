//! Whom the server is to HDFS, and whom each app's files are written as.
//!
//! The Java server decides this once from its Hadoop conf (`HadoopFilesystemProvider`): under
//! simple authentication it writes as its own identity (its process user, or
//! `HADOOP_USER_NAME`), because operators prepare the remote path for the server's service
//! user; only when Hadoop security is on does it act as a proxy of the job's user, so that
//! a kerberized cluster charges and authorises each job's files to the job. Spillway does the
//! same by default ([`WriteAs::Auto`]).

use std::path::Path;

pub use crate::config::HdfsWriteAs as WriteAs;

/// Everything that decides the identity of one HDFS client.
#[derive(Clone, Debug, Default)]
pub struct Identity {
    /// Kerberos principal to log in as; `None` uses the ticket cache's default principal.
    pub principal: Option<String>,
    /// Keytab for the principal.
    pub keytab: Option<String>,
    /// The user the server writes as under simple authentication; `None`: `HADOOP_USER_NAME`,
    /// else the OS user (what the Java server's `UserGroupInformation` takes).
    pub simple_user: Option<String>,
    /// `hdfs_store.write_as`.
    pub write_as: WriteAs,
    /// Hadoop security as the server's own conf (`HADOOP_CONF_DIR`) or config sets it.
    pub security: bool,
}

impl Identity {
    /// The identity as `[hdfs_store]` and the Hadoop conf directory give it. Security is on
    /// when a principal is configured or `hadoop.security.authentication` is not `simple`
    /// (the server's conf items, `hdfs_store.hadoop_conf`, over `HADOOP_CONF_DIR`).
    pub fn resolve(
        principal: Option<String>,
        keytab: Option<String>,
        simple_user: Option<String>,
        write_as: WriteAs,
        server_conf: &[(String, String)],
    ) -> Identity {
        let configured = server_conf
            .iter()
            .rev()
            .find(|(k, _)| k == KEY)
            .map(|(_, v)| v.trim().to_ascii_lowercase());
        let authentication = configured
            .or_else(|| super::conf_files::conf_dir().and_then(|(d, _)| authentication_in(&d)));
        let security = principal.is_some() || authentication.is_some_and(|a| a != "simple");
        Identity {
            principal,
            keytab,
            simple_user,
            write_as,
            security,
        }
    }

    /// The effective user to ask HDFS for; `None` lets the client take the server's own
    /// identity (principal, `HADOOP_USER_NAME` or OS user). `app_conf_security`: the app's
    /// remote-storage conf items turn security on for its client.
    pub fn effective_user(&self, app_user: &str, app_conf_security: bool) -> Option<String> {
        let security = self.security || app_conf_security;
        let proxy = match self.write_as {
            WriteAs::Auto => security,
            WriteAs::Server => false,
            WriteAs::AppUser => true,
        };
        if proxy && !app_user.is_empty() {
            Some(app_user.to_owned())
        } else if security {
            None
        } else {
            self.simple_user.clone()
        }
    }

    /// One line for the start-up log: whom HDFS files are written as.
    pub fn describe(&self) -> String {
        let server = match (&self.principal, self.security) {
            (Some(p), _) => format!("the principal {p}"),
            (None, true) => "the ticket cache's principal".to_owned(),
            (None, false) => match &self.simple_user {
                Some(u) => format!("the user {u}"),
                None => match std::env::var("HADOOP_USER_NAME") {
                    Ok(u) if !u.is_empty() => format!("the user {u} (HADOOP_USER_NAME)"),
                    _ => "the server's OS user".to_owned(),
                },
            },
        };
        let auth = if self.security { "Kerberos" } else { "simple" };
        match (self.write_as, self.security) {
            (WriteAs::AppUser, _) | (WriteAs::Auto, true) => {
                format!("{auth} authentication: HDFS files are written by {server} as a proxy of each app's user")
            }
            _ => format!("{auth} authentication: HDFS files are written as {server}"),
        }
    }
}

/// `hadoop.security.authentication` as the conf directory's files set it (the last
/// definition wins, as in Hadoop). Files that do not parse stop the server at start-up
/// (`conf_files::check`), so `None` here means the key is not set.
pub fn authentication_in(dir: &Path) -> Option<String> {
    super::conf_files::read(dir)
        .ok()?
        .into_iter()
        .filter(|(k, _)| k == KEY)
        .map(|(_, v)| v.to_ascii_lowercase())
        .next_back()
}

/// The Hadoop key that turns security on.
pub const KEY: &str = "hadoop.security.authentication";

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(write_as: WriteAs, security: bool) -> Identity {
        Identity {
            simple_user: Some("rss".into()),
            write_as,
            security,
            ..Identity::default()
        }
    }

    #[test]
    fn auto_writes_as_the_server_under_simple_auth_and_proxies_under_kerberos() {
        let simple = identity(WriteAs::Auto, false);
        assert_eq!(
            simple.effective_user("alice", false).as_deref(),
            Some("rss")
        );
        assert_eq!(
            simple.effective_user("alice", true).as_deref(),
            Some("alice")
        );
        let kerberos = identity(WriteAs::Auto, true);
        assert_eq!(
            kerberos.effective_user("alice", false).as_deref(),
            Some("alice")
        );
        assert_eq!(
            kerberos.effective_user("", false),
            None,
            "the principal itself"
        );
    }

    #[test]
    fn server_and_app_user_override_auto() {
        assert_eq!(
            identity(WriteAs::Server, true).effective_user("alice", false),
            None
        );
        assert_eq!(
            identity(WriteAs::Server, false)
                .effective_user("alice", false)
                .as_deref(),
            Some("rss")
        );
        assert_eq!(
            identity(WriteAs::AppUser, false)
                .effective_user("alice", false)
                .as_deref(),
            Some("alice")
        );
        let no_simple_user = Identity::default();
        assert_eq!(no_simple_user.effective_user("alice", false), None);
    }

    #[test]
    fn reads_the_authentication_from_core_site() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(authentication_in(dir.path()), None);
        std::fs::write(
            dir.path().join("core-site.xml"),
            "<?xml version=\"1.0\"?>\n<configuration>\n\
             <property><name>fs.defaultFS</name><value>hdfs://nn:8020</value></property>\n\
             <property>\n  <name> hadoop.security.authentication </name>\n  <value>Kerberos</value>\n</property>\n\
             </configuration>\n",
        )
        .unwrap();
        assert_eq!(authentication_in(dir.path()).as_deref(), Some("kerberos"));
        std::fs::write(dir.path().join("core-site.xml"), "<configuration").unwrap();
        assert_eq!(authentication_in(dir.path()), None);
    }
}
