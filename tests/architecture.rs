//! The floors the code keeps (docs/testing.md, "Architecture"): checks
//! over the source tree itself, so that a change which erodes them fails
//! here and says where, rather than in a review months later.
//!
//! - Import circles: within each crate of the workspace (`src/` and
//!   `crates/*/src/`), the graph of which file uses items of which other
//!   file has no cycle except the one the intercepted re-entry needs
//!   (`proxy/route` <-> `proxy/tunnel`). A file uses another when it names
//!   a path into it (`use crate::a::b`, `super::x`, `self::y`, `child::z`);
//!   a module file that declares children and re-exports them uses them,
//!   so a child that imports from its parent closes a circle (shared items
//!   live in a file of their own). Crates cannot import each other in a
//!   circle at all: Cargo refuses.
//! - Size: no source file longer than 800 lines before its tests, no
//!   function longer than 120 lines (`route`, the one table of where a
//!   request goes, excepted).
//! - One writer of record keys: the string `"record:` appears in the typed
//!   store key's file only (and in tests).
//! - The fuzz targets use the robots crate as a library: no `#[path]`, and
//!   no `cfg(fuzzing)` in the robots engine.
//! - Formatting: `cargo fmt --all --check` passes, so the line counts above
//!   are those of rustfmt's layout.
//! - Typed errors: a `Result<_, String>` only where its message ends at a
//!   person (the command line and the configuration), at most
//!   [`MAX_STRING_ERRORS`] in all; elsewhere a caller may branch on an
//!   error, so it has a type of its own.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 800;
const MAX_FN_LINES: usize = 120;
/// The cycles allowed, as sets of module paths.
/// The intercepted re-entry: a CONNECT's route opens a tunnel
/// (`proxy/tunnel`) whose requests take the route again
/// (`proxy/in_tunnel`).
const ALLOWED_CYCLES: &[&[&str]] = &[&["proxy/in_tunnel", "proxy/route", "proxy/tunnel"]];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(rust_files(&p));
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The source directories of the workspace's crates: `src/` and every
/// `crates/*/src/`.
fn crate_sources() -> Vec<PathBuf> {
    let mut out = vec![root().join("src")];
    if let Ok(rd) = fs::read_dir(root().join("crates")) {
        let mut crates: Vec<PathBuf> =
            rd.flatten().map(|e| e.path().join("src")).filter(|p| p.is_dir()).collect();
        crates.sort();
        out.extend(crates);
    }
    out
}

