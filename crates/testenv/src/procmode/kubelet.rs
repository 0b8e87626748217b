//! The kubelet's streaming endpoint, for process mode: `pods/exec` (and so `kubectl exec`,
//! `kubectl cp`, Ansible's `k8s_exec` and `k8s_cp`) reaches the agent's containers.
//!
//! The API server serves `pods/exec` by proxying the client's connection to the kubelet of the
//! pod's node, at the node's address and `status.daemonEndpoints.kubeletEndpoint.Port`, over
//! TLS. It checks the kubelet's certificate only when started with
//! `--kubelet-certificate-authority` (the test control plane is not), so a self-signed one
//! does. A WebSocket client speaking `v4.channel.k8s.io` (the Python client, older kubectl)
//! is passed through as it is; this endpoint answers that protocol: one binary message per
//! chunk, its first byte the channel (0 stdin, 1 stdout, 2 stderr, 3 the final status).
//! SPDY and `v5.channel.k8s.io` (which the API server turns into SPDY) are refused with a
//! clear message: they would need SPDY/3.1's compressed framing here.
//!
//! One endpoint per test process (one control plane, so one node, per process), on its own
//! thread and runtime so that it outlives any one test's runtime; every process-mode agent
//! of the process registers with it, and a request goes to the agent that runs the pod.
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpListener as StdListener;
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::{sandbox, Ctx, PodShared};

const PROTOCOL: &str = "v4.channel.k8s.io";
const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const STATUS: u8 = 3;
/// A request head larger than this is refused (the API server's are a few hundred bytes).
const MAX_HEAD: usize = 16 * 1024;
/// A client message larger than this ends the session (stdin arrives in small chunks).
const MAX_MESSAGE: usize = 16 * 1024 * 1024;

static AGENTS: Mutex<Vec<Weak<Ctx>>> = Mutex::new(Vec::new());
static PORT: OnceLock<Option<u16>> = OnceLock::new();

/// Registers an agent; starts the endpoint on first use. The port, or None when it could not
/// be started (logged; exec is then unavailable, the pods still run).
pub(crate) fn register(ctx: &Arc<Ctx>) -> Option<u16> {
    {
        let mut agents = AGENTS.lock().unwrap_or_else(|e| e.into_inner());
        agents.retain(|a| a.strong_count() > 0);
        agents.push(Arc::downgrade(ctx));
    }
    port()
}

/// The endpoint's port, for the node's `daemonEndpoints`.
pub(crate) fn port() -> Option<u16> {
    *PORT.get_or_init(|| match start() {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::warn!(error = %e, "process mode: no exec endpoint");
            None
        }
    })
}

fn tls_config() -> Result<Arc<rustls::ServerConfig>, String> {
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()])
        .map_err(|e| e.to_string())?;
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
    let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_no_client_auth()
    .with_single_cert(vec![cert.cert.der().clone()], key)
    .map_err(|e| e.to_string())?;
    Ok(Arc::new(cfg))
}

fn start() -> Result<u16, String> {
    let tls = tls_config()?;
    let listener = StdListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("bosun-kubelet")
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    std::thread::Builder::new()
        .name("bosun-kubelet".into())
        .spawn(move || rt.block_on(serve(listener, tls)))
        .map_err(|e| e.to_string())?;
    Ok(port)
}

async fn serve(listener: StdListener, tls: Arc<rustls::ServerConfig>) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "process mode: exec endpoint");
            return;
        }
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            match acceptor.accept(tcp).await {
                Ok(stream) => {
                    if let Err(e) = connection(stream).await {
                        tracing::debug!(error = %e, "process mode: exec session");
                    }
                }
                Err(e) => tracing::debug!(error = %e, "process mode: exec endpoint TLS"),
            }
        });
    }
}

/// A parsed request head.
struct Request {
    path: String,
    query: Vec<(String, String)>,
    headers: HashMap<String, String>,
}

fn parse_head(head: &str) -> Option<Request> {
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let _method = first.next()?;
    let target = first.next()?;
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let query = query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (unescape(k), unescape(v))
        })
        .collect();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Some(Request {
        path: path.to_string(),
        query,
        headers,
    })
}

