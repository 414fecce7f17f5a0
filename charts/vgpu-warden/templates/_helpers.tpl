{{/*
Labels of every object: Helm's standard set (helm.sh/chart, app.kubernetes.io/name, instance,
version, component, managed-by) and the base's part-of. Call with (dict "root" $ "component" "...").
The instance is the release name (vgpu-warden in the base); selectors use name, instance and component.
*/}}
{{- define "vgpu-warden.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: vgpu-warden
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: vgpu-warden
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end -}}

{{- define "vgpu-warden.selector" -}}
app.kubernetes.io/name: vgpu-warden
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
Labels of a pod template: the base's (selector, part-of, version) and podLabels, which may not
override them (a selector label changed would orphan the pods). Helm's own labels (helm.sh/chart,
managed-by) stay on the objects Helm manages: a chart release alone does not restart the pods.
Call with (dict "root" $ "component" "..." "values" <the Deployment's values> "path" "<their key>").
*/}}
{{- define "vgpu-warden.podLabels" -}}
{{- $labels := include "vgpu-warden.selector" . | fromYaml -}}
{{- $_ := set $labels "app.kubernetes.io/part-of" "vgpu-warden" -}}
{{- $_ := set $labels "app.kubernetes.io/version" (.root.Chart.AppVersion | toString) -}}
{{- range $key, $value := (.values.podLabels | default dict) -}}
{{- if hasKey $labels $key -}}
{{- fail (printf "%spodLabels may not set %s: the chart sets it on the pods (a selector or version label)" $.path $key) -}}
{{- end -}}
{{- $_ := set $labels $key ($value | toString) -}}
{{- end -}}
{{- toYaml $labels -}}
{{- end -}}

{{/*
The scheduling fields both Deployments share: imagePullSecrets, nodeSelector, tolerations and
affinity (empty affinity: replicas spread over nodes, preferred). Call with
(dict "root" $ "component" "..." "values" <the Deployment's values>); renders at the pod spec's indent 0.
*/}}
{{- define "vgpu-warden.podPlacement" -}}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
affinity:
{{- with .values.affinity }}
  {{- toYaml . | nindent 2 }}
{{- else }}
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "vgpu-warden.selector" . | nindent 14 }}
{{- end }}
{{- end -}}

{{/*
kube-scheduler's image tag: kubeScheduler.image.tag, or the cluster's version as helm sees it
(.Capabilities.KubeVersion.Version) without a distribution suffix, as HAMi's chart does:
v1.31.6+k3s1 and v1.31.6-eks-2d5f260 give v1.31.6 (registry.k8s.io has upstream tags only).
*/}}
{{- define "vgpu-warden.kubeSchedulerTag" -}}
{{- $tag := .Values.kubeScheduler.image.tag | default "" | toString | trim -}}
{{- if $tag -}}
{{ $tag }}
{{- else -}}
{{- $version := .Capabilities.KubeVersion.Version -}}
{{- if not (regexMatch "^v?[0-9]+\\.[0-9]+\\.[0-9]+" $version) -}}
{{- fail (printf "kubeScheduler.image.tag is empty and the cluster's version %q is not vMAJOR.MINOR.PATCH: set kubeScheduler.image.tag" $version) -}}
{{- end -}}
{{ regexReplaceAll "^v?([0-9]+\\.[0-9]+\\.[0-9]+).*$" $version "v${1}" }}
{{- end -}}
{{- end -}}

{{- define "vgpu-warden.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion | toString }}
{{- end -}}

{{- define "vgpu-warden.kubeSchedulerImage" -}}
{{ .Values.kubeScheduler.image.repository }}:{{ include "vgpu-warden.kubeSchedulerTag" . }}
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

{{/*
The webhooks' namespaceSelector and objectSelector (webhook.*, the same for both webhooks). Read
through a default, so a --reuse-values upgrade from a chart without webhook.* still renders.
*/}}
{{- define "vgpu-warden.webhookSelectors" -}}
{{- $webhook := .Values.webhook | default dict -}}
{{- with $webhook.namespaceSelector }}
namespaceSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $webhook.objectSelector }}
objectSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
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
