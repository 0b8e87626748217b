//! `operator_sdk.util.osdk_metric` in a role shaped like operator-sdk's memcached-molecule
//! sample: the metrics land in the process-wide set the operator serves, with
//! ansible-operator's rules (its `internal/ansible/metrics`), and a refused request fails
//! the task with the handler's message.
use std::sync::Arc;

use bosun_ansible::metrics::UserMetrics;
use bosun_ansible::{Discovery, LoadOptions, Role, RunContext};

const TASKS: &str = r#"
- name: create sanity_counter
  operator_sdk.util.osdk_metric:
    name: osdk_test_counter
    description: ensure counter can be created
    counter: {}
- name: increment it
  operator_sdk.util.osdk_metric:
    name: osdk_test_counter
    description: ensure counter can be incremented
    counter:
      increment: yes
- name: add to it
  operator_sdk.util.osdk_metric:
    name: osdk_test_counter
    description: ensure counter can be added to
    counter:
      add: 2.5
- name: set a gauge
  operator_sdk.util.osdk_metric:
    name: osdk_test_gauge
    description: ensure gauge can be set
    gauge:
      set: "{{ 4 + 1 }}"
- name: observe a histogram
  operator_sdk.util.osdk_metric:
    name: osdk_test_histogram
    description: ensure histogram can observe
    histogram:
      observe: 0.3
- name: observe a summary
  operator_sdk.util.osdk_metric:
    name: osdk_test_summary
    description: ensure summary can observe
    summary:
      observe: 2
- name: a counter is not a gauge
  operator_sdk.util.osdk_metric:
    name: osdk_test_counter
    description: wrong type
    gauge:
      set: 1
  register: wrong
  ignore_errors: true
- name: the refusal (the handler's text ends with a newline)
  assert:
    that:
      - wrong is failed
      - wrong.msg | trim == 'cannot change metric type of osdk_test_counter, which is a counter'
      - wrong.msg.endswith(lf)
      - wrong.status_code == 400
  vars:
    lf: "\n"
"#;

#[tokio::test]
async fn a_molecule_shaped_role_publishes_its_metrics() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::create_dir_all(dir.path().join("metrics/tasks")).expect("role");
    std::fs::write(dir.path().join("metrics/tasks/main.yml"), TASKS).expect("tasks");
    let role = Role::load(
        "metrics",
        &LoadOptions {
            roles_path: vec![dir.path().to_path_buf()],
            collections_paths: vec![],
            cwd: dir.path().to_path_buf(),
        },
    )
    .expect("osdk_metric loads");
    let ctx = RunContext::new(None, Arc::new(Discovery::new()), None);
    let outcome = role.run(&ctx, &Default::default()).await;
    assert!(
        outcome.succeeded(),
        "{:?} {:?}",
        outcome.failures,
        outcome.tasks.iter().map(|t| &t.result).collect::<Vec<_>>()
    );
    assert_eq!(
        outcome.stats.changed, 6,
        "each accepted request reports changed"
    );
    let m = UserMetrics::global();
    assert_eq!(m.value("osdk_test_counter"), Some(3.5));
    assert_eq!(m.value("osdk_test_gauge"), Some(5.0));
    assert_eq!(m.value("osdk_test_histogram"), Some(1.0));
    let text = m.encode();
    assert!(
        text.contains("# HELP osdk_test_counter ensure counter can be created\n# TYPE osdk_test_counter counter\nosdk_test_counter 3.5\n"),
        "{text}"
    );
    assert!(
        text.contains("osdk_test_summary_sum 2\nosdk_test_summary_count 1\n"),
        "{text}"
    );
}
