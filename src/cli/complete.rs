//! `completion SHELL`: clap's completion script, and for bash the names of rollouts too. The
//! generated script knows subcommands and flags only; for a rollout's NAME, bash calls this
//! program back (`__complete-names`, hidden) with the `-n`, `--kubeconfig` and `--context`
//! already typed, as kubectl's own completion does.

use crate::cli::kubeconfig::{KubeClientError, KubeOptions};

pub const BIN_NAME: &str = "temporal-worker-controller";
/// The hidden subcommand bash calls for rollout names.
pub const NAMES_SUBCOMMAND: &str = "__complete-names";
/// The subcommands whose first positional argument is a rollout's name.
pub const NAMED: [&str; 10] = [
    "status", "wait", "pause", "resume", "promote", "skip", "retry", "restart", "abort", "undo",
];

/// The completion script of `shell` for `command`. clap_complete 4.6 spells a hyphenated program
/// name one way in bash's subcommand state and another in the `case` arms that match it, so no
/// option of a subcommand ever completed (clap-rs/clap#6421); the arms are respelt as the state
/// is. Bash gets rollout names on top.
pub fn script(shell: clap_complete::Shell, command: &mut clap::Command) -> String {
    let mut out = Vec::new();
    clap_complete::generate(shell, command, BIN_NAME, &mut out);
    let script = String::from_utf8_lossy(&out).into_owned();
    if shell != clap_complete::Shell::Bash {
        return script;
    }
    const SEP: &str = "__subcmd__";
    let misspelt = format!("{}{SEP}", BIN_NAME.replace('-', SEP));
    let state = format!("{}{SEP}", BIN_NAME.replace('-', "__"));
    let script = script.replace(&misspelt, &state);
    let generated = format!("_{}", BIN_NAME.replace('-', "__"));
    let ours = format!("{generated}__with_names");
    let script = script.replace(&format!("-F {generated} "), &format!("-F {ours} "));
    format!("{script}\n{}", bash_names(&generated, &ours))
}

/// The bash function `ours` that completes a rollout's name after clap's `generated` ran (whose
/// `compgen` fails when nothing matches: `|| true` keeps a caller's `set -e` from ending there).
fn bash_names(generated: &str, ours: &str) -> String {
    let named = NAMED.join("|");
    format!(
        r#"{ours}() {{
    {generated} "$@" || true
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    [[ $cur == -* ]] && return 0
    case "$prev" in
        -n|--namespace|--kubeconfig|--context|--build|--api-url|-o|--output|--for|--timeout|--url|--rollback-window) return 0 ;;
    esac
    local i w sub="" positional=0 args=({NAMES_SUBCOMMAND})
    for ((i = 1; i < COMP_CWORD; i++)); do
        w="${{COMP_WORDS[i]}}"
        case "$w" in
            -n|--namespace|--kubeconfig|--context) args+=("$w" "${{COMP_WORDS[i+1]}}"); ((i++)) ;;
            --build|--api-url|-o|--output|--for|--timeout|--rollback-window) ((i++)) ;;
            -*) ;;
            *) if [[ -z $sub ]]; then sub="$w"; else positional=$((positional + 1)); fi ;;
        esac
    done
    case "$sub" in {named}) ;; *) return 0 ;; esac
    ((positional == 0)) || return 0
    local names
    names="$("${{COMP_WORDS[0]}}" "${{args[@]}}" 2>/dev/null)" || return 0
    COMPREPLY=($(compgen -W "$names" -- "$cur")) || true
}}
"#
    )
}

/// The names of the rollouts (both kind sets) in `namespace`, else the context's namespace,
/// sorted, one a line.
pub async fn names(namespace: Option<&str>, kube: &KubeOptions) -> Result<String, NamesError> {
    let client = kube.client().await?;
    let ns = namespace.map_or_else(|| client.default_namespace().to_string(), str::to_string);
    let mut names: Vec<String> = crate::workers::list(&client, Some(&ns))
        .await?
        .into_iter()
        .filter_map(|t| t.metadata.name)
        .collect();
    names.sort();
    names.dedup();
    Ok(names.into_iter().map(|n| n + "\n").collect())
}

#[derive(Debug, thiserror::Error)]
pub enum NamesError {
    #[error(transparent)]
    KubeClient(#[from] KubeClientError),
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}
