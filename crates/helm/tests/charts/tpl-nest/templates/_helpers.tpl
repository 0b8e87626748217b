{{- define "tpl-nest.fullname" -}}
{{ .Release.Name }}-{{ .Chart.Name }}
{{- end }}
{{- define "tpl-nest.deep" -}}
{{ tpl "{{ include \"tpl-nest.leaf\" . }}" . }}
{{- end }}
{{- define "tpl-nest.leaf" -}}
leaf{{ tpl $.Values.extraConfig $ }}
{{- end }}
