//! `bosun dev --operators postgres` through the binary: a local control plane, the
//! process-mode node agent, the sample 3-instance PostgresCluster of real PostgreSQL shown
//! (one primary, two replicas), and the printed `psql` command pasted as printed: it reaches
//! a writable primary. Ctrl-C (SIGINT) then stops everything cleanly. Needs root, the control
//! plane assets and PostgreSQL (`bash scripts/setup-postgres.sh`).
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn dev_with_postgres_runs_three_instances_and_prints_a_working_psql_command() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(["dev", "--operators", "postgres", "--timeout", "150"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run bosun dev");
    // stderr passed through; the signal is sent once bosun says it waits for one.
    let stderr = child.stderr.take().expect("stderr");
    let (waiting_tx, waiting_rx) = std::sync::mpsc::channel::<()>();
    let echo = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{line}");
            if line.contains("Ctrl-C stops everything") {
                let _ = waiting_tx.send(());
            }
        }
    });
    // stdout is read to its end (bosun must never write to a closed pipe); the lines up to
    // the kubeconfig line (printed once the sample is ready) are what is checked.
    let stdout = child.stdout.take().expect("stdout");
    let (lines_tx, lines_rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let mut seen = Vec::new();
    let mut psql = None;
    for line in lines_rx.iter() {
        if line.trim_start().starts_with("PGPASSFILE=") {
            psql = Some(line.trim().to_string());
        }
        let done = line.starts_with("kubeconfig: ");
        seen.push(line);
        if done {
            break;
        }
    }
    let out = seen.join("\n");
    let roles: Vec<(&str, &str)> = seen
        .iter()
        .filter(|l| l.starts_with("postgres-sample-"))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((*f.first()?, *f.get(1)?))
        })
        .collect();
    let result = || {
        assert_eq!(
            roles,
            [
                ("postgres-sample-1", "primary"),
                ("postgres-sample-2", "replica"),
                ("postgres-sample-3", "replica"),
            ],
            "{out}"
        );
        let psql = psql
            .clone()
            .unwrap_or_else(|| panic!("no psql command: {out}"));
        let run = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "{psql} -XAtc \"CREATE TABLE dev_t (v int); INSERT INTO dev_t VALUES (1); SELECT pg_is_in_recovery(), count(*) FROM dev_t\""
            ))
            .output()
            .expect("run psql");
        let said = String::from_utf8_lossy(&run.stdout);
        assert!(
            run.status.success(),
            "{psql}: {said}{}",
            String::from_utf8_lossy(&run.stderr)
        );
        assert_eq!(said.lines().last(), Some("f|1"), "{said}");
    };
    let outcome = std::panic::catch_unwind(result);
    waiting_rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("bosun dev never said it waits for Ctrl-C");
    // Stopped (SIGTERM, handled as Ctrl-C): everything stops and bosun exits cleanly.
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(killed.success());
    let status = child.wait().expect("wait for bosun dev");
    let _ = echo.join();
    let _ = reader.join();
    if let Err(e) = outcome {
        std::panic::resume_unwind(e);
    }
    assert!(status.success(), "bosun dev after Ctrl-C: {status}");
    // The pgpass file went with the control plane's directory.
    let pgpass = psql
        .as_deref()
        .and_then(|c| c.strip_prefix("PGPASSFILE="))
        .and_then(|c| c.split_whitespace().next())
        .expect("the pgpass path");
    assert!(
        !std::path::Path::new(pgpass).exists(),
        "{pgpass} is left behind"
    );
}
