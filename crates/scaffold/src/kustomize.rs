//! `config/`: the kustomize layout operator-sdk scaffolds (default, manager, rbac, crd,
//! samples, prometheus, network-policy, manifests, scorecard), running `bosun run` as the
//! manager. The CRDs and the operator's own RBAC are not templates: they are what `bosun crd`
//! and `bosun rbac --watches` derive from the watches file (see [`crate::Derive`]).
use crate::files::Tree;

/// The ServiceAccount `bosun rbac` binds its roles to.
pub const SERVICE_ACCOUNT: &str = "bosun";
/// The Lease `bosun rbac`'s leader-election Role allows.
pub const LEASE: &str = "bosun-leader";

fn labels(project: &str, indent: &str) -> String {
    format!("{indent}app.kubernetes.io/name: {project}\n{indent}app.kubernetes.io/managed-by: kustomize\n")
}

/// The namespace every namespaced object of the install lands in.
pub fn namespace(project: &str) -> String {
    format!("{project}-system")
}

/// Everything `init` writes under `config/` (the RBAC derived separately).
pub fn init(project: &str) -> Tree {
    let mut t = Tree::default();
    let ns = namespace(project);
    t.put(
        "config/default/kustomization.yaml",
        format!(
            "# Adds namespace to all resources.\nnamespace: {ns}\n\n# Value of this field is prepended to the\n# names of all resources, e.g. a deployment named\n# \"wordpress\" becomes \"alices-wordpress\".\nnamePrefix: {project}-\n\nresources:\n#- ../crd\n- ../rbac\n- ../manager\n# [PROMETHEUS] To enable prometheus monitor, uncomment all sections with 'PROMETHEUS'.\n#- ../prometheus\n# [METRICS] Expose the controller manager metrics service.\n- metrics_service.yaml\n# [NETWORK POLICY] Protect the /metrics endpoint and Webhook Server with NetworkPolicy.\n#- ../network-policy\n\npatches:\n# [METRICS] The manager serves /metrics on every interface, behind bosun's TokenReview and\n# SubjectAccessReview (bind the metrics-reader ClusterRole to Prometheus' account).\n- path: manager_metrics_patch.yaml\n  target:\n    kind: Deployment\n"
        ),
    );
    t.put(
        "config/default/manager_metrics_patch.yaml",
        "# This patch adds the args to expose the metrics endpoint, secured by TokenReview and\n# SubjectAccessReview.\n- op: add\n  path: /spec/template/spec/containers/0/args/-\n  value: --metrics-bind-address=0.0.0.0:8080\n- op: add\n  path: /spec/template/spec/containers/0/args/-\n  value: --metrics-secure\n",
    );
    t.put(
        "config/default/metrics_service.yaml",
        format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  labels:\n    control-plane: controller-manager\n{l}  name: controller-manager-metrics-service\n  namespace: system\nspec:\n  ports:\n  - name: http\n    port: 8080\n    protocol: TCP\n    targetPort: 8080\n  selector:\n    control-plane: controller-manager\n    app.kubernetes.io/name: {project}\n",
            l = labels(project, "    ")
        ),
    );
    t.put(
        "config/manager/kustomization.yaml",
        "resources:\n- manager.yaml\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nimages:\n- name: controller\n  newName: controller\n  newTag: latest\n",
    );
    t.put("config/manager/manager.yaml", manager(project));
    t.put(
        "config/rbac/service_account.yaml",
        format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  labels:\n{l}  name: {SERVICE_ACCOUNT}\n  namespace: {ns}\n",
            l = labels(project, "    ")
        ),
    );
    t.put(
        "config/prometheus/kustomization.yaml",
        "resources:\n- monitor.yaml\n",
    );
    t.put(
        "config/prometheus/monitor.yaml",
        format!(
            "# Prometheus Monitor Service (Metrics)\napiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  labels:\n    control-plane: controller-manager\n{l}  name: controller-manager-metrics-monitor\n  namespace: system\nspec:\n  endpoints:\n    - path: /metrics\n      port: http\n      scheme: http\n      bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n  selector:\n    matchLabels:\n      control-plane: controller-manager\n      app.kubernetes.io/name: {project}\n",
            l = labels(project, "    ")
        ),
    );
    t.put(
        "config/network-policy/kustomization.yaml",
        "resources:\n- allow-metrics-traffic.yaml\n",
    );
    t.put(
        "config/network-policy/allow-metrics-traffic.yaml",
        format!(
            "# Allows the metrics port of the manager only from namespaces labelled\n# 'metrics: enabled' (where Prometheus runs).\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  labels:\n{l}  name: allow-metrics-traffic\n  namespace: system\nspec:\n  podSelector:\n    matchLabels:\n      control-plane: controller-manager\n      app.kubernetes.io/name: {project}\n  policyTypes:\n    - Ingress\n  ingress:\n    - from:\n      - namespaceSelector:\n          matchLabels:\n            metrics: enabled\n      ports:\n        - port: 8080\n          protocol: TCP\n",
            l = labels(project, "    ")
        ),
    );
    t.put(
        "config/manifests/kustomization.yaml",
        "# These resources constitute the fully configured set of manifests\n# used to generate the 'manifests/' directory in a bundle.\nresources:\n- ../default\n#- ../samples\n- ../scorecard\n",
    );
    t.extend(scorecard());
    t
}

