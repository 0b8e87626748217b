{{- define "large.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "large.fullname" -}}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "large.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "large.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "large.selectorLabels" -}}
app.kubernetes.io/name: {{ include "large.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "large.image" -}}
{{- $registry := .global.imageRegistry | default .image.registry -}}
{{- printf "%s/%s:%s" $registry .image.repository (.image.tag | toString) -}}
{{- end }}
