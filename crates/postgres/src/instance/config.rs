//! What one instance manager is told: by the command line and environment in a pod
//! ([`Args`]), or directly by a test ([`Config`]). Secrets come from the environment only
//! (never arguments, which `ps` shows) and never appear in `Debug` output.
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;

use super::error::Error;

/// What the instance should be when it starts.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Primary,
    Replica,
}

/// Passwords and the API token, from the Secret the operator owns.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// Of the `postgres` superuser (clients, `pg_rewind`).
    pub superuser_password: String,
    /// Of the `streaming_replica` role (base backups, streaming).
    pub replication_password: String,
    /// Bearer token mutating HTTP requests must carry.
    pub api_token: String,
    /// Of the application database's owner (None: the owner cannot log in with a password).
    pub app_password: Option<String>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credentials { .. }")
    }
}

impl Credentials {
    /// From `BOSUN_PG_SUPERUSER_PASSWORD`, `BOSUN_PG_REPLICATION_PASSWORD` and
    /// `BOSUN_PG_API_TOKEN` (in a pod: `secretKeyRef`s).
    pub fn from_env() -> Result<Credentials, Error> {
        let get = |k: &str| {
            std::env::var(k)
                .ok()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| Error::Config(format!("{k} is not set (or empty)")))
        };
        Ok(Credentials {
            superuser_password: get("BOSUN_PG_SUPERUSER_PASSWORD")?,
            replication_password: get("BOSUN_PG_REPLICATION_PASSWORD")?,
            api_token: get("BOSUN_PG_API_TOKEN")?,
            app_password: get("BOSUN_PG_APP_PASSWORD").ok(),
        })
    }
}

/// Everything one instance manager needs.
#[derive(Clone, Debug)]
pub struct Config {
    /// The instance's name (`<cluster>-<n>`): its replication slot and application name.
    pub name: String,
    /// PGDATA.
    pub data_dir: PathBuf,
    /// The pod's IP: PostgreSQL and the HTTP API listen there only.
    pub pod_ip: IpAddr,
    /// The pod's UID: tells a container restart (the role record on the volume wins) from
    /// a new pod on the claim (the role below wins). None: not in a pod; the record wins.
    pub pod_uid: Option<String>,
    pub port: u16,
    pub http_port: u16,
    /// Where PostgreSQL's programs are (None: `postgres` on PATH, else the newest
    /// /usr/lib/postgresql/<N>/bin).
    pub bin_dir: Option<PathBuf>,
    /// The unix socket and password file directory (None: /tmp/bosun-pg/<ip>-<port>). Its
    /// socket path must fit the 107 bytes of a unix socket address.
    pub run_dir: Option<PathBuf>,
    /// The role the pod was created with (see [`super::record`] for when it applies).
    pub role: Role,
    /// `host:port` of the primary to join when starting as a replica.
    pub primary: Option<String>,
    /// The unprivileged OS user to run PostgreSQL as when the manager runs as root (None:
    /// `bosun-pg`, else `postgres`).
    pub os_user: Option<String>,
    /// PostgreSQL parameters (validated by the operator), passed as `-c name=value`.
    pub parameters: Vec<(String, String)>,
    /// Where PostgreSQL's own log goes (None: the manager's stderr, i.e. the pod's log).
    pub log_file: Option<PathBuf>,
    /// How a new cluster is made (read by a primary that finds no data).
    pub initdb: InitDbOptions,
    /// Standbys that must confirm each commit while this instance is the primary (0:
    /// asynchronous).
    pub synchronous: u32,
    /// WAL archiving, base backups and the restore of a new instance.
    pub backups: BackupOptions,
    /// How long a start may go without its recovery advancing (None: 300 s).
    pub start_timeout: Option<std::time::Duration>,
    /// A primary that has had replicas fences itself after this long without a replica
    /// streaming or a poll from the operator (None: never; see `instance::isolation`).
    pub isolation_timeout: Option<std::time::Duration>,
    pub credentials: Credentials,
}

/// Backups on the instance's side: the store it archives to and takes base backups into
/// (while it is the primary), and the store a new primary restores from instead of initdb.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackupOptions {
    /// The store's location: a directory (`<backup volume>/<cluster>`) or
    /// `s3://bucket/<prefix><cluster>`. None: no archiving, no backups.
    pub store: Option<String>,
    /// Days base backups are kept (0: 30).
    pub retention_days: u32,
    /// Restore from this store when the data directory is empty (a primary only).
    pub restore_from: Option<String>,
    /// Where the restore stops (None: the end of the archived WAL).
    pub target: Option<crate::backup::catalog::Target>,
    /// The `bosun` PostgreSQL runs as archive_command and restore_command (None: the
    /// running binary).
    pub program: Option<PathBuf>,
    /// The cluster this instance belongs to, checked against the store's owner record before
    /// anything is written there (None: a pod made before owner records; nothing checked).
    pub owner: Option<crate::backup::owner::Owner>,
}

