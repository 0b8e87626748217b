//! operator-sdk's helm-operator as the oracle of bosun's Helm flavour beyond the seed chart
//! (issue 35): a failed upgrade, uninstall with a hook, `overrideValues`, `reconcilePeriod`
//! (the watches field and the CR annotation), `selector`, and the annotations helm-operator
//! v1.42.2 reads (`internal/helm/controller/reconcile.go`: `upgrade-force`, `rollback-force`,
//! `uninstall-wait`, `reconcile-period`; `install-disable-hooks` and the other
//! `helm.sdk.operatorframework.io/*` annotations of helm-operator-plugins are not read by
//! operator-sdk's helm-operator, so there is nothing to compare them with).
//!
//! One fixture chart and watches.yaml (crates/helm-operator/tests/charts/peer), both operators
//! started once, at the same time, each limited to a namespace of its own; every scenario is a
//! custom resource of its own, played in both namespaces at once. The same outcome is asserted
//! for both; where bosun differs on purpose the difference is asserted and named.
mod peers;
use peers::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use bosun_watches::Flavor;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde_json::{json, Value};

const TEAM: &str = "platform";
const IMAGE: &str = "registry.example/app:1.2";

fn dir() -> PathBuf {
    repo().join("crates/helm-operator/tests/charts/peer")
}

fn kind(kind: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("peer.bosun.dev", "v1", kind),
        &format!("{}s", kind.to_lowercase()),
    )
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Who {
    HelmOperator,
    Bosun,
}

/// Either operator started as its image starts it: from the watches file's directory, limited
/// to `ns`, with the environment the overrides read.
fn start(who: Who, kubeconfig: &Path, ns: &str, log: &Path) -> Running {
    let mut cmd = match who {
        Who::HelmOperator => {
            let mut c = tokio::process::Command::new(peer("helm-operator"));
            c.args([
                "run",
                "--watches-file=watches.yaml",
                "--metrics-bind-address=0",
                "--health-probe-bind-address=0",
            ]);
            c
        }
        Who::Bosun => {
            let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_bosun"));
            c.args([
                "run".to_string(),
                format!("--watches={}", dir().join("watches.yaml").display()),
                format!("--metrics-addr=127.0.0.1:{}", free_port()),
                format!("--probe-addr=127.0.0.1:{}", free_port()),
            ]);
            c
        }
    };
    let child = cmd
        .current_dir(dir())
        .env("KUBECONFIG", kubeconfig)
        .env("WATCH_NAMESPACE", ns)
        .env("PEER_TEAM", TEAM)
        .env("PEER_IMAGE", IMAGE)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("log file"))
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("start {who:?}: {e}"));
    Running(child, None)
}

/// Conditions by type: status, reason, message.
fn full_conditions(o: &DynamicObject) -> BTreeMap<String, (String, String, String)> {
    o.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (s("type"), (s("status"), s("reason"), s("message")))
        })
        .collect()
}

fn has(o: &DynamicObject, ty: &str, status: &str, reason: &str) -> bool {
    conditions(o).get(ty) == Some(&(status.to_string(), reason.to_string()))
}

/// One side of the comparison: an operator, its namespace and its log.
struct Side {
    who: Who,
    client: Client,
    ns: String,
    log: PathBuf,
}