/// The text of a source file before its `#[cfg(test)] mod tests`, with
/// line comments removed.
fn code_before_tests(text: &str) -> String {
    let cut = text.find("\n#[cfg(test)]\nmod tests {").map_or(text.len(), |i| i + 1);
    text[..cut]
        .lines()
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module path of a file relative to its crate's `src/`: `store/index`
/// for `store/index.rs`, `store` for `store/mod.rs`, `` for `lib.rs`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// The file-level import graph of one crate: module -> modules it uses.
///
/// Paths are followed from `crate::`, `super::` and `self::`, from a
/// child module's name, and from every name a `use` binds to a module
/// (`use super::stages::{self, Step}` binds `stages`; `use crate::a::b`
/// binds `b` when `a/b` is a module file; `use crate::a as c` binds `c`),
/// so `stages::forward::run(..)` after such a `use` is an edge to
/// `stages/forward` however it is spelled.
fn import_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let files: Vec<(Vec<String>, PathBuf)> =
        rust_files(src).into_iter().map(|f| (module_of(src, &f), f)).collect();
    let known: BTreeSet<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
    // The longest prefix of `path` that is a module file.
    let resolve = |path: &[String]| -> Option<Vec<String>> {
        (0..=path.len()).rev().map(|n| path[..n].to_vec()).find(|p| known.contains(p))
    };
    let path_re = regex::Regex::new(r"\b(crate|super|self)((?:::\w+)+)").unwrap();
    let use_re = regex::Regex::new(
        r"\buse\s+(crate|super|self)((?:::\w+)*)(?:::\{([^;]*)\}|\s+as\s+(\w+))?\s*;",
    )
    .unwrap();
    let relative_re = regex::Regex::new(r"(?:^|[^:\w])(\w+)((?:::\w+)*)::").unwrap();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, file) in &files {
        let code = code_before_tests(&fs::read_to_string(file).unwrap_or_default());
        let mut uses: BTreeSet<Vec<String>> = BTreeSet::new();
        // `crate`, `self` or `super` followed by `rest` (which may start
        // with more `super`s), as a path from the crate root.
        let absolute = |head: &str, rest: &str| -> Vec<String> {
            let mut path = match head {
                "crate" => Vec::new(),
                "self" => module.clone(),
                _ => module[..module.len().saturating_sub(1)].to_vec(),
            };
            let mut rest: Vec<String> =
                rest.split("::").filter(|s| !s.is_empty()).map(str::to_string).collect();
            while rest.first().is_some_and(|s| s == "super") {
                path.pop();
                rest.remove(0);
            }
            path.extend(rest);
            path
        };
        for c in path_re.captures_iter(&code) {
            uses.extend(resolve(&absolute(&c[1], &c[2])));
        }
        // Names bound to modules by `use`, and the items of `use` groups.
        let mut aliases: HashMap<String, Vec<String>> = HashMap::new();
        for c in use_re.captures_iter(&code) {
            let prefix = absolute(&c[1], &c[2]);
            if let Some(group) = c.get(3) {
                for item in group.as_str().split(',') {
                    let mut words = item.split(" as ");
                    let name = words
                        .next()
                        .unwrap_or("")
                        .trim_matches(|ch: char| ch == '{' || ch == '}' || ch.is_whitespace());
                    let alias = words.next().map(str::trim);
                    if name.is_empty() {
                        continue;
                    }
                    let mut path = prefix.clone();
                    if name != "self" {
                        path.extend(name.split("::").filter(|s| !s.is_empty()).map(str::to_string));
                    }
                    uses.extend(resolve(&path));
                    if known.contains(&path) {
                        if let Some(last) = alias.or(path.last().map(String::as_str)) {
                            aliases.insert(last.to_string(), path.clone());
                        }
                    }
                }
            } else if known.contains(&prefix) {
                if let Some(last) =
                    c.get(4).map(|m| m.as_str()).or(prefix.last().map(String::as_str))
                {
                    aliases.insert(last.to_string(), prefix.clone());
                }
            }
        }
        for c in relative_re.captures_iter(&code) {
            let name = &c[1];
            let mut child = module.clone();
            child.push(name.to_string());
            let start =
                if known.contains(&child) { Some(child) } else { aliases.get(name).cloned() };
            if let Some(mut path) = start {
                path.extend(c[2].split("::").filter(|s| !s.is_empty()).map(str::to_string));
                uses.extend(resolve(&path));
            }
        }
        uses.remove(module);
        graph.insert(module.join("/"), uses.into_iter().map(|m| m.join("/")).collect());
    }
    graph
}

