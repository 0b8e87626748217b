{{- define "bosun.labels" -}}
app.kubernetes.io/component: operator
app.kubernetes.io/name: bosun
{{- end -}}

{{- define "bosun.namespacedRules" -}}
{{- if has "bookstore" .Values.operators }}
- apiGroups: [charts.example.com]
  resources: [bookstores]
  verbs: [list, watch, patch]
- apiGroups: [charts.example.com]
  resources: [bookstores/status]
  verbs: [patch]
- apiGroups: [charts.example.com]
  resources: [bookstores/finalizers]
  verbs: [update]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, create, patch]
- apiGroups: [apps]
  resources: [statefulsets]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [services]
  verbs: [get, list, watch, create, patch]
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [get, list, watch, patch, delete]
- apiGroups: [""]
  resources: [pods]
  verbs: [list, patch, delete]
{{- end }}
{{- if has "myownshell" .Values.operators }}
- apiGroups: [my-first-operator.jgato.io]
  resources: [myownshells]
  verbs: [list, watch, patch]
- apiGroups: [my-first-operator.jgato.io]
  resources: [myownshells/status]
  verbs: [patch]
- apiGroups: [my-first-operator.jgato.io]
  resources: [myownshells/finalizers]
  verbs: [update]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, create, patch]
{{- end }}
{{- if has "vmgroup" .Values.operators }}
- apiGroups: [vm.codeconnect.vmworld.com]
  resources: [vmgroups]
  verbs: [list, watch, patch]
- apiGroups: [vm.codeconnect.vmworld.com]
  resources: [vmgroups/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [secrets]
  resourceNames: [vc-creds]
  verbs: [get]
{{- end }}
{{- if has "postgres" .Values.operators }}
- apiGroups: [lukeb0nd.com]
  resources: [postgresclusters]
  verbs: [get, list, watch, patch]
- apiGroups: [lukeb0nd.com]
  resources: [postgresclusters/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [pods, persistentvolumeclaims]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [secrets, services]
  verbs: [get, create]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, create]
{{- end }}
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end -}}

{{- define "bosun.clusterRules" -}}
{{- if has "bookstore" .Values.operators }}
- apiGroups: [storage.k8s.io]
  resources: [storageclasses]
  verbs: [get, list]
{{- end }}
{{- if has "postgres" .Values.operators }}
- apiGroups: [storage.k8s.io]
  resources: [storageclasses]
  verbs: [get, list]
- apiGroups: [""]
  resources: [nodes]
  verbs: [get]
{{- end }}
- apiGroups: [authentication.k8s.io]
  resources: [tokenreviews]
  verbs: [create]
- apiGroups: [authorization.k8s.io]
  resources: [subjectaccessreviews]
  verbs: [create]
{{- end -}}


{{- /* The webhooks served: checked, then each with its port (9443 on, in the order named). */ -}}
{{- define "bosun.webhooks" -}}
{{- range $i, $op := .Values.webhooks }}
{{- if not (has $op $.Values.operators) }}
{{- fail (printf "webhooks names %q, which is not among the operators installed (add it to operators)" $op) }}
{{- end }}
{{- if eq $op "bookstore" }}
{{- fail "BookStore's conversion webhook needs the CRD's spec.conversion, which Helm's crds/ cannot template: install with `bosun manifests --operators=bookstore --webhooks=bookstore`" }}
{{- end }}
{{- if ne $op "vmgroup" }}
{{- fail (printf "operator %q serves no webhooks" $op) }}
{{- end }}
{{- end }}
{{- end -}}
