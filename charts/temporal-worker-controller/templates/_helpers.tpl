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
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
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

{{/* True (non-empty) when the default identity gets the release namespace's UID appended. */}}
{{- define "twc.identityNamespaceUID" -}}
{{- if and .Values.controller.identityNamespaceUID (not .Values.controller.identity) (not .Values.watchNamespaces) -}}
true
{{- end -}}
{{- end -}}

{{/* True (non-empty) when leader election is on; refuses unsafe replica counts. */}}
{{- define "twc.leaderElect" -}}
{{- if and (not .Values.leaderElection.enabled) (gt (int .Values.replicas) 1) -}}
{{- fail "leaderElection.enabled=false with replicas > 1 (the default is 2) lets several controllers act at once; enable leader election or set replicas: 1" -}}
{{- end -}}
{{- if .Values.leaderElection.enabled -}}true{{- end -}}
{{- end -}}

{{/*
Rules the controller needs wherever it manages TemporalWorkerDeployments: least privilege,
no wildcards. Used by the ClusterRole (all namespaces) or by one Role per watched namespace.
*/}}
{{- define "twc.managerRules" -}}
# Every grant below is used by the controller in the e2e suite (tests/rbac_grants.rs compares
# these rules with the API server's audit log); the comment names the code path.
# Every grant on our kinds covers both kind sets (src/api/kinds.rs): the canonical
# WorkerDeployment/Connection/WorkerResourceTemplate and the seed Temporal* kinds.
# Reflectors over worker deployments and Connections (src/controller.rs); finalizers are added
# and removed with merge patches (src/reconcile/act/finalizers.rs).
- apiGroups: ["temporal.io"]
  resources: ["workerdeployments", "connections", "temporalworkerdeployments", "temporalconnections"]
  verbs: ["list", "watch", "patch"]
# Reconciles read a worker deployment's Connection from the Connection reflector; one missing
# there is asked for by name before it counts as absent (src/reconcile/connect.rs).
- apiGroups: ["temporal.io"]
  resources: ["connections", "temporalconnections"]
  verbs: ["get"]
# The one status write per reconcile (src/reconcile/report.rs, replace_status).
- apiGroups: ["temporal.io"]
  resources: ["workerdeployments/status", "temporalworkerdeployments/status"]
  verbs: ["update"]
# A Connection's status, patched only when it changed (src/connection/report.rs).
- apiGroups: ["temporal.io"]
  resources: ["connections/status", "temporalconnections/status"]
  verbs: ["patch"]
# Versioned Deployments carry an owner reference with blockOwnerDeletion to their TWD; API
# servers with the OwnerReferencesPermissionEnforcement admission plugin (the test control plane
# enables it) require this to create them (src/render/mod.rs).
- apiGroups: ["temporal.io"]
  resources: ["workerdeployments/finalizers", "temporalworkerdeployments/finalizers"]
  verbs: ["update"]
# Versioned Deployments: watched into the cache reconciles read (src/caches.rs), created and updated in place for
# customBuildID/connection drift (src/reconcile/act/execute.rs), read back after a 409, deleted
# at sunset and by the TWD finalizer (src/reconcile/act/finalizers.rs); patched to restart a version in
# place (temporal.io/restart, src/reconcile/act/restart.rs).
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
# Scale up/down through the scale subresource (src/reconcile/act/execute.rs, patch_scale).
- apiGroups: ["apps"]
  resources: ["deployments/scale"]
  verbs: ["patch"]
# Named Secrets (mTLS, API key, gate input) and ConfigMaps (gate input) are read by name only
# (src/caches.rs reuses a Secret for 5 minutes; gate input is read only while a rollout waits
# for its gate): no list or watch of anybody's Secrets.
- apiGroups: [""]
  resources: ["secrets", "configmaps"]
  verbs: ["get"]
# The Pods of a target version, listed by label only while it waits to become routable, to say
# why a build fails (image pull, crash loop, unschedulable) in its progress-deadline message
# (src/reconcile/observe/target_pods.rs). Never watched; nothing is written.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
# events.k8s.io Events, a repeated Warning becoming a series (src/events.rs).
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
# TemporalWorkerOwnedResources: watched (src/controller.rs), our finalizer and the TWD's
# controller reference added by merge patch, and one status patch per pass (src/owned/apply.rs).
# `delete` is never requested: the OwnerReferencesPermissionEnforcement admission plugin
# requires it to set an owner reference. The TWOR controller reads the TWD it names from the
# worker-deployment cache, by name when it is not there (src/owned/observe.rs).
- apiGroups: ["temporal.io"]
  resources: ["workerresourcetemplates", "temporalworkerownedresources"]
  verbs: ["list", "watch", "patch", "delete"]
