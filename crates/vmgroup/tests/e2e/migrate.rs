//! Taking a group over from the seed's Go operator: its folder `<namespace>-<name>`, its
//! `<name>-replica-<rand>` VMs and its finalizer `vm-operator`, as it left them.
use bosun_vmgroup::migrate::{ADOPT_ANNOTATION, SEED_FINALIZER};
use bosun_vmgroup::reconcile::FINALIZER;
use kube::api::DeleteParams;
use kube::ResourceExt;

use crate::support::{self, PARENT};

#[tokio::test]
async fn a_seed_group_is_taken_over_scaled_and_deleted_leaving_other_vms() {
    let env = support::env("vg-seed", None).await;
    let old = format!("{}-web", env.ns);
    let path = format!("{PARENT}/{old}");
    let made = env
        .foreign_folder(
            &old,
            &["keep-me", "web-replica-abcdefgh", "web-replica-qwertyui"],
        )
        .await;
    let keep_me = made
        .iter()
        .find(|v| v.name == "keep-me")
        .expect("keep-me")
        .clone();
    env.create_in(
        &env.ns,
        "web",
        3,
        "DC0_H0_VM0",
        serde_json::json!({ ADOPT_ANNOTATION: path }),
        &[SEED_FINALIZER],
    )
    .await;
    let vg = env
        .wait_status("web", "RUNNING with 3", |s| {
            s.phase == "RUNNING" && s.current_replicas == 3
        })
        .await;
    assert_eq!(
        vg.finalizers(),
        [FINALIZER.to_string()],
        "the seed's finalizer gave way"
    );
    let folder = env.vc.require_path(&path).await.expect("old folder");
    assert_eq!(vg.status.expect("st").folder, Some(folder.value.clone()));
    let names = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert_eq!(
        env.vm_names_at(&path).await,
        names(&[
            "keep-me",
            "web-1",
            "web-replica-abcdefgh",
            "web-replica-qwertyui"
        ]),
        "two adopted, one cloned to make three"
    );
    assert_eq!(env.vms("web").await, None, "no new-style folder");
    let events = env.events_for("web").await;
    assert!(
        events.iter().any(|e| e.0 == "Adopted"
            && e.1.contains("web-replica-abcdefgh, web-replica-qwertyui")),
        "{events:?}"
    );
    let now = env
        .vc
        .vms(std::slice::from_ref(&keep_me.vm))
        .await
        .expect("read");
    assert_eq!(
        (
            now[0].num_cpu,
            now[0].memory_mb,
            now[0].custom_values.is_empty()
        ),
        (keep_me.num_cpu, keep_me.memory_mb, true),
        "keep-me untouched"
    );

    env.patch_spec("web", serde_json::json!({"replicas": 1}))
        .await;
    env.wait_status("web", "RUNNING with 1", |s| {
        s.phase == "RUNNING" && s.current_replicas == 1
    })
    .await;
    assert_eq!(
        env.vm_names_at(&path).await,
        names(&["keep-me", "web-replica-abcdefgh"]),
        "the other-named go first, then the numbers"
    );

    env.api()
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    env.wait_gone(&env.ns, "web").await;
    assert_eq!(
        env.vm_names_at(&path).await,
        names(&["keep-me"]),
        "the folder stays with what the group did not create"
    );
    env.stop().await;
}

/// A VmGroup the seed left behind, deleted before bosun took it over: bosun drops the
/// seed's finalizer (the Go operator is gone) and touches nothing in vCenter.
#[tokio::test]
async fn a_seed_group_deleted_without_adoption_is_released_and_its_vms_kept() {
    let mut env = support::env("vg-seed-del", None).await;
    env.halt().await;
    let old = format!("{}-db", env.ns);
    let made = env.foreign_folder(&old, &["db-replica-abcdefgh"]).await;
    env.create_in(
        &env.ns,
        "db",
        1,
        "DC0_H0_VM0",
        serde_json::json!({}),
        &[SEED_FINALIZER],
    )
    .await;
    env.api()
        .delete("db", &DeleteParams::default())
        .await
        .expect("delete");
    env.start_operator().await;
    env.wait_gone(&env.ns, "db").await;
    let now = env.vc.vms(&[made[0].vm.clone()]).await.expect("read");
    assert_eq!(now.len(), 1, "the seed's VM is kept");
    env.stop().await;
}
