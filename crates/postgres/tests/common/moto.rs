//! A real S3-compatible server for the S3 store's tests: moto (`bash
//! scripts/setup-moto.sh`), on a free port of 127.0.0.1, stopped when dropped.
use std::net::SocketAddr;
use std::time::{Duration, Instant};

pub const BUCKET: &str = "pg-backups";
pub const ACCESS_KEY: &str = "test-access";
pub const SECRET_KEY: &str = "test-secret";

pub struct Moto {
    pub addr: SocketAddr,
    /// `http://<addr>`.
    pub endpoint: String,
    child: std::process::Child,
}

impl Moto {
    /// Starts it and waits until it accepts connections (a minute at most).
    pub async fn start() -> Moto {
        let venv = std::env::var("BOSUN_MOTO_VENV").unwrap_or_else(|_| {
            format!(
                "{}/.cache/bosun/moto-venv",
                std::env::var("HOME").unwrap_or_default()
            )
        });
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = std::process::Command::new(format!("{venv}/bin/moto_server"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("moto_server (run scripts/setup-moto.sh)");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(60);
        while tokio::net::TcpStream::connect(addr).await.is_err() {
            assert!(
                Instant::now() < deadline,
                "moto_server did not listen on {port}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Moto {
            addr,
            endpoint: format!("http://{addr}"),
            child,
        }
    }

    /// A client of [`BUCKET`] under `root`.
    #[cfg(feature = "s3")]
    pub fn client(&self, root: &str) -> bosun_postgres::backup::s3::S3Store {
        bosun_postgres::backup::s3::S3Store::new(
            &self.endpoint,
            BUCKET,
            root,
            "us-east-1",
            bosun_postgres::backup::sigv4::Credentials {
                access_key: ACCESS_KEY.into(),
                secret_key: SECRET_KEY.into(),
            },
        )
        .expect("client")
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
