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
    module_graph_of(&root().join("src"))
}

/// [`module_graph`] of the crate whose root module is in `src` (its `main.rs` declares the
/// modules and imports none).
fn module_graph_of(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(src).expect("under src");
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
        let code = production_code(&text);
        let deps = graph.entry(module.clone()).or_default();
        for dep in idents_after(&code, "crate::") {
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
    for key in [
        "api",
        "planner",
        "metrics",
        "http",
        "summary",
        "worker_deployment",
    ] {
        assert!(graph.contains_key(key), "module {key} not found: {graph:?}");
    }
    assert_eq!(find_cycle(&graph), None, "import cycle; graph: {graph:#?}");
}

#[test]
fn the_scale_probes_modules_do_not_import_each_other_in_a_cycle() {
    let graph = module_graph_of(&root().join("benches/scale_probe"));
    for key in ["ground", "churn", "rig", "scenarios"] {
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

/// The module path of the file at `rel` (relative to `src/`): `planner/mod.rs` → `[planner]`.
fn module_path(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The paths named by the use tree at the start of `text` (`a::{b, c::d}` → `a::b`, `a::c::d`).
fn use_tree(text: &str) -> (Vec<Vec<String>>, usize) {
    let ident_end = |s: &str| {
        s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(s.len())
    };
    let mut prefix = Vec::new();
    let mut i = 0;
    loop {
        let rest = &text[i..];
        let ws = rest.len() - rest.trim_start().len();
        i += ws;
        let rest = &text[i..];
        if let Some(group) = rest.strip_prefix('{') {
            i += 1;
            let mut paths = Vec::new();
            let mut offset = 0;
            loop {
                let (sub, used) = use_tree(&group[offset..]);
                for s in sub {
                    let mut p = prefix.clone();
                    p.extend(s.into_iter().filter(|seg| seg != "self"));
                    paths.push(p);
                }
                offset += used;
                let tail = group[offset..].trim_start();
                offset = group.len() - tail.len();
                if let Some(after) = tail.strip_prefix(',') {
                    offset = group.len() - after.len();
                } else {
                    if tail.starts_with('}') {
                        offset += 1;
                    }
                    break;
                }
            }
            return (paths, i + offset);
        }
        let end = ident_end(rest);
        if end == 0 {
            return (vec![prefix], i);
        }
        prefix.push(rest[..end].to_string());
        i += end;
        match text[i..].strip_prefix("::") {
            Some(_) => i += 2,
            None => return (vec![prefix], i),
        }
    }
}

/// The driver of a folder (its `mod.rs`) as a node of [`folder_graphs`]: an item defined there.
const DRIVER: &str = "(mod.rs)";

/// Production code: outside every test item, without comment lines (a doc link names a
/// module without importing it).
fn production_code(text: &str) -> String {
    outside_test_items(text)
        .into_iter()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The lines of a source file outside its `#[cfg(test)]` items: each such attribute takes the
/// item after it (and that item's other attributes) out, a one-line item (`mod tests;`,
/// `use …;`) or a block up to the line that closes it at its own indentation (rustfmt's
/// layout). Production code after a test module is still read.
fn outside_test_items(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim_start() != "#[cfg(test)]" {
            out.push(line);
            i += 1;
            continue;
        }
        i += 1;
        while i < lines.len() && lines[i].trim_start().starts_with("#[") {
            i += 1;
        }
        let Some(item) = lines.get(i) else { break };
        let code = item.trim_start();
        if !code.ends_with(';') {
            let indent = &item[..item.len() - code.len()];
            let closes = |l: &&str| *l == format!("{indent}}}") || *l == format!("{indent}}};");
            i += lines[i..]
                .iter()
                .position(closes)
                .unwrap_or(lines.len() - i);
        }
        i += 1;
    }
    out
}

/// Folder → (item name → the child module it comes from), from the `pub use` lines of each
/// folder's `mod.rs` that re-export a child's items (`pub use child::Item;`).
fn reexports(
    files: &[(String, String)],
    modules: &[Vec<String>],
) -> BTreeMap<Vec<String>, BTreeMap<String, String>> {
    let mut out: BTreeMap<Vec<String>, BTreeMap<String, String>> = BTreeMap::new();
    for ((rel, text), folder) in files.iter().zip(modules) {
        if !(rel.ends_with("/mod.rs") || rel == "lib.rs") {
            continue;
        }
        for line in production_code(text).lines() {
            let line = line.trim_start();
            let Some(rest) = ["pub use ", "pub(crate) use ", "pub(super) use "]
                .iter()
                .find_map(|p| line.strip_prefix(p))
            else {
                continue;
            };
            for path in use_tree(rest).0 {
                let mut segs: Vec<String> = path.into_iter().filter(|s| s != "self").collect();
                if segs.first().is_some_and(|s| s == "crate") {
                    if !segs[1..].starts_with(folder) {
                        continue;
                    }
                    segs.drain(..=folder.len());
                }
                if let (Some(child), Some(item)) = (segs.first(), segs.last())
                    && segs.len() > 1
                {
                    out.entry(folder.clone())
                        .or_default()
                        .insert(item.clone(), child.clone());
                }
            }
        }
    }
    out
}

/// The paths the production code of the file of `module` names through `crate::` and
/// `super::`, each from the crate root (`super::b::X` in `a/c.rs` → `a::b::X`).
fn named_paths(module: &[String], text: &str) -> Vec<Vec<String>> {
    // `super` in `a/b.rs` and in `a/b/mod.rs` both name `a`.
    let parent = module[..module.len().saturating_sub(1)].to_vec();
    let code = production_code(text);
    let mut targets = Vec::new();
    for (start, keyword) in code
        .match_indices("crate::")
        .chain(code.match_indices("super::"))
    {
        let before = code[..start].chars().next_back();
        if before.is_some_and(|c| c == ':' || c == '_' || c.is_ascii_alphanumeric()) {
            continue; // the tail of a longer path, e.g. the second `super` of `super::super`
        }
        let (paths, _) = use_tree(&code[start..]);
        for path in paths {
            let mut base = if keyword == "crate::" {
                Vec::new()
            } else {
                parent.clone()
            };
            let mut segs = path.into_iter().skip(1).peekable();
            while segs.peek().is_some_and(|s| s == "super") {
                segs.next();
                base.pop();
            }
            base.extend(segs);
            targets.push(base);
        }
    }
    targets
}

/// Folder → (child module → the sibling child modules its non-test code imports), from
/// `(path relative to src/, source text)` pairs. `crate::folder::child` and `super::child`
/// paths count, and so does an item the folder's `mod.rs` re-exports (an edge to the child it
/// comes from: a re-export hides no cycle). An item defined in `mod.rs` itself is an edge to
/// [`DRIVER`].
fn folder_graphs(
    files: &[(String, String)],
) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let modules: Vec<Vec<String>> = files.iter().map(|(rel, _)| module_path(rel)).collect();
    let reexported = reexports(files, &modules);
    let mut graphs: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    let is_child = |folder: &[String], name: &str| {
        modules
            .iter()
            .any(|m| m.len() > folder.len() && m.starts_with(folder) && m[folder.len()] == name)
    };
    for ((rel, text), module) in files.iter().zip(&modules) {
        if rel.ends_with("tests.rs") || rel == "fixtures.rs" {
            continue;
        }
        let targets = named_paths(module, text);
        for depth in 1..module.len() {
            let folder = &module[..depth];
            let from = &module[depth];
            for target in &targets {
                if target.len() > depth && target.starts_with(folder) {
                    let named = &target[depth];
                    let to: &str = if is_child(folder, named) {
                        named
                    } else {
                        match reexported.get(folder).and_then(|r| r.get(named)) {
                            Some(child) => child,
                            None => DRIVER,
                        }
                    };
                    if to != from {
                        graphs
                            .entry(folder.join("/"))
                            .or_default()
                            .entry(from.clone())
                            .or_default()
                            .insert(to.to_string());
                    }
                }
            }
        }
    }
    graphs
}

fn source_files() -> Vec<(String, String)> {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(&src).expect("under src");
            let text = fs::read_to_string(f).expect("read source");
            (rel.to_string_lossy().replace('\\', "/"), text)
        })
        .collect()
}

#[test]
fn modules_inside_a_folder_do_not_import_each_other_in_a_cycle() {
    let graphs = folder_graphs(&source_files());
    for folder in ["planner", "temporal", "worker_deployment", "owned", "run"] {
        assert!(
            graphs.contains_key(folder),
            "folder {folder} not found: {graphs:#?}"
        );
    }
    let cycles: Vec<_> = graphs
        .iter()
        .filter_map(|(folder, graph)| find_cycle(graph).map(|c| (folder, c)))
        .collect();
    assert!(
        cycles.is_empty(),
        "import cycles inside folders: {cycles:#?}"
    );
}

/// `(folder, stage)` pairs where a stage of a folder imports an item its driver (`mod.rs`)
/// defines rather than one of a sibling module.
fn stages_importing_their_driver(files: &[(String, String)], folders: &[&str]) -> Vec<String> {
    let graphs = folder_graphs(files);
    folders
        .iter()
        .flat_map(|folder| {
            graphs
                .get(*folder)
                .into_iter()
                .flatten()
                .filter(|(_, to)| to.contains(DRIVER))
                .map(move |(from, _)| format!("{folder}/{from}"))
        })
        .collect()
}

/// The reconcilers' folders: each a driver (`mod.rs`) over its stages.
const RECONCILERS: [&str; 3] = ["worker_deployment", "owned", "connection"];

/// A check over `(path relative to src/, source text)` pairs and folders; what it found.
type FolderCheck = fn(&[(String, String)], &[&str]) -> Vec<String>;

/// `check` over the source files and the reconcilers' folders, each reconciler's and every
/// folder inside it (a stage's own folder: observe/, act/, ...), each with a driver (`mod.rs`).
fn over_reconciler_folders(check: FolderCheck) -> Vec<String> {
    let files = source_files();
    let folders: Vec<&str> = files
        .iter()
        .filter_map(|(rel, _)| rel.strip_suffix("/mod.rs"))
        .filter(|f| {
            RECONCILERS
                .iter()
                .any(|r| *f == *r || f.starts_with(&format!("{r}/")))
        })
        .collect();
    assert!(folders.len() > RECONCILERS.len(), "{folders:?}");
    check(&files, &folders)
}

#[test]
fn a_stage_never_imports_its_driver() {
    // A file never imports its folder's mod.rs.
    let found = over_reconciler_folders(stages_importing_their_driver);
    assert!(found.is_empty(), "stages importing their driver: {found:?}");
}

/// Files inside each of `folders` (its driver, `mod.rs`, aside) that name an item through the
/// driver's re-export (`crate::folder::Item`, `super::Item` where `mod.rs` has
/// `pub use child::Item;`) instead of from the file that defines it (`crate::folder::child::Item`).
fn stages_importing_through_reexports(files: &[(String, String)], folders: &[&str]) -> Vec<String> {
    let modules: Vec<Vec<String>> = files.iter().map(|(rel, _)| module_path(rel)).collect();
    let reexported = reexports(files, &modules);
    let mut found = Vec::new();
    for folder in folders {
        let folder: Vec<String> = folder.split('/').map(str::to_string).collect();
        let Some(items) = reexported.get(&folder) else {
            continue;
        };
        for ((rel, text), module) in files.iter().zip(&modules) {
            let inside = module.len() > folder.len() && module.starts_with(&folder);
            if !inside || rel.ends_with("tests.rs") {
                continue;
            }
            for path in named_paths(module, text) {
                // A child module of the folder's name (`observe::observed::Observed` beside the
                // re-exported function `observe::observed`) is the module, not the item.
                let named = path
                    .get(folder.len())
                    .filter(|_| path.starts_with(&folder))
                    .filter(|_| {
                        !modules
                            .iter()
                            .any(|m| m.starts_with(&path[..=folder.len()]))
                    });
                if let Some(child) = named.and_then(|item| items.get(item)) {
                    found.push(format!("{rel}: {} (defined in {child})", path.join("::")));
                }
            }
        }
    }
    found
}

#[test]
fn a_stage_imports_an_item_from_the_file_that_defines_it() {
    let found = over_reconciler_folders(stages_importing_through_reexports);
    assert!(
        found.is_empty(),
        "stages importing through their driver's re-exports: {found:#?}"
    );
}

#[test]
fn the_reexport_check_sees_an_item_named_through_the_driver() {
    let files: Vec<(String, String)> = [
        (
            "top/mod.rs",
            "mod a; mod ctx;\npub use ctx::{Ctx, Memory};\npub use a::ctx;",
        ),
        ("top/a.rs", "use crate::top::{Ctx, b};"),
        ("top/ctx.rs", "pub struct Ctx;\npub struct Memory;"),
        ("top/b.rs", "use crate::top::ctx::Ctx;\nuse super::b;"),
        (
            "top/c.rs",
            "fn f(_: &super::Memory) {}\nuse super::ctx::Ctx;",
        ),
        // `ctx` is both a child module and an item `mod.rs` re-exports from `a`.
        ("top/f.rs", "use crate::top::ctx::Memory;"),
        (
            "top/d/mod.rs",
            "use crate::top::ctx::Memory;\nfn f(_: super::Ctx) {}",
        ),
        ("top/d/x.rs", "fn f(_: super::super::Memory) {}"),
        ("top/e.rs", "#[cfg(test)]\nuse super::Ctx;"),
        ("other.rs", "use crate::top::Ctx;"),
    ]
    .iter()
    .map(|(p, t)| (p.to_string(), t.to_string()))
    .collect();
    let found = stages_importing_through_reexports(&files, &["top"]);
    assert_eq!(
        found,
        [
            "top/a.rs: top::Ctx (defined in ctx)",
            "top/c.rs: top::Memory (defined in ctx)",
            "top/d/mod.rs: top::Ctx (defined in ctx)",
            "top/d/x.rs: top::Memory (defined in ctx)",
        ],
        "{found:#?}"
    );
}

/// Every reconciler's folder has these stage modules (a file or a folder), besides its driver.
const STAGES: [&str; 8] = [
    "validate", "observe", "plan", "act", "report", "status", "outcome", "context",
];

#[test]
fn every_reconciler_lays_out_the_same_stage_files() {
    // The two exceptions, each for a reason: the worker deployment's plan stage is the
    // planner, a module tree of its own (`src/planner/`, every rollout rule), and a
    // Connection has nothing the schema does not already check.
    let elsewhere = [
        ("worker_deployment", "plan", "planner"),
        ("connection", "validate", ""),
    ];
    let src = root().join("src");
    let mut missing = Vec::new();
    for folder in RECONCILERS {
        for stage in STAGES {
            let here = src.join(folder).join(format!("{stage}.rs")).exists()
                || src.join(folder).join(stage).join("mod.rs").exists();
            let excused = elsewhere
                .iter()
                .find(|(f, s, _)| *f == folder && *s == stage);
            match (here, excused) {
                (true, None) => {}
                (false, Some((_, _, ""))) => {}
                (false, Some((_, _, other))) if src.join(other).join("mod.rs").exists() => {}
                _ => missing.push(format!("{folder}/{stage}")),
            }
        }
    }
    assert!(
        missing.is_empty(),
        "stage files missing or misplaced: {missing:?}"
    );
}

#[test]
fn no_reconciler_imports_another_reconcilers_folder() {
    let mut found = Vec::new();
    for (rel, text) in source_files() {
        let Some(own) = RECONCILERS
            .iter()
            .find(|r| rel.starts_with(&format!("{r}/")))
        else {
            continue;
        };
        let code = production_code(&text);
        for other in RECONCILERS.iter().filter(|r| *r != own) {
            if idents_after(&code, "crate::").contains(other) {
                found.push(format!("{rel} imports crate::{other}"));
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_folder_graph_sees_cycles_inside_a_folder() {
    let src = |files: &[(&str, &str)]| -> Vec<(String, String)> {
        files
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect()
    };
    let acyclic = folder_graphs(&src(&[
        ("top/mod.rs", "mod a; mod b; mod c; use crate::top::a::X;"),
        ("top/a.rs", "use super::{b::Y, c};"),
        // A doc link and test-only code are no imports (each would close a cycle).
        (
            "top/b.rs",
            "/// Unlike [`crate::top::a`].\nuse crate::other::a;",
        ),
        (
            "top/c/mod.rs",
            "use crate::top::b;\n#[cfg(test)]\nuse crate::top::a;",
        ),
        ("top/c/d.rs", "use super::e;"),
        ("top/c/e.rs", ""),
        ("top/tests.rs", "use crate::top::c::d; use super::a;"),
    ]));
    assert_eq!(
        acyclic["top"]["a"],
        BTreeSet::from(["b".into(), "c".into()])
    );
    assert_eq!(acyclic["top/c"]["d"], BTreeSet::from(["e".into()]));
    for graph in acyclic.values() {
        assert_eq!(find_cycle(graph), None, "{acyclic:#?}");
    }
    // Through `super::super` from a nested file, and through a group.
    let cyclic = folder_graphs(&src(&[
        ("top/a.rs", "use super::b::Y;"),
        ("top/b.rs", "use crate::top::{c::Z, x};"),
        ("top/c/d.rs", "fn f() { super::super::a::g() }"),
    ]));
    let cycle = find_cycle(&cyclic["top"]).expect("a cycle inside `top`");
    assert_eq!(cycle.len(), 4, "{cycle:?}");
    // Behind a re-export of the folder's `mod.rs`: `a` imports `Ctx`, which comes from `ctx`,
    // which imports `a`. An item `mod.rs` defines itself is an import of the driver.
    let behind = src(&[
        (
            "top/mod.rs",
            "mod a; mod ctx;\npub use ctx::Ctx;\npub struct Attempt;",
        ),
        ("top/a.rs", "use crate::top::{Ctx, Attempt};"),
        ("top/ctx.rs", "use crate::top::a::Memory;"),
    ]);
    let graphs = folder_graphs(&behind);
    assert!(
        find_cycle(&graphs["top"]).is_some(),
        "a cycle behind a re-export: {graphs:#?}"
    );
    assert_eq!(stages_importing_their_driver(&behind, &["top"]), ["top/a"]);
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

#[test]
fn connection_reason_table_in_docs_matches_the_code() {
    assert_eq!(
        documented_reasons("docs/connection-status.md"),
        reasons_in_code(conditions::CONNECTION_ALL)
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
        ReasonKind::Unknown => "unknown",
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
    for file in files {
        let text = fs::read_to_string(&file).unwrap_or_default();
        let cited = outside_citations(&text);
        assert!(
            cited.is_empty(),
            "{} cites {cited:?}: state the rule where it is tested instead",
            file.display()
        );
    }
}

/// What `text` cites of the notes outside the repository: their paths, or one of their
/// numbered decisions (the word, a space and a number).
fn outside_citations(text: &str) -> Vec<String> {
    // Split so that this file does not match itself.
    let needles = [
        concat!("../", "shared"),
        concat!("shared/", "reference"),
        concat!("temporal-", "facts"),
        concat!("go-controller-", "behaviour"),
    ];
    let mut cited: Vec<String> = needles
        .iter()
        .filter(|n| text.contains(*n))
        .map(|n| n.to_string())
        .collect();
    let lower = text.to_lowercase();
    let word = concat!("decision", " ");
    for (i, _) in lower.match_indices(word) {
        let number: String = lower[i + word.len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if !number.is_empty() {
            cited.push(format!("{word}{number}"));
        }
    }
    cited
}

#[test]
fn the_citation_guard_sees_paths_and_numbered_decisions() {
    let planted = format!(
        "as {} 14 says, and {}/README.md",
        "Decision",
        concat!("..", "/shared")
    );
    assert_eq!(
        outside_citations(&planted),
        [concat!("../", "shared"), concat!("decision", " 14")]
    );
    assert!(outside_citations("a decision the planner takes, 14 times").is_empty());
}

/// Production lines of a source file: those outside its test items.
fn production_lines(text: &str) -> Vec<&str> {
    outside_test_items(text)
}

/// `(name, lines)` of every function of `lines` longer than `max`, a function ending at the
/// first line that closes it at its own indentation (rustfmt's layout).
fn long_functions(lines: &[&str], max: usize) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        let indent = &line[..line.len() - code.len()];
        let signature = [
            "fn ",
            "pub fn ",
            "async fn ",
            "pub async fn ",
            "pub(crate) fn ",
            "pub(crate) async fn ",
            "pub(super) fn ",
            "pub(super) async fn ",
        ]
        .iter()
        .find_map(|p| code.strip_prefix(p));
        let Some(rest) = signature else { continue };
        if code.ends_with(';') {
            continue; // a declaration without a body
        }
        let closing = format!("{indent}}}");
        if let Some(end) = lines[i + 1..].iter().position(|l| *l == closing) {
            let len = end + 2;
            if len > max {
                let name = rest.split(['(', '<']).next().unwrap_or(rest);
                out.push((name.to_string(), len));
            }
        }
    }
    out
}

#[test]
fn no_production_file_or_function_is_longer_than_the_house_allows() {
    const MAX_FILE: usize = 550;
    const MAX_FN: usize = 70;
    let mut too_long = Vec::new();
    for (rel, text) in source_files() {
        if rel.ends_with("tests.rs") || rel == "fixtures.rs" {
            continue;
        }
        let lines = production_lines(&text);
        if lines.len() > MAX_FILE {
            too_long.push(format!("{rel}: {} production lines", lines.len()));
        }
        for (name, len) in long_functions(&lines, MAX_FN) {
            too_long.push(format!("{rel}: fn {name} has {len} lines"));
        }
    }
    assert!(too_long.is_empty(), "{too_long:#?}");
    // The main binary parses arguments only.
    let main = fs::read_to_string(root().join("src/main.rs")).expect("main.rs");
    assert!(main.lines().count() < 100, "src/main.rs has grown");
}

#[test]
fn the_length_check_sees_a_long_function_and_skips_declarations() {
    let mut text = vec![
        "trait T {",
        "    fn declared(&self);",
        "}",
        "pub fn long() {",
    ];
    text.extend(std::iter::repeat_n("    step();", 90));
    text.push("}");
    assert_eq!(long_functions(&text, 80), [("long".to_string(), 92)]);
    assert!(long_functions(&text, 100).is_empty());
}

#[test]
fn the_checks_read_past_a_test_item_to_the_production_code_after_it() {
    let text = "use crate::a;\n#[cfg(test)]\nuse crate::b;\n#[cfg(test)]\n#[path = \"x.rs\"]\nmod x;\n\
                #[cfg(test)]\nmod tests {\n    use crate::c;\n    fn t() {}\n}\n\
                pub fn after() {\n    crate::d::go();\n}";
    let kept = outside_test_items(text);
    assert_eq!(
        kept,
        [
            "use crate::a;",
            "pub fn after() {",
            "    crate::d::go();",
            "}"
        ]
    );
    assert_eq!(idents_after(&kept.join("\n"), "crate::"), ["a", "d"]);
}

#[test]
fn the_library_map_names_only_modules_that_exist() {
    let lib = fs::read_to_string(root().join("src/lib.rs")).expect("lib.rs");
    let (named, unknown) = map_modules(&lib);
    assert!(named > 20, "the map of src/lib.rs names the modules");
    assert!(
        unknown.is_empty(),
        "src/lib.rs names modules that do not exist: {unknown:?}"
    );
}

#[test]
fn the_library_map_check_sees_a_module_that_moved() {
    let lib = "//! Map: `api`, `status` (moved).\n\npub mod api;\n";
    assert_eq!(map_modules(lib), (2, vec!["status".to_string()]));
}

/// How many module names the `//!` map of `lib` gives, and those `lib` does not declare.
fn map_modules(lib: &str) -> (usize, Vec<String>) {
    let declared: BTreeSet<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';'))
        .collect();
    let map = lib
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    let named: Vec<&str> = code_spans(&map)
        .into_iter()
        .filter(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect();
    let unknown = named
        .iter()
        .filter(|n| !declared.contains(*n))
        .map(|n| n.to_string())
        .collect();
    (named.len(), unknown)
}