fn manager(project: &str) -> String {
    let l = labels(project, "    ");
    let tl = labels(project, "        ");
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata:
  labels:
    control-plane: controller-manager
{l}  name: system
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: controller-manager
  namespace: system
  labels:
    control-plane: controller-manager
{l}spec:
  selector:
    matchLabels:
      control-plane: controller-manager
      app.kubernetes.io/name: {project}
  replicas: 1
  template:
    metadata:
      annotations:
        kubectl.kubernetes.io/default-container: manager
      labels:
        control-plane: controller-manager
{tl}    spec:
      securityContext:
        runAsNonRoot: true
        seccompProfile:
          type: RuntimeDefault
      containers:
      - name: manager
        image: controller:latest
        args:
          - run
          - --leader-elect
          - --leader-election-id={LEASE}
          - --watches={home}/watches.yaml
          - --health-probe-bind-address=0.0.0.0:8081
          - --log-format=json
        env:
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        ports:
        - containerPort: 8080
          name: metrics
          protocol: TCP
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities:
            drop:
            - "ALL"
        livenessProbe:
          httpGet:
            path: /healthz
            port: 8081
          initialDelaySeconds: 15
          periodSeconds: 20
        readinessProbe:
          httpGet:
            path: /readyz
            port: 8081
          initialDelaySeconds: 5
          periodSeconds: 10
        resources:
          limits:
            cpu: 500m
            memory: 128Mi
          requests:
            cpu: 10m
            memory: 64Mi
      serviceAccountName: {SERVICE_ACCOUNT}
      terminationGracePeriodSeconds: 10
"#,
        home = crate::top::HOME
    )
}

fn scorecard() -> Tree {
    let mut t = Tree::default();
    t.put(
        "config/scorecard/bases/config.yaml",
        "apiVersion: scorecard.operatorframework.io/v1alpha3\nkind: Configuration\nmetadata:\n  name: config\nstages:\n- parallel: true\n  tests: []\n",
    );
    t.put(
        "config/scorecard/kustomization.yaml",
        "resources:\n- bases/config.yaml\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\npatches:\n- path: patches/basic.config.yaml\n  target:\n    group: scorecard.operatorframework.io\n    kind: Configuration\n    name: config\n    version: v1alpha3\n- path: patches/olm.config.yaml\n  target:\n    group: scorecard.operatorframework.io\n    kind: Configuration\n    name: config\n    version: v1alpha3\n# +kubebuilder:scaffold:patches\n",
    );
    let test = |suite: &str, name: &str| {
        format!(
            "- op: add\n  path: /stages/0/tests/-\n  value:\n    entrypoint:\n    - scorecard-test\n    - {name}\n    image: quay.io/operator-framework/scorecard-test:v1.42.0\n    labels:\n      suite: {suite}\n      test: {name}-test\n"
        )
    };
    t.put(
        "config/scorecard/patches/basic.config.yaml",
        test("basic", "basic-check-spec"),
    );
    let olm: String = [
        "olm-bundle-validation",
        "olm-crds-have-validation",
        "olm-crds-have-resources",
        "olm-spec-descriptors",
        "olm-status-descriptors",
    ]
    .iter()
    .map(|n| test("olm", n))
    .collect();
    t.put("config/scorecard/patches/olm.config.yaml", olm);
    t
}

/// A kind as the per-kind files name it.
pub struct KindRef {
    pub group: String,
    pub short_group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
}

impl KindRef {
    pub fn lower(&self) -> String {
        self.kind.to_lowercase()
    }
}

