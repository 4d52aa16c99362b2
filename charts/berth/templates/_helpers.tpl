{{/* Names, labels and images shared by every template. */}}

{{- define "berth.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's base name; service objects append "-<service>", so it leaves room for the longest (sandbox-manager). */}}
{{- define "berth.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 47 | trimSuffix "-" -}}
{{- else if contains (include "berth.name" .) .Release.Name -}}
{{- .Release.Name | trunc 47 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "berth.name" .) | trunc 47 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The services, as "<object name suffix>": "<values key>"; ranged over in name order. */}}
{{- define "berth.services" -}}
gateway: gateway
control-plane: controlPlane
sandbox-manager: sandboxManager
export-worker: exportWorker
{{- end -}}

{{- define "berth.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "berth.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one service; call with (dict "root" $ "service" "gateway"). */}}
{{- define "berth.selectorLabels" -}}
app.kubernetes.io/name: {{ include "berth.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .service }}
{{- end -}}

{{/* The selector labels of one service as `key=value,…` (for settings); call like berth.selectorLabels. */}}
{{- define "berth.selectorList" -}}
{{- include "berth.labelList" (include "berth.selectorLabels" . | fromYaml) -}}
{{- end -}}

{{/* Labels as the control plane's `key=value,…` settings take them, in key order. */}}
{{- define "berth.labelList" -}}
{{- $items := list -}}
{{- range $key, $value := . -}}
{{- $items = append $items (printf "%s=%s" $key $value) -}}
{{- end -}}
{{- join "," $items -}}
{{- end -}}

{{- define "berth.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "berth.agentServerImage" -}}
{{- printf "%s:%s" .Values.agentServerImage.repository (default .Chart.AppVersion .Values.agentServerImage.tag) -}}
{{- end -}}

{{- define "berth.secretName" -}}
{{- default (include "berth.fullname" .) .Values.secrets.existingSecret -}}
{{- end -}}

{{- define "berth.deploymentsNamespace" -}}
{{- default .Release.Namespace .Values.deployments.namespace -}}
{{- end -}}

{{/*
  "true" when Prometheus scrapes the agent servers: their PodMonitor, and the scraper their NetworkPolicy
  admits to their metrics port (dig: a release upgraded with --reuse-values from before the value has none).
*/}}
{{- define "berth.scrapeAgents" -}}
{{- if and .Values.monitoring.podMonitor.enabled (dig "agents" "enabled" false .Values.monitoring) }}true{{ end -}}
{{- end -}}

{{- define "berth.sandboxesNamespace" -}}
{{- default .Release.Namespace .Values.sandboxes.namespace -}}
{{- end -}}

{{/* The service account a service's pods run as: their own where they call the Kubernetes API, else the shared one without a token. */}}
{{- define "berth.serviceAccountName" -}}
{{- if or (eq .service "control-plane") (and (eq .service "sandbox-manager") (eq .root.Values.sandboxes.driver "kubernetes")) -}}
{{- printf "%s-%s" (include "berth.fullname" .root) .service -}}
{{- else -}}
{{- include "berth.fullname" .root -}}
{{- end -}}
{{- end -}}

{{/* The gateway's address inside the cluster (agent servers send their traces there). */}}
{{- define "berth.gatewayClusterUrl" -}}
{{- printf "http://%s-gateway.%s.svc:%d" (include "berth.fullname" .) .Release.Namespace (int .Values.gateway.service.port) -}}
{{- end -}}

{{/* Keys of the Secret each service reads: only what it needs. */}}
{{- define "berth.secretKeys" -}}
{{- $keys := list "DATABASE_URL" "REDIS_URL" -}}
{{- if eq . "gateway" -}}{{- $keys = append $keys "BERTH_INTERNAL_TOKEN" -}}{{- end -}}
{{- if eq . "control-plane" -}}{{- $keys = concat $keys (list "BERTH_INTERNAL_TOKEN" "BERTH_SECRET_KEY" "AWS_ACCESS_KEY_ID" "AWS_SECRET_ACCESS_KEY") -}}{{- end -}}
{{- if eq . "sandbox-manager" -}}{{- $keys = concat $keys (list "BERTH_INTERNAL_TOKEN" "BERTH_SECRET_KEY") -}}{{- end -}}
{{- if eq . "export-worker" -}}{{- $keys = concat $keys (list "BERTH_INTERNAL_TOKEN" "BERTH_SECRET_KEY") -}}{{- end -}}
{{- toJson $keys -}}
{{- end -}}
