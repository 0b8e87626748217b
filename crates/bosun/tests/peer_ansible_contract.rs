//! The contract between an operator and its role, against operator-sdk's ansible-operator
//! (issue 35): one project (a watches.yaml and a role written for this test) run by
//! ansible-operator in one namespace and by `bosun run --watches` in another, both at once,
//! one process each for the whole file. The role writes what it sees into a ConfigMap
//! (`ansible_operator_meta`, `_<group>_<kind>`, `_<group>_<kind>_spec`, the snake-cased spec)
//! and publishes an Event; a CR that makes it fail must leave the same `Failure` condition.
//! Where bosun differs on purpose the difference is asserted here and named in the README.
mod peers;
use peers::*;
use std::path::Path;

use bosun_watches::Flavor;
use kube::api::{Api, ListParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::Client;
use serde_json::{json, Value};

const WATCHES: &str = "\
- version: v1alpha1
  group: contract.example.com
  kind: Probe
  role: probe
  finalizer:
    name: contract.example.com/cleanup
    vars:
      state: absent
      cleanup_reason: deleted
";

/// A role in the shape scaffolded roles have: tasks/main.yml, empty defaults, the
/// collections in meta. Values carry a `json:` prefix in the ConfigMap: under ansible-core
/// 2.18 a rendered string that reads as a dict would become one (a ConfigMap's data is text).
const TASKS: &str = r#"---
- name: clean up when the CR goes
  when: state | default('present') == 'absent'
  block:
    - name: write down the finalizer's run
      k8s:
        definition:
          apiVersion: v1
          kind: ConfigMap
          metadata:
            name: "ledger-{{ ansible_operator_meta.name }}"
            namespace: "{{ ansible_operator_meta.namespace }}"
          data:
            finalized: "json:{{ {'state': state, 'reason': cleanup_reason, 'deleting': _contract_example_com_probe.metadata.deletionTimestamp is defined, 'finalizers': _contract_example_com_probe.metadata.finalizers} | to_json }}"
    - meta: end_play

- name: fail when asked
  fail:
    msg: "{{ fail_with }}"
  when: fail_with is defined

- name: read a variable nobody set
  debug:
    msg: "{{ no_such_variable }}"
  when: read_undefined | default(false)

- name: write down what the role sees
  k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{ ansible_operator_meta.name }}-seen"
        namespace: "{{ ansible_operator_meta.namespace }}"
      data:
        meta: "json:{{ ansible_operator_meta | to_json }}"
        cr: "json:{{ _contract_example_com_probe | to_json }}"
        rawSpec: "json:{{ _contract_example_com_probe_spec | to_json }}"
        snake: "json:{{ {'size_k8s_buckets': size_k8s_buckets, 'egress_ips': egress_ips, '_urls_egress_ips_egress_https': _urls_egress_ips_egress_https, 'k8s_var': k8s_var, 'nested': nested, 'pg1_repo_path': pg1_repo_path} | to_json }}"
        defined: "json:{{ [sizeK8sBuckets is defined, egressIPs is defined, size is defined] | to_json }}"

- name: tell the user
  operator_sdk.util.k8s_event:
    name: "{{ ansible_operator_meta.name }}-seen"
    namespace: "{{ ansible_operator_meta.namespace }}"
    reason: Seen
    message: "{{ size_k8s_buckets }} buckets"
    involvedObject:
      apiVersion: contract.example.com/v1alpha1
      kind: Probe
      name: "{{ ansible_operator_meta.name }}"
      namespace: "{{ ansible_operator_meta.namespace }}"
      uid: "{{ _contract_example_com_probe.metadata.uid }}"
"#;

const META: &str = "---\ncollections:\n  - operator_sdk.util\n  - kubernetes.core\n";

const NAMES: [&str; 3] = ["seen", "broken", "undefined"];

fn probes() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("contract.example.com", "v1alpha1", "Probe"),
        "probes",
    )
}

fn write_project(dir: &Path) {
    let role = dir.join("roles/probe");
    for sub in ["tasks", "defaults", "meta"] {
        std::fs::create_dir_all(role.join(sub)).expect("role dir");
    }
    std::fs::write(dir.join("watches.yaml"), WATCHES).expect("watches");
    std::fs::write(role.join("tasks/main.yml"), TASKS).expect("tasks");
    std::fs::write(
        role.join("defaults/main.yml"),
        "---\n# defaults file for Probe\n",
    )
    .expect("defaults");
    std::fs::write(role.join("meta/main.yml"), META).expect("meta");
}

