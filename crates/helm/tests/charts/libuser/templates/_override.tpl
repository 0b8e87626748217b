{{- define "toolkit.banner" -}}
banner from the parent
{{- end -}}
