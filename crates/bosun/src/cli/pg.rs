//! `bosun pg instance`: the entry point of a PostgresCluster instance's pod. Hidden from the
//! help: the operator writes it into the pods it builds; people do not run it by hand.
use bosun_runtime::manager::shutdown_signal;
use bosun_runtime::telemetry::{self, LogFormat};
use clap::{Args, Subcommand};
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
pub struct PgArgs {
    #[command(subcommand)]
    pub command: PgCommand,
}

#[derive(Subcommand, Debug)]
pub enum PgCommand {
    /// Run one PostgreSQL instance (initdb or join, start, serve its state and the operator's
    /// requests on the pod IP). Secrets come from BOSUN_PG_SUPERUSER_PASSWORD,
    /// BOSUN_PG_REPLICATION_PASSWORD and BOSUN_PG_API_TOKEN.
    Instance(Box<bosun_postgres::instance::Args>),
    /// Copy this binary to DEST (an instance pod's init container, from bosun's image into
    /// a volume the PostgreSQL image's container runs it from).
    Install { dest: std::path::PathBuf },
    /// PostgreSQL's archive_command on a primary with a backup store: copy the WAL file
    /// PATH into the store as NAME (atomically; the same contents again succeed).
    ArchiveWal {
        #[arg(long)]
        store: std::path::PathBuf,
        path: std::path::PathBuf,
        name: String,
    },
    /// PostgreSQL's restore_command during a restore: copy the archived NAME to DEST; exit
    /// status 1 when the store does not hold it (the end of the archive).
    RestoreWal {
        #[arg(long)]
        store: std::path::PathBuf,
        name: String,
        dest: std::path::PathBuf,
    },
}

pub async fn run(args: PgArgs) -> anyhow::Result<()> {
    match args.command {
        PgCommand::Instance(a) => {
            telemetry::init(LogFormat::Text);
            let cfg = (*a).into_config()?;
            let stop = CancellationToken::new();
            let on_signal = stop.clone();
            tokio::spawn(async move {
                shutdown_signal().await;
                on_signal.cancel();
            });
            bosun_postgres::instance::run(cfg, stop).await?;
            Ok(())
        }
        PgCommand::Install { dest } => Ok(bosun_postgres::instance::install_self(&dest)?),
        PgCommand::ArchiveWal { store, path, name } => {
            Ok(bosun_postgres::backup::VolumeStore::new(store).archive_wal(&path, &name)?)
        }
        PgCommand::RestoreWal { store, name, dest } => {
            if bosun_postgres::backup::VolumeStore::new(store).restore_wal(&name, &dest)? {
                Ok(())
            } else {
                // Not an error worth a message: PostgreSQL asks for files past the end.
                std::process::exit(1)
            }
        }
    }
}