/// `initdb`'s choices and the application database made on a new cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitDbOptions {
    pub locale: String,
    pub data_checksums: bool,
    /// The application database and its owner, made on every start as primary when missing.
    pub app: Option<AppDb>,
}

impl Default for InitDbOptions {
    fn default() -> Self {
        InitDbOptions {
            locale: "C".into(),
            data_checksums: true,
            app: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppDb {
    pub database: String,
    pub owner: String,
}

/// `bosun pg instance`: the command line of an instance's pod.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// The instance's name (`<cluster>-<n>`).
    #[arg(long, env = "BOSUN_PG_NAME")]
    pub name: String,
    /// The data directory.
    #[arg(long, env = "PGDATA")]
    pub data_dir: PathBuf,
    /// The pod's IP (downward API `status.podIP`).
    #[arg(long, env = "BOSUN_PG_POD_IP")]
    pub pod_ip: IpAddr,
    /// The pod's UID (downward API `metadata.uid`).
    #[arg(long, env = "BOSUN_PG_POD_UID")]
    pub pod_uid: Option<String>,
    /// PostgreSQL's port.
    #[arg(long, env = "BOSUN_PG_PORT", default_value_t = 5432)]
    pub port: u16,
    /// The instance API's port.
    #[arg(long, env = "BOSUN_PG_HTTP_PORT", default_value_t = 8000)]
    pub http_port: u16,
    /// PostgreSQL's programs (default: `postgres` on PATH, else the newest
    /// /usr/lib/postgresql/<N>/bin).
    #[arg(long, env = "BOSUN_PG_BIN_DIR")]
    pub bin_dir: Option<PathBuf>,
    /// The unix socket and password file directory (default /tmp/bosun-pg/<ip>-<port>).
    #[arg(long, env = "BOSUN_PG_RUN_DIR")]
    pub run_dir: Option<PathBuf>,
    /// The role to start in.
    #[arg(long, env = "BOSUN_PG_ROLE", value_enum)]
    pub role: Role,
    /// `host:port` of the primary (replicas).
    #[arg(long, env = "BOSUN_PG_PRIMARY")]
    pub primary: Option<String>,
    /// The OS user PostgreSQL runs as when started by root (default bosun-pg, else postgres).
    #[arg(long, env = "BOSUN_PG_OS_USER")]
    pub os_user: Option<String>,
    /// A PostgreSQL parameter `name=value` (repeatable).
    #[arg(long = "param", value_parser = parse_param)]
    pub parameters: Vec<(String, String)>,
    /// Standbys that must confirm each commit (0: asynchronous replication).
    #[arg(long, env = "BOSUN_PG_SYNCHRONOUS", default_value_t = 0)]
    pub synchronous: u32,
    /// Locale of a new cluster.
    #[arg(long, env = "BOSUN_PG_LOCALE", default_value = "C")]
    pub locale: String,
    /// Make a new cluster without data page checksums.
    #[arg(long, env = "BOSUN_PG_NO_DATA_CHECKSUMS")]
    pub no_data_checksums: bool,
    /// The application database to make on a new cluster (with --app-owner).
    #[arg(long, env = "BOSUN_PG_APP_DATABASE", requires = "app_owner")]
    pub app_database: Option<String>,
    /// Its owner, a login role (password: BOSUN_PG_APP_PASSWORD).
    #[arg(long, env = "BOSUN_PG_APP_OWNER", requires = "app_database")]
    pub app_owner: Option<String>,
    /// The backup store (a directory, or s3://bucket/prefix with BOSUN_PG_S3_ENDPOINT and
    /// AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY): WAL is archived there and base backups are written
    /// there while this instance is the primary.
    #[arg(long, env = "BOSUN_PG_BACKUP_STORE")]
    pub backup_store: Option<String>,
    /// Days base backups are kept.
    #[arg(long, env = "BOSUN_PG_BACKUP_RETENTION_DAYS", default_value_t = 30)]
    pub backup_retention_days: u32,
    /// Restore from this backup store instead of initdb when there is no data.
    #[arg(long, env = "BOSUN_PG_RESTORE_FROM")]
    pub restore_from: Option<String>,
    /// Stop the restore at this time (RFC 3339).
    #[arg(
        long,
        env = "BOSUN_PG_RECOVERY_TARGET_TIME",
        conflicts_with = "recovery_target_lsn"
    )]
    pub recovery_target_time: Option<String>,
    /// Stop the restore at this WAL position (`X/Y`).
    #[arg(long, env = "BOSUN_PG_RECOVERY_TARGET_LSN")]
    pub recovery_target_lsn: Option<String>,
    /// Seconds a start (crash recovery, a replica reaching consistency) may go without its
    /// replay advancing before it is given up (0: 300).
    #[arg(long, env = crate::contract::ENV_START_TIMEOUT, default_value_t = 0)]
    pub start_timeout: u64,
    /// Seconds without a replica streaming or a poll from the operator before a primary
    /// that has had replicas fences itself (0: never).
    #[arg(long, env = crate::contract::ENV_ISOLATION_TIMEOUT, default_value_t = 0)]
    pub isolation_timeout: u64,
    /// The PostgresCluster's UID: the backup store's owner record must name it.
    #[arg(long, env = crate::contract::ENV_CLUSTER_UID)]
    pub cluster_uid: Option<String>,
    /// The PostgresCluster's name (for the owner record's messages).
    #[arg(long, env = crate::contract::ENV_CLUSTER, default_value = "")]
    pub cluster: String,
    /// What this cluster may claim of a store that is not recorded as its own.
    #[arg(long, env = crate::contract::ENV_STORE_CLAIM, value_enum, default_value = "empty")]
    pub store_claim: crate::backup::owner::Claim,
}