/// The strongly connected components with more than one module (Tarjan).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: HashMap<&'a str, usize>,
        low: HashMap<&'a str, usize>,
        stack: Vec<&'a str>,
        next: usize,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        let graph = s.graph;
        for w in graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.stack.contains(&w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                comp.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        graph,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn no_import_circle_but_the_intercepted_re_entry() {
    let mut found = Vec::new();
    for src in crate_sources() {
        for cycle in cycles(&import_graph(&src)) {
            let allowed = ALLOWED_CYCLES
                .iter()
                .any(|a| a.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>() == cycle);
            if !allowed {
                found.push(format!(
                    "{}: {:?}",
                    src.strip_prefix(root()).unwrap_or(&src).display(),
                    cycle
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "import circles (move what both sides use into a file of its own):\n{}",
        found.join("\n")
    );
}

/// Every function of a file longer than `max` lines (brace matching by
/// indentation, as rustfmt lays code out), with its line and length.
fn long_functions(code: &str, max: usize) -> Vec<(usize, String, usize)> {
    let fn_re = regex::Regex::new(
        r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)",
    )
    .unwrap();
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(c) = fn_re.captures(l) else { continue };
        if l.trim_end().ends_with(';') {
            continue;
        }
        let indent = c[1].len();
        let close = format!("{}}}", " ".repeat(indent));
        if let Some(j) = lines[i + 1..]
            .iter()
            .position(|m| m.starts_with(&close) && m.len() - m.trim_start().len() == indent)
        {
            let len = j + 2;
            if len > max {
                out.push((i + 1, c[2].to_string(), len));
            }
        }
    }
    out
}

/// The functions allowed over [`MAX_FN_LINES`]: (file, function, why).
/// At most two (issue 42).
const SIZE_EXEMPTIONS: &[(&str, &str, &str)] = &[(
    "src/proxy/route.rs",
    "route",
    "the one table of where a request goes: read as a whole, it is the map of the proxy",
)];

#[test]
fn no_file_over_800_lines_and_no_function_over_120_but_route() {
    assert!(SIZE_EXEMPTIONS.len() <= 2, "at most two exemptions from the size limits");
    let mut problems = Vec::new();
    for src in crate_sources() {
        for file in rust_files(&src) {
            let text = fs::read_to_string(&file).unwrap_or_default();
            let rel = file.strip_prefix(root()).unwrap_or(&file).display().to_string();
            // A file of tests only (`tests.rs` beside its module) is not code.
            if file.file_name().is_some_and(|n| n == "tests.rs") {
                continue;
            }
            let before = text.find("\n#[cfg(test)]\nmod tests {").map_or(text.len(), |i| i + 1);
            // The tests module comes last: nothing but blank lines after
            // its closing brace (code there would escape every check).
            let after_tests =
                text[before..].find("\n}\n").map_or("", |end| &text[before + end + 3..]);
            if !after_tests.trim().is_empty() {
                problems.push(format!("{rel}: code after its `#[cfg(test)] mod tests {{ .. }}` (move the tests to the end)"));
            }
            let lines = text[..before].lines().count();
            if lines > MAX_FILE_LINES {
                problems.push(format!(
                    "{rel}: {lines} lines before its tests (at most {MAX_FILE_LINES})"
                ));
            }
            for (line, name, len) in long_functions(&text[..before], MAX_FN_LINES) {
                let exempt = SIZE_EXEMPTIONS.iter().any(|(f, n, _)| rel == *f && name == *n);
                if !exempt {
                    problems.push(format!(
                        "{rel}:{line}: fn {name} is {len} lines (at most {MAX_FN_LINES})"
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "split these:\n{}", problems.join("\n"));
}

#[test]
fn record_keys_are_written_and_read_in_one_place() {
    let mut found = Vec::new();
    for src in crate_sources() {
        for file in rust_files(&src) {
            let rel = file.strip_prefix(root()).unwrap_or(&file).display().to_string();
            let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name == "store_key.rs" || name == "tests.rs" {
                continue;
            }
            let text = fs::read_to_string(&file).unwrap_or_default();
            let before = text.find("\n#[cfg(test)]\nmod tests {").map_or(text.len(), |i| i + 1);
            for (n, l) in text[..before].lines().enumerate() {
                if l.contains("\"record:") {
                    found.push(format!("{rel}:{}: {}", n + 1, l.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "record keys spelled out of the StoreKey type:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_fuzz_targets_use_the_robots_engine_as_a_library() {
    let mut found = Vec::new();
    for file in rust_files(&root().join("fuzz")) {
        let text = fs::read_to_string(&file).unwrap_or_default();
        if text.contains("#[path") {
            found.push(format!("{}: #[path]", file.display()));
        }
    }
    let robots =
        ["crates/robots/src", "src/robots"].iter().map(|d| root().join(d)).find(|d| d.is_dir());
    for file in robots.iter().flat_map(|d| rust_files(d)) {
        if code_before_tests(&fs::read_to_string(&file).unwrap_or_default()).contains("fuzzing)") {
            found.push(format!("{}: cfg(fuzzing)", file.display()));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The checker itself: a circle through a parent module and a child that
/// imports from it is found; the allowed one is not reported.
#[test]
fn the_import_checker_finds_a_circle_through_a_parent() {
    let dir = std::env::temp_dir().join(format!("crawlcache-arch-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("a")).unwrap();
    fs::write(dir.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    fs::write(dir.join("a/mod.rs"), "mod child;\npub use child::Thing;\npub struct Shared;\n")
        .unwrap();
    fs::write(dir.join("a/child.rs"), "use super::Shared;\npub struct Thing(Shared);\n").unwrap();
    fs::write(dir.join("b.rs"), "use crate::a::Thing;\n").unwrap();
    // A module reached through a name a `use` bound: `stages::forward::run`
    // after `use super::stages::{self}` is an edge to `p/stages/forward`.
    fs::create_dir_all(dir.join("p/stages")).unwrap();
    fs::write(dir.join("p/mod.rs"), "pub mod route;\npub mod stages;\n").unwrap();
    fs::write(
        dir.join("p/route.rs"),
        "use super::stages::{self};\npub const MAX: u32 = 3;\nfn f() { stages::forward::run(); }\n",
    )
    .unwrap();
    fs::write(dir.join("p/stages/mod.rs"), "pub mod forward;\n").unwrap();
    fs::write(dir.join("p/stages/forward.rs"), "use super::super::route::MAX;\npub fn run() {}\n")
        .unwrap();
    let set = |m: &[&str]| m.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let found = cycles(&import_graph(&dir));
    assert_eq!(found, vec![set(&["a", "a/child"]), set(&["p/route", "p/stages/forward"])]);
    let long = "fn long() {\n".to_string() + &"    x();\n".repeat(130) + "}\n";
    assert_eq!(long_functions(&long, 120), vec![(1, "long".to_string(), 132)]);
    let _ = fs::remove_dir_all(&dir);
}

/// The crates of the workspace (`crawlcache-*` names) `crates/NAME`
/// depends on, from its `Cargo.toml` (`[dependencies]` only).
fn workspace_deps(name: &str) -> BTreeSet<String> {
    let text =
        fs::read_to_string(root().join("crates").join(name).join("Cargo.toml")).unwrap_or_default();
    let mut in_deps = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps {
            if let Some(dep) =
                line.split('=').next().map(str::trim).and_then(|d| d.strip_prefix("crawlcache-"))
            {
                out.insert(dep.to_string());
            }
        }
    }
    out
}

/// The floors: base imports nothing of ours; policy, store and robots only
/// base; fleet those four. Cargo refuses a circle, so these directions
/// also mean no crate can import one above it. Policy stays synchronous
/// and without I/O: no tokio, hyper or sled among its dependencies.
#[test]
fn the_crates_import_only_the_floors_below_them() {
    let allowed: &[(&str, &[&str])] = &[
        ("base", &[]),
        ("policy", &["base"]),
        ("store", &["base"]),
        ("robots", &["base"]),
        ("fleet", &["base", "policy", "robots", "store"]),
    ];
    for (name, may) in allowed {
        let deps = workspace_deps(name);
        let may: BTreeSet<String> = may.iter().map(|s| s.to_string()).collect();
        assert!(deps.is_subset(&may), "crates/{name} depends on {deps:?}; it may use only {may:?}");
        assert!(root().join("crates").join(name).join("src").is_dir(), "crates/{name} exists");
    }
    // What Cargo resolves for policy, features of its dependencies
    // included (a dependency's feature can pull tokio in).
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = std::process::Command::new(cargo)
        .args(["tree", "--offline", "-p", "crawlcache-policy", "-e", "normal", "--prefix", "none"])
        .current_dir(root())
        .output()
        .expect("running cargo tree");
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && tree.contains("crawlcache-policy"),
        "cargo tree -p crawlcache-policy failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for forbidden in ["tokio", "hyper", "sled"] {
        let hit = tree.lines().find(|l| l.split_whitespace().next() == Some(forbidden));
        assert!(hit.is_none(), "crates/policy depends on {forbidden} ({})", hit.unwrap_or(""));
    }
}

/// The size limits above count lines as rustfmt lays them out (the
/// workspace's `rustfmt.toml`), so the code is kept formatted: a
/// contributor's `cargo fmt` does not move a file or function over them.
#[test]
fn the_code_is_formatted_as_rustfmt_toml_says() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = std::process::Command::new(cargo)
        .args(["fmt", "--all", "--check"])
        .current_dir(root())
        .output()
        .expect("running cargo fmt");
    assert!(
        out.status.success(),
        "cargo fmt --all --check (rustup component rustfmt) reports differences; run `cargo fmt --all`:\n{}{}",
        String::from_utf8_lossy(&out.stdout).lines().take(40).collect::<Vec<_>>().join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// RFC 9111 section 4.1's "most recent matching response" is chosen in
/// one function (`crawlcache_policy::cache::variant`): nobody else compares
/// the response times of stored variants.
#[test]
fn the_newest_variant_rule_is_written_once() {
    // Response times compared (`a.response_time_ms > b.response_time_ms`),
    // ordered (`.cmp(`, `max_by_key`, `sort_by`) or picked by.
    let ordering = regex::Regex::new(
        r"response_time_ms\s*(?:[<>]=?)\s*[\w(&*]|[\w)]\s+(?:[<>]=?)\s*[\w.&*]*response_time_ms|(?:max|min|sort|sort_unstable)_by(?:_key)?\(.*response_time_ms|response_time_ms\)?\s*\.\s*(?:partial_)?cmp\(",
    )
    .unwrap();
    for bad in [
        "if v.response_time_ms > best.response_time_ms {",
        "variants.iter().max_by_key(|v| v.response_time_ms)",
        "a.response_time_ms.cmp(&b.response_time_ms)",
        "x < v.response_time_ms",
    ] {
        assert!(ordering.is_match(bad), "the check must catch {bad}");
    }
    assert!(!ordering
        .is_match("pub fn encode_head<'a, H, V>(status: u16, response_time_ms: u64) -> Vec<u8>"));
    let mut found = Vec::new();
    for src in crate_sources() {
        for file in rust_files(&src) {
            let rel = file.strip_prefix(root()).unwrap_or(&file).display().to_string();
            if rel.ends_with("cache/variant.rs") {
                continue;
            }
            for (n, l) in code_before_tests(&fs::read_to_string(&file).unwrap_or_default())
                .lines()
                .enumerate()
            {
                if ordering.is_match(l) {
                    found.push(format!("{rel}:{}: {}", n + 1, l.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "stored variants ordered outside cache::variant:\n{}",
        found.join("\n")
    );
}

/// The normal dependencies (`[dependencies]`) of the manifest at `manifest`:
/// the name code uses for each (the key, `-` read as `_`; a `package =`
/// rename keeps the key), the Cargo key, and its line in the manifest.
fn normal_dependencies(manifest: &Path) -> Vec<(String, String, usize)> {
    let text =
        fs::read_to_string(manifest).unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    let mut in_deps = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if !in_deps || line.starts_with('#') || !line.contains('=') {
            continue;
        }
        let key = line.split('=').next().unwrap_or("").trim().trim_matches('"').to_string();
        if !key.is_empty() {
            out.push((key.replace('-', "_"), key, i + 1));
        }
    }
    out
}

/// The code of every `.rs` file under `dirs` before its first test module
/// (`#[cfg(test)] mod`: clippy keeps test modules last in a file), without
/// line comments.
fn code_without_tests(dirs: &[PathBuf]) -> String {
    let mut all = String::new();
    for dir in dirs {
        let files = if dir.is_file() { vec![dir.clone()] } else { rust_files(dir) };
        for f in files {
            let text = fs::read_to_string(&f).unwrap_or_default();
            if f.file_name().is_some_and(|n| n == "tests.rs") {
                continue;
            }
            let cut = text.find("\n#[cfg(test)]\nmod ").map_or(text.len(), |i| i + 1);
            all.push_str(&code_before_tests(&text[..cut]));
            all.push('\n');
        }
    }
    all
}

/// Whether `code` names the crate `name`: a path through it (`name::`), a
/// `use` of it (`use name as x;` included) or an `extern crate`.
fn names_crate(code: &str, name: &str) -> bool {
    let bytes = code.as_bytes();
    let mut from = 0;
    while let Some(i) = code[from..].find(name).map(|i| i + from) {
        let before = if i == 0 { b' ' } else { bytes[i - 1] };
        let after = &code[i + name.len()..];
        let starts_word = !(before.is_ascii_alphanumeric() || before == b'_');
        let used = after.starts_with("::")
            || code[..i].ends_with("use ")
            || (after.starts_with(';') && code[..i].ends_with("extern crate "));
        if starts_word && used {
            return true;
        }
        from = i + name.len();
    }
    false
}

/// Every normal dependency of every crate of the workspace is named by
/// that crate's own code outside its tests (`src/`, and `build.rs`); a
/// dependency only tests use belongs in `[dev-dependencies]`, where it is
/// not built for users. (A check of our own rather than `cargo machete`,
/// which must be compiled and misreads renamed dependencies.)
#[test]
fn every_normal_dependency_is_used_by_its_crate() {
    let mut crates = vec![root()];
    let mut members: Vec<PathBuf> = fs::read_dir(root().join("crates"))
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    members.sort();
    crates.extend(members.into_iter().filter(|p| p.join("Cargo.toml").is_file()));
    let mut unused = Vec::new();
    for dir in &crates {
        let code = code_without_tests(&[dir.join("src"), dir.join("build.rs")]);
        for (name, key, line) in normal_dependencies(&dir.join("Cargo.toml")) {
            if !names_crate(&code, &name) {
                unused.push(format!("{}/Cargo.toml:{line}: `{key}`", dir.display()));
            }
        }
    }
    assert!(unused.is_empty(), "normal dependencies no code outside the tests names (make them dev-dependencies, or remove them):\n{}", unused.join("\n"));
}

/// The check above sees a dependency used only by a test module, and one
/// used by code.
#[test]
fn the_dependency_check_tells_test_use_from_code_use() {
    let code = code_before_tests("use alpha::A;\nfn f() { beta_x::g(); }\n");
    assert!(names_crate(&code, "alpha"));
    assert!(!names_crate(&code, "beta"), "a longer name is another crate");
    let text = "fn f() {}\n#[cfg(test)]\nmod tests {\n    use gamma::G;\n}\n";
    let cut = text.find("\n#[cfg(test)]\nmod ").map_or(text.len(), |i| i + 1);
    assert!(!names_crate(&code_before_tests(&text[..cut]), "gamma"));
    assert!(names_crate("extern crate delta;", "delta"));
    assert!(names_crate("pub use epsilon as e;", "epsilon"));
}

/// Every path names the crate its item lives in (issue 42): no `pub use`
/// (or `pub(crate) use`) in the root crate re-exports another crate's
/// items, `lib.rs` included, so `crate::store::Store` cannot stand for
/// `crawlcache_store::Store`. A crate is another's when its name is a
/// dependency of the root's manifest.
#[test]
fn no_module_re_exports_another_crates_items() {
    let re =
        regex::Regex::new(r"(?m)^\s*pub(?:\([a-z]+\))?\s+use\s+:{0,2}([A-Za-z_][A-Za-z0-9_]*)")
            .unwrap();
    let mut found = Vec::new();
    for src in crate_sources() {
        let manifest = src.parent().unwrap_or(&src).join("Cargo.toml");
        let deps: BTreeSet<String> =
            normal_dependencies(&manifest).into_iter().map(|(name, _, _)| name).collect();
        for file in rust_files(&src) {
            let text = fs::read_to_string(&file).unwrap_or_default();
            for c in re.captures_iter(&text) {
                let first = &c[1];
                if deps.contains(first) || first.starts_with("crawlcache_") {
                    let line = text[..c.get(0).map_or(0, |m| m.start())].lines().count() + 1;
                    found.push(format!(
                        "{}:{line}: pub use {first}::...",
                        file.strip_prefix(root()).unwrap_or(&file).display()
                    ));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "re-exports of other crates' items (name the crate at the call sites instead):\n{}",
        found.join("\n")
    );
}

/// The root crate's floors as docs/architecture.md declares them (its
/// fenced block marked `floors`), bottom first; the names on one line share
/// a floor.
fn declared_floors(doc: &str) -> Vec<Vec<String>> {
    let block = doc.split("```floors\n").nth(1).and_then(|rest| rest.split("```").next());
    let lines = block.unwrap_or("").lines();
    lines
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .filter(|names| !names.is_empty())
        .collect()
}

/// Every import of `src` from one top-level module into another that does
/// not go to a lower floor of `floors`, as a sentence naming both files
/// and both floors; and every top-level module (a `mod` of `lib.rs`)
/// without a floor.
fn floor_violations(src: &Path, floors: &[Vec<String>]) -> Vec<String> {
    let floor_of = |top: &str| floors.iter().position(|f| f.iter().any(|n| n == top));
    let files: BTreeMap<String, PathBuf> =
        rust_files(src).into_iter().map(|f| (module_of(src, &f).join("/"), f)).collect();
    let shown = |module: &str| -> String {
        let file = files.get(module).map(|f| f.strip_prefix(src).unwrap_or(f).to_path_buf());
        format!("src/{}", file.unwrap_or_else(|| PathBuf::from(module)).display())
    };
    let mut out = Vec::new();
    let lib = code_before_tests(&fs::read_to_string(src.join("lib.rs")).unwrap_or_default());
    let mod_re = regex::Regex::new(r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;").unwrap();
    for c in mod_re.captures_iter(&lib) {
        if floor_of(&c[1]).is_none() {
            out.push(format!(
                "src/lib.rs declares `mod {}`, which has no floor in docs/architecture.md",
                &c[1]
            ));
        }
    }
    for (from, tos) in import_graph(src) {
        let Some(top) = from.split('/').next().filter(|t| !t.is_empty()) else { continue };
        for to in tos {
            let Some(to_top) = to.split('/').next().filter(|t| !t.is_empty()) else { continue };
            if to_top == top {
                continue;
            }
            let (Some(a), Some(b)) = (floor_of(top), floor_of(to_top)) else { continue };
            if b >= a {
                out.push(format!(
                    "{} (floor {}, {top}) uses {} (floor {}, {to_top}): a floor may use only the \
                     floors below it",
                    shown(&from),
                    a + 1,
                    shown(&to),
                    b + 1
                ));
            }
        }
    }
    out
}

/// The root's top-level modules keep the floors docs/architecture.md
/// declares: no import upwards or sideways (so no two modules import each
/// other), and no module without a floor.
#[test]
fn the_root_modules_import_only_the_floors_below_them() {
    let doc =
        fs::read_to_string(root().join("docs/architecture.md")).expect("docs/architecture.md");
    let floors = declared_floors(&doc);
    assert!(floors.len() >= 10, "docs/architecture.md declares the floors in a ```floors block");
    let found = floor_violations(&root().join("src"), &floors);
    assert!(found.is_empty(), "imports against the floors:\n{}", found.join("\n"));
}

/// The floor check itself, on a small tree: an upward import and a
/// two-way pair on one floor are found and named by file; a downward
/// import is not; a module without a floor is.
#[test]
fn the_floor_checker_finds_an_upward_import_and_a_two_way_pair() {
    let dir = std::env::temp_dir().join(format!("cc-floors-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("wire")).unwrap();
    fs::create_dir_all(dir.join("proxy")).unwrap();
    let lib = "pub mod wire;\npub mod proxy;\npub mod a;\npub mod b;\npub(crate) mod c;\n";
    fs::write(dir.join("lib.rs"), lib).unwrap();
    fs::write(dir.join("c.rs"), "pub fn z() {}\n").unwrap();
    fs::write(dir.join("wire/mod.rs"), "pub mod body;\n").unwrap();
    fs::write(dir.join("wire/body.rs"), "pub fn f() { crate::proxy::state::g(); }\n").unwrap();
    fs::write(dir.join("proxy/mod.rs"), "pub mod state;\n").unwrap();
    fs::write(dir.join("proxy/state.rs"), "use crate::wire::body;\npub fn g() { body::f(); }\n")
        .unwrap();
    fs::write(dir.join("a.rs"), "pub fn x() { crate::b::y(); }\n").unwrap();
    fs::write(dir.join("b.rs"), "pub fn y() { crate::a::x(); }\n").unwrap();
    let floors = declared_floors("x\n```floors\nwire\na b\nproxy\nc\n```\n");
    assert_eq!(floors.len(), 4);
    let found = floor_violations(&dir, &floors);
    let joined = found.join("\n");
    assert!(
        joined
            .contains("src/wire/body.rs (floor 1, wire) uses src/proxy/state.rs (floor 3, proxy)"),
        "{joined}"
    );
    assert!(joined.contains("src/a.rs (floor 2, a) uses src/b.rs (floor 2, b)"), "{joined}");
    assert!(joined.contains("src/b.rs (floor 2, b) uses src/a.rs (floor 2, a)"), "{joined}");
    assert!(!joined.contains("(floor 3, proxy) uses"), "a downward import is fine: {joined}");
    assert_eq!(found.len(), 3, "{joined}");
    let fewer = declared_floors("```floors\nwire\nproxy\n```\n");
    let found = floor_violations(&dir, &fewer);
    assert!(found.iter().any(|f| f.contains("`mod a`, which has no floor")), "{found:?}");
    assert!(found.iter().any(|f| f.contains("`mod c`, which has no floor")), "{found:?}");
    let _ = fs::remove_dir_all(&dir);
}

/// The picture of the floors in docs/architecture.md, drawn from the
/// crates' floors and the root's declared ones: one band per floor,
/// bottom up.
fn floors_svg(floors: &[Vec<String>]) -> String {
    let crates: [(&str, bool); 3] = [
        ("crates/base", true),
        ("crates/policy · crates/store · crates/robots", true),
        ("crates/fleet", true),
    ];
    let mut bands: Vec<(String, bool)> = crates.iter().map(|(n, c)| (n.to_string(), *c)).collect();
    bands.extend(floors.iter().map(|f| (f.join(" · "), false)));
    let (w, h, gap) = (440, 26, 4);
    let height = bands.len() * (h + gap) + gap;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{height}\" \
         font-family=\"sans-serif\" font-size=\"13\">\n"
    );
    for (i, (name, is_crate)) in bands.iter().enumerate() {
        let y = height - (i + 1) * (h + gap);
        let (fill, label) =
            if *is_crate { ("#d9d9d9", name.clone()) } else { ("#cfe2f3", format!("src/ {name}")) };
        svg.push_str(&format!(
            "<rect x=\"4\" y=\"{y}\" width=\"{}\" height=\"{h}\" rx=\"4\" fill=\"{fill}\"/>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{label}</text>\n",
            w - 8,
            w / 2,
            y + 17
        ));
    }
    svg.push_str("</svg>\n");
    svg
}

/// docs/architecture-floors.svg is the picture of the declared floors
/// (`CRAWLCACHE_WRITE_DOCS=1` rewrites it).
#[test]
fn the_picture_of_the_floors_is_up_to_date() {
    let doc =
        fs::read_to_string(root().join("docs/architecture.md")).expect("docs/architecture.md");
    let svg = floors_svg(&declared_floors(&doc));
    let path = root().join("docs/architecture-floors.svg");
    if std::env::var_os("CRAWLCACHE_WRITE_DOCS").is_some() {
        fs::write(&path, &svg).unwrap();
    }
    let on_disk = fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == svg,
        "{} is out of date: CRAWLCACHE_WRITE_DOCS=1 cargo test --test architecture rewrites it",
        path.display()
    );
}

/// Most `Result<_, String>` the code may hold (issue 42).
const MAX_STRING_ERRORS: usize = 20;

/// Where a `Result<_, String>` may stand: the message ends at a person, as
/// a command's last words (`src/cli/`, `src/main.rs`) or as a
/// configuration error naming the key (`src/config.rs`, `src/config/`).
/// Paths relative to the workspace root; a directory ends in `/`.
const STRING_ERRORS_ALLOWED_IN: &[&str] =
    &["src/cli/", "src/config.rs", "src/config/", "src/main.rs"];

/// The lines (1-based) and text of every `Result<_, String>` in `code`
/// (the error type `String`, whatever the value type; one per line at
/// most, as `grep` counts them).
fn string_errors(code: &str) -> Vec<(usize, String)> {
    let re = regex::Regex::new(r"Result<[^;{]*, String>").unwrap();
    code.lines()
        .enumerate()
        .filter(|(_, l)| re.is_match(l))
        .map(|(i, l)| (i + 1, l.trim().to_string()))
        .collect()
}

/// Typed errors wherever a caller may branch on one (issue 42): every
/// `Result<_, String>` in the code of `src/` and `crates/*/src/` (before
/// the tests) stands in [`STRING_ERRORS_ALLOWED_IN`], and there are at most
/// [`MAX_STRING_ERRORS`]. A new fallible function below the command line
/// returns an error enum (`thiserror`), whose `Display` is the message.
#[test]
fn string_errors_only_where_a_person_reads_them() {
    let mut misplaced = Vec::new();
    let mut all = Vec::new();
    for src in crate_sources() {
        for file in rust_files(&src) {
            let text = fs::read_to_string(&file).unwrap_or_default();
            let rel = file.strip_prefix(root()).unwrap_or(&file).display().to_string();
            for (line, code) in string_errors(&code_before_tests(&text)) {
                let allowed = STRING_ERRORS_ALLOWED_IN.iter().any(|p| rel.starts_with(p));
                if !allowed {
                    misplaced.push(format!("{rel}:{line}: {code}"));
                }
                all.push(format!("{rel}:{line}"));
            }
        }
    }
    assert!(
        misplaced.is_empty(),
        "`Result<_, String>` outside the command line and the configuration (give the error a type, a thiserror enum naming what failed):\n{}",
        misplaced.join("\n")
    );
    assert!(
        all.len() <= MAX_STRING_ERRORS,
        "{} `Result<_, String>` (at most {MAX_STRING_ERRORS}); give some a type:\n{}",
        all.len(),
        all.join("\n")
    );
}

/// The counter above finds the error type `String` whatever the value
/// type, not a `String` value with another error, and not in tests.
#[test]
fn the_string_error_counter_finds_string_errors_only() {
    let text = "fn a() -> Result<(u16, Vec<u8>), String> {}\n\
                fn b() -> Result<String, io::Error> {}\n\
                fn c() -> io::Result<Result<(), String>> {}\n\
                // fn d() -> Result<(), String>\n\
                #[cfg(test)]\nmod tests {\n    fn e() -> Result<(), String> {}\n}\n";
    let found: Vec<usize> =
        string_errors(&code_before_tests(text)).into_iter().map(|(l, _)| l).collect();
    assert_eq!(found, vec![1, 3]);
}
