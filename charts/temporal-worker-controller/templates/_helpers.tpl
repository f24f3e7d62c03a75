{{/* Chart name, overridable. */}}
{{- define "twc.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-scoped name for every object; the release name alone when it already names the chart. */}}
{{- define "twc.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "twc.selectorLabels" -}}
app.kubernetes.io/name: {{ include "twc.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "twc.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "twc.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "twc.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "twc.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "twc.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "twc.identity" -}}
{{- default (include "twc.fullname" .) .Values.controller.identity -}}
{{- end -}}

{{/* True (non-empty) when leader election is on; refuses unsafe replica counts. */}}
{{- define "twc.leaderElect" -}}
{{- if and (not .Values.leaderElection.enabled) (gt (int .Values.replicas) 1) -}}
{{- fail "leaderElection.enabled=false with replicas > 1 lets several controllers act at once; enable leader election" -}}
{{- end -}}
{{- if .Values.leaderElection.enabled -}}true{{- end -}}
{{- end -}}

{{/*
Rules the controller needs wherever it manages TemporalWorkerDeployments: least privilege,
no wildcards. Used by the ClusterRole (all namespaces) or by one Role per watched namespace.
*/}}
{{- define "twc.managerRules" -}}
- apiGroups: ["temporal.io"]
  resources: ["temporalworkerdeployments", "temporalconnections"]
  verbs: ["get", "list", "watch", "update", "patch"]
- apiGroups: ["temporal.io"]
  resources: ["temporalworkerdeployments/status", "temporalconnections/status"]
  verbs: ["update", "patch"]
- apiGroups: ["temporal.io"]
  resources: ["temporalworkerdeployments/finalizers", "temporalconnections/finalizers"]
  verbs: ["update"]
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: ["apps"]
  resources: ["deployments/scale"]
  verbs: ["get", "update", "patch"]
- apiGroups: [""]
  resources: ["secrets", "configmaps"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- range .Values.ownedResourceKinds }}
- apiGroups: {{ toJson .apiGroups }}
  resources: {{ toJson .resources }}
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
{{- end }}
{{- end -}}
