//! End-to-end suite: the controller in-process against a real control plane (etcd +
//! kube-apiserver + kube-controller-manager started by the test harness, or a user's cluster
//! given `TWC_E2E_KUBECONFIG`), a real Temporal dev server and real versioned workers run by the
//! pod-level kubelet stand-in. Each test owns a Kubernetes namespace and a Temporal
//! namespace, so tests run in parallel against one shared environment.

mod adoption;
mod argocd_actions;
mod autoscaling;
mod backlog;
mod bad_build;
mod connection_ref;
mod connection_tls;
#[path = "../common/controller.rs"]
mod controller;
mod deployment_settings;
mod draining;
mod engines;
mod first_looks;
mod foreign_versions;
mod inputs;
mod kind_sets;
mod lifecycle;
mod observability;
mod old_versions;
mod owned_resources;
mod pollers;
mod prometheus;
mod rollout;
mod rollout_control;
mod support;