- apiGroups: ["temporal.io"]
  resources: ["workerresourcetemplates/status", "temporalworkerownedresources/status"]
  verbs: ["patch"]
- apiGroups: ["temporal.io"]
  resources: ["workerdeployments", "temporalworkerdeployments"]
  verbs: ["get"]
# HPAs are watched into a cache (src/caches.rs): a version an HPA targets keeps the replicas
# the HPA chose (src/reconcile/observe/autoscalers.rs).
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers"]
  verbs: ["list", "watch"]
# Kinds copied per version by TemporalWorkerOwnedResources: server-side apply (a patch, which
# the API server authorizes as create for a new copy) and the removal of copies when a TWOR is
# deleted or changes kind (src/owned/apply.rs).
{{- range .Values.ownedResourceKinds }}
- apiGroups: {{ toJson .apiGroups }}
  resources: {{ toJson .resources }}
  verbs: ["create", "patch", "delete"]
{{- end }}
{{- if .Values.webhook.enabled }}
# The webhook asks whether the author of a TemporalWorkerOwnedResource may create, update and
# delete its kind in the namespace (src/webhook/access.rs); a LocalSubjectAccessReview is
# namespaced, so a namespaced install needs no ClusterRole for it.
- apiGroups: ["authorization.k8s.io"]
  resources: ["localsubjectaccessreviews"]
  verbs: ["create"]
{{- end }}
{{- end -}}

{{/*
The admission webhook's names (docs/webhook.md). The ValidatingWebhookConfiguration is
cluster-scoped, so its name carries the release namespace like the ClusterRoles do.
*/}}
{{- define "twc.webhookConfigurationName" -}}
{{- printf "%s-%s" (include "twc.fullname" .) .Release.Namespace -}}
{{- end }}

{{- define "twc.webhookServiceName" -}}
{{- printf "%s-webhook" (include "twc.fullname" .) -}}
{{- end }}

{{/* The webhook certificate's Secret: webhook.certSecretName (the Go chart's key) or ours. */}}
{{- define "twc.webhookSecretName" -}}
{{- default (printf "%s-webhook-tls" (include "twc.fullname" .)) .Values.webhook.certSecretName -}}
{{- end }}

{{/* The host of webhook.url, without port: the certificate must name it. */}}
{{- define "twc.webhookUrlHost" -}}
{{- with .Values.webhook.url -}}
{{- regexReplaceAll ":[0-9]+$" (urlParse .).host "" | trimPrefix "[" | trimSuffix "]" -}}
{{- end -}}
{{- end }}

{{/* One webhook's clientConfig, for path `path` (dict "root" $ "path" "/..."). */}}
{{- define "twc.webhookClientConfig" -}}
{{- $root := .root -}}
{{- if $root.Values.webhook.url }}
url: {{ printf "%s%s" $root.Values.webhook.url .path | quote }}
{{- else }}
service:
  name: {{ include "twc.webhookServiceName" $root }}
  namespace: {{ $root.Release.Namespace }}
  path: {{ .path | quote }}
  port: 443
{{- end }}
{{- end }}

{{/* Which namespaces' objects the API server sends to the webhook. */}}
{{- define "twc.webhookNamespaceSelector" -}}
matchExpressions:
{{- if .Values.watchNamespaces }}
  - key: kubernetes.io/metadata.name
    operator: In
    values: {{ toJson .Values.watchNamespaces }}
{{- else if .Values.webhook.excludeNamespaces }}
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: {{ toJson .Values.webhook.excludeNamespaces }}
{{- end }}
{{- end }}