impl Args {
    /// The config, with the credentials read from the environment.
    pub fn into_config(self) -> Result<Config, Error> {
        use crate::backup::catalog::Target;
        let target = match (&self.recovery_target_time, &self.recovery_target_lsn) {
            (Some(t), _) => Some(Target::Time(
                chrono::DateTime::parse_from_rfc3339(t)
                    .map_err(|e| Error::Config(format!("recovery target time {t:?}: {e}")))?
                    .to_utc(),
            )),
            (None, Some(l)) => Some(Target::Lsn(super::parse_lsn(l).ok_or_else(|| {
                Error::Config(format!("recovery target {l:?} is not a WAL position"))
            })?)),
            (None, None) => None,
        };
        Ok(Config {
            backups: BackupOptions {
                store: self.backup_store,
                retention_days: self.backup_retention_days,
                restore_from: self.restore_from,
                target,
                program: None,
                owner: self.cluster_uid.filter(|u| !u.is_empty()).map(|uid| {
                    crate::backup::owner::Owner {
                        uid,
                        cluster: self.cluster,
                        claim: self.store_claim,
                    }
                }),
            },
            name: self.name,
            data_dir: self.data_dir,
            pod_ip: self.pod_ip,
            pod_uid: self.pod_uid.filter(|u| !u.is_empty()),
            port: self.port,
            http_port: self.http_port,
            bin_dir: self.bin_dir,
            run_dir: self.run_dir,
            role: self.role,
            primary: self.primary,
            os_user: self.os_user,
            parameters: self.parameters,
            log_file: None,
            start_timeout: (self.start_timeout > 0)
                .then(|| std::time::Duration::from_secs(self.start_timeout)),
            isolation_timeout: (self.isolation_timeout > 0)
                .then(|| std::time::Duration::from_secs(self.isolation_timeout)),
            synchronous: self.synchronous,
            initdb: InitDbOptions {
                locale: self.locale,
                data_checksums: !self.no_data_checksums,
                app: match (self.app_database, self.app_owner) {
                    (Some(database), Some(owner)) => Some(AppDb { database, owner }),
                    _ => None,
                },
            },
            credentials: Credentials::from_env()?,
        })
    }
}

fn parse_param(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{s:?} is not name=value")),
    }
}

impl Config {
    /// The run directory to use.
    pub fn run_dir(&self) -> PathBuf {
        self.run_dir.clone().unwrap_or_else(|| {
            PathBuf::from(format!("/tmp/bosun-pg/{}-{}", self.pod_ip, self.port))
        })
    }

    /// The replication slot this instance streams through on its primary.
    pub fn slot_name(&self) -> String {
        slot_name(&self.name)
    }

