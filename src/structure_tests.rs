//! Checks on the shape of the code itself: the module graph has no cycles, the architecture
//! page names only things that exist, and the documented reason table matches the code.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::api::conditions::{self, ReasonKind};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The identifiers that follow `prefix` in `text`.
fn idents_after<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.match_indices(prefix)
        .map(|(i, _)| {
            let rest = &text[i + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .filter(|s| !s.is_empty())
        .collect()
}

/// Top-level module → the top-level modules its non-test code imports.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(&src).expect("under src");
        let name = rel.to_string_lossy();
        if name.ends_with("tests.rs") || name == "main.rs" || name == "fixtures.rs" {
            continue;
        }
        let module = rel
            .components()
            .next()
            .map(|c| {
                c.as_os_str()
                    .to_string_lossy()
                    .trim_end_matches(".rs")
                    .to_string()
            })
            .expect("module name");
        let text = fs::read_to_string(&file).expect("read source");
        // Test modules may reach anywhere; only production imports shape the layering.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        let deps = graph.entry(module.clone()).or_default();
        for dep in idents_after(code, "crate::") {
            if dep != module {
                deps.insert(dep.to_string());
            }
        }
    }
    graph
}

/// A cycle through `graph`, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|n| n == node) {
            let mut cycle = path[i..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for dep in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(dep, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

#[test]
fn top_level_modules_do_not_import_each_other_in_a_cycle() {
    let graph = module_graph();
    for key in ["api", "planner", "metrics", "http", "summary", "reconcile"] {
        assert!(graph.contains_key(key), "module {key} not found: {graph:?}");
    }
    assert_eq!(find_cycle(&graph), None, "import cycle; graph: {graph:#?}");
}

#[test]
fn the_cycle_finder_finds_cycles() {
    let g = |edges: &[(&str, &str)]| {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in edges {
            m.entry(a.to_string()).or_default().insert(b.to_string());
        }
        m
    };
    assert_eq!(find_cycle(&g(&[("a", "b"), ("b", "c")])), None);
    assert!(find_cycle(&g(&[("a", "b"), ("b", "c"), ("c", "a")])).is_some());
}

/// Backticked tokens of a Markdown text.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

#[test]
fn architecture_doc_names_only_files_and_functions_that_exist() {
    let doc =
        fs::read_to_string(root().join("docs/architecture.md")).expect("docs/architecture.md");
    let mut sources = Vec::new();
    rust_files(&root().join("src"), &mut sources);
    let all_source: String = sources
        .iter()
        .map(|p| fs::read_to_string(p).expect("read source"))
        .collect();
    let (mut files, mut fns) = (0, 0);
    for span in code_spans(&doc) {
        if span.starts_with("src/") || span.starts_with("docs/") {
            files += 1;
            assert!(
                root().join(span).exists(),
                "docs/architecture.md names missing {span}"
            );
        } else if let Some(name) = span.strip_suffix("()") {
            fns += 1;
            let name = name.rsplit("::").next().unwrap_or(name);
            assert!(
                all_source.contains(&format!("fn {name}("))
                    || all_source.contains(&format!("fn {name}<")),
                "docs/architecture.md names missing function {name}()"
            );
        }
    }
    assert!(
        files > 10 && fns > 10,
        "too few references parsed: {files} files, {fns} fns"
    );
}

#[test]
fn reason_table_in_docs_matches_the_code() {
    assert_eq!(
        documented_reasons("docs/cd-rollouts.md"),
        reasons_in_code(conditions::ALL)
    );
}

#[test]
fn owned_resource_reason_table_in_docs_matches_the_code() {
    assert_eq!(
        documented_reasons("docs/owned-resources.md"),
        reasons_in_code(conditions::OWNED_ALL)
    );
}

/// `reason → kind` from the table after `<!-- reason-table -->` in `doc`.
fn documented_reasons(doc: &str) -> BTreeMap<String, String> {
    let text = fs::read_to_string(root().join(doc)).expect("doc");
    let table = text
        .split("<!-- reason-table -->")
        .nth(1)
        .expect("reason table marker");
    let mut documented = BTreeMap::new();
    let rows = table
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .skip(2) // header and separator
        .take_while(|l| l.starts_with('|'));
    for line in rows {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let reason = cells[1].trim_matches('`').to_string();
        documented.insert(reason, cells[2].to_string());
    }
    documented
}

fn reasons_in_code(reasons: &[conditions::Reason]) -> BTreeMap<String, String> {
    let kind = |k: ReasonKind| match k {
        ReasonKind::Done => "done",
        ReasonKind::Progressing => "progressing",
        ReasonKind::Blocked => "blocked",
        ReasonKind::Terminal => "terminal",
    };
    reasons
        .iter()
        .map(|r| (r.reason.to_string(), kind(r.kind).to_string()))
        .collect()
}

#[test]
fn terminal_reasons_match_the_argocd_health_check() {
    let lua = fs::read_to_string(root().join("lua/temporalworkerdeployment-health.lua"))
        .expect("lua health check");
    for r in conditions::ALL {
        let listed = lua.contains(&format!("{} = true", r.reason));
        assert_eq!(
            listed,
            r.kind == ReasonKind::Terminal,
            "{}: terminal reasons must be listed in the Lua health check, others not",
            r.reason
        );
    }
}

/// Every file below `dir`, except those below `skip`.
fn all_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            all_files(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn project_files_cite_no_notes_outside_the_repository() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    files.push(root().join("README.md"));
    for doc in fs::read_dir(root().join("docs")).expect("docs") {
        files.push(doc.expect("doc").path());
    }
    // The integration tests and their harness and fixtures.
    all_files(&root().join("tests"), &mut files);
    assert!(
        files
            .iter()
            .any(|f| f.ends_with("tests/temporal_client.rs")),
        "the walk reaches tests/"
    );
    // Split so that this file does not match itself.
    let needles = [
        concat!("../", "shared"),
        concat!("shared/", "reference"),
        concat!("temporal-", "facts"),
        concat!("go-controller-", "behaviour"),
    ];
    for file in files {
        let text = fs::read_to_string(&file).unwrap_or_default();
        for needle in needles {
            assert!(
                !text.contains(needle),
                "{} cites {needle}: state the rule where it is tested instead",
                file.display()
            );
        }
    }
}
