//! The Kubernetes client of the client subcommands (`status`, `wait`, `pause`, …): the user's
//! kubeconfig, or the one `--kubeconfig` names, in the context `--context` names.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};

/// `--kubeconfig` and `--context`; both unset means kubectl's defaults (`KUBECONFIG`, then
/// `~/.kube/config`, then the in-cluster config).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeOptions {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum KubeClientError {
    #[error("reading kubeconfig {path}: {source}")]
    Read {
        path: String,
        source: kube::config::KubeconfigError,
    },
    #[error("kubeconfig: {0}")]
    Config(#[from] kube::config::KubeconfigError),
    #[error("no Kubernetes configuration: {0}")]
    Infer(#[from] kube::config::InferConfigError),
    #[error("building the Kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

impl KubeOptions {
    fn config_options(&self) -> KubeConfigOptions {
        KubeConfigOptions {
            context: self.context.clone(),
            ..Default::default()
        }
    }

    /// The client configuration these options select.
    pub async fn config(&self) -> Result<kube::Config, KubeClientError> {
        let options = self.config_options();
        Ok(match (&self.kubeconfig, &self.context) {
            (Some(path), _) => {
                let kubeconfig =
                    Kubeconfig::read_from(path).map_err(|source| KubeClientError::Read {
                        path: path.display().to_string(),
                        source,
                    })?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?
            }
            (None, Some(_)) => kube::Config::from_kubeconfig(&options).await?,
            (None, None) => kube::Config::infer().await?,
        })
    }

    pub async fn client(&self) -> Result<kube::Client, KubeClientError> {
        Ok(kube::Client::try_from(self.config().await?)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_CONTEXTS: &str = "\
apiVersion: v1
kind: Config
current-context: a
clusters:
- name: a
  cluster: {server: 'https://127.0.0.1:1'}
- name: b
  cluster: {server: 'https://127.0.0.2:2'}
users:
- name: u
  user: {token: t}
contexts:
- name: a
  context: {cluster: a, user: u, namespace: ns-a}
- name: b
  context: {cluster: b, user: u, namespace: ns-b}
";

    fn kubeconfig_file(tag: &str) -> PathBuf {
        let path =
            std::env::temp_dir().join(format!("twc-cli-kube-{tag}-{}.yaml", std::process::id()));
        std::fs::write(&path, TWO_CONTEXTS).expect("write kubeconfig");
        path
    }

    #[tokio::test]
    async fn kubeconfig_and_context_select_the_cluster_and_namespace() {
        let path = kubeconfig_file("ctx");
        let opts = |context: Option<&str>| KubeOptions {
            kubeconfig: Some(path.clone()),
            context: context.map(str::to_string),
        };
        let a = opts(None).config().await.expect("current context");
        assert_eq!(a.cluster_url.to_string(), "https://127.0.0.1:1/");
        assert_eq!(a.default_namespace, "ns-a");
        let b = opts(Some("b")).config().await.expect("context b");
        assert_eq!(b.cluster_url.to_string(), "https://127.0.0.2:2/");
        assert_eq!(b.default_namespace, "ns-b");
        let missing = opts(Some("nope")).config().await;
        assert!(missing.is_err(), "an unknown context is an error");
        let gone = KubeOptions {
            kubeconfig: Some(path.with_extension("missing")),
            context: None,
        }
        .config()
        .await
        .expect_err("no such file");
        assert!(gone.to_string().contains("missing"), "{gone}");
        let _ = std::fs::remove_file(path);
    }
}
