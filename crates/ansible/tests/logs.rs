//! What a run logs: `debug` output at info as ansible-operator logs it (`[playbook debug]`,
//! with the task's name), never a `no_log` task's output.
use std::sync::{Arc, Mutex};

use bosun_ansible::{Discovery, LoadOptions, Role, RunContext};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// One event: its level and its fields as text.
type Logged = (Level, Vec<(String, String)>);

/// Every event.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Logged>>>);

struct Fields(Vec<(String, String)>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .push((field.name().to_string(), format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().to_string(), value.to_string()));
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, e: &Event<'_>) {
        let mut f = Fields(Vec::new());
        e.record(&mut f);
        self.0
            .lock()
            .expect("capture")
            .push((*e.metadata().level(), f.0));
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

const TASKS: &str = r#"
- name: say hello
  debug:
    msg: "hello {{ who }}"
- name: say the secret
  debug:
    msg: "token {{ token }}"
  no_log: true
"#;

#[tokio::test(flavor = "current_thread")]
async fn debug_is_logged_and_no_log_is_not() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    let dir = tempfile::tempdir().expect("dir");
    std::fs::create_dir_all(dir.path().join("r/tasks")).expect("role");
    std::fs::write(dir.path().join("r/tasks/main.yml"), TASKS).expect("tasks");
    let role = Role::load(
        "r",
        &LoadOptions {
            roles_path: vec![dir.path().to_path_buf()],
            collections_paths: vec![],
            cwd: dir.path().to_path_buf(),
        },
    )
    .expect("load");
    let ctx = RunContext::new(None, Arc::new(Discovery::new()), None);
    let vars: serde_json::Map<String, serde_json::Value> =
        serde_json::from_value(serde_json::json!({"who": "world", "token": "s3cr3t-t0ken"}))
            .expect("vars");
    let o = role.run(&ctx, &vars).await;
    assert!(o.succeeded());
    let events = capture.0.lock().expect("capture").clone();
    let debug: Vec<_> = events
        .iter()
        .filter(|(l, f)| {
            *l == Level::INFO
                && f.iter()
                    .any(|(k, v)| k == "message" && v == "[playbook debug]")
        })
        .collect();
    assert_eq!(debug.len(), 2, "{events:?}");
    let field = |i: usize, k: &str| {
        debug[i]
            .1
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(field(0, "task").as_deref(), Some("say hello"));
    assert_eq!(field(0, "msg").as_deref(), Some("hello world"));
    assert_eq!(field(1, "msg").as_deref(), Some(bosun_ansible::CENSORED));
    assert!(
        !format!("{events:?}").contains("s3cr3t-t0ken"),
        "a log holds the secret: {events:?}"
    );
}