/// Query-string decoding as Go's `url.ParseQuery` (the API server encodes with
/// `url.Values.Encode`: `+` for a space).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(v) => {
                        out.push(v);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn flag(req: &Request, name: &str) -> bool {
    req.query
        .iter()
        .any(|(k, v)| k == name && matches!(v.as_str(), "1" | "true" | "True"))
}

async fn reply<S: AsyncWrite + Unpin>(s: &mut S, code: &str, msg: &str) -> std::io::Result<()> {
    let text = format!(
        "HTTP/1.1 {code}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{msg}",
        msg.len()
    );
    s.write_all(text.as_bytes()).await?;
    s.shutdown().await
}

/// The running container `(ns, pod, container)` of any registered agent.
fn find(ns: &str, pod: &str, container: &str) -> Result<(Arc<PodShared>, super::Running), String> {
    let agents: Vec<Arc<Ctx>> = AGENTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    let shared = agents
        .iter()
        .find_map(|a| a.find(ns, pod))
        .ok_or_else(|| format!("pod {ns}/{pod} is not running on this node"))?;
    let running = shared
        .running
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(container)
        .cloned()
        .ok_or_else(|| format!("container {container:?} of pod {ns}/{pod} is not running"))?;
    Ok((shared, running))
}

async fn connection<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    mut s: S,
) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    // Byte by byte: nothing after the head may be consumed (the client may send frames at
    // once), and heads are small.
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() >= MAX_HEAD || s.read(&mut byte).await? == 0 {
            return Ok(());
        }
        head.push(byte[0]);
    }
    let Some(req) = parse_head(&String::from_utf8_lossy(&head)) else {
        return reply(&mut s, "400 Bad Request", "malformed request").await;
    };
    let parts: Vec<&str> = req.path.trim_start_matches('/').split('/').collect();
    let (ns, pod, container) = match parts.as_slice() {
        ["exec", ns, pod, container] => (unescape(ns), unescape(pod), unescape(container)),
        _ => {
            let msg = format!(
                "the process-mode node agent serves /exec/<namespace>/<pod>/<container> only, \
                 not {}",
                req.path
            );
            return reply(&mut s, "404 Not Found", &msg).await;
        }
    };
    let header = |n: &str| req.headers.get(n).map(String::as_str).unwrap_or("");
    let protocols: Vec<&str> = header("sec-websocket-protocol")
        .split(',')
        .map(str::trim)
        .collect();
    if !header("upgrade").eq_ignore_ascii_case("websocket") || !protocols.contains(&PROTOCOL) {
        let msg = format!(
            "the process-mode node agent speaks WebSocket {PROTOCOL} only (asked for upgrade \
             {:?}, protocols {:?}); SPDY and v5.channel.k8s.io are not implemented",
            header("upgrade"),
            header("sec-websocket-protocol")
        );
        return reply(&mut s, "400 Bad Request", &msg).await;
    }
    let command: Vec<String> = req
        .query
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    let (shared, (sandbox, env)) = match find(&ns, &pod, &container) {
        Ok(found) => found,
        Err(msg) => return reply(&mut s, "404 Not Found", &msg).await,
    };
    let accept = accept_key(header("sec-websocket-key"));
    let ok = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: {PROTOCOL}\r\n\r\n"
    );
    s.write_all(ok.as_bytes()).await?;
    // The API server asks the kubelet with `input`/`output`/`error` (corev1's Exec*Param),
    // not the `stdin`/`stdout`/`stderr` of PodExecOptions; both are read.
    let (want_in, want_out, want_err) = (
        flag(&req, "input") || flag(&req, "stdin"),
        flag(&req, "output") || flag(&req, "stdout"),
        flag(&req, "error") || flag(&req, "stderr"),
    );
    let (mut rd, mut wr) = tokio::io::split(s);
    let spawned = sandbox.command(&command, &env, None).and_then(|mut cmd| {
        let pipe = |on: bool| if on { Stdio::piped() } else { Stdio::null() };
        cmd.stdin(pipe(want_in))
            .stdout(pipe(want_out))
            .stderr(pipe(want_err));
        sandbox::Proc::spawn(cmd)
    });
    let mut proc = match spawned {
        Ok(p) => p,
        Err(e) => {
            // As a container runtime reports a command it cannot start.
            let status = serde_json::json!({"metadata": {}, "status": "Failure",
                "message": format!("failed to exec in container: starting {command:?}: {e}"),
                "reason": "InternalError",
                "details": {"causes": [{"message": e.to_string()}]}});
            write_frame(&mut wr, 2, &message(STATUS, status.to_string().as_bytes())).await?;
            write_frame(&mut wr, 8, &1000u16.to_be_bytes()).await?;
            return wr.shutdown().await;
        }
    };
    shared.add_group(proc.pgid);
    let (stdin, stdout, stderr) = proc.take_stdio();
    let (out_tx, mut out_rx) = mpsc::channel::<(u8, Vec<u8>)>(16);
    for (chan, pipe) in [
        (STDOUT, stdout.map(|p| Box::new(p) as Box<dyn Read + Send>)),
        (STDERR, stderr.map(|p| Box::new(p) as Box<dyn Read + Send>)),
    ] {
        if let Some(mut pipe) = pipe {
            let tx = out_tx.clone();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 32 * 1024];
                while let Ok(n) = pipe.read(&mut buf) {
                    if n == 0 || tx.blocking_send((chan, buf[..n].to_vec())).is_err() {
                        break;
                    }
                }
            });
        }
    }
    drop(out_tx);
    // stdin: written by a thread of its own (a pipe write may block), fed from the socket.
    let (in_tx, in_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    if let Some(mut pipe) = stdin {
        std::thread::spawn(move || {
            for chunk in in_rx {
                if pipe.write_all(&chunk).is_err() {
                    break;
                }
            }
        });
    }
    let (closed_tx, mut closed_rx) = mpsc::channel::<()>(1);
    let reader = tokio::spawn(async move {
        // Ends on the client's close, a broken connection or a protocol error.
        while let Ok(Some(msg)) = read_message(&mut rd).await {
            if let Some((&STDIN, data)) = msg.split_first() {
                if in_tx.send(data.to_vec()).is_err() {
                    // stdin closed by the process: ignore the rest.
                }
            }
        }
        let _ = closed_tx.send(()).await;
    });
    let mut client_gone = false;
    loop {
        tokio::select! {
            chunk = out_rx.recv() => match chunk {
                Some((chan, data)) => write_frame(&mut wr, 2, &message(chan, &data)).await?,
                None => break,
            },
            _ = closed_rx.recv(), if !client_gone => {
                // A client that hangs up takes its command with it, as with the kubelet.
                client_gone = true;
                sandbox::kill_group(proc.pgid);
            }
        }
    }
    let exit = proc.wait().await;
    sandbox::kill_group(proc.pgid);
    shared.remove_group(proc.pgid);
    reader.abort();
    let (code, _) = sandbox::exit_code(&exit?);
    let status = if code == 0 {
        serde_json::json!({"metadata": {}, "status": "Success"})
    } else {
        serde_json::json!({"metadata": {}, "status": "Failure",
            "message": format!("command terminated with non-zero exit code: exit status {code}"),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]}})
    };
    if !client_gone {
        write_frame(&mut wr, 2, &message(STATUS, status.to_string().as_bytes())).await?;
        write_frame(&mut wr, 8, &1000u16.to_be_bytes()).await?;
    }
    wr.shutdown().await
}

