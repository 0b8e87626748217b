//! Hand-written documents shaped like real chart values, Chart.yaml files, Kubernetes
//! manifests and Ansible roles (written for these tests, not copied from any project).

pub const DOCUMENTS: &[&str] = &[
    r#"# Default values for a web app.
replicaCount: 1
image:
  repository: registry.example.com/team/app
  pullPolicy: IfNotPresent
  # Overrides the image tag whose default is the chart appVersion.
  tag: ""
imagePullSecrets: []
nameOverride: ""
serviceAccount:
  create: true
  annotations: {}
  name: ""
podAnnotations:
  prometheus.io/scrape: "true"
  prometheus.io/port: "9102"
securityContext:
  capabilities:
    drop:
    - ALL
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  runAsUser: 1000
service:
  type: ClusterIP
  port: 80
ingress:
  enabled: false
  className: ""
  hosts:
    - host: chart-example.local
      paths:
        - path: /
          pathType: ImplementationSpecific
  tls: []
resources:
  limits:
    cpu: 100m
    memory: 128Mi
  requests:
    cpu: 0.5
    memory: 1Gi
autoscaling:
  enabled: false
  minReplicas: 1
  maxReplicas: 100
  targetCPUUtilizationPercentage: 80
nodeSelector: {}
tolerations: []
affinity: {}
"#,
    r#"apiVersion: v2
name: bookstore
description: A Helm chart for a small book store
type: application
version: 0.1.0
appVersion: "1.16.0"
keywords: [books, store]
maintainers:
  - name: Jane Doe
    email: jane@example.com
dependencies:
  - name: mongodb
    version: ~12.1.0
    repository: https://charts.example.com/stable
    condition: mongodb.enabled
"#,
    r#"config:
  logLevel: info
  featureGates: "A=true,B=false"
  timeout: 30s
  retries: 3
  ratio: 0.75
  enabled: yes
  mode: on
  octal: 0755
  big: 123456789012345678
  when: 2024-05-01
  cron: "*/5 * * * *"
  banner: |
    Welcome!
      Indented line
    Last line
  folded: >
    a folded
    paragraph

    and another
  keep: |+
    trailing

  strip: |-
    no newline
  json: '{"a": 1, "b": [true, null]}'
  empty:
  tilde: ~
  url: http://example.com:8080/path?q=1#frag
  windows: C:\Program Files\App
  quote: 'it''s'
  unicode: "caf\u00e9 \U0001F600"
defaults: &defaults
  adapter: postgres
  host: localhost
development:
  <<: *defaults
  database: dev
test:
  <<: [*defaults]
  database: test
"#,
    r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app.kubernetes.io/name: web
    app.kubernetes.io/instance: "release-1"
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: "nginx:1.25"
        args: ["--port=8080", "--verbose"]
        env:
        - {name: MODE, value: "production"}
        - name: EMPTY
          value: ""
        ports:
        - containerPort: 8080
          protocol: TCP
        readinessProbe:
          httpGet: {path: /healthz, port: 8080}
          initialDelaySeconds: 5
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  ports: [{port: 80, targetPort: 8080}]
...
"#,
    r#"---
- name: Create the namespace
  kubernetes.core.k8s:
    state: present
    definition:
      apiVersion: v1
      kind: Namespace
      metadata:
        name: "{{ ansible_operator_meta.namespace }}"
  when: create_namespace | bool

- name: Deploy the app
  kubernetes.core.k8s:
    definition: "{{ lookup('template', 'deployment.yaml.j2') | from_yaml }}"
    wait: yes
    wait_timeout: 300
  register: result
  until: result is succeeded
  retries: 3
  delay: 10
  tags: [deploy, app]

- name: Report
  debug:
    msg: >-
      Deployed {{ result.result.metadata.name }}
      with {{ replicas }} replicas
  vars:
    replicas: 3
    ratio: 1:30
    flag: n
    date: 2001-12-14
"#,
    r#"# role defaults
size: 1
image: quay.io/example/app:v0.1.0
storage:
  class: ~
  size: 10Gi
ports: [8080, 8443]
labels:
  tier: backend
  "app.kubernetes.io/part-of": store
yes_no: [yes, no, y, n, on, off, true, false]
numbers: [0x1F, 0o17, 017, 1_000, 1e3, 1.0e+3, .5, -.inf, .NaN, 1:20]
"#,
];
