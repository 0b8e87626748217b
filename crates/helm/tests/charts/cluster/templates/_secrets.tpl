{{- define "cluster.password" -}}
{{- $secret := lookup "v1" "Secret" .Release.Namespace (printf "%s-auth" .Release.Name) -}}
{{- if and $secret $secret.data (hasKey $secret.data "password") -}}
{{- index $secret.data "password" -}}
{{- else if .Values.password -}}
{{- .Values.password | b64enc -}}
{{- else -}}
{{- "generated" | b64enc -}}
{{- end -}}
{{- end -}}