{{/*
The Go temporal-worker-controller chart's values (v1.8-v1.10) read into ours, so that its users'
values files install unchanged (docs/migrating-from-go-controller.md#helm-values). Every template
that reads a mapped key includes this first; it only ever sets ours from theirs, so running it
once per template gives the same values. Keys with no effect here are named in NOTES
("twc.goValuesNotes").
*/}}
{{- define "twc.goValues" -}}
{{- $v := .Values -}}
{{- $rbac := $v.rbac | default dict -}}
{{- if and $rbac.restrictWatchNamespaces (not $v.watchNamespaces) -}}
{{- $_ := set $v "watchNamespaces" $rbac.restrictWatchNamespaces -}}
{{- end -}}
{{- with $v.workerResourceTemplate -}}
{{- if hasKey . "allowedResources" -}}
{{- $rules := list -}}
{{- $kinds := list -}}
{{- range .allowedResources -}}
{{- $rules = append $rules (dict "apiGroups" .apiGroups "resources" .resources) -}}
{{- $kinds = concat $kinds .kinds -}}
{{- end -}}
{{- $_ := set $v "ownedResourceKinds" $rules -}}
{{- $_ := set $v "ownedResourceAllowedKinds" (uniq $kinds) -}}
{{- end -}}
{{- /* The Go chart's webhook.enabled turns off only its WorkerDeployment webhook; its
       WorkerResourceTemplate webhook (the authors' access check) is always on. Ours serves both
       from one switch, so Go-shaped values keep it on: the WorkerDeployment webhook fails open
       (failurePolicy Ignore) and the controller re-checks everything it checks. */ -}}
{{- if not $v.webhook.enabled -}}
{{- $_ := set $v.webhook "enabled" true -}}
{{- $_ := set $v "goWebhookKeptOn" true -}}
{{- end -}}
{{- end -}}
{{- if and $v.prometheus $v.prometheus.enabled -}}
{{- $_ := set $v.serviceMonitor "enabled" true -}}
{{- end -}}
{{- with $v.metrics -}}
{{- if and (hasKey . "disableAuth") (not .disableAuth) (eq $v.statusApi.auth.mode "token-review") -}}
{{- $_ := set $v.statusApi.auth "protectMetrics" true -}}
{{- end -}}
{{- if .disableAuth -}}
{{- $_ := set $v.statusApi.auth "protectMetrics" false -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* NOTES lines for the Go chart's keys that have no effect here, each with why. */}}
{{- define "twc.goValuesNotes" -}}
{{- $v := .Values -}}
{{- $lines := list -}}
{{- if hasKey $v "authProxy" -}}
{{- $lines = append $lines "authProxy: no effect: no kube-rbac-proxy sidecar here; /metrics takes a Kubernetes token with statusApi.auth.mode=token-review and statusApi.auth.protectMetrics=true" -}}
{{- end -}}
{{- if hasKey $v "kubeRBACProxy" -}}
{{- $lines = append $lines "kubeRBACProxy.*: no effect: no kube-rbac-proxy sidecar here (see authProxy)" -}}
{{- end -}}
{{- with $v.metrics -}}
{{- if hasKey . "enabled" -}}
{{- $lines = append $lines (printf "metrics.enabled: no effect: /metrics is always served, on http.port (%v) with the status API and probes" $v.http.port) -}}
{{- end -}}
{{- if hasKey . "port" -}}
{{- $lines = append $lines (printf "metrics.port: no effect: /metrics is served on http.port (%v)" $v.http.port) -}}
{{- end -}}
{{- if and (hasKey . "disableAuth") (not .disableAuth) (ne $v.statusApi.auth.mode "token-review") -}}
{{- $lines = append $lines "metrics.disableAuth=false: no effect: there is no auth proxy; /metrics needs a token only with statusApi.auth.mode=token-review (then protectMetrics follows disableAuth)" -}}
{{- end -}}
{{- end -}}
{{- if hasKey $v "namespace" -}}
{{- $lines = append $lines "namespace.create: no effect: a chart does not create its own release namespace here; use helm install --create-namespace" -}}
{{- end -}}
{{- if hasKey $v "securityContext" -}}
{{- $lines = append $lines "securityContext.seccompProfile: no effect: podSecurityContext sets seccompProfile RuntimeDefault by default" -}}
{{- end -}}
{{- if hasKey $v "certmanager" -}}
{{- $lines = append $lines "certmanager.*: no effect: the controller makes and rotates its own webhook certificates, so cert-manager is never required; set webhook.certManager.enabled=true to use cert-manager instead" -}}
{{- end -}}
{{- if $v.goWebhookKeptOn -}}
{{- $lines = append $lines "webhook.enabled=false: read with the Go chart's meaning (its WorkerDeployment webhook only): the WorkerResourceTemplate access check stays on, as in the Go chart; the WorkerDeployment webhook fails open" -}}
{{- end -}}
{{- if and $v.rbac (hasKey $v.rbac "restrictWatchNamespaces") $v.rbac.restrictWatchNamespaces (ne (toJson $v.rbac.restrictWatchNamespaces) (toJson $v.watchNamespaces)) -}}
{{- $lines = append $lines "rbac.restrictWatchNamespaces: no effect: watchNamespaces is set and wins" -}}
{{- end -}}
{{- range $lines }}
  - {{ . }}
{{- end -}}
{{- end -}}
