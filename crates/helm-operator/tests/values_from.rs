//! `valuesFrom` (bosun's watches.yaml extension, issue 34) on the real API server: values
//! from a ConfigMap and a Secret merged under the custom resource's spec (sources in order,
//! then the spec, then `overrideValues`); a missing source is a condition naming it, not a
//! crash and not empty values; a change of a source re-reconciles the custom resource; no
//! value the Secret gave reaches the operator's log, its Events or the status — not even when
//! the chart's own error quotes it.
mod support;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine as _;
use bosun_helm_operator::Storage;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use support::*;

const USER: &str = "system:serviceaccount:bosun-system:bosun-helm-values-from";

/// Everything the operator logs at the default level (info).
fn captured() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sink = buf.clone();
        let _ = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .with_writer(move || Sink(sink.clone()))
            .try_init();
        buf
    })
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn forms(secret: &str) -> Vec<String> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    vec![secret.to_string(), b64(secret), b64(&b64(secret))]
}

fn message(o: &kube::core::DynamicObject, type_: &str) -> String {
    condition(o, type_)
        .and_then(|c| c["message"].as_str())
        .unwrap_or("")
        .to_string()
}

async fn put_creds(env: &Env, creds: &str) {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "db-creds"},
        "stringData": {"creds.yaml": creds}
    }))
    .expect("secret");
    Api::<Secret>::namespaced(env.admin.clone(), &env.ns)
        .patch(
            "db-creds",
            &PatchParams::apply("values-from-test").force(),
            &Patch::Apply(&secret),
        )
        .await
        .expect("the Secret");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_come_from_sources_under_the_spec_and_no_secret_value_shows() {
    captured();
    let env = env("helm-valuesfrom").await;
    let watches = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/charts/values-from-watches.yaml");
    let ops = operators(&watches, Storage::Secrets);
    install_crds(&env.admin, &ops).await;
    grant(&env, &ops, USER).await;
    let op = start(&env, ops, USER).await;
    let sourced = resource("test.bosun.dev", "v1", "Sourced");
    let (first, second, quoted) = (
        "F1rst-planted-pa55",
        "S3cond-planted-pa55",
        "Qu0ted-planted-pa55",
    );

    create(
        &env,
        &sourced,
        "apiVersion: test.bosun.dev/v1\nkind: Sourced\nmetadata:\n  name: a\nspec:\n  level: warn\n  mode: spec\n",
    )
    .await;
    // No source yet: the first missing one is named, and nothing is installed.
    let ns = env.ns.clone();
    let o = wait_for(&env, &sourced, "a", 90, "the ConfigMap missing", |o| {
        has(o, "Irreconcilable", "True", Some("ValuesFromError"))
    })
    .await;
    assert_eq!(
        message(&o, "Irreconcilable"),
        format!("valuesFrom: ConfigMap {ns}/shared-values not found; create it or mark the source optional: true")
    );
    assert!(!op.task.is_finished(), "the operator is still running");

    // The ConfigMap appears: its watch brings a reconcile, which now misses the Secret.
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "shared-values"},
        "data": {"values.yaml": "greeting: from-cm\nlevel: debug\nmode: cm\ndb:\n  host: cm-host\n"}
    }))
    .expect("configmap");
    Api::<ConfigMap>::namespaced(env.admin.clone(), &env.ns)
        .create(&PostParams::default(), &cm)
        .await
        .expect("the ConfigMap");
    let want = format!(
        "valuesFrom: Secret {ns}/db-creds not found; create it or mark the source optional: true"
    );
    wait_for(&env, &sourced, "a", 90, "the Secret missing", |o| {
        message(o, "Irreconcilable") == want
    })
    .await;

    // The Secret appears: installed, each value from where precedence says.
    put_creds(
        &env,
        &format!("db:\n  host: secret-host\n  password: {first}\n"),
    )
    .await;
    wait_for(&env, &sourced, "a", 90, "installed", |o| {
        has(o, "Deployed", "True", Some("InstallSuccessful"))
            && condition(o, "Irreconcilable").is_none()
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(env.admin.clone(), &env.ns);
    let cfg = cms.get("a-cfg").await.expect("the chart's ConfigMap");
    let data = cfg.data.expect("data");
    assert_eq!(
        data["greeting"], "from-cm",
        "a source's value over the chart's"
    );
    assert_eq!(
        data["host"], "secret-host",
        "a later source over an earlier one"
    );
    assert_eq!(data["level"], "warn", "the spec over the sources");
    assert_eq!(data["mode"], "override", "overrideValues over the spec");
    let secrets: Api<Secret> = Api::namespaced(env.admin.clone(), &env.ns);
    let password = |s: Secret| s.data.and_then(|d| d.get("password").map(|b| b.0.clone()));
    assert_eq!(
        password(secrets.get("a-db").await.expect("the chart's Secret")),
        Some(first.as_bytes().to_vec())
    );

    // The Secret changes: its watch re-reconciles, the release is upgraded with the new value.
    put_creds(
        &env,
        &format!("db:\n  host: secret-host\n  password: {second}\n"),
    )
    .await;
    let s2 = secrets.clone();
    eventually(90, || async {
        let got = password(s2.get("a-db").await.ok()?)?;
        (got == second.as_bytes()).then_some(())
    })
    .await
    .expect("the Secret's change reached the release");
    wait_for(&env, &sourced, "a", 90, "upgraded", |o| {
        has(o, "Deployed", "True", Some("UpgradeSuccessful"))
    })
    .await;

    // A value the chart's own error quotes is masked wherever the error goes.
    put_creds(
        &env,
        &format!("db:\n  host: secret-host\n  password: {quoted}\n  reject: true\n"),
    )
    .await;
    let o = wait_for(&env, &sourced, "a", 90, "the chart's refusal", |o| {
        message(o, "ReleaseFailed").contains("the database refused password")
    })
    .await;
    assert!(
        message(&o, "ReleaseFailed").ends_with("the database refused password ****"),
        "{}",
        message(&o, "ReleaseFailed")
    );
    let status = o.data["status"].to_string();
    let events = Api::<Event>::namespaced(env.admin.clone(), &env.ns)
        .list(&Default::default())
        .await
        .expect("events");
    let event_text: Vec<String> = events
        .items
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e.reason.as_deref().unwrap_or(""),
                e.message.as_deref().unwrap_or("")
            )
        })
        .collect();
    assert!(
        event_text
            .iter()
            .any(|e| e.contains("the database refused password ****")),
        "the refusal is an Event: {event_text:?}"
    );
    // The runtime logs the failed reconcile after its status write: wait for that line.
    let log_text = || String::from_utf8_lossy(&captured().lock().expect("log")).into_owned();
    eventually(60, || async {
        log_text()
            .contains("the database refused password ****")
            .then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("the failed reconcile is not logged:\n{}", log_text()));
    let log = log_text();
    for planted in [first, second, quoted] {
        for form in forms(planted) {
            assert!(!log.contains(&form), "the log holds {form:?}:\n{log}");
            assert!(
                !event_text.iter().any(|e| e.contains(&form)),
                "an Event holds {form:?}: {event_text:?}"
            );
            assert!(
                !status.contains(&form),
                "the status holds {form:?}: {status}"
            );
        }
    }
    op.stop().await;
}
