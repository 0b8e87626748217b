{{- define "lifecycle.name" -}}
{{ .Release.Name }}-{{ . | default "" }}
{{- end -}}
{{- define "lifecycle.labels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/name: lifecycle
{{- with .Values.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}