fn message(chan: u8, data: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(data.len() + 1);
    m.push(chan);
    m.extend_from_slice(data);
    m
}

/// One unmasked, unfragmented server frame (RFC 6455 §5.2).
async fn write_frame<W: AsyncWrite + Unpin>(
    w: &mut W,
    opcode: u8,
    payload: &[u8],
) -> std::io::Result<()> {
    let mut f = Vec::with_capacity(payload.len() + 10);
    f.push(0x80 | opcode);
    match payload.len() {
        n if n < 126 => f.push(n as u8),
        n if n <= u16::MAX as usize => {
            f.push(126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    f.extend_from_slice(payload);
    w.write_all(&f).await?;
    w.flush().await
}

/// The next whole data message from the client (fragments joined, control frames handled
/// in between); None once the client closes.
async fn read_message<R: AsyncRead + Unpin>(r: &mut R) -> std::io::Result<Option<Vec<u8>>> {
    let mut msg = Vec::new();
    loop {
        let mut h = [0u8; 2];
        r.read_exact(&mut h).await?;
        let (fin, opcode, masked) = (h[0] & 0x80 != 0, h[0] & 0x0f, h[1] & 0x80 != 0);
        let len = match h[1] & 0x7f {
            126 => {
                let mut b = [0u8; 2];
                r.read_exact(&mut b).await?;
                u64::from(u16::from_be_bytes(b))
            }
            127 => {
                let mut b = [0u8; 8];
                r.read_exact(&mut b).await?;
                u64::from_be_bytes(b)
            }
            n => u64::from(n),
        };
        if len > MAX_MESSAGE as u64 || msg.len() as u64 + len > MAX_MESSAGE as u64 {
            return Err(std::io::Error::other("WebSocket message too large"));
        }
        let mut mask = [0u8; 4];
        if masked {
            r.read_exact(&mut mask).await?;
        }
        let mut payload = vec![0u8; len as usize];
        r.read_exact(&mut payload).await?;
        if masked {
            for (i, b) in payload.iter_mut().enumerate() {
                *b ^= mask[i % 4];
            }
        }
        match opcode {
            8 => return Ok(None),
            // Ping and pong: the API server passes them through; nothing to answer for
            // a session this short-lived.
            9 | 10 => continue,
            _ => {
                msg.extend_from_slice(&payload);
                if fin {
                    return Ok(Some(msg));
                }
            }
        }
    }
}

/// `Sec-WebSocket-Accept` for a key (RFC 6455 §4.2.2): base64(SHA-1(key + GUID)).
fn accept_key(key: &str) -> String {
    let digest = sha1(format!("{key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11").as_bytes());
    base64(&digest)
}

/// SHA-1 (FIPS 180-4), only for the handshake above.
fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0];
    let mut padded = data.to_vec();
    padded.push(0x80);
    while padded.len() % 64 != 56 {
        padded.push(0);
    }
    padded.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in padded.chunks_exact(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A827999),
                20..=39 => (b ^ c ^ d, 0x6ED9EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1BBCDC),
                _ => (b ^ c ^ d, 0xCA62C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 20];
    for (i, x) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}

fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_key_as_rfc_6455() {
        // RFC 6455 §1.3's example.
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"a"), "YQ==");
    }

    #[test]
    fn query_as_go_parses_it() {
        let req = parse_head(
            "POST /exec/ns/p/c?command=sh&command=-c&command=echo+a%26b%3D1&stdout=1&stdin=true \
             HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
        )
        .expect("parsed");
        let cmd: Vec<&str> = req
            .query
            .iter()
            .filter(|(k, _)| k == "command")
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(cmd, ["sh", "-c", "echo a&b=1"]);
        assert!(flag(&req, "stdout") && flag(&req, "stdin") && !flag(&req, "stderr"));
        assert_eq!(
            req.headers.get("upgrade").map(String::as_str),
            Some("websocket")
        );
        assert_eq!(unescape("100%"), "100%");
        assert_eq!(unescape("%zz"), "%zz");
    }

    #[tokio::test]
    async fn frames_round_trip_masked_and_fragmented() {
        let (mut a, mut b) = tokio::io::duplex(1 << 20);
        // A masked client frame in two fragments, a ping between them, then a close.
        let mask = [1u8, 2, 3, 4];
        let mut raw = Vec::new();
        for (first, fin, part) in [(true, false, &b"\x00hel"[..]), (false, true, &b"lo"[..])] {
            raw.push(if fin { 0x80 } else { 0 } | if first { 2 } else { 0 });
            raw.push(0x80 | part.len() as u8);
            raw.extend_from_slice(&mask);
            raw.extend(part.iter().enumerate().map(|(i, c)| c ^ mask[i % 4]));
            if first {
                raw.extend_from_slice(&[0x89, 0x80, 0, 0, 0, 0]);
            }
        }
        raw.extend_from_slice(&[0x88, 0x80, 0, 0, 0, 0]);
        a.write_all(&raw).await.expect("write");
        assert_eq!(
            read_message(&mut b).await.expect("read"),
            Some(b"\x00hello".to_vec())
        );
        assert_eq!(read_message(&mut b).await.expect("read"), None);
        // A long server frame takes the 16-bit length.
        write_frame(&mut a, 2, &vec![7u8; 300])
            .await
            .expect("frame");
        let mut h = [0u8; 4];
        b.read_exact(&mut h).await.expect("head");
        assert_eq!(h, [0x82, 126, 1, 44]);
    }
}
