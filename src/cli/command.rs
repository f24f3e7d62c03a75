//! The command line: the subcommands (`run`, `status`, `wait`, the rollout controls, `crds`,
//! `probe`, `completion`), how each is dispatched, and the name it goes by as a kubectl plugin. The
//! binary's `main` only calls [`main`]; `run`'s flags are [`RunArgs`].

use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand, ValueEnum};

use crate::cli::control::{self, Action};
use crate::cli::follow::Source;
use crate::cli::kubeconfig::KubeOptions;
use crate::cli::request::{self, Request};
use crate::cli::status::OutputFormat;
use crate::cli::wait::{self, WaitFor};
use crate::cli::{complete, probe, status, undo, watch};
use crate::run;
use crate::run::args::{GoDuration, LogFormat, RunArgs};

#[derive(Parser)]
#[command(
    name = "temporal-worker-controller",
    version,
    about = "Runs Temporal workers as rainbow deployments"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the controller against the cluster from KUBECONFIG / in-cluster config.
    Run(Box<RunArgs>),
    /// Print the CustomResourceDefinitions as YAML.
    Crds,
    /// Print a human summary of rollouts, or follow one live (`--watch`).
    Status(StatusCli),
    /// Wait until a rollout is Ready, its target build Current, or Stalled.
    #[command(after_help = WAIT_EXIT_CODES)]
    Wait(WaitCli),
    /// Hold a rollout at its step (patches spec.rollout.paused).
    Pause(ControlArgs),
    /// Continue a paused rollout with the time its step had left.
    Resume(ControlArgs),
    /// Promote the target now, skipping its remaining steps and gates (annotation).
    Promote(ControlArgs),
    /// End the step in effect now (annotation).
    Skip(ControlArgs),
    /// Retry the build that missed its progress deadline (annotation, a new value each run).
    Retry(ControlArgs),
    /// Restart a version's Pods in place, same build ID and routing (annotation).
    Restart {
        #[command(flatten)]
        target: ControlArgs,
        /// The build ID to restart (default: the Current version, else the target).
        #[arg(long)]
        build: Option<String>,
    },
    /// Go back to the build that was Current before, within the rollback window (patches
    /// spec.template; in a GitOps install, prints the change to commit instead).
    Undo(UndoCli),
    /// Ramp the target back to 0% and keep the current version (patches spec.rollout.abort).
    Abort {
        #[command(flatten)]
        target: ControlArgs,
        /// Clear the abort instead: the rollout starts again from its first step.
        #[arg(long)]
        clear: bool,
    },
    /// Check manifests offline as the API server and the admission webhook would (schema, CEL
    /// rules, webhook rules); exit 1 when one would be refused.
    #[command(after_help = LINT_EXIT_CODES)]
    Lint {
        /// YAML files (several documents each); `-` reads stdin.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<std::path::PathBuf>,
    },
    /// GET an http:// URL and exit 0 on a 2xx answer, 1 otherwise (the chart's `helm test`).
    Probe {
        /// e.g. http://temporal-worker-controller.temporal-system.svc:8080/readyz
        #[arg(long)]
        url: String,
    },
    /// The rollout names bash completes (called back by the completion script).
    #[command(name = "__complete-names", hide = true)]
    CompleteNames {
        #[arg(short, long)]
        namespace: Option<String>,
        #[command(flatten)]
        kube: KubeArgs,
    },
    /// Print a shell completion script (e.g. `source <(temporal-worker-controller completion bash)`).
    Completion {
        #[arg(value_enum)]
        shell: CompletionShell,
    },
}

