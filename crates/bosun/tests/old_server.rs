//! `bosun run` against an API server older than bosun supports stops at start with the
//! server's version and the supported range — not a crash or a 404 mid-reconcile. The server
//! here answers `/version` as Kubernetes v1.20.2 does and 404 to everything else (no old
//! kube-apiserver is built for the tests); the time limit only guards against a hang.
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const HANG_GUARD: Duration = Duration::from_secs(120);

/// Answers every request on `listener` until the test process ends.
fn serve_as(listener: TcpListener, version: serde_json::Value) {
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let version = version.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(&stream);
                loop {
                    let mut request_line = String::new();
                    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
                        return;
                    }
                    // Headers up to the blank line; requests here carry no body we need.
                    let mut length = 0usize;
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).unwrap_or(0) == 0 {
                            return;
                        }
                        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                        if h == "\r\n" || h == "\n" {
                            break;
                        }
                    }
                    let mut body = vec![0u8; length];
                    let _ = std::io::Read::read_exact(&mut reader, &mut body);
                    let path = request_line.split_whitespace().nth(1).unwrap_or("");
                    let (status, body) = if path.starts_with("/version") {
                        ("200 OK", version.to_string())
                    } else {
                        (
                            "404 Not Found",
                            serde_json::json!({"kind": "Status", "apiVersion": "v1",
                                "status": "Failure", "reason": "NotFound", "code": 404})
                            .to_string(),
                        )
                    };
                    let reply = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if (&stream).write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
}

#[test]
fn bosun_run_refuses_an_api_server_older_than_the_supported_range() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    serve_as(
        listener,
        serde_json::json!({"major": "1", "minor": "20", "gitVersion": "v1.20.2",
            "gitCommit": "", "gitTreeState": "clean", "buildDate": "", "goVersion": "",
            "compiler": "gc", "platform": "linux/amd64"}),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: old\n  cluster:\n    server: http://127.0.0.1:{port}\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: old\n  context: {{cluster: old, user: u}}\ncurrent-context: old\n"
        ),
    )
    .expect("kubeconfig");
    let child = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(["run", "--operators", "bookstore"])
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(["--metrics-addr=127.0.0.1:0", "--probe-addr=127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn bosun run");
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(HANG_GUARD) {
        Ok(out) => out.expect("wait"),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("bosun run was still running after {HANG_GUARD:?} against a v1.20 server");
        }
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "exited 0:\n{stderr}");
    assert!(stderr.contains("Kubernetes v1.20.2"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "supports 1.{} to 1.{}",
            bosun_runtime::kubeversion::MIN_MINOR,
            bosun_runtime::kubeversion::MAX_TESTED_MINOR
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}