/// The spec keys paramconv rewrites (operator-sdk's own test vectors among them), nested
/// inside lists too, and one it keeps: `pg1_repo_path` stays as written (the fact sheet's
/// `pg_1__repo_path`, from an old operator-sdk issue, is not what v1.42.2 does).
fn seen_spec() -> Value {
    json!({
        "sizeK8sBuckets": 3,
        "egressIPs": ["10.0.0.1"],
        "URLsegressIPsEgressHTTPs": "u",
        "k8s var": "v",
        "pg1_repo_path": "/repo",
        "nested": {"innerKey": [{"deepKey": 1, "ThisShouldHaveUnderscores": true}]}
    })
}

async fn create(client: &Client, ns: &str, name: &str, spec: Value) {
    let cr: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "contract.example.com/v1alpha1", "kind": "Probe",
        "metadata": {"name": name, "namespace": ns}, "spec": spec
    }))
    .expect("CR");
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, &probes())
        .create(&PostParams::default(), &cr)
        .await
        .expect("create the Probe");
}

fn config_maps(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
    )
}

async fn ledger(client: &Client, ns: &str, name: &str) {
    let cm: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("ledger-{name}"), "namespace": ns}
    }))
    .expect("ConfigMap");
    config_maps(client, ns)
        .create(&PostParams::default(), &cm)
        .await
        .expect("create the ledger");
}

/// Deletes every Probe of `ns`, waits until they are gone, and returns what each finalizer
/// run wrote down (name -> the decoded value).
async fn delete_all(client: &Client, ns: &str, log: &Path) -> Value {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &probes());
    for name in NAMES {
        api.delete(name, &Default::default())
            .await
            .expect("delete the Probe");
    }
    let gone = bosun_testenv::eventually(300, || async {
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
        "{ns}: Probes left after their delete; the operator said:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
    let mut out = serde_json::Map::new();
    for name in NAMES {
        let cm = config_maps(client, ns)
            .get(&format!("ledger-{name}"))
            .await
            .expect("the ledger");
        let text = cm.data["data"]["finalized"]
            .as_str()
            .and_then(|t| t.strip_prefix("json:"))
            .unwrap_or_else(|| panic!("{ns}/{name}: no finalizer run written down: {cm:?}"));
        out.insert(name.into(), serde_json::from_str(text).expect("JSON"));
    }
    Value::Object(out)
}

/// Waits until `pred` holds for the CR and returns it (the operator's log in the panic).
async fn wait_cr(
    client: &Client,
    ns: &str,
    name: &str,
    what: &str,
    log: &Path,
    pred: impl Fn(&DynamicObject) -> bool,
) -> DynamicObject {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &probes());
    bosun_testenv::eventually(300, || {
        let api = api.clone();
        let pred = &pred;
        async move { api.get(name).await.ok().filter(|o| pred(o)) }
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "{ns}/{name} never {what}; the operator said:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        )
    })
}

fn is_true(o: &DynamicObject, type_: &str) -> bool {
    condition(o, type_).is_some_and(|(s, _, _)| s == "True")
}

/// The ConfigMap the role wrote, its values decoded, what differs by namespace or by server
/// (identities, times, versions) replaced.
async fn seen(client: &Client, ns: &str, name: &str) -> Value {
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
    );
    let cm = api
        .get(&format!("{name}-seen"))
        .await
        .expect("the role's ConfigMap");
    let mut out = serde_json::Map::new();
    for (k, v) in cm.data["data"].as_object().expect("data") {
        let text = v
            .as_str()
            .and_then(|t| t.strip_prefix("json:"))
            .expect("json:-prefixed text")
            .replace(ns, "NAMESPACE");
        out.insert(k.clone(), serde_json::from_str(&text).expect("JSON"));
    }
    let cr = &mut out["cr"];
    if let Some(m) = cr["metadata"].as_object_mut() {
        for k in ["uid", "resourceVersion", "creationTimestamp"] {
            assert!(m.remove(k).is_some(), "the CR as passed has metadata.{k}");
        }
    }
    Value::Object(out)
}