/// `config/rbac/kustomization.yaml` for the project's kinds.
pub fn rbac_kustomization(kinds: &[KindRef]) -> String {
    let mut s = String::from("resources:\n# All RBAC will be applied under this service account in\n# the deployment namespace. The operator's own rules are what\n# `bosun rbac --watches watches.yaml` derives from the charts.\n- service_account.yaml\n- role.yaml\n- role_binding.yaml\n- leader_election_role.yaml\n- leader_election_role_binding.yaml\n- metrics_reader_role.yaml\n");
    if !kinds.is_empty() {
        s.push_str("# For each CRD, \"Admin\", \"Editor\" and \"Viewer\" roles are scaffolded by\n# default, aiding admins in cluster management. Those roles are\n# not used by the project itself.\n");
        for k in kinds {
            for r in ["admin", "editor", "viewer"] {
                s.push_str(&format!("- {}_{r}_role.yaml\n", k.lower()));
            }
        }
    }
    s
}

/// The admin, editor and viewer ClusterRoles of a kind, for its users (no wildcard).
pub fn kind_roles(project: &str, k: &KindRef) -> Tree {
    let mut t = Tree::default();
    let sets: [(&str, &str, &[&str]); 3] = [
        (
            "admin",
            "full permissions (including status)",
            &[
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ],
        ),
        (
            "editor",
            "permissions to create, update, and delete",
            &[
                "create", "delete", "get", "list", "patch", "update", "watch",
            ],
        ),
        ("viewer", "read-only access", &["get", "list", "watch"]),
    ];
    for (role, what, verbs) in sets {
        let verbs: String = verbs.iter().map(|v| format!("  - {v}\n")).collect();
        let status_verbs = if role == "admin" {
            "  - get\n  - patch\n  - update\n"
        } else {
            "  - get\n"
        };
        t.put(
            format!("config/rbac/{}_{role}_role.yaml", k.lower()),
            format!(
                "# This rule is not used by the project {project} itself.\n# It is provided to allow the cluster admin to help manage permissions for users.\n#\n# Grants {what} on {g} {kind}s.\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  labels:\n{l}  name: {lower}-{role}-role\nrules:\n- apiGroups:\n  - {g}\n  resources:\n  - {plural}\n  verbs:\n{verbs}- apiGroups:\n  - {g}\n  resources:\n  - {plural}/status\n  verbs:\n{status_verbs}",
                g = k.group,
                kind = k.kind,
                lower = k.lower(),
                plural = k.plural,
                l = labels(project, "    "),
            ),
        );
    }
    t
}

/// The sample's file name: `<group>_<version>_<kind>.yaml`.
pub fn sample_name(k: &KindRef) -> String {
    format!("{}_{}_{}.yaml", k.short_group, k.version, k.lower())
}

/// A custom resource with `values` as its spec (`note` says where they come from).
pub fn sample(
    project: &str,
    k: &KindRef,
    values: &serde_json::Value,
    note: &str,
) -> Result<String, serde_yaml::Error> {
    let spec = match values {
        serde_json::Value::Object(m) if !m.is_empty() => {
            let body = serde_yaml::to_string(values)?;
            let indented: String = body.lines().map(|l| format!("  {l}\n")).collect();
            format!("spec:\n  # {note}\n{indented}")
        }
        _ => "spec: {}\n".to_string(),
    };
    Ok(format!(
        "apiVersion: {g}/{v}\nkind: {kind}\nmetadata:\n  name: {lower}-sample\n  labels:\n{l}{spec}",
        g = k.group,
        v = k.version,
        kind = k.kind,
        lower = k.lower(),
        l = labels(project, "    "),
    ))
}

pub fn samples_kustomization(files: &[String]) -> String {
    let mut s = String::from("## Append samples of your project ##\nresources:\n");
    for f in files {
        s.push_str(&format!("- {f}\n"));
    }
    s.push_str("# +kubebuilder:scaffold:manifestskustomizesamples\n");
    s
}

pub fn crd_kustomization(files: &[String]) -> String {
    let mut s = String::from("# This kustomization.yaml is not intended to be run by itself,\n# since it depends on service name and namespace that are out of this kustomize package.\n# It should be run by config/default\nresources:\n");
    for f in files {
        s.push_str(&format!("- {f}\n"));
    }
    s.push_str("# +kubebuilder:scaffold:crdkustomizeresource\n");
    s
}
