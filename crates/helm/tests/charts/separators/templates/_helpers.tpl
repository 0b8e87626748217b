{{- define "separators.cm" -}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ . }}
{{- end -}}
{{- define "separators.glued" -}}
---{{ printf "# glued %s" . }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: glued-{{ . }}
{{ end -}}
