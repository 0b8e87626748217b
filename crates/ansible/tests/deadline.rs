//! A run's limits (L13): roles may retry and pause for as long as the run's deadline
//! allows (not a fixed per-task cap), and no run goes past it; a host that does not read
//! the tasks' results has the run keep none. Time is tokio's paused clock: nothing here
//! waits for real.
use std::sync::Arc;
use std::time::Duration;

use bosun_ansible::{Discovery, LoadOptions, Outcome, Role, RunContext};

async fn run(tasks: &str, timeout: Duration) -> Outcome {
    run_with(tasks, timeout, true).await
}

async fn run_with(tasks: &str, timeout: Duration, keep_results: bool) -> Outcome {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::create_dir_all(dir.path().join("r/tasks")).expect("role");
    std::fs::write(dir.path().join("r/tasks/main.yml"), tasks).expect("tasks");
    let role = Role::load(
        "r",
        &LoadOptions {
            roles_path: vec![dir.path().to_path_buf()],
            collections_paths: vec![],
            cwd: dir.path().to_path_buf(),
        },
    )
    .expect("load");
    let mut ctx = RunContext::new(None, Arc::new(Discovery::new()), None);
    ctx.run_timeout = timeout;
    ctx.keep_results = keep_results;
    role.run(&ctx, &Default::default()).await
}

#[tokio::test(start_paused = true)]
async fn a_role_may_retry_for_longer_than_ten_minutes() {
    // 120 retries 10 s apart: 20 minutes, as roles waiting for a slow dependency do.
    let o = run(
        "- name: wait\n  set_fact:\n    n: 1\n  until: false\n  retries: 120\n  delay: 10\n  ignore_errors: true\n",
        bosun_ansible::engine::DEFAULT_RUN_TIMEOUT,
    )
    .await;
    let r = &o.tasks[0].result;
    assert_eq!(r["attempts"], 120, "{r}");
    assert!(
        r.get("msg").is_none(),
        "it ran out of retries, not of time: {r}"
    );
}

#[tokio::test(start_paused = true)]
async fn no_run_goes_past_its_deadline() {
    let o = run(
        "- name: slow\n  pause:\n    seconds: 20\n  loop: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n",
        Duration::from_secs(60),
    )
    .await;
    assert!(!o.succeeded());
    // Two pauses fit; the third would reach past the deadline (the loop's own message is
    // Ansible's "One or more items failed").
    let items = o.tasks[0].result["results"]
        .as_array()
        .expect("items")
        .clone();
    let failed: Vec<_> = items.iter().filter(|i| i["failed"] == true).collect();
    assert_eq!(items.len() - failed.len(), 2, "{items:?}");
    assert!(
        failed[0]["msg"]
            .as_str()
            .is_some_and(|m| m.contains("would go past the run's deadline of 60 s")),
        "{items:?}"
    );
    let o = run(
        "- name: wait\n  set_fact:\n    n: 1\n  until: false\n  retries: 100\n  delay: 10\n",
        Duration::from_secs(300),
    )
    .await;
    assert!(
        o.failure_messages()[0]
            .contains("until/retries would wait past the run's deadline of 300 s"),
        "{:?}",
        o.failure_messages()
    );
    let o = run(
        "- name: a\n  set_fact:\n    n: 1\n- name: b\n  pause:\n    seconds: 1\n",
        Duration::ZERO,
    )
    .await;
    assert!(
        o.failure_messages()[0].contains("went past its deadline of 0 s"),
        "{:?}",
        o.failure_messages()
    );
}

#[tokio::test(start_paused = true)]
async fn a_host_that_reads_no_results_keeps_none() {
    let tasks = "- name: big\n  set_fact:\n    x: \"{{ 'y' * 100000 }}\"\n  loop: [1, 2, 3]\n- name: fails\n  fail:\n    msg: done\n";
    let kept = run_with(tasks, Duration::from_secs(60), true).await;
    assert_eq!(kept.tasks.len(), 2);
    let o = run_with(tasks, Duration::from_secs(60), false).await;
    assert!(o.tasks.is_empty());
    assert_eq!(
        (o.stats.ok, o.stats.failures),
        (kept.stats.ok, kept.stats.failures)
    );
    assert_eq!(o.failure_messages(), ["done"]);
}
