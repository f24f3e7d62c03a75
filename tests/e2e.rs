//! End-to-end suite: the controller in-process against a real control plane (etcd +
//! kube-apiserver + kube-controller-manager started by the test harness, or a user's cluster
//! given `TWC_E2E_KUBECONFIG`), a real Temporal dev server and real versioned workers run by the
//! pod-level kubelet stand-in. Each test owns a Kubernetes namespace and a Temporal
//! namespace, so tests run in parallel against one shared environment.

#[path = "chart_support/mod.rs"]
mod chart_support;

#[path = "gitops_support/mod.rs"]
mod gitops_support;

#[path = "e2e/support.rs"]
mod support;

#[path = "e2e/rollout.rs"]
mod rollout;

#[path = "e2e/rollout_control.rs"]
mod rollout_control;

#[path = "e2e/inputs.rs"]
mod inputs;

#[path = "e2e/lifecycle.rs"]
mod lifecycle;

#[path = "e2e/old_versions.rs"]
mod old_versions;

#[path = "e2e/backlog.rs"]
mod backlog;

#[path = "e2e/observability.rs"]
mod observability;

#[path = "dashboard_support/mod.rs"]
mod dashboard_support;

#[path = "e2e/prometheus.rs"]
mod prometheus;

#[path = "loopback_http/mod.rs"]
mod loopback_http;

#[path = "e2e/owned_resources.rs"]
mod owned_resources;
