{{- define "toolkit.configmap" -}}
{{- $top := index . 0 -}}
{{- $data := index . 1 -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "toolkit.fullname" $top }}
  labels:
    {{- include "toolkit.labels" $top | nindent 4 }}
data:
  {{- range $k, $v := $data }}
  {{ $k }}: {{ if kindIs "string" $v }}{{ $v | quote }}{{ else }}{{ toJson $v | quote }}{{ end }}
  {{- end }}
{{- end -}}
