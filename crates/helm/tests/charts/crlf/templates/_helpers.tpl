{{/*
A helper, CRLF-terminated.
*/}}
{{- define "crlf.name" -}}
{{ .Values.name }}-{{ .Release.Name }}
{{- end }}

{{- define "crlf.labels" }}
app: {{ include "crlf.name" . }}
tier: web
{{- end }}
