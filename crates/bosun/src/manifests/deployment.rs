//! bosun's own Deployment (two replicas with leader election, probes, a restricted security
//! context) and its metrics Service.
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction,
    ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec, Probe, ResourceRequirements,
    SeccompProfile, SecurityContext, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{labels, meta, ManifestArgs, NAME};

fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn port(name: &str, number: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.into()),
        container_port: number,
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}

fn probe(path: &str, initial_delay: Option<i32>, period: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::String("probes".into()),
            ..Default::default()
        }),
        initial_delay_seconds: initial_delay,
        period_seconds: Some(period),
        ..Default::default()
    }
}

fn args(a: &ManifestArgs) -> Vec<String> {
    let mut args = vec![
        "run".to_string(),
        "--leader-elect".into(),
        format!("--lease-name={}", a.lease_name()),
    ];
    if let Some(n) = a.shards {
        args.push(format!("--shards={n}"));
    } else if a.sharding {
        args.push("--sharding".into());
    }
    let coded = a.coded_names();
    if !coded.is_empty() || a.watches.is_none() {
        args.push(format!("--operators={}", coded.join(",")));
    }
    if a.watches.is_some() {
        args.push(format!("--watches={}", a.watches_in_image));
        // `secret` is run's default; any other storage must reach the pods, or they would keep
        // records where their role grants nothing.
        match a.release_storage {
            bosun_helm_operator::Storage::Secrets => {}
            bosun_helm_operator::Storage::ConfigMaps => {
                args.push("--release-storage=configmap".into())
            }
            bosun_helm_operator::Storage::None => args.push("--release-storage=none".into()),
        }
    }
    args.extend([
        format!("--log-format={}", a.log_format),
        "--metrics-addr=0.0.0.0:8080".into(),
        "--metrics-secure".into(),
        "--probe-addr=0.0.0.0:8081".into(),
    ]);
    if !a.watch_namespaces.is_empty() {
        args.push(format!("--namespaces={}", a.watch_namespaces.join(",")));
    }
    args
}

pub fn deployment(a: &ManifestArgs) -> Deployment {
    let quantity = |s: &str| Quantity(s.to_string());
    let mut env = vec![
        field_env("POD_NAME", "metadata.name"),
        field_env("POD_NAMESPACE", "metadata.namespace"),
    ];
    env.extend(super::webhooks::env_vars(a));
    let mut ports = vec![port("metrics", 8080), port("probes", 8081)];
    ports.extend(
        super::webhooks::ports(a)
            .iter()
            .map(|(name, number)| port(name, *number)),
    );
    let (volumes, mounts): (Vec<_>, Vec<_>) = super::webhooks::volumes(a).into_iter().unzip();
    let container = Container {
        name: NAME.into(),
        image: Some(a.image.clone()),
        args: Some(args(a)),
        env: Some(env),
        ports: Some(ports),
        volume_mounts: (!mounts.is_empty()).then_some(mounts),
        liveness_probe: Some(probe("/healthz", Some(5), 10)),
        readiness_probe: Some(probe("/readyz", None, 5)),
        // Sized from the benchmark (BENCHMARKS.md): ~20 MB RSS at 1000 BookStores.
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".to_string(), quantity("50m")),
                ("memory".to_string(), quantity("32Mi")),
            ])),
            limits: Some(BTreeMap::from([("memory".to_string(), quantity("128Mi"))])),
            ..Default::default()
        }),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            privileged: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    Deployment {
        metadata: meta(a, a.name(), Some(&a.namespace)),
        spec: Some(DeploymentSpec {
            replicas: Some(a.replica_count()),
            selector: LabelSelector {
                match_labels: Some(labels(a)),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(a)),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(a.name().into()),
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        run_as_user: Some(65532),
                        run_as_group: Some(65532),
                        seccomp_profile: Some(SeccompProfile {
                            type_: "RuntimeDefault".into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    termination_grace_period_seconds: Some(30),
                    containers: vec![container],
                    volumes: (!volumes.is_empty()).then_some(volumes),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn metrics_service(a: &ManifestArgs) -> Service {
    Service {
        metadata: meta(a, &format!("{}-metrics", a.name()), Some(&a.namespace)),
        spec: Some(ServiceSpec {
            selector: Some(labels(a)),
            ports: Some(vec![ServicePort {
                name: Some("metrics".into()),
                port: 8080,
                target_port: Some(IntOrString::String("metrics".into())),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}