impl Side {
    fn api(&self, kind_name: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.ns, &kind(kind_name))
    }

    fn said(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn create(&self, kind_name: &str, name: &str, labels: Value, ann: Value, spec: Value) {
        let cr: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "peer.bosun.dev/v1",
            "kind": kind_name,
            "metadata": {"name": name, "labels": labels, "annotations": ann},
            "spec": spec,
        }))
        .expect("a custom resource");
        self.api(kind_name)
            .create(&PostParams::default(), &cr)
            .await
            .unwrap_or_else(|e| panic!("{:?}: create {kind_name} {name}: {e}", self.who));
    }

    async fn patch(&self, kind_name: &str, name: &str, patch: Value) {
        self.api(kind_name)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap_or_else(|e| panic!("{:?}: patch {kind_name} {name}: {e}", self.who));
    }

    /// Waits for the CR to satisfy `done`; the operator's log is shown otherwise.
    async fn wait(
        &self,
        kind_name: &str,
        name: &str,
        what: &str,
        done: impl Fn(&DynamicObject) -> bool,
    ) -> DynamicObject {
        let api = self.api(kind_name);
        let found = bosun_testenv::eventually(120, || {
            let api = api.clone();
            let done = &done;
            async move { api.get(name).await.ok().filter(|o| done(o)) }
        })
        .await;
        if let Some(o) = found {
            return o;
        }
        let now = api.get_opt(name).await.ok().flatten();
        panic!(
            "{:?}: {kind_name} {}/{name} never {what}; now {:?}; the operator said:\n{}",
            self.who,
            self.ns,
            now.map(|o| full_conditions(&o)),
            self.said()
        )
    }

    async fn wait_gone(&self, kind_name: &str, name: &str) {
        let api = self.api(kind_name);
        let gone = bosun_testenv::eventually(120, || async {
            api.get_opt(name).await.ok()?.is_none().then_some(())
        })
        .await;
        assert!(
            gone.is_some(),
            "{:?}: {kind_name} {name} is still there after its delete; the operator said:\n{}",
            self.who,
            self.said()
        );
    }

    async fn config_map(&self, name: &str) -> Option<ConfigMap> {
        Api::<ConfigMap>::namespaced(self.client.clone(), &self.ns)
            .get_opt(name)
            .await
            .expect("read a ConfigMap")
    }

    /// The release records of `release`: version -> (status label, decoded record).
    async fn records(&self, release: &str) -> BTreeMap<i64, (String, Value)> {
        Api::<Secret>::namespaced(self.client.clone(), &self.ns)
            .list(&ListParams::default().labels(&format!("owner=helm,name={release}")))
            .await
            .expect("release secrets")
            .into_iter()
            .map(|s| {
                let rec = record(&s, &self.ns);
                let status = s.labels().get("status").cloned().unwrap_or_default();
                (
                    rec["version"].as_f64().unwrap_or(-1.0) as i64,
                    (status, rec),
                )
            })
            .collect()
    }

    /// The distinct (type, reason, message) of the Events about CR `name` with `reason`.
    async fn events(&self, name: &str, reason: &str) -> Vec<(String, String, String)> {
        let mut out: Vec<_> = Api::<Event>::namespaced(self.client.clone(), &self.ns)
            .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
            .await
            .expect("events")
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .map(|e| {
                (
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.message.unwrap_or_default(),
                )
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// What one operator did with the scenarios.
#[derive(Debug, Default)]
struct Seen {
    basic_conditions: BTreeMap<String, (String, String, String)>,
    basic_config: Value,
    basic_record: Value,
    override_events: Vec<(String, String, String)>,
    basic_finalizers: Vec<String>,
    unlabelled_touched: bool,
    failed_conditions: BTreeMap<String, (String, String)>,
    failed_records: BTreeMap<i64, String>,
    reverted_conditions: BTreeMap<String, (String, String)>,
    reverted_records: BTreeMap<i64, String>,
    forced: BTreeMap<String, (String, String)>,
    forced_value: Option<String>,
    unforced: BTreeMap<String, (String, String)>,
    unforced_value: Option<String>,
    hooked_finalizers: Vec<String>,
    goodbye: Value,
    waiting: BTreeMap<String, (String, String, String)>,
    waiting_cr_there: bool,
}

fn scenario_spec(extra: Value) -> Value {
    let mut spec = json!({"team": "from-the-cr", "nested": {"level": "from-the-cr"}});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    spec
}

fn labelled() -> Value {
    json!({"peer": "yes"})
}

async fn play(side: &Side) -> Seen {
    let mut seen = Seen::default();
    let deployed = |o: &DynamicObject| has(o, "Deployed", "True", "InstallSuccessful");
    // Every scenario's custom resource at once.
    let s = side;
    tokio::join!(
        s.create(
            "Scenario",
            "basic",
            labelled(),
            json!({}),
            scenario_spec(json!({}))
        ),
        s.create(
            "Scenario",
            "unlabelled",
            json!({}),
            json!({}),
            scenario_spec(json!({}))
        ),
        s.create(
            "Scenario",
            "failing",
            labelled(),
            json!({}),
            scenario_spec(json!({}))
        ),
        s.create(
            "Scenario",
            "forced",
            labelled(),
            json!({"helm.sdk.operatorframework.io/upgrade-force": "true"}),
            scenario_spec(json!({"immutable": true}))
        ),
        s.create(
            "Scenario",
            "unforced",
            labelled(),
            json!({}),
            scenario_spec(json!({"immutable": true}))
        ),
        s.create(
            "Scenario",
            "hooked",
            labelled(),
            json!({}),
            scenario_spec(json!({"deleteHook": true}))
        ),
        s.create(
            "Scenario",
            "waits",
            labelled(),
            json!({"helm.sdk.operatorframework.io/uninstall-wait": "true"}),
            scenario_spec(json!({"hold": true}))
        ),
        s.create("Periodic", "periodic", json!({}), json!({}), json!({})),
        s.create(
            "Annotated",
            "annotated",
            json!({}),
            json!({"helm.sdk.operatorframework.io/reconcile-period": "2s"}),
            json!({})
        ),
    );
    let (basic, _, _, _, hooked, _, _, _) = tokio::join!(
        s.wait("Scenario", "basic", "installed", deployed),
        s.wait("Scenario", "failing", "installed", deployed),
        s.wait("Scenario", "forced", "installed", deployed),
        s.wait("Scenario", "unforced", "installed", deployed),
        s.wait("Scenario", "hooked", "installed", deployed),
        s.wait("Scenario", "waits", "installed", deployed),
        s.wait("Periodic", "periodic", "installed", deployed),
        s.wait("Annotated", "annotated", "installed", deployed),
    );

    // overrideValues: the release's values, objects and Events.
    seen.basic_conditions = full_conditions(&basic);
    seen.basic_finalizers = basic.finalizers().to_vec();
    seen.basic_config = normalise(
        serde_json::to_value(s.config_map("basic-config").await.expect("basic-config"))
            .expect("json"),
        &s.ns,
    );
    seen.basic_record = s
        .records("basic")
        .await
        .remove(&1)
        .map(|(_, r)| r)
        .unwrap_or_default();
    let overrides = bosun_testenv::eventually(60, || async {
        let e = s.events("basic", "OverrideValuesInUse").await;
        (e.len() >= 3).then_some(e)
    })
    .await;
    seen.override_events = match overrides {
        Some(e) => e,
        None => s.events("basic", "OverrideValuesInUse").await,
    };

    // selector: the custom resource without the label was left alone while every labelled one
    // was installed; labelled, it is installed.
    let unlabelled = s
        .api("Scenario")
        .get("unlabelled")
        .await
        .expect("unlabelled");
    seen.unlabelled_touched = !unlabelled.data["status"].is_null()
        || !unlabelled.finalizers().is_empty()
        || s.config_map("unlabelled-config").await.is_some();
    s.patch(
        "Scenario",
        "unlabelled",
        json!({"metadata": {"labels": labelled()}}),
    )
    .await;

    // A failed upgrade (a name the API server refuses), then reverted; upgrade-force and an
    // immutable field; the reconcile period of the watches file and of the annotation.
    let periodic_uid = s.config_map("periodic-config").await.and_then(|c| c.uid());
    let annotated_uid = s.config_map("annotated-config").await.and_then(|c| c.uid());
    let cms = Api::<ConfigMap>::namespaced(s.client.clone(), &s.ns);
    for name in ["periodic-config", "annotated-config"] {
        cms.delete(name, &DeleteParams::default())
            .await
            .expect("delete a ConfigMap of the release");
    }
    tokio::join!(
        s.patch(
            "Scenario",
            "failing",
            // The release's ConfigMap changes too: the attempt writes it before the refusal.
            json!({"spec": {"extraName": "Not_A_Name", "nested": {"kept": false}}})
        ),
        s.patch("Scenario", "forced", json!({"spec": {"frozen": "b"}})),
        s.patch("Scenario", "unforced", json!({"spec": {"frozen": "b"}})),
    );
    let settled = |o: &DynamicObject| {
        has(o, "ReleaseFailed", "True", "UpgradeError")
            || has(o, "Deployed", "True", "UpgradeSuccessful")
    };
    let (failed, forced, unforced, _) = tokio::join!(
        s.wait("Scenario", "failing", "failed its upgrade", |o| {
            has(o, "ReleaseFailed", "True", "UpgradeError")
        }),
        s.wait("Scenario", "forced", "upgraded or failed", settled),
        s.wait("Scenario", "unforced", "upgraded or failed", settled),
        s.wait(
            "Scenario",
            "unlabelled",
            "installed once labelled",
            deployed
        ),
    );
    seen.failed_conditions = conditions(&failed);
    seen.failed_records = statuses(s.records("failing").await);
    seen.forced = conditions(&forced);
    seen.unforced = conditions(&unforced);
    let value = |c: Option<ConfigMap>| c.and_then(|c| c.data).and_then(|d| d.get("value").cloned());
    seen.forced_value = value(s.config_map("forced-frozen").await);
    seen.unforced_value = value(s.config_map("unforced-frozen").await);
    s.patch(
        "Scenario",
        "failing",
        json!({"spec": {"extraName": null, "nested": {"kept": null}}}),
    )
    .await;
    let reverted = s
        .wait("Scenario", "failing", "recovered from the revert", |o| {
            !conditions(o).contains_key("ReleaseFailed") && has_deployed(o)
        })
        .await;
    seen.reverted_conditions = conditions(&reverted);
    seen.reverted_records = statuses(s.records("failing").await);
    for (name, uid) in [
        ("periodic-config", periodic_uid),
        ("annotated-config", annotated_uid),
    ] {
        let back = bosun_testenv::eventually(60, || async {
            let c = s.config_map(name).await?;
            (c.uid() != uid).then_some(())
        })
        .await;
        assert!(
            back.is_some(),
            "{:?}: {name} was not made again by the periodic reconcile; the operator said:\n{}",
            s.who,
            s.said()
        );
    }

    // Uninstall with a pre-delete hook; uninstall-wait over an object a finalizer holds.
    seen.hooked_finalizers = hooked.finalizers().to_vec();
    let crs = s.api("Scenario");
    for name in ["hooked", "waits"] {
        crs.delete(name, &DeleteParams::default())
            .await
            .expect("delete a custom resource");
    }
    s.wait_gone("Scenario", "hooked").await;
    seen.goodbye = normalise(
        serde_json::to_value(
            s.config_map("hooked-goodbye")
                .await
                .expect("the pre-delete hook's ConfigMap"),
        )
        .expect("json"),
        &s.ns,
    );
    assert!(
        s.config_map("hooked-config").await.is_none() && s.records("hooked").await.is_empty(),
        "{:?}: the hooked release's objects and records are gone with it",
        s.who
    );
    let waiting = s
        .wait("Scenario", "waits", "waiting for its objects", |o| {
            has(o, "Deployed", "False", "UninstallSuccessful")
        })
        .await;
    seen.waiting = full_conditions(&waiting);
    seen.waiting_cr_there = crs.get_opt("waits").await.expect("read").is_some();
    let held = s
        .config_map("waits-held")
        .await
        .expect("the held ConfigMap");
    assert!(
        held.metadata.deletion_timestamp.is_some(),
        "{:?}: the uninstall deleted the held ConfigMap",
        s.who
    );
    cms.patch(
        "waits-held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release the held ConfigMap");
    s.wait_gone("Scenario", "waits").await;
    seen
}

fn has_deployed(o: &DynamicObject) -> bool {
    conditions(o)
        .get("Deployed")
        .is_some_and(|(s, _)| s == "True")
}

fn statuses(records: BTreeMap<i64, (String, Value)>) -> BTreeMap<i64, String> {
    records.into_iter().map(|(v, (s, _))| (v, s)).collect()
}

/// Deletes every custom resource left and waits until they are gone, so neither namespace is
/// left with a resource held by a finalizer of a stopped operator.
async fn clean_up(side: &Side) {
    for k in ["Scenario", "Periodic", "Annotated"] {
        let api = side.api(k);
        let _ = api
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await;
        let gone = bosun_testenv::eventually(120, || async {
            api.list(&ListParams::default())
                .await
                .ok()?
                .items
                .is_empty()
                .then_some(())
        })
        .await;
        assert!(
            gone.is_some(),
            "{:?}: {k} resources left after their delete; the operator said:\n{}",
            side.who,
            side.said()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scenarios_same_outcome_as_helm_operator() {
    peer("helm-operator");
    let tc = bosun_testenv::kit::cluster("peer-helm-scn-sdk")
        .await
        .expect("test cluster");
    let bosun_ns = bosun_testenv::test_namespace(&tc.admin, "peer-helm-scn-bosun")
        .await
        .expect("namespace");
    let file = bosun_watches::WatchesFile::load(&dir().join("watches.yaml"))
        .expect("the scenarios' watches.yaml");
    let crds: Vec<_> = file
        .entries
        .iter()
        .map(|e| {
            bosun_helm_operator::HelmFlavor::load(e, &Default::default())
                .expect("a Helm entry")
                .crd()
        })
        .collect();
    bosun_testenv::kit::install_crds(&tc.admin, crds)
        .await
        .expect("the scenario CRDs served");
    let logs = tempfile::tempdir().expect("tempdir");
    let kubeconfig = tc.cp.kubeconfig();
    let theirs = Side {
        who: Who::HelmOperator,
        client: tc.admin.clone(),
        ns: tc.ns.clone(),
        log: logs.path().join("helm-operator.log"),
    };
    let ours = Side {
        who: Who::Bosun,
        client: tc.admin.clone(),
        ns: bosun_ns.clone(),
        log: logs.path().join("bosun.log"),
    };
    let sdk_op = start(Who::HelmOperator, kubeconfig, &theirs.ns, &theirs.log);
    let bosun_op = start(Who::Bosun, kubeconfig, &ours.ns, &ours.log);
    let (t, o) = tokio::join!(play(&theirs), play(&ours));
    tokio::join!(clean_up(&theirs), clean_up(&ours));
    sdk_op.stop().await;
    bosun_op.stop().await;
    compare(t, o);
}

fn compare(mut t: Seen, mut o: Seen) {
    // overrideValues: `${ENV}` expanded, then run as a template, dotted keys set into the
    // spec's tree over the CR's own values; the same objects, record and conditions.
    let data = &t.basic_config["data"];
    assert_eq!(data["team"], TEAM, "helm-operator: {data}");
    assert_eq!(data["image"], "registry.example/app", "{data}");
    assert_eq!(data["level"], "deep", "{data}");
    assert_eq!(data["kept"], "true", "{data}");
    differences_on_purpose("basic-config", &mut t.basic_config, &mut o.basic_config);
    assert_eq!(t.basic_config, o.basic_config, "basic-config");
    // On purpose (named in peer_helm.rs): bosun's engine is Helm 4.2's, which keeps the
    // newline a template ends with in the release's manifest; helm-operator's Helm 3.18 trims
    // each document. Both read either record alike.
    let (their_manifest, our_manifest) = (
        t.basic_record["manifest"].take(),
        o.basic_record["manifest"].take(),
    );
    let (their_manifest, our_manifest) = (
        their_manifest.as_str().unwrap_or_default(),
        our_manifest.as_str().unwrap_or_default(),
    );
    assert_eq!(their_manifest, trimmed_documents(their_manifest));
    assert_ne!(our_manifest, their_manifest);
    assert_eq!(
        trimmed_documents(our_manifest),
        their_manifest,
        "the manifests"
    );
    assert_eq!(t.basic_record, o.basic_record, "the basic release's record");
    assert_eq!(
        t.basic_record["config"]["team"], TEAM,
        "the record keeps the overridden values"
    );
    let ready = o.basic_conditions.remove("Ready");
    assert_eq!(
        ready.map(|(s, r, _)| (s, r)),
        Some(("True".to_string(), "AllReady".to_string())),
        "bosun reports Ready on purpose"
    );
    assert_eq!(t.basic_conditions, o.basic_conditions, "basic's conditions");
    assert_eq!(
        t.override_events.len(),
        3,
        "helm-operator: one OverrideValuesInUse Warning per override: {:?}",
        t.override_events
    );
    assert_eq!(
        t.override_events, o.override_events,
        "OverrideValuesInUse Events"
    );
    // On purpose: no finalizer where the garbage collector does the whole uninstall.
    assert_eq!(
        t.basic_finalizers,
        ["helm.sdk.operatorframework.io/uninstall-release"]
    );
    assert!(o.basic_finalizers.is_empty(), "{:?}", o.basic_finalizers);

    // selector
    assert!(
        !t.unlabelled_touched,
        "helm-operator ignores an unselected CR"
    );
    assert!(!o.unlabelled_touched, "bosun ignores an unselected CR");

    // A failed upgrade: ReleaseFailed UpgradeError beside the earlier Deployed (and, on
    // purpose, bosun's Ready False: the release is not what the spec asks for).
    assert_eq!(
        o.failed_conditions.remove("Ready"),
        Some(("False".to_string(), "NotReady".to_string()))
    );
    assert_eq!(t.failed_conditions, o.failed_conditions, "a failed upgrade");
    assert_eq!(
        t.failed_conditions.get("ReleaseFailed"),
        Some(&("True".to_string(), "UpgradeError".to_string()))
    );
    // On purpose: helm-operator rolls a failed upgrade back with force (a new revision each
    // time, and each reconcile retries the upgrade: operator-sdk#6494, #5759), deleting every
    // record but the deployed one; bosun records the failed revision, leaves revision 1
    // deployed and waits for a change of the spec.
    assert_eq!(
        o.failed_records,
        BTreeMap::from([(1, "deployed".into()), (2, "failed".into())]),
        "bosun's records after the failed upgrade"
    );
    assert_eq!(
        o.reverted_records, o.failed_records,
        "bosun's revert only syncs"
    );
    let (v, s) = t
        .reverted_records
        .iter()
        .next()
        .expect("helm-operator's record");
    assert!(
        t.reverted_records.len() == 1 && *v >= 3 && s == "deployed",
        "helm-operator keeps its rollback revision only: {:?}",
        t.reverted_records
    );
    // …so after the revert, helm-operator reports the rollback's revision as an upgrade and
    // bosun revision 1 as the install it is.
    assert_eq!(
        t.reverted_conditions.get("Deployed"),
        Some(&("True".to_string(), "UpgradeSuccessful".to_string()))
    );
    assert_eq!(
        o.reverted_conditions.remove("Deployed"),
        Some(("True".to_string(), "InstallSuccessful".to_string()))
    );
    t.reverted_conditions.remove("Deployed");
    assert_eq!(
        o.reverted_conditions.remove("Ready"),
        Some(("True".to_string(), "AllReady".to_string()))
    );
    assert_eq!(
        t.reverted_conditions, o.reverted_conditions,
        "after the revert"
    );

    // An immutable field changed without upgrade-force: the upgrade fails for both.
    assert_eq!(
        o.unforced.remove("Ready"),
        Some(("False".to_string(), "NotReady".to_string()))
    );
    assert_eq!(t.unforced, o.unforced, "an immutable change, not forced");
    assert_eq!(
        t.unforced.get("ReleaseFailed"),
        Some(&("True".to_string(), "UpgradeError".to_string()))
    );
    assert_eq!(t.unforced_value.as_deref(), Some("a"));
    assert_eq!(o.unforced_value.as_deref(), Some("a"));
    // With upgrade-force: helm-operator (Helm 3's --force) replaces the object with a PUT,
    // which the API server refuses for an immutable field as it refuses the patch; bosun
    // deletes and recreates the object, what a user sets upgrade-force for (Helm 2's --force).
    assert_eq!(
        t.forced.get("ReleaseFailed"),
        Some(&("True".to_string(), "UpgradeError".to_string())),
        "helm-operator: {:?}",
        t.forced
    );
    assert_eq!(t.forced_value.as_deref(), Some("a"));
    assert_eq!(
        o.forced.get("Deployed"),
        Some(&("True".to_string(), "UpgradeSuccessful".to_string())),
        "bosun: {:?}",
        o.forced
    );
    assert!(!o.forced.contains_key("ReleaseFailed"), "{:?}", o.forced);
    assert_eq!(
        o.forced.get("Ready"),
        Some(&("True".to_string(), "AllReady".to_string()))
    );
    assert_eq!(o.forced_value.as_deref(), Some("b"));

    // Uninstall with a pre-delete hook: both hold the CR with the finalizer, run the hook,
    // remove the release; the hook's object (kept) is the same.
    assert_eq!(
        t.hooked_finalizers,
        ["helm.sdk.operatorframework.io/uninstall-release"]
    );
    assert_eq!(t.hooked_finalizers, o.hooked_finalizers);
    differences_on_purpose("hooked-goodbye", &mut t.goodbye, &mut o.goodbye);
    assert_eq!(t.goodbye, o.goodbye, "the pre-delete hook's object");

    // uninstall-wait: the CR stays, Deployed False/UninstallSuccessful with helm-operator's
    // message, until the release's objects are gone.
    assert!(t.waiting_cr_there && o.waiting_cr_there);
    // bosun's Ready during the wait: whatever the last reconcile saw; not compared.
    o.waiting.remove("Ready");
    assert_eq!(
        t.waiting.get("Deployed").map(|c| c.2.as_str()),
        Some("Waiting until all resources are deleted.")
    );
    assert_eq!(t.waiting, o.waiting, "uninstall-wait");
}

/// Asserts, then removes, what bosun writes on an object differently from helm-operator on
/// purpose (named in peer_helm.rs): its applied-object hash, its child label, and no
/// `blockOwnerDeletion` on its owner references.
fn differences_on_purpose(key: &str, theirs: &mut Value, ours: &mut Value) {
    let m = &mut ours["metadata"];
    if let Some(a) = m["annotations"].as_object_mut() {
        a.remove("bosun.dev/applied-hash");
        if a.is_empty() {
            m.as_object_mut().map(|m| m.remove("annotations"));
        }
    }
    let kind = m["labels"]
        .as_object_mut()
        .and_then(|l| l.remove("bosun.dev/owner-kind"));
    assert_eq!(
        kind,
        Some(json!("scenario.peer.bosun.dev")),
        "{key}: bosun labels its children with their owner's kind"
    );
    for (who, refs, block) in [
        (
            "helm-operator",
            &mut theirs["metadata"]["ownerReferences"],
            Some(json!(true)),
        ),
        ("bosun", &mut ours["metadata"]["ownerReferences"], None),
    ] {
        for r in refs.as_array_mut().into_iter().flatten() {
            let got = r
                .as_object_mut()
                .and_then(|r| r.remove("blockOwnerDeletion"));
            assert_eq!(got, block, "{key}: {who}'s owner reference");
        }
    }
}
