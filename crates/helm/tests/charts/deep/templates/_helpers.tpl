{{- define "deep.down" -}}
{{- if gt (int .) 0 -}}{{ include "deep.down" (sub (int .) 1) }}{{- else -}}include-bottom{{- end -}}
{{- end -}}
{{- define "deep.c0" -}}{{ if gt (int .) 0 }}{{ include "deep.c1" (sub (int .) 1) }}{{ else }}c0{{ end }}{{- end -}}
{{- define "deep.c1" -}}{{ if gt (int .) 0 }}{{ include "deep.c2" (sub (int .) 1) }}{{ else }}c1{{ end }}{{- end -}}
{{- define "deep.c2" -}}{{ if gt (int .) 0 }}{{ include "deep.c3" (sub (int .) 1) }}{{ else }}c2{{ end }}{{- end -}}
{{- define "deep.c3" -}}{{ if gt (int .) 0 }}{{ include "deep.c4" (sub (int .) 1) }}{{ else }}c3{{ end }}{{- end -}}
{{- define "deep.c4" -}}{{ if gt (int .) 0 }}{{ include "deep.c5" (sub (int .) 1) }}{{ else }}c4{{ end }}{{- end -}}
{{- define "deep.c5" -}}{{ if gt (int .) 0 }}{{ include "deep.c6" (sub (int .) 1) }}{{ else }}c5{{ end }}{{- end -}}
{{- define "deep.c6" -}}{{ if gt (int .) 0 }}{{ include "deep.c7" (sub (int .) 1) }}{{ else }}c6{{ end }}{{- end -}}
{{- define "deep.c7" -}}{{ if gt (int .) 0 }}{{ include "deep.c0" (sub (int .) 1) }}{{ else }}c7{{ end }}{{- end -}}
{{- define "deep.tmpl" -}}{{ if gt (int .) 0 }}{{ template "deep.tmpl" (sub (int .) 1) }}{{ else }}template-bottom{{ end }}{{- end -}}
{{- define "deep.mixed" -}}
{{- if gt (int .) 0 -}}
{{- $inner := include "deep.mixed" (sub (int .) 1) -}}
{{- template "deep.leaf" (int .) -}}{{ $inner }}
{{- end -}}
{{- end -}}
{{- define "deep.leaf" -}}{{ if eq (mod . 100) 0 }}[{{ . }}]{{ end }}{{- end -}}
