"""Generates the large benchmark chart of the test corpus: ~200 templates and ~15k
template actions in the style of big public charts (helpers, labels, toYaml blocks,
ranges over maps and lists, conditions, tpl). Deterministic; the output is committed.
Usage: gen-large-chart.py OUT_DIR
"""
import os
import sys

out = sys.argv[1]
N = 200
os.makedirs(os.path.join(out, "templates"), exist_ok=True)
with open(os.path.join(out, "Chart.yaml"), "w") as f:
    f.write("apiVersion: v2\nname: large\nversion: 1.0.0\nappVersion: \"9.9.9\"\ndescription: Generated benchmark chart\n")

helpers = ['{{- define "large.name" -}}\n{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}\n{{- end }}\n',
           '{{- define "large.fullname" -}}\n{{- $name := default .Chart.Name .Values.nameOverride }}\n{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}\n{{- end }}\n',
           '{{- define "large.labels" -}}\nhelm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}\n{{ include "large.selectorLabels" . }}\napp.kubernetes.io/version: {{ .Chart.AppVersion | quote }}\napp.kubernetes.io/managed-by: {{ .Release.Service }}\n{{- with .Values.commonLabels }}\n{{ toYaml . }}\n{{- end }}\n{{- end }}\n',
           '{{- define "large.selectorLabels" -}}\napp.kubernetes.io/name: {{ include "large.name" . }}\napp.kubernetes.io/instance: {{ .Release.Name }}\n{{- end }}\n',
           '{{- define "large.image" -}}\n{{- $registry := .global.imageRegistry | default .image.registry -}}\n{{- printf "%s/%s:%s" $registry .image.repository (.image.tag | toString) -}}\n{{- end }}\n']
with open(os.path.join(out, "templates", "_helpers.tpl"), "w") as f:
    f.write("\n".join(helpers))

vals = ["nameOverride: \"\"", "commonLabels:\n  team: bench\n  tier: backend", "global:\n  imageRegistry: \"\"", "components:"]
for i in range(N):
    vals.append(f"""  c{i:03d}:
    enabled: {"true" if i % 7 else "false"}
    replicas: {1 + i % 5}
    image:
      registry: registry.example
      repository: team/component-{i}
      tag: "1.{i}.0"
    port: {8000 + i}
    env:
      LOG_LEVEL: info
      COMPONENT: c{i:03d}
      INDEX: "{i}"
    resources:
      limits: {{cpu: 500m, memory: {128 + i}Mi}}
      requests: {{cpu: 100m, memory: 64Mi}}
    annotations:
      note: "component {{{{ .Release.Name }}}}-{i}"
    ports: [{{name: http, port: {8000 + i}}}, {{name: metrics, port: 9090}}]""")
with open(os.path.join(out, "values.yaml"), "w") as f:
    f.write("\n".join(vals) + "\n")

for i in range(N):
    t = f"""{{{{- $c := index .Values.components "c{i:03d}" }}}}
{{{{- if $c.enabled }}}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{{{ include "large.fullname" . }}}}-c{i:03d}
  labels:
    {{{{- include "large.labels" . | nindent 4 }}}}
  annotations:
    {{{{- range $k, $v := $c.annotations }}}}
    {{{{ $k }}}}: {{{{ tpl $v $ | quote }}}}
    {{{{- end }}}}
spec:
  replicas: {{{{ $c.replicas }}}}
  selector:
    matchLabels:
      {{{{- include "large.selectorLabels" . | nindent 6 }}}}
      component: c{i:03d}
  template:
    metadata:
      labels:
        {{{{- include "large.selectorLabels" . | nindent 8 }}}}
        component: c{i:03d}
    spec:
      containers:
        - name: main
          image: {{{{ include "large.image" (dict "image" $c.image "global" .Values.global) | quote }}}}
          ports:
            {{{{- range $c.ports }}}}
            - name: {{{{ .name }}}}
              containerPort: {{{{ .port }}}}
            {{{{- end }}}}
          env:
            {{{{- range $k, $v := $c.env }}}}
            - name: {{{{ $k }}}}
              value: {{{{ $v | quote }}}}
            {{{{- end }}}}
          resources:
            {{{{- toYaml $c.resources | nindent 12 }}}}
---
apiVersion: v1
kind: Service
metadata:
  name: {{{{ include "large.fullname" . }}}}-c{i:03d}
  labels:
    {{{{- include "large.labels" . | nindent 4 }}}}
spec:
  ports:
    {{{{- range $c.ports }}}}
    - name: {{{{ .name }}}}
      port: {{{{ .port }}}}
      targetPort: {{{{ .name }}}}
    {{{{- end }}}}
  selector:
    {{{{- include "large.selectorLabels" . | nindent 4 }}}}
    component: c{i:03d}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{{{ include "large.fullname" . }}}}-c{i:03d}-config
  labels:
    {{{{- include "large.labels" . | nindent 4 }}}}
data:
""" + "".join(f"""  key{k}: {{{{ printf "%s-%d-%v" (include "large.name" $) {k} $c.port | quote }}}}
  flag{k}: {{{{ if and $c.enabled (gt (int $c.replicas) {k % 4}) }}}}{{{{ $c.image.tag | default "none" | upper | quote }}}}{{{{ else }}}}{{{{ "off" | quote }}}}{{{{ end }}}}
""" for k in range(12)) + """{{- end }}
"""
    with open(os.path.join(out, "templates", f"c{i:03d}.yaml"), "w") as f:
        f.write(t)
