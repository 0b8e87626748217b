//! What the manager asks PostgreSQL, through tokio-postgres: its own instance over the private
//! unix socket, a primary over the network (as the replication role, to make a slot).
use std::path::Path;
use std::time::Duration;

use tokio_postgres::{Client, NoTls};

use super::config::{AppDb, Credentials};
use super::error::Error;
use super::{REPLICATION_USER, SUPERUSER};

/// The local instance, as the superuser over the unix socket.
pub async fn connect_local(run_dir: &Path, port: u16) -> Result<Client, Error> {
    let mut cfg = tokio_postgres::Config::new();
    cfg.host_path(run_dir)
        .port(port)
        .user(SUPERUSER)
        .dbname("postgres")
        .application_name("bosun-instance-manager")
        .connect_timeout(Duration::from_secs(5));
    let (client, conn) = cfg
        .connect(NoTls)
        .await
        .map_err(Error::sql("connecting to the local instance"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

/// A remote instance over TCP.
pub async fn connect_remote(
    host: &str,
    port: u16,
    user: &str,
    password: &str,
) -> Result<Client, Error> {
    let mut cfg = tokio_postgres::Config::new();
    cfg.host(host)
        .port(port)
        .user(user)
        .password(password)
        .dbname("postgres")
        .application_name("bosun-instance-manager")
        // What runs over these sessions (slots, ALTER SYSTEM, pg_drop_replication_slot) is
        // quick; a primary stalled inside one must not hold the caller — the operator's
        // reconcile, and a failover with it (issue 32, M5).
        .options("-c statement_timeout=15s -c lock_timeout=5s")
        .connect_timeout(Duration::from_secs(5));
    // connect_timeout bounds the TCP connect only: a primary that accepts and never answers
    // (a stopped process whose socket still listens) would hold the caller — a replica's
    // start — forever.
    let (client, conn) = tokio::time::timeout(Duration::from_secs(10), cfg.connect(NoTls))
        .await
        .map_err(|_| Error::Timeout("the primary to answer a connection"))?
        .map_err(Error::sql("connecting to the primary"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

/// The roles a primary needs, with the passwords of the Secret, and the application database.
/// Passwords are sent as SCRAM verifiers made here, so the clear text never reaches a server
/// log, even in an error. Names were checked to be plain identifiers.
pub async fn ensure_roles(
    client: &Client,
    creds: &Credentials,
    app: Option<&AppDb>,
) -> Result<(), Error> {
    // These writes are the instance manager's own, made on a primary that may have just been
    // promoted: it inherited the old primary's synchronous_standby_names, and no standby
    // follows it until the operator repoints them — after the promotion returns. Waiting for
    // a standby here would hang the failover; a role lost with a failover is made again on
    // the next primary.
    client
        .batch_execute("SET synchronous_commit TO local")
        .await
        .map_err(Error::sql(
            "setting synchronous_commit for the instance manager",
        ))?;
    let exists = client
        .query_opt(
            "SELECT 1 FROM pg_roles WHERE rolname = $1",
            &[&REPLICATION_USER],
        )
        .await
        .map_err(Error::sql("looking up the replication role"))?
        .is_some();
    if !exists {
        client
            .batch_execute(&format!(
                "CREATE ROLE {REPLICATION_USER} WITH REPLICATION LOGIN"
            ))
            .await
            .map_err(Error::sql("creating the replication role"))?;
    }
    if let Some(app) = app {
        let owner_exists = client
            .query_opt("SELECT 1 FROM pg_roles WHERE rolname = $1", &[&app.owner])
            .await
            .map_err(Error::sql("looking up the application owner"))?
            .is_some();
        if !owner_exists {
            client
                .batch_execute(&format!("CREATE ROLE {} WITH LOGIN", app.owner))
                .await
                .map_err(Error::sql("creating the application owner"))?;
        }
        let db_exists = client
            .query_opt(
                "SELECT 1 FROM pg_database WHERE datname = $1",
                &[&app.database],
            )
            .await
            .map_err(Error::sql("looking up the application database"))?
            .is_some();
        if !db_exists {
            client
                .batch_execute(&format!(
                    "CREATE DATABASE {} OWNER {}",
                    app.database, app.owner
                ))
                .await
                .map_err(Error::sql("creating the application database"))?;
        }
    }
    let app_role = app.zip(creds.app_password.as_ref());
    for (role, password) in [
        (REPLICATION_USER, &creds.replication_password),
        (SUPERUSER, &creds.superuser_password),
    ]
    .into_iter()
    .chain(app_role.map(|(a, p)| (a.owner.as_str(), p)))
    {
        let verifier = postgres_protocol::password::scram_sha_256(password.as_bytes());
        client
            .batch_execute(&format!("ALTER ROLE {role} PASSWORD '{verifier}'"))
            .await
            .map_err(Error::sql("setting a role's password"))?;
    }
    Ok(())
}

/// The synchronous standbys a primary waits for: any `n` of its replicas (names are not
/// needed: every standby streaming from it is a replica of the cluster). Set with ALTER SYSTEM,
/// not on the command line, so that a reload applies a change and a promoted replica
/// inherits it with the base backup's files.
pub async fn set_synchronous(client: &Client, n: u32) -> Result<(), Error> {
    let want = if n == 0 {
        String::new()
    } else {
        format!("ANY {n} (*)")
    };
    let current: String = client
        .query_one("SELECT current_setting('synchronous_standby_names')", &[])
        .await
        .map_err(Error::sql("reading synchronous_standby_names"))?
        .get(0);
    if current == want {
        return Ok(());
    }
    // Two statements, two queries: ALTER SYSTEM refuses an (implicit) transaction block.
    client
        .batch_execute(&format!(
            "ALTER SYSTEM SET synchronous_standby_names = '{want}'"
        ))
        .await
        .map_err(Error::sql("setting synchronous_standby_names"))?;
    client
        .batch_execute("SELECT pg_reload_conf()")
        .await
        .map_err(Error::sql("reloading the configuration"))
}

/// Makes this instance's physical slot on the primary, if missing.
pub async fn ensure_slot(
    host: &str,
    port: u16,
    creds: &Credentials,
    slot: &str,
) -> Result<(), Error> {
    let client = connect_remote(host, port, REPLICATION_USER, &creds.replication_password).await?;
    client
        .execute(
            "SELECT pg_create_physical_replication_slot($1) \
             WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)",
            &[&slot],
        )
        .await
        .map_err(Error::sql("creating the replication slot on the primary"))?;
    Ok(())
}

/// Standbys streaming from this primary now: walsenders of instances of this cluster, each on
/// its own slot (a replica's `primary_conninfo` names it and its slot is [`slot_name`] of
/// that). A base backup's WAL stream (a replica's clone, a backup, `pg_receivewal`) is not a
/// standby, though `pg_stat_replication` shows it `streaming` too: it must not arm the
/// primary's isolation check, which would then fence a primary whose backup ended.
///
/// [`slot_name`]: super::config::slot_name
pub async fn streaming_replicas(client: &Client) -> Result<u32, Error> {
    let rows = client
        .query(
            "SELECT r.application_name, s.slot_name::text \
             FROM pg_stat_replication r JOIN pg_replication_slots s ON s.active_pid = r.pid \
             WHERE r.state = 'streaming' AND NOT s.temporary",
            &[],
        )
        .await
        .map_err(Error::sql("counting the streaming replicas"))?;
    let standbys = rows
        .iter()
        .filter(|r| {
            let app: Option<String> = r.get(0);
            let slot: Option<String> = r.get(1);
            is_standby(app.as_deref(), slot.as_deref())
        })
        .count();
    Ok(u32::try_from(standbys).unwrap_or(u32::MAX))
}

/// A walsender is a standby of this cluster's: its application is an instance (not one of
/// PostgreSQL's backup programs) and it streams through that instance's slot.
fn is_standby(application: Option<&str>, slot: Option<&str>) -> bool {
    match (application, slot) {
        (Some(app), Some(slot)) => {
            !matches!(app, "pg_basebackup" | "pg_receivewal" | "")
                && slot == super::config::slot_name(app)
        }
        _ => false,
    }
}

/// Promotes the local replica and waits for the promotion to finish, then checkpoints: the
/// end-of-recovery checkpoint a promotion requests is a spread one, and until it ends the
/// control file still names the old timeline. pg_rewind reads the source's timeline there, so
/// an old primary rewound against this one before that would be left with its diverged WAL
/// and never stream.
pub async fn promote(client: &Client) -> Result<(), Error> {
    let done: bool = client
        .query_one("SELECT pg_promote(true, 60)", &[])
        .await
        .map_err(Error::sql("promoting"))?
        .get(0);
    if !done {
        return Err(Error::Timeout("the promotion to finish"));
    }
    client
        .batch_execute("CHECKPOINT")
        .await
        .map_err(Error::sql("checkpointing the new timeline"))
}

/// What a running instance reports of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub in_recovery: bool,
    pub timeline: Option<u32>,
    pub lsn: Option<String>,
    pub received_lsn: Option<String>,
    pub streaming: bool,
    /// A replica: why it cannot follow the newest timeline it knows of (see
    /// [`super::timeline`]).
    pub diverged: Option<String>,
    /// A primary: the standbys each commit waits for now (`ANY n (*)` → n, empty → 0;
    /// None: a value bosun did not set).
    pub synchronous: Option<u32>,
    /// `postgresql.auto.conf` and what waits for a restart (None: could not be read).
    pub parameters: Option<Vec<super::ParameterState>>,
}

/// `ANY n (*)` → n, empty → 0; anything else (set by hand) → None.
pub fn parse_synchronous(names: &str) -> Option<u32> {
    let t = names.trim();
    if t.is_empty() {
        return Some(0);
    }
    t.strip_prefix("ANY ")?
        .strip_suffix(" (*)")?
        .trim()
        .parse()
        .ok()
}

pub async fn observe(client: &Client) -> Result<Observed, Error> {
    let in_recovery: bool = client
        .query_one("SELECT pg_is_in_recovery()", &[])
        .await
        .map_err(Error::sql("reading the role"))?
        .get(0);
    if !in_recovery {
        // The timeline of the segment being written: promotion does not wait for the
        // checkpoint that would update pg_control's.
        let row = client
            .query_one(
                "SELECT pg_current_wal_lsn()::text, pg_walfile_name(pg_current_wal_lsn()), \
                 current_setting('synchronous_standby_names')",
                &[],
            )
            .await
            .map_err(Error::sql("reading the WAL position"))?;
        let walfile: String = row.get(1);
        return Ok(Observed {
            in_recovery,
            timeline: walfile
                .get(..8)
                .and_then(|t| u32::from_str_radix(t, 16).ok()),
            lsn: Some(row.get(0)),
            received_lsn: None,
            streaming: false,
            diverged: None,
            synchronous: parse_synchronous(row.get(2)),
            parameters: parameters(client).await.ok(),
        });
    }
    let row = client
        .query_one(
            "SELECT pg_last_wal_replay_lsn()::text, pg_last_wal_receive_lsn()::text, \
             (SELECT received_tli FROM pg_stat_wal_receiver), \
             (SELECT status = 'streaming' FROM pg_stat_wal_receiver), \
             (SELECT timeline_id FROM pg_control_checkpoint())",
            &[],
        )
        .await
        .map_err(Error::sql("reading the replay position"))?;
    let received_tli: Option<i32> = row.get(2);
    let checkpoint_tli: Option<i32> = row.get(4);
    let replayed: Option<String> = row.get(0);
    let diverged = match &replayed {
        Some(at) => diverged(client, at).await?,
        None => None,
    };
    Ok(Observed {
        in_recovery,
        timeline: received_tli
            .or(checkpoint_tli)
            .and_then(|t| u32::try_from(t).ok()),
        lsn: replayed,
        received_lsn: row.get(1),
        streaming: row.get::<_, Option<bool>>(3).unwrap_or(false),
        diverged,
        synchronous: None,
        parameters: parameters(client).await.ok(),
    })
}

/// The parameters written in `postgresql.auto.conf` (the last entry of a name wins, as
/// PostgreSQL reads it) with their value in effect, and every parameter waiting for a
/// restart. A value written there that the pod's command line overrides waits for a restart
/// too: the new pod's command line no longer sets it.
pub async fn parameters(client: &Client) -> Result<Vec<super::ParameterState>, Error> {
    let rows = client
        .query(
            "WITH w AS (SELECT DISTINCT ON (name) name, setting FROM pg_file_settings \
               WHERE sourcefile LIKE '%/postgresql.auto.conf' ORDER BY name, seqno DESC) \
             SELECT coalesce(w.name, s.name), w.setting, \
               CASE WHEN s.name IS NULL THEN NULL ELSE current_setting(s.name) END, \
               coalesce(s.pending_restart, false) \
                 OR (w.name IS NOT NULL AND s.source = 'command line') \
             FROM w FULL JOIN pg_settings s ON s.name = w.name \
             WHERE w.name IS NOT NULL OR s.pending_restart \
             ORDER BY 1",
            &[],
        )
        .await
        .map_err(Error::sql("reading the parameters"))?;
    Ok(rows
        .iter()
        .map(|r| super::ParameterState {
            name: r.get(0),
            written: r.get(1),
            effective: r.get(2),
            pending_restart: r.get(3),
        })
        .collect())
}

/// A parameter's value as SQL: each item of a list parameter its own literal, anything else
/// one literal; dollar-quoted, so no setting of the server (`standard_conforming_strings`)
/// changes what a backslash or a quote in it means.
fn parameter_sql(name: &str, value: &str) -> String {
    let literal = |v: &str| {
        let mut tag = String::from("bosun");
        while v.contains(&format!("${tag}$")) {
            tag.push('x');
        }
        format!("${tag}${v}${tag}$")
    };
    let items = crate::contract::parameter_items(name, value);
    if crate::contract::LIST_PARAMETERS.contains(&name) && !items.is_empty() {
        items
            .iter()
            .map(|i| literal(i))
            .collect::<Vec<_>>()
            .join(", ")
    } else {
        literal(value)
    }
}

/// What [`set_parameters`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Names set or reset.
    pub changed: Vec<String>,
    /// Values PostgreSQL refused, each with its words (the others are applied).
    pub refused: Vec<String>,
}

/// Makes `postgresql.auto.conf` hold `desired` (the spec's parameters, names lower-case and
/// checked by the operator): each differing value set with ALTER SYSTEM, each parameter no
/// longer asked for reset (the operator's own entries kept), then one reload. A value
/// PostgreSQL refuses is reported, the others are applied.
pub async fn set_parameters(
    client: &Client,
    desired: &std::collections::BTreeMap<String, String>,
) -> Result<Applied, Error> {
    let now = parameters(client).await?;
    let written: std::collections::BTreeMap<&str, &str> = now
        .iter()
        .filter_map(|p| Some((p.name.as_str(), p.written.as_deref()?)))
        .collect();
    let mut out = Applied::default();
    for (name, value) in desired {
        if written
            .get(name.as_str())
            .is_some_and(|w| crate::contract::parameter_matches(name, w, value))
        {
            continue;
        }
        // Names were checked to be [A-Za-z0-9_.]; ALTER SYSTEM refuses a transaction block.
        match client
            .batch_execute(&format!(
                "ALTER SYSTEM SET {name} = {}",
                parameter_sql(name, value)
            ))
            .await
        {
            Ok(()) => out.changed.push(name.clone()),
            Err(e) => match e.as_db_error() {
                Some(db) => out
                    .refused
                    .push(format!("{name} = {value:?}: {}", db.message())),
                None => return Err(Error::sql("setting a parameter")(e)),
            },
        }
    }
    for name in written.keys() {
        if desired.contains_key(*name) || crate::contract::OPERATOR_AUTO_CONF.contains(name) {
            continue;
        }
        let valid = name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        if !valid {
            continue;
        }
        client
            .batch_execute(&format!("ALTER SYSTEM RESET {name}"))
            .await
            .map_err(Error::sql("resetting a parameter"))?;
        out.changed.push((*name).to_string());
    }
    if !out.changed.is_empty() {
        client
            .batch_execute("SELECT pg_reload_conf()")
            .await
            .map_err(Error::sql("reloading the configuration"))?;
    }
    Ok(out)
}

/// A replica replayed up to `replayed`: whether it diverged from the newest timeline whose
/// history its WAL receiver fetched (one directory listing; the history file read only when
/// a newer timeline is there).
async fn diverged(client: &Client, replayed: &str) -> Result<Option<String>, Error> {
    let names: Vec<String> = client
        .query("SELECT name FROM pg_ls_waldir()", &[])
        .await
        .map_err(Error::sql("listing pg_wal"))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let (Some(newest), Some(mine)) =
        super::timeline::newest_timelines(names.iter().map(String::as_str))
    else {
        return Ok(None);
    };
    if newest <= mine {
        return Ok(None);
    }
    let history: String = client
        .query_one(
            "SELECT pg_read_file('pg_wal/' || $1)",
            &[&format!("{newest:08X}.history")],
        )
        .await
        .map_err(Error::sql("reading a timeline history file"))?
        .get(0);
    Ok(super::timeline::divergence(
        newest, &history, mine, replayed,
    ))
}

#[cfg(test)]
mod standby_tests {
    use super::is_standby;

    #[test]
    fn only_an_instance_on_its_own_slot_is_a_standby() {
        assert!(is_standby(Some("pg-2"), Some("bosun_pg_2")));
        // A replica's clone: pg_basebackup on the replica's slot.
        assert!(!is_standby(Some("pg_basebackup"), Some("bosun_pg_2")));
        assert!(!is_standby(Some("pg_receivewal"), Some("archive")));
        // Another program on some instance's slot, or an instance on another's.
        assert!(!is_standby(Some("pg-3"), Some("bosun_pg_2")));
        assert!(!is_standby(Some(""), Some("bosun_")));
        assert!(!is_standby(None, Some("bosun_pg_2")));
        assert!(!is_standby(Some("pg-2"), None));
    }
}