    /// Refused before anything is touched: a socket path over the limit, a wildcard pod IP.
    pub fn check(&self) -> Result<(), Error> {
        if self.pod_ip.is_unspecified() {
            return Err(Error::Config(format!(
                "pod IP {} would listen on every address; give the pod's own IP",
                self.pod_ip
            )));
        }
        if self.name.is_empty() {
            return Err(Error::Config("the instance name is empty".into()));
        }
        if let Some(app) = &self.initdb.app {
            for (what, v) in [("database", &app.database), ("owner", &app.owner)] {
                let ok = (1..=63).contains(&v.len())
                    && v.starts_with(|c: char| c.is_ascii_lowercase())
                    && v.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
                if !ok {
                    return Err(Error::Config(format!(
                        "application {what} {v:?}: lower-case letters, digits and _ only"
                    )));
                }
            }
        }
        if !self
            .initdb
            .locale
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-@".contains(c))
        {
            return Err(Error::Config(format!(
                "locale {:?} is not a locale name",
                self.initdb.locale
            )));
        }
        let socket = self.run_dir().join(format!(".s.PGSQL.{}", self.port));
        let len = socket.as_os_str().len();
        if len > MAX_SOCKET_PATH {
            return Err(Error::Config(format!(
                "unix socket path {} is {len} bytes, over the limit of {MAX_SOCKET_PATH}: choose a shorter run directory",
                socket.display()
            )));
        }
        Ok(())
    }
}

/// `sun_path` holds 108 bytes including the terminating NUL.
pub const MAX_SOCKET_PATH: usize = 107;

/// `bosun_<name>`, in the characters slot names allow, at most 63.
pub fn slot_name(instance: &str) -> String {
    let mut s: String = format!("bosun_{instance}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    s.truncate(63);
    s
}

/// Splits `host:port` (IPv6 hosts in brackets).
pub fn host_port(s: &str) -> Result<(String, u16), Error> {
    let bad = || Error::Config(format!("{s:?} is not host:port"));
    let (h, p) = s.rsplit_once(':').ok_or_else(bad)?;
    let port = p.parse().map_err(|_| bad())?;
    let host = h.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        Config {
            name: "pg-1".into(),
            data_dir: "/data".into(),
            pod_ip: "127.0.0.2".parse().expect("ip"),
            pod_uid: None,
            port: 5432,
            http_port: 8000,
            bin_dir: None,
            run_dir: None,
            role: Role::Primary,
            primary: None,
            os_user: None,
            parameters: vec![],
            log_file: None,
            isolation_timeout: None,
            start_timeout: None,
            synchronous: 0,
            backups: BackupOptions::default(),
            initdb: InitDbOptions::default(),
            credentials: Credentials {
                superuser_password: "s3cret-super".into(),
                replication_password: "s3cret-repl".into(),
                api_token: "s3cret-token".into(),
                app_password: Some("s3cret-app".into()),
            },
        }
    }

    #[test]
    fn secrets_never_show_in_debug_output() {
        let text = format!("{:?}", config());
        assert!(!text.contains("s3cret"), "{text}");
    }

    #[test]
    fn a_socket_path_over_107_bytes_is_refused() {
        let mut c = config();
        c.run_dir = Some(PathBuf::from(format!("/{}", "r".repeat(90))));
        assert!(c.check().is_ok(), "90 + 15 bytes fit");
        c.run_dir = Some(PathBuf::from(format!("/{}", "r".repeat(93))));
        let e = c.check().expect_err("over the limit");
        assert!(e.to_string().contains("over the limit of 107"), "{e}");
    }

    #[test]
    fn application_names_must_be_plain_identifiers() {
        let mut c = config();
        c.initdb.app = Some(AppDb {
            database: "app".into(),
            owner: "app; DROP".into(),
        });
        assert!(c.check().is_err());
        c.initdb.app = Some(AppDb {
            database: "app".into(),
            owner: "app_owner".into(),
        });
        assert!(c.check().is_ok());
    }

    #[test]
    fn a_wildcard_address_is_refused() {
        let mut c = config();
        c.pod_ip = "0.0.0.0".parse().expect("ip");
        assert!(c.check().is_err());
    }

    /// A replica with data may start with no primary to follow (read-only, a failover
    /// candidate: issue 32, M12); one without data still needs it (refused at its start).
    #[test]
    fn a_replica_may_be_started_without_a_primary() {
        let mut c = config();
        c.role = Role::Replica;
        assert!(c.check().is_ok());
        c.primary = Some("127.0.0.3:5432".into());
        assert!(c.check().is_ok());
    }

    #[test]
    fn slot_names_are_valid() {
        assert_eq!(slot_name("My-PG-12"), "bosun_my_pg_12");
        assert_eq!(slot_name(&"x".repeat(80)).len(), 63);
    }

    #[test]
    fn host_port_splits() {
        assert_eq!(
            host_port("127.0.0.1:5432").expect("ok"),
            ("127.0.0.1".into(), 5432)
        );
        assert_eq!(host_port("[::1]:5433").expect("ok"), ("::1".into(), 5433));
        assert!(host_port("127.0.0.1").is_err());
        assert!(host_port(":5432").is_err());
    }
}