/// The Events about `name` in `ns`: type, reason, message, source, reportingComponent,
/// count, involvedObject's kind and apiVersion, owners, sorted.
async fn events(client: &Client, ns: &str, name: &str) -> Vec<Value> {
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), ns);
    let mut out: Vec<Value> = api
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .map(|e| {
            json!({
                "type": e.type_, "reason": e.reason, "message": e.message,
                "source": e.source.and_then(|s| s.component),
                "reportingComponent": e.reporting_component, "count": e.count,
                "involvedObject": {"kind": e.involved_object.kind, "apiVersion": e.involved_object.api_version},
                "owners": e.metadata.owner_references.unwrap_or_default().into_iter()
                    .map(|o| format!("{}/{}", o.kind, o.name)).collect::<Vec<_>>(),
            })
        })
        .collect();
    out.sort_by_key(Value::to_string);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn role_sees_the_same_variables_events_and_failures_as_under_ansible_operator() {
    peer("ansible-operator");
    let dir = tempfile::tempdir().expect("tempdir");
    let project = dir.path().join("project");
    write_project(&project);
    let sdk = bosun_testenv::kit::cluster("peer-contract-sdk")
        .await
        .expect("test cluster");
    let client = sdk.admin.clone();
    let ours_ns = bosun_testenv::test_namespace(&client, "peer-contract-bosun")
        .await
        .expect("namespace");
    let theirs_ns = sdk.ns.clone();
    let file = bosun_watches::WatchesFile::load(&project.join("watches.yaml")).expect("watches");
    let opts = bosun_ansible_operator::AnsibleOptions {
        watches_dir: Some(project.clone()),
        ..Default::default()
    };
    let flavor = bosun_ansible_operator::AnsibleFlavor::load(&file.entries[0], &opts)
        .expect("the Probe entry");
    bosun_testenv::kit::install_crds(&client, [flavor.crd()])
        .await
        .expect("Probe CRD served");

    let kubeconfig = sdk.cp.kubeconfig();
    let their_log = dir.path().join("ansible-operator.log");
    let our_log = dir.path().join("bosun.log");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).expect("tmp");
    let theirs_op = start_ansible_operator(
        &project,
        "watches.yaml",
        kubeconfig,
        &theirs_ns,
        &their_log,
        &tmp,
    );
    let ours_op = start_bosun_watches(
        &project.join("watches.yaml"),
        kubeconfig,
        &ours_ns,
        &our_log,
    );

    for ns in [&theirs_ns, &ours_ns] {
        // Where the finalizer run writes (made here, so the role's write is a PATCH and the
        // ConfigMap outlives the CR).
        for name in NAMES {
            ledger(&client, ns, name).await;
        }
        create(&client, ns, "seen", seen_spec()).await;
        create(
            &client,
            ns,
            "broken",
            json!({"failWith": "the database is not ready"}),
        )
        .await;
        create(&client, ns, "undefined", json!({"readUndefined": true})).await;
    }
    let side = |ns: &str, log: &Path| (ns.to_string(), log.to_path_buf());
    let mut results = Vec::new();
    for (ns, log) in [side(&theirs_ns, &their_log), side(&ours_ns, &our_log)] {
        let ok = wait_cr(&client, &ns, "seen", "succeeded", &log, |o| {
            is_true(o, "Successful")
        })
        .await;
        let broken = wait_cr(&client, &ns, "broken", "failed", &log, |o| {
            is_true(o, "Failure")
        })
        .await;
        let undefined = wait_cr(&client, &ns, "undefined", "failed", &log, |o| {
            is_true(o, "Failure")
        })
        .await;
        results.push((
            seen(&client, &ns, "seen").await,
            events(&client, &ns, "seen").await,
            events(&client, &ns, "broken").await,
            ok,
            broken,
            undefined,
        ));
    }
    // Deleting runs the finalizer (the role again, with the finalizer's vars), which writes
    // down what it saw; then the finalizer goes and the CR with it.
    let mut finalized = Vec::new();
    for (ns, log) in [side(&theirs_ns, &their_log), side(&ours_ns, &our_log)] {
        finalized.push(delete_all(&client, &ns, &log).await);
    }
    theirs_op.stop().await;
    ours_op.stop().await;
    let (theirs, ours) = (&results[0], &results[1]);

    // The finalizer's run: the finalizer vars over the spec, the CR being deleted with its
    // finalizer still on; the same under both.
    for name in NAMES {
        assert_eq!(
            finalized[0][name],
            json!({"state": "absent", "reason": "deleted", "deleting": true,
                   "finalizers": ["contract.example.com/cleanup"]}),
            "{name}: ansible-operator's finalizer run"
        );
    }
    assert_eq!(
        finalized[0], finalized[1],
        "finalizer runs: ansible-operator's, then bosun's"
    );

    // The variables: the snake-cased spec (paramconv, keys inside lists too), the camelCase
    // names undefined, the raw spec and the meta as given.
    assert_eq!(
        theirs.0["snake"],
        json!({"size_k8s_buckets": 3, "egress_ips": ["10.0.0.1"], "_urls_egress_ips_egress_https": "u",
               "k8s_var": "v", "pg1_repo_path": "/repo",
               "nested": {"inner_key": [{"deep_key": 1, "_this_should_have_underscores": true}]}}),
        "ansible-operator's snake-cased spec"
    );
    assert_eq!(theirs.0["defined"], json!([false, false, false]));
    assert_eq!(theirs.0["rawSpec"], seen_spec());
    assert_eq!(
        theirs.0["meta"],
        json!({"name": "seen", "namespace": "NAMESPACE"})
    );
    for k in ["snake", "defined", "rawSpec", "meta"] {
        assert_eq!(
            theirs.0[k], ours.0[k],
            "{k}: ansible-operator's, then bosun's"
        );
    }
    // The whole CR as `_<group>_<kind>`: the same, but for the status and managedFields.
    // ansible-operator writes `Running` before the run and passes the CR it wrote; bosun
    // writes once, after.
    let mut their_cr = theirs.0["cr"].clone();
    let mut our_cr = ours.0["cr"].clone();
    assert_eq!(
        their_cr["status"]["conditions"][0]["type"], "Running",
        "ansible-operator passes the CR with its Running condition: {their_cr}"
    );
    assert_eq!(
        our_cr.get("status"),
        None,
        "bosun passes the CR as the user wrote it (no status write before the run)"
    );
    their_cr.as_object_mut().expect("CR").remove("status");
    our_cr.as_object_mut().expect("CR").remove("status");
    // ansible-operator's cache keeps managedFields, and passes them on; bosun's drops them
    // (they are most of a small object's size, and a role has no use for them).
    assert!(
        their_cr["metadata"]["managedFields"].is_array(),
        "ansible-operator passes managedFields: {their_cr}"
    );
    assert_eq!(our_cr["metadata"].get("managedFields"), None);
    their_cr["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("managedFields");
    assert_eq!(their_cr, our_cr, "_contract_example_com_probe");

    // The role's Event, as the operator_sdk.util.k8s_event module writes it (owned by the CR:
    // ansible-operator's proxy adds the reference to whatever a role creates).
    assert_eq!(theirs.1.len(), 1, "one Event about seen: {:?}", theirs.1);
    assert_eq!(theirs.1[0]["owners"], json!(["Probe/seen"]));
    assert_eq!(theirs.1, ours.1, "Events about seen");

    // A failing role: the same Failure condition, message for message.
    for (i, name) in [(4, "broken"), (5, "undefined")] {
        let their = condition(if i == 4 { &theirs.4 } else { &theirs.5 }, "Failure");
        let our = condition(if i == 4 { &ours.4 } else { &ours.5 }, "Failure");
        assert_eq!(their, our, "{name}: Failure (status, reason, message)");
    }
    assert_eq!(
        condition(&theirs.4, "Failure"),
        Some((
            "True".into(),
            "Failed".into(),
            "the database is not ready".into()
        ))
    );
    // bosun also tells the user with a Warning Event (reason Failed, the message); the
    // ansible-operator publishes none.
    assert_eq!(theirs.2, Vec::<Value>::new(), "ansible-operator: no Event");
    assert_eq!(ours.2.len(), 1, "bosun's Events about broken: {:?}", ours.2);
    assert_eq!(ours.2[0]["type"], "Warning");
    assert_eq!(ours.2[0]["reason"], "Failed");
    assert_eq!(ours.2[0]["message"], "the database is not ready");
}