pub const WAIT_EXIT_CODES: &str = "\
Exit codes:
  0  the condition was reached (on the rollout's current generation)
  1  the rollout is Stalled (reason and message on stderr), was deleted, or could not be read
  2  timed out (or a usage error)";

pub const LINT_EXIT_CODES: &str = "\
Exit codes:
  0  no object would be refused
  1  at least one would be refused (each refusal in the API server's words on stdout)
  2  a file could not be read or is not YAML (or a usage error)";

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

/// The user's kubeconfig, for every client subcommand.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct KubeArgs {
    /// The kubeconfig file (default: KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long, value_name = "PATH")]
    kubeconfig: Option<std::path::PathBuf>,
    /// The kubeconfig context (default: its current context).
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
}

impl KubeArgs {
    fn options(&self) -> KubeOptions {
        KubeOptions {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
        }
    }
}

#[derive(clap::Args)]
pub struct StatusCli {
    /// Namespace (default: the kube context's; with NAME and --api-url, the one rollout of
    /// that name).
    #[arg(short, long, conflicts_with = "all_namespaces")]
    namespace: Option<String>,
    /// List the rollouts of every namespace.
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// One rollout's name.
    name: Option<String>,
    /// Read from the controller's status API (e.g. http://localhost:8080) instead of the
    /// Kubernetes API.
    #[arg(long)]
    api_url: Option<String>,
    /// Follow NAME and redraw its per-version table on every change (cleared on a terminal;
    /// on a pipe, each new table after a blank line).
    #[arg(short, long, requires = "name")]
    watch: bool,
    /// Print the status API's JSON shape instead (docs/openapi.yaml): a RolloutList, or one
    /// Rollout with NAME; with --watch, one document per change.
    #[arg(short, long, value_enum)]
    output: Option<OutputFormat>,
    #[command(flatten)]
    kube: KubeArgs,
}

#[derive(clap::Args)]
pub struct UndoCli {
    #[command(flatten)]
    target: ControlArgs,
    /// The controller's `--rollback-window`: only a build that left routing this recently is
    /// promoted at once (Go duration).
    #[arg(long, default_value = "1h")]
    rollback_window: GoDuration,
    /// Print the change to commit instead of patching, GitOps or not.
    #[arg(long)]
    print: bool,
}

#[derive(clap::Args)]
pub struct WaitCli {
    /// The rollout's name.
    name: String,
    /// Namespace (default: the context's; with --api-url, the one rollout of that name).
    #[arg(short, long)]
    namespace: Option<String>,
    /// `ready`: Ready=True; `current`: the target build is Current in Temporal; `stalled`:
    /// Stalled=True. Only a status written for the object's current generation counts.
    #[arg(long = "for", value_enum, default_value = "ready")]
    wait_for: WaitFor,
    /// Give up after this long (Go duration, e.g. 90s, 10m).
    #[arg(long, default_value = "10m")]
    timeout: GoDuration,
    /// Follow the controller's status API instead of the Kubernetes API.
    #[arg(long)]
    api_url: Option<String>,
    #[command(flatten)]
    kube: KubeArgs,
}

/// The rollout a control subcommand acts on, with the user's kubeconfig.
#[derive(clap::Args)]
pub struct ControlArgs {
    /// The TemporalWorkerDeployment's name.
    name: String,
    /// Namespace (default: the kube context's).
    #[arg(short, long)]
    namespace: Option<String>,
    #[command(flatten)]
    kube: KubeArgs,
}

impl Command {
    /// The one-shot request and its target, for `retry` and `restart`.
    fn request(&self) -> Option<(Request, &ControlArgs)> {
        match self {
            Command::Retry(a) => Some((Request::Retry, a)),
            Command::Restart { target, build } => Some((
                Request::Restart {
                    build: build.clone(),
                },
                target,
            )),
            _ => None,
        }
    }

    /// The control action and its target, for the control subcommands.
    fn control(&self) -> Option<(Action, &ControlArgs)> {
        Some(match self {
            Command::Pause(a) => (Action::Pause, a),
            Command::Resume(a) => (Action::Resume, a),
            Command::Promote(a) => (Action::Promote, a),
            Command::Skip(a) => (Action::Skip, a),
            Command::Abort { target, clear } => {
                let action = if *clear {
                    Action::ClearAbort
                } else {
                    Action::Abort
                };
                (action, target)
            }
            Command::Run(_)
            | Command::Retry(_)
            | Command::Restart { .. }
            | Command::Undo(_)
            | Command::Lint { .. }
            | Command::CompleteNames { .. }
            | Command::Crds
            | Command::Status(_)
            | Command::Wait(_)
            | Command::Probe { .. }
            | Command::Completion { .. } => return None,
        })
    }
}

/// The name `kubectl` shows for this program run as a kubectl plugin (`kubectl-temporal_workers`
/// is `kubectl temporal-workers`), or None when run under its own name.
pub fn plugin_name(argv0: &std::ffi::OsStr) -> Option<String> {
    let base = std::path::Path::new(argv0).file_name()?.to_str()?;
    let plugin = base.strip_prefix("kubectl-").filter(|p| !p.is_empty())?;
    Some(format!("kubectl {}", plugin.replace('_', "-")))
}

/// The command line definition, named as it was invoked (itself, or a kubectl plugin).
pub fn cli_command(plugin: Option<&str>) -> clap::Command {
    let command = Cli::command();
    match plugin {
        Some(name) => command.name(name.to_string()).bin_name(name.to_string()),
        None => command,
    }
}

/// The arguments as the subcommands read them: a list whose first argument is a flag (other than
/// help or version) means `run`. The Go controller's chart sets no `command` and passes only
/// `--leader-elect --metrics-bind-address=… --health-probe-bind-address=…` as the container's
/// `args`, which replace the image's default command (`run`); with this, our image runs under
/// that Deployment unchanged.
pub fn with_default_subcommand(
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> Vec<std::ffi::OsString> {
    let mut args: Vec<_> = args.into_iter().collect();
    let first_is_run_flag = args
        .get(1)
        .and_then(|a| a.to_str())
        .is_some_and(|a| a.starts_with('-') && !matches!(a, "-h" | "--help" | "-V" | "--version"));
    if first_is_run_flag {
        args.insert(1, "run".into());
    }
    args
}

pub fn main() -> ExitCode {
    let args = with_default_subcommand(std::env::args_os());
    let plugin = args.first().map(|a| a.as_os_str()).and_then(plugin_name);
    let matches = cli_command(plugin.as_deref()).get_matches_from(args);
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    if let Some((action, args)) = cli.command.control() {
        let (name, ns, kube) = (
            args.name.clone(),
            args.namespace.clone(),
            args.kube.options(),
        );
        return block_on(async move {
            control::run(action, &name, ns.as_deref(), &kube)
                .await
                .map_err(|e| e.to_string())
        });
    }
    if let Some((request, args)) = cli.command.request() {
        let (name, ns, kube) = (
            args.name.clone(),
            args.namespace.clone(),
            args.kube.options(),
        );
        return block_on(async move {
            let decide = |twd: &_| request::decide(&request, twd, jiff::Timestamp::now());
            control::run_with(&name, ns.as_deref(), &kube, decide)
                .await
                .map_err(|e| e.to_string())
        });
    }
    match cli.command {
        Command::Crds => {
            print!("{}", crate::generate::crds::all_yaml());
            ExitCode::SUCCESS
        }
        Command::Status(args) => status(args),
        Command::Wait(args) => wait(args),
        Command::Probe { url } => block_on(async move {
            let answered = probe::run(&url).await.map_err(|e| e.to_string())?;
            println!("{answered}");
            Ok(())
        }),
        Command::Completion { shell } => {
            print!("{}", completion_script(shell.into()));
            ExitCode::SUCCESS
        }
        command @ (Command::Lint { .. } | Command::CompleteNames { .. } | Command::Undo(_)) => {
            day_two(command)
        }
        Command::Run(args) => {
            init_tracing(args.log_format);
            block_on(run_controller(*args))
        }
        Command::Pause(_)
        | Command::Resume(_)
        | Command::Promote(_)
        | Command::Skip(_)
        | Command::Retry(_)
        | Command::Restart { .. }
        | Command::Abort { .. } => ExitCode::SUCCESS, // handled above
    }
}

/// `lint`, `undo` and the completion script's name lookup.
fn day_two(command: Command) -> ExitCode {
    match command {
        Command::Lint { files } => match crate::cli::lint::run(&files) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Command::CompleteNames { namespace, kube } => block_on(async move {
            let names = complete::names(namespace.as_deref(), &kube.options())
                .await
                .map_err(|e| e.to_string())?;
            print!("{names}");
            Ok(())
        }),
        Command::Undo(args) => block_on(async move {
            let t = &args.target;
            let (ns, kube) = (t.namespace.as_deref(), t.kube.options());
            undo::run(&t.name, ns, &kube, args.rollback_window.0, args.print)
                .await
                .map_err(|e| e.to_string())
        }),
        _ => ExitCode::SUCCESS, // the others are dispatched by `main`
    }
}

/// `status`, once or followed (`--watch`).
fn status(args: StatusCli) -> ExitCode {
    if args.watch {
        return block_on(async move {
            let name = args.name.unwrap_or_default();
            watch::run(watch::WatchArgs {
                source: source(args.api_url, &args.kube),
                namespace: args.namespace,
                name,
                output: args.output,
            })
            .await
            .map_err(|e| e.to_string())
        });
    }
    block_on(async move {
        status::run(status::StatusArgs {
            namespace: args.namespace,
            all_namespaces: args.all_namespaces,
            name: args.name,
            api_url: args.api_url,
            kube: args.kube.options(),
            output: args.output,
        })
        .await
        .map_err(|e| e.to_string())
    })
}

/// `wait`: its own exit codes (`wait::run`), not `block_on`'s.
fn wait(args: WaitCli) -> ExitCode {
    let wait = wait::WaitArgs {
        source: source(args.api_url, &args.kube),
        namespace: args.namespace,
        name: args.name,
        wait_for: args.wait_for,
        timeout: args.timeout.0,
    };
    match runtime() {
        Ok(rt) => rt.block_on(wait::run(wait)),
        Err(e) => {
            eprintln!("error: starting runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

impl From<CompletionShell> for clap_complete::Shell {
    fn from(shell: CompletionShell) -> Self {
        match shell {
            CompletionShell::Bash => clap_complete::Shell::Bash,
            CompletionShell::Zsh => clap_complete::Shell::Zsh,
            CompletionShell::Fish => clap_complete::Shell::Fish,
        }
    }
}

pub use crate::cli::complete::BIN_NAME;

/// The completion script of `shell` (`crate::cli::complete`).
fn completion_script(shell: clap_complete::Shell) -> String {
    complete::script(shell, &mut cli_command(None))
}

/// The status API when `--api-url` is given, else the Kubernetes API.
fn source(api_url: Option<String>, kube: &KubeArgs) -> Source {
    match api_url {
        Some(url) => Source::Api(url),
        None => Source::Kube(kube.options()),
    }
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

fn block_on(fut: impl std::future::Future<Output = Result<(), String>>) -> ExitCode {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(fut) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube_runtime=warn"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if format == LogFormat::Json {
        builder.json().init();
    } else {
        builder.init();
    }
}

async fn run_controller(args: RunArgs) -> Result<(), String> {
    let opts = args.options().map_err(|e| e.to_string())?;
    let client = kube::Client::try_default()
        .await
        .map_err(|e| format!("building Kubernetes client: {e}"))?;
    let running = run::start(client, opts).await.map_err(|e| e.to_string())?;
    tracing::info!(addr = %running.http_addr, "controller started");
    // Kubernetes sends SIGTERM, and as PID 1 an unhandled SIGTERM is ignored (the pod is
    // SIGKILLed mid-reconcile 30 s later, still holding the lease).
    let signal = run::shutdown_signal()
        .await
        .map_err(|e| format!("installing signal handlers: {e}"))?;
    tracing::info!(
        signal,
        "shutting down: no new work, finishing in-flight reconciles, then releasing the lease"
    );
    running.stop().await;
    tracing::info!("stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_argument_list_that_starts_with_a_flag_means_run() {
        let args = |a: &[&str]| -> Vec<String> {
            with_default_subcommand(a.iter().map(std::ffi::OsString::from))
                .into_iter()
                .map(|a| a.into_string().expect("utf-8"))
                .collect()
        };
        // The Go v1.8.1 chart's container args, with no command.
        let go = [
            "twc",
            "--leader-elect",
            "--metrics-bind-address=127.0.0.1:8080",
        ];
        assert_eq!(args(&go)[1], "run");
        let Command::Run(run) = Cli::try_parse_from(args(&go)).expect("parse").command else {
            panic!("the Go chart's args must run the controller");
        };
        assert!(run.leader_elect);
        for unchanged in [
            &["twc", "status", "-n", "x"][..],
            &["twc", "--help"],
            &["twc", "-V"],
            &["twc"],
        ] {
            assert_eq!(args(unchanged), unchanged.to_vec(), "{unchanged:?}");
        }
    }

    #[test]
    fn control_subcommands_parse() {
        let action = |args: &[&str]| {
            let cli = Cli::try_parse_from(args).expect("parse");
            cli.command
                .control()
                .map(|(a, t)| (a, t.name.clone(), t.namespace.clone()))
        };
        assert_eq!(
            action(&["twc", "pause", "orders", "-n", "shop"]),
            Some((Action::Pause, "orders".into(), Some("shop".into())))
        );
        assert_eq!(
            action(&["twc", "abort", "orders", "--clear"]),
            Some((Action::ClearAbort, "orders".into(), None))
        );
        for (word, want) in [
            ("resume", Action::Resume),
            ("promote", Action::Promote),
            ("skip", Action::Skip),
            ("abort", Action::Abort),
        ] {
            assert_eq!(action(&["twc", word, "x"]).map(|a| a.0), Some(want));
        }
        assert!(
            Cli::try_parse_from(["twc", "pause"]).is_err(),
            "name required"
        );
        assert_eq!(action(&["twc", "crds"]), None);
        assert_eq!(
            action(&["twc", "probe", "--url", "http://x:1/readyz"]),
            None
        );
        assert!(
            Cli::try_parse_from(["twc", "probe"]).is_err(),
            "--url required"
        );
    }

    #[test]
    fn retry_and_restart_parse_as_requests() {
        let request = |args: &[&str]| {
            let cli = Cli::try_parse_from(args).expect("parse");
            let r = cli
                .command
                .request()
                .map(|(r, t)| (r, t.name.clone(), t.namespace.clone()));
            if r.is_some() {
                assert!(cli.command.control().is_none(), "not a control action");
            }
            r
        };
        assert_eq!(
            request(&["twc", "retry", "orders", "-n", "shop"]),
            Some((Request::Retry, "orders".into(), Some("shop".into())))
        );
        assert_eq!(
            request(&["twc", "restart", "orders"]).map(|r| r.0),
            Some(Request::Restart { build: None })
        );
        assert_eq!(
            request(&["twc", "restart", "orders", "--build", "v1"]).map(|r| r.0),
            Some(Request::Restart {
                build: Some("v1".into())
            })
        );
        assert_eq!(request(&["twc", "pause", "orders"]), None);
        assert!(Cli::try_parse_from(["twc", "retry", "x", "--build", "v1"]).is_err());
    }

    #[test]
    fn client_subcommands_take_the_kubeconfig_and_context() {
        let parse = |args: &[&str]| Cli::try_parse_from(args).expect("parse");
        let kube = ["--kubeconfig", "/tmp/k.yaml", "--context", "prod"];
        let want = KubeOptions {
            kubeconfig: Some("/tmp/k.yaml".into()),
            context: Some("prod".into()),
        };
        for word in ["pause", "resume", "promote", "skip", "abort"] {
            let mut argv = vec!["twc", word, "orders"];
            argv.extend(kube);
            let cli = parse(&argv);
            let (_, target) = cli.command.control().expect("control");
            assert_eq!(target.kube.options(), want, "{word}");
        }
        let mut argv = vec!["twc", "status"];
        argv.extend(kube);
        let Command::Status(status) = parse(&argv).command else {
            panic!("status")
        };
        assert_eq!(status.kube.options(), want);
        let mut argv = vec!["twc", "wait", "orders"];
        argv.extend(kube);
        let Command::Wait(wait) = parse(&argv).command else {
            panic!("wait")
        };
        assert_eq!(wait.kube.options(), want);
        // `run` is not a client command: it reads the in-cluster config.
        assert!(Cli::try_parse_from(["twc", "run", "--context", "prod"]).is_err());
    }

    #[test]
    fn status_watch_output_and_wait_flags() {
        let Command::Status(s) =
            Cli::try_parse_from(["twc", "status", "orders", "-w", "-o", "yaml", "-n", "shop"])
                .expect("parse")
                .command
        else {
            panic!("status")
        };
        assert!(s.watch);
        assert_eq!(s.output, Some(OutputFormat::Yaml));
        assert!(
            Cli::try_parse_from(["twc", "status", "--watch"]).is_err(),
            "--watch follows one rollout"
        );
        assert!(Cli::try_parse_from(["twc", "status", "-o", "table"]).is_err());

        let Command::Wait(w) = Cli::try_parse_from(["twc", "wait", "orders"])
            .expect("parse")
            .command
        else {
            panic!("wait")
        };
        assert_eq!(
            (w.wait_for, w.timeout.0),
            (WaitFor::Ready, Duration::from_secs(600))
        );
        let Command::Wait(w) = Cli::try_parse_from([
            "twc",
            "wait",
            "orders",
            "--for",
            "current",
            "--timeout",
            "1m30s",
        ])
        .expect("parse")
        .command
        else {
            panic!("wait")
        };
        assert_eq!(
            (w.wait_for, w.timeout.0),
            (WaitFor::Current, Duration::from_secs(90))
        );
        let usage = Cli::try_parse_from(["twc", "wait", "orders", "--timeout", "soon"])
            .err()
            .expect("bad duration");
        assert_eq!(usage.exit_code(), i32::from(wait::exit::TIMEOUT));
        let help = Cli::command()
            .find_subcommand_mut("wait")
            .expect("wait")
            .render_long_help()
            .to_string();
        assert!(
            help.contains("Exit codes:") && help.contains("Stalled"),
            "{help}"
        );
    }

    #[test]
    fn invoked_as_a_kubectl_plugin_it_names_itself_so() {
        use std::ffi::OsStr;
        assert_eq!(
            plugin_name(OsStr::new("/home/u/.local/bin/kubectl-temporal_workers")).as_deref(),
            Some("kubectl temporal-workers")
        );
        assert_eq!(plugin_name(OsStr::new("temporal-worker-controller")), None);
        assert_eq!(plugin_name(OsStr::new("/usr/bin/kubectl-")), None);
        let mut cmd = cli_command(Some("kubectl temporal-workers"));
        let usage = cmd.render_usage().to_string();
        assert!(usage.contains("kubectl temporal-workers"), "{usage}");
        let matches = cli_command(Some("kubectl temporal-workers"))
            .try_get_matches_from(["kubectl-temporal_workers", "status", "-n", "shop"])
            .expect("parse");
        assert!(matches!(
            Cli::from_arg_matches(&matches).expect("cli").command,
            Command::Status(_)
        ));
    }

    #[test]
    fn completion_scripts_name_the_subcommands() {
        use clap_complete::Shell;
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let script = completion_script(shell);
            for word in ["status", "wait", "completion", "kubeconfig"] {
                assert!(script.contains(word), "{shell:?} lacks {word}");
            }
        }
        // Every state bash's word loop can reach has its `case` arm (clap-rs/clap#6421).
        let bash = completion_script(Shell::Bash);
        let states: Vec<&str> = bash
            .lines()
            .filter_map(|l| l.trim().strip_prefix("cmd=\""))
            .filter_map(|l| l.strip_suffix('"'))
            .filter(|state| !state.is_empty())
            .collect();
        assert!(states.len() > 10, "{bash}");
        for state in states {
            assert!(
                bash.lines().any(|l| l.trim() == format!("{state})")),
                "no case arm for {state}"
            );
        }
    }
}
