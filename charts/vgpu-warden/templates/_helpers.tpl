{{/*
Labels of every object: the base's app.kubernetes.io/* set. Call with (dict "root" $ "component" "...").
The instance is the release name (vgpu-warden in the base); selectors use name, instance and component.
*/}}
{{- define "vgpu-warden.labels" -}}
app.kubernetes.io/name: vgpu-warden
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: vgpu-warden
{{- end -}}

{{- define "vgpu-warden.selector" -}}
app.kubernetes.io/name: vgpu-warden
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "vgpu-warden.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* HAMi's fullname for a release, as HAMi's chart computes it (release name, or <release>-hami). */}}
{{- define "vgpu-warden.hamiFullname" -}}
{{- $release := .Values.hamiMigration.release -}}
{{- if contains "hami" $release -}}{{ $release | trunc 63 | trimSuffix "-" }}{{- else -}}{{ printf "%s-hami" $release | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{/* Usernames of the HAMi device plugin, as a CEL list literal. */}}
{{- define "vgpu-warden.devicePluginUsers" -}}
{{- $users := list -}}
{{- if .Values.hamiMigration.enabled -}}
{{- $users = append $users (printf "'system:serviceaccount:%s:%s-device-plugin'" .Values.hamiMigration.namespace (include "vgpu-warden.hamiFullname" .)) -}}
{{- else -}}
{{- range .Values.admissionPolicies.devicePluginServiceAccounts -}}
{{- $users = append $users (printf "'system:serviceaccount:%s:%s'" (required "admissionPolicies.devicePluginServiceAccounts[].namespace is required" .namespace) (required "admissionPolicies.devicePluginServiceAccounts[].name is required" .name)) -}}
{{- end -}}
{{- end -}}
[{{ join ", " $users }}]
{{- end -}}

{{/* The three CEL variables every admission policy starts with (manifests/admission-policies.yaml). */}}
{{- define "vgpu-warden.policyVariables" -}}
- name: wardenUsers
  expression: {{ printf "['system:serviceaccount:%s:vgpu-warden']" .Release.Namespace | quote }}
- name: devicePluginUsers
  expression: {{ include "vgpu-warden.devicePluginUsers" . | quote }}
- name: schedulerName
  expression: {{ printf "'%s'" .Values.schedulerName | quote }}
{{- end -}}

{{/* Fails rendering on values that cannot work, with one line naming the value. */}}
{{- define "vgpu-warden.validate" -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$" .Values.schedulerName) -}}
{{- fail (printf "schedulerName %q must be a DNS subdomain (lowercase letters, digits, '-' and '.')" (.Values.schedulerName | toString | trunc 63)) -}}
{{- end -}}
{{- if not (has .Values.admissionPolicies.mode (list "deny" "warn")) -}}
{{- fail (printf "admissionPolicies.mode must be deny or warn, not %q" (.Values.admissionPolicies.mode | toString | trunc 63)) -}}
{{- end -}}
{{- if and (not .Values.priorityClass.create) (not .Values.priorityClass.name) -}}
{{- fail "priorityClass.name is required (the class both Deployments use)" -}}
{{- end -}}
{{- range $key := list "heapLimitMiB" "semiSpaceMiB" -}}
{{- $value := index $.Values $key | toString -}}
{{- if not (regexMatch "^[0-9]{1,6}$" $value) -}}
{{- fail (printf "%s must be a whole number of MiB (0 leaves V8's own), not %q" $key ($value | trunc 63)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
