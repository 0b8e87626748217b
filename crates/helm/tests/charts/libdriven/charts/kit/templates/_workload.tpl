{{- define "kit.workload" -}}
{{- $root := .root }}
{{- $c := .spec }}
{{- if $c.schedule }}
apiVersion: batch/v1
kind: CronJob
{{- else }}
apiVersion: apps/v1
kind: Deployment
{{- end }}
metadata:
  name: {{ include "kit.fullname" $root }}-{{ .component }}
  labels:
    {{- include "kit.labels" . | nindent 4 }}
spec:
  {{- if $c.schedule }}
  schedule: {{ $c.schedule | quote }}
  jobTemplate:
    spec:
      template:
        spec:
          {{- include "kit.podspec" . | nindent 10 }}
  {{- else }}
  replicas: {{ $c.replicas }}
  selector:
    matchLabels:
      {{- include "kit.labels" . | nindent 6 }}
  template:
    spec:
      {{- include "kit.podspec" . | nindent 6 }}
  {{- end }}
{{- end }}

{{- define "kit.podspec" -}}
containers:
  - name: {{ .component }}
    image: "{{ .root.Values.image.repository }}:{{ .root.Values.image.tag | default .root.Chart.AppVersion | default "latest" }}"
    {{- with .spec.command }}
    args: {{ toJson . }}
    {{- end }}
    {{- with .spec.port }}
    ports:
      - containerPort: {{ . }}
    {{- end }}
    {{- with .spec.env }}
    env:
      {{- range $k, $v := . }}
      - name: {{ $k }}
        value: {{ $v | quote }}
      {{- end }}
    {{- end }}
{{- end }}

{{- define "kit.all" -}}
{{- $root := . }}
{{- range $name, $spec := .Values.components }}
{{- if and $spec (or $spec.schedule (gt (int $spec.replicas) 0)) }}
---
{{ include "kit.workload" (dict "root" $root "component" $name "spec" $spec) }}
{{- end }}
{{- end }}
{{- range $name, $cm := .Values.configMaps }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "kit.fullname" $root }}-{{ $name }}
data:
  {{- include "kit.tplvalues" (dict "value" $cm.data "context" $root) | nindent 2 }}
{{- end }}
{{- end }}
