//! Where the configuration comes from, and where each value came from.
//!
//! The built-in defaults (`config/crawlcache.toml`) come first; then, each
//! laid over the last key by key, a file (`--config FILE`), environment
//! variables `CRAWLCACHE_SECTION__KEY=value` (for containers and units
//! that set no file), and command-line flags (`--data-dir`). Every key a
//! layer sets must exist in the defaults (except inside [`OPEN_TABLES`]);
//! an unknown key is an error naming the layer, the line of a file, and
//! the nearest known key ("did you mean"). [`Layered::sources`] records,
//! for every key, the layer its value came from (`crawlcache config show`).

use super::{Config, ConfigError, DEFAULT_CONFIG};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The prefix of the environment variables that set configuration keys:
/// `CRAWLCACHE_SERVER__LISTEN` is `server.listen`, sections and keys
/// separated by two underscores.
pub const ENV_PREFIX: &str = "CRAWLCACHE_";

/// What every message about an unknown key ends with: where the keys are
/// listed for a user who has the binary and no source tree.
pub const KEYS_HINT: &str =
    "`crawlcache config defaults` prints every key with its default and meaning";

/// Tables whose keys are free-form (host names and the like): keys inside
/// them are not checked against the defaults.
pub const OPEN_TABLES: &[&str] = &["robots.hosts"];

/// Where a configuration value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The built-in defaults.
    Default,
    /// A configuration file, and the line of the key when known.
    File {
        /// The file.
        path: PathBuf,
        /// The key's line, counted from 1.
        line: Option<usize>,
    },
    /// An environment variable (its name).
    Env(String),
    /// A command-line flag (its name, `--data-dir`).
    Flag(String),
}

impl Source {
    /// `default`, `file`, `environment` or `flag`: the kind alone, for
    /// machine-readable output.
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Default => "default",
            Source::File { .. } => "file",
            Source::Env(_) => "environment",
            Source::Flag(_) => "flag",
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File { path, line: Some(l) } => write!(f, "file {}:{l}", path.display()),
            Source::File { path, line: None } => write!(f, "file {}", path.display()),
            Source::Env(name) => write!(f, "environment {name}"),
            Source::Flag(name) => write!(f, "flag {name}"),
        }
    }
}

/// One layer laid over the defaults: its keys, where they came from, and
/// for a file the line of each key.
#[derive(Debug, Clone)]
pub struct Layer {
    source: Source,
    table: toml::Table,
    /// Dotted key path -> line (files only).
    lines: BTreeMap<String, usize>,
    /// For an environment variable: its value as written, used as a string
    /// where the default is a string and the value read as TOML is not
    /// (`CRAWLCACHE_SERVER__ADMIN_TOKEN=12345`).
    raw: Option<String>,
}

impl Layer {
    /// The file at `path`. Errors: it cannot be read or is not TOML (the
    /// message names the file).
    pub fn file(path: &Path) -> Result<Layer, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError(format!("cannot read configuration file {}: {e}", path.display()))
        })?;
        Layer::file_text(path, &text)
    }

    /// A file's `text`, named `path` in messages. Errors: not TOML (the
    /// message names the file and the line).
    pub fn file_text(path: &Path, text: &str) -> Result<Layer, ConfigError> {
        let table: toml::Table =
            toml::from_str(text).map_err(|e| ConfigError(format!("{}: {e}", path.display())))?;
        Ok(Layer {
            source: Source::File { path: path.to_path_buf(), line: None },
            table,
            lines: key_lines(text),
            raw: None,
        })
    }

    /// One layer per `CRAWLCACHE_SECTION__KEY=value` among `vars` (in name
    /// order): `CRAWLCACHE_SERVER__LISTEN=127.0.0.1:3130` sets
    /// `server.listen`. Names are case-insensitive; a name without `__`
    /// after the prefix (`CRAWLCACHE_BIN`) is not a key and is skipped. The
    /// value is read as a TOML value (`3130`, `true`, `["10.0.0.0/8"]`),
    /// else taken as a string.
    pub fn env(vars: impl IntoIterator<Item = (String, String)>) -> Vec<Layer> {
        let mut vars: Vec<(String, String)> =
            vars.into_iter().filter(|(k, _)| env_key(k).is_some()).collect();
        vars.sort();
        vars.into_iter()
            .filter_map(|(name, raw)| {
                let path = env_key(&name)?;
                let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
                    .ok()
                    .and_then(|mut t| t.remove("v"))
                    .unwrap_or(toml::Value::String(raw.clone()));
                Some(Layer {
                    source: Source::Env(name),
                    table: nest(&path, value),
                    lines: BTreeMap::new(),
                    raw: Some(raw),
                })
            })
            .collect()
    }

    /// The process environment's `CRAWLCACHE_SECTION__KEY` variables
    /// ([`Layer::env`]); variables whose name or value is not Unicode are
    /// skipped.
    pub fn from_environment() -> Vec<Layer> {
        Layer::env(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
        )
    }

    /// A command-line `flag` that sets the key at dotted `path` to `value`.
    pub fn flag(flag: &str, path: &str, value: toml::Value) -> Layer {
        let path: Vec<String> = path.split('.').map(str::to_string).collect();
        Layer {
            source: Source::Flag(flag.to_string()),
            table: nest(&path, value),
            lines: BTreeMap::new(),
            raw: None,
        }
    }

    /// Where this layer's key at dotted `path` came from (a file's with
    /// its line).
    fn source_of(&self, path: &str) -> Source {
        match &self.source {
            Source::File { path: file, .. } => {
                Source::File { path: file.clone(), line: self.lines.get(path).copied() }
            }
            other => other.clone(),
        }
    }

    /// The layer in messages: `my.toml`, `environment variable NAME`.
    fn name(&self) -> String {
        match &self.source {
            Source::Default => "built-in defaults".into(),
            Source::File { path, .. } => path.display().to_string(),
            Source::Env(name) => format!("environment variable {name}"),
            Source::Flag(name) => format!("flag {name}"),
        }
    }

    /// The layer and the place of `path` in it: `my.toml:12`, `environment
    /// variable NAME`.
    fn place(&self, path: &str) -> String {
        match self.lines.get(path) {
            Some(line) => format!("{}:{line}", self.name()),
            None => self.name(),
        }
    }
}

/// The dotted key path of an environment variable's name, lower-cased:
/// `CRAWLCACHE_SERVER__LISTEN` -> `["server", "listen"]`. `None` for a
/// name without the prefix or without `__` after it.
fn env_key(name: &str) -> Option<Vec<String>> {
    let rest = name
        .get(..ENV_PREFIX.len())
        .filter(|p| p.eq_ignore_ascii_case(ENV_PREFIX))
        .map(|_| &name[ENV_PREFIX.len()..])?;
    let parts: Vec<String> = rest.split("__").map(|p| p.to_ascii_lowercase()).collect();
    (parts.len() >= 2 && parts.iter().all(|p| !p.is_empty())).then_some(parts)
}

/// `value` at `path` in a table of nested tables.
fn nest(path: &[String], value: toml::Value) -> toml::Table {
    let mut value = value;
    for seg in path.iter().skip(1).rev() {
        let mut t = toml::Table::new();
        t.insert(seg.clone(), value);
        value = toml::Value::Table(t);
    }
    let mut top = toml::Table::new();
    if let Some(first) = path.first() {
        top.insert(first.clone(), value);
    }
    top
}

/// The line (1-based) of every key of a TOML `text`, by dotted path
/// (tables too: a `[section]` header's line). Empty when it does not parse.
fn key_lines(text: &str) -> BTreeMap<String, usize> {
    fn walk(
        t: &dyn toml_edit::TableLike,
        prefix: &str,
        text: &str,
        out: &mut BTreeMap<String, usize>,
    ) {
        for (name, _) in t.iter() {
            let Some((key, item)) = t.get_key_value(name) else { continue };
            let path =
                if prefix.is_empty() { name.to_string() } else { format!("{prefix}.{name}") };
            if let Some(span) = key.span() {
                out.entry(path.clone()).or_insert_with(|| {
                    text[..span.start.min(text.len())].matches('\n').count() + 1
                });
            }
            if let Some(sub) = item.as_table_like() {
                walk(sub, &path, text, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    if let Ok(doc) = toml_edit::ImDocument::parse(text) {
        walk(doc.as_table(), "", text, &mut out);
    }
    out
}

/// The effective configuration and where each of its values came from.
#[derive(Debug, Clone)]
pub struct Layered {
    /// The configuration.
    pub config: Config,
    /// Every key's value after all layers (the defaults' shape).
    pub table: toml::Table,
    /// Dotted key path -> the layer that gave the value (keys absent are
    /// defaults).
    pub sources: BTreeMap<String, Source>,
}

impl Layered {
    /// Where the value of dotted `path` came from.
    pub fn source(&self, path: &str) -> Source {
        self.sources.get(path).cloned().unwrap_or(Source::Default)
    }

    /// Every leaf key, its value and its source, in the order of the
    /// sections and then of the keys (sorted by name).
    pub fn entries(&self) -> Vec<Entry> {
        let mut out = Vec::new();
        let mut walk = |segs: &[String], v: &toml::Value| {
            let key = segs.join(".");
            let source = self.source(&key);
            out.push(Entry { key, segments: segs.to_vec(), value: v.clone(), source });
        };
        leaf_segments(&self.table, &mut Vec::new(), &mut walk);
        out
    }
}

/// One key of the effective configuration ([`Layered::entries`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The dotted path (`server.listen`).
    pub key: String,
    /// The path's keys, one by one (a key may hold dots:
    /// `robots.hosts."a.example".fresh`).
    pub segments: Vec<String>,
    /// The value.
    pub value: toml::Value,
    /// Where it came from.
    pub source: Source,
}

/// Calls `f` with every leaf of `t` (a value that is not a table, or an
/// empty table) and its keys from the top.
fn leaf_segments(
    t: &toml::Table,
    prefix: &mut Vec<String>,
    f: &mut dyn FnMut(&[String], &toml::Value),
) {
    for (k, v) in t {
        prefix.push(k.clone());
        match v {
            toml::Value::Table(sub) if !sub.is_empty() => leaf_segments(sub, prefix, f),
            _ => f(prefix, v),
        }
        prefix.pop();
    }
}

/// Calls `f` with every leaf of `t` (a value that is not a table, or an
/// empty table) and its dotted path.
fn leaves(t: &toml::Table, prefix: &str, f: &mut dyn FnMut(&str, &toml::Value)) {
    for (k, v) in t {
        let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        match v {
            toml::Value::Table(sub) if !sub.is_empty() => leaves(sub, &path, f),
            _ => f(&path, v),
        }
    }
}

/// Lays `user` over `base`, recording the source of every leaf set and
/// the dotted path of every key `base` does not have (outside open tables).
fn merge(
    base: &mut toml::Table,
    user: &toml::Table,
    prefix: &str,
    layer: &Layer,
    sources: &mut BTreeMap<String, Source>,
    unknown: &mut Vec<String>,
) {
    for (k, v) in user {
        let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        let open = OPEN_TABLES.contains(&prefix)
            || OPEN_TABLES.iter().any(|t| prefix.starts_with(&format!("{t}.")));
        match (base.get_mut(k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(u)) => {
                merge(b, u, &path, layer, sources, unknown)
            }
            (Some(slot), v) => {
                let v = match (&*slot, v, &layer.raw) {
                    // A string key given a value that reads as another TOML type.
                    (toml::Value::String(_), v, Some(raw)) if !v.is_str() => {
                        toml::Value::String(raw.clone())
                    }
                    _ => v.clone(),
                };
                record(&path, &v, layer, sources);
                *slot = v;
            }
            (None, v) if open || OPEN_TABLES.contains(&path.as_str()) => {
                record(&path, v, layer, sources);
                base.insert(k.clone(), v.clone());
            }
            (None, _) => unknown.push(path),
        }
    }
}

/// Records `layer` as the source of `v` at `path` and of every leaf in it.
fn record(path: &str, v: &toml::Value, layer: &Layer, sources: &mut BTreeMap<String, Source>) {
    sources.retain(|k, _| !(k == path || k.starts_with(&format!("{path}."))));
    match v {
        toml::Value::Table(t) if !t.is_empty() => leaves(t, path, &mut |p, _| {
            sources.insert(p.to_string(), layer.source_of(p));
        }),
        _ => {
            sources.insert(path.to_string(), layer.source_of(path));
        }
    }
}

/// "; did you mean `x`?" for an unknown key at dotted `path`: the known
/// key of the same name in another section, else the key nearest to it in
/// the same table (by Jaro-Winkler similarity, at least 0.8).
pub fn suggestion(defaults: &toml::Table, path: &str) -> String {
    let (parent, last) = path.rsplit_once('.').unwrap_or(("", path));
    let mut known: Vec<String> = Vec::new();
    leaves(defaults, "", &mut |p, _| known.push(p.to_string()));
    // Section names too (an unknown top-level table).
    known.extend(defaults.keys().cloned());
    let siblings = known.iter().filter(|k| k.rsplit_once('.').map_or("", |(p, _)| p) == parent);
    let best = known
        .iter()
        .find(|k| k.rsplit('.').next() == Some(last) && k.as_str() != path)
        .cloned()
        .or_else(|| {
            siblings
                .map(|k| (strsim::jaro_winkler(last, k.rsplit('.').next().unwrap_or(k)), k))
                .filter(|(score, _)| *score >= 0.8)
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(_, k)| k.clone())
        });
    best.map(|k| format!("; did you mean `{k}`?")).unwrap_or_default()
}

impl Config {
    /// Loads the defaults, then the file at `path` if given (no
    /// environment variables: [`from_layers`] takes those).
    ///
    /// Errors: the file cannot be read, is not TOML, has a key the defaults
    /// lack, or a value of the wrong shape. The message names the file, the
    /// line and the key.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let layers = match path {
            None => vec![],
            Some(p) => vec![Layer::file(p)?],
        };
        Ok(from_layers(&layers)?.config)
    }

    /// Builds the configuration from the defaults and an optional user file
    /// (`(name, text)`; the name is used in error messages).
    pub fn from_sources(user: Option<(&Path, &str)>) -> Result<Config, ConfigError> {
        let layers = match user {
            None => vec![],
            Some((p, text)) => vec![Layer::file_text(p, text)?],
        };
        Ok(from_layers(&layers)?.config)
    }
}

/// The configuration from the defaults and `layers`, laid over them in
/// order, with the source of every value.
///
/// Errors: a layer has a key the defaults lack (the message names the
/// layer, a file's line, and suggests the nearest key), a value of the
/// wrong shape, or a value the checks refuse; each message names the key
/// and where its value came from.
pub fn from_layers(layers: &[Layer]) -> Result<Layered, ConfigError> {
    let defaults: toml::Table = toml::from_str(DEFAULT_CONFIG)
        .map_err(|e| ConfigError(format!("built-in defaults: {e}")))?;
    let mut merged = defaults.clone();
    let mut sources = BTreeMap::new();
    for layer in layers {
        let mut unknown = Vec::new();
        merge(&mut merged, &layer.table, "", layer, &mut sources, &mut unknown);
        if let Some(first) = unknown.first() {
            let more = match &unknown[1..] {
                [] => String::new(),
                rest => format!(
                    " (and {} more: {})",
                    rest.len(),
                    rest.iter()
                        .map(|k| format!("`{k}` at {}", layer.place(k)))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            return Err(ConfigError(format!(
                "{}: unknown key `{first}`{}{more} ({KEYS_HINT})",
                layer.place(first),
                suggestion(&defaults, first)
            )));
        }
    }
    let config: Config = match toml::Value::Table(merged.clone()).try_into() {
        Ok(c) => c,
        Err(e) => {
            let e: toml::de::Error = e;
            let msg = e.message().trim().to_string();
            return Err(ConfigError(match first_bad_key(&defaults, &merged, &sources) {
                Some(k) => {
                    format!("{}: bad value for key `{k}`: {msg}", place_of(layers, &sources, &k))
                }
                None => format!(
                    "{}: bad value: {msg}",
                    layers.iter().map(Layer::name).collect::<Vec<_>>().join(", ")
                ),
            }));
        }
    };
    if let Err(m) = config.validate() {
        // The message names the key between backticks: say where its value came from.
        let key = m.split('`').nth(1).unwrap_or("");
        return Err(ConfigError(format!("{}: {m}", place_of(layers, &sources, key))));
    }
    Ok(Layered { config, table: merged, sources })
}

/// The dotted path of the first key a layer set (`sources`) whose value in
/// `merged`, laid alone over the defaults, does not deserialize (toml's
/// messages for a mistyped value do not always name the key).
fn first_bad_key(
    defaults: &toml::Table,
    merged: &toml::Table,
    sources: &BTreeMap<String, Source>,
) -> Option<String> {
    for path in sources.keys() {
        let segs: Vec<&str> = path.split('.').collect();
        let mut value = Some(merged);
        let mut leaf = None;
        for (i, seg) in segs.iter().enumerate() {
            let Some(t) = value else { break };
            match t.get(*seg) {
                Some(toml::Value::Table(next)) if i + 1 < segs.len() => value = Some(next),
                Some(v) if i + 1 == segs.len() => leaf = Some(v.clone()),
                _ => value = None,
            }
        }
        let Some(leaf) = leaf else { continue };
        let mut t = defaults.clone();
        let mut cur = &mut t;
        for (i, seg) in segs.iter().enumerate() {
            if i + 1 == segs.len() {
                cur.insert(seg.to_string(), leaf.clone());
            } else {
                let entry = cur
                    .entry(seg.to_string())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                match entry {
                    toml::Value::Table(next) => cur = next,
                    _ => return Some(path.clone()),
                }
            }
        }
        if toml::Value::Table(t).try_into::<Config>().is_err() {
            return Some(path.clone());
        }
    }
    None
}

/// Where the value of `key` came from, for a message: `my.toml:3`,
/// `environment variable NAME`, `built-in defaults`.
fn place_of(layers: &[Layer], sources: &BTreeMap<String, Source>, key: &str) -> String {
    let found = sources.get(key).or_else(|| {
        sources.iter().find(|(k, _)| k.starts_with(&format!("{key}."))).map(|(_, s)| s)
    });
    match found {
        Some(Source::File { path, line: Some(l) }) => format!("{}:{l}", path.display()),
        Some(Source::File { path, line: None }) => path.display().to_string(),
        Some(Source::Env(name)) => format!("environment variable {name}"),
        Some(Source::Flag(name)) => format!("flag {name}"),
        Some(Source::Default) | None => match layers.last() {
            Some(l) if key.is_empty() => l.name(),
            _ => "built-in defaults".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> Layer {
        Layer::file_text(Path::new("my.toml"), text).unwrap()
    }

    #[test]
    fn an_unknown_key_names_its_line_and_the_nearest_key() {
        let e = from_layers(&[file("[server]\nlog = \"info\"\n\n[cache]\nmax_sise = \"1GiB\"\n")])
            .unwrap_err()
            .0;
        assert!(
            e.starts_with(
                "my.toml:5: unknown key `cache.max_sise`; did you mean `cache.max_size`?"
            ),
            "{e}"
        );
        assert!(
            e.ends_with(&format!("({KEYS_HINT})")) && !e.contains("config/crawlcache.toml"),
            "{e}"
        );
        let e = from_layers(&[file("[sever]\nlisten = \"127.0.0.1:1\"\n")]).unwrap_err().0;
        assert!(e.starts_with("my.toml:1: unknown key `sever`; did you mean `server`?"), "{e}");
        // A key of another section.
        let e = from_layers(&[file("[server]\nmax_object_size = 5\n")]).unwrap_err().0;
        assert!(e.contains("did you mean `cache.max_object_size`?"), "{e}");
        // Nothing near: no suggestion.
        let e = from_layers(&[file("[cache]\nzzzzzz = 1\n")]).unwrap_err().0;
        assert!(!e.contains("did you mean"), "{e}");
    }

    #[test]
    fn environment_variables_set_keys_as_toml_values_or_strings() {
        let vars = [
            ("CRAWLCACHE_SERVER__LISTEN", "127.0.0.1:3130"),
            ("CRAWLCACHE_SERVER__THREADS", "3"),
            ("crawlcache_cache__max_size", "2GiB"),
            ("CRAWLCACHE_SERVER__ADMIN_TOKEN", "12345"),
            ("CRAWLCACHE_SERVER__ALLOW_CLIENTS", "[\"10.0.0.0/8\"]"),
            ("CRAWLCACHE_BIN", "/not/a/key"),
            ("OTHER__THING", "x"),
        ];
        let layers = Layer::env(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        assert_eq!(layers.len(), 5);
        let l = from_layers(&layers).unwrap();
        assert_eq!(l.config.server.listen, "127.0.0.1:3130".parse().unwrap());
        assert_eq!(l.config.server.threads, 3);
        assert_eq!(l.config.cache.max_size, 2 << 30);
        assert_eq!(l.config.server.admin_token, "12345");
        assert_eq!(l.config.server.allow_clients.len(), 1);
        assert_eq!(l.source("server.listen"), Source::Env("CRAWLCACHE_SERVER__LISTEN".into()));
        assert_eq!(l.source("server.log"), Source::Default);
        let e =
            from_layers(&Layer::env([("CRAWLCACHE_SERVR__LISTEN".to_string(), "1".to_string())]))
                .unwrap_err()
                .0;
        assert!(e.starts_with("environment variable CRAWLCACHE_SERVR__LISTEN: unknown key `servr`; did you mean `server`?"), "{e}");
        let e = from_layers(&Layer::env([(
            "CRAWLCACHE_SERVER__THREADS".to_string(),
            "many".to_string(),
        )]))
        .unwrap_err()
        .0;
        assert!(e.starts_with("environment variable CRAWLCACHE_SERVER__THREADS: bad value for key `server.threads`"), "{e}");
    }

    #[test]
    fn each_value_names_the_last_layer_that_set_it() {
        let f = file("[server]\nlog = \"debug\"\nthreads = 2\n[robots.hosts.\"a.example\"]\nfresh = \"1s\"\n");
        let env = Layer::env([("CRAWLCACHE_SERVER__THREADS".to_string(), "4".to_string())]);
        let flag =
            Layer::flag("--data-dir", "server.data_dir", toml::Value::String("/srv/d".into()));
        let mut layers = vec![f];
        layers.extend(env);
        layers.push(flag);
        let l = from_layers(&layers).unwrap();
        assert_eq!(l.source("server.log"), Source::File { path: "my.toml".into(), line: Some(2) });
        assert_eq!(l.source("server.threads"), Source::Env("CRAWLCACHE_SERVER__THREADS".into()));
        assert_eq!(l.source("server.data_dir"), Source::Flag("--data-dir".into()));
        assert_eq!(l.source("robots.hosts.a.example.fresh").kind(), "file");
        assert_eq!(l.config.server.threads, 4);
        let entries = l.entries();
        assert!(
            entries.iter().any(|e| e.key == "server.log"
                && e.value.as_str() == Some("debug")
                && e.source.to_string() == "file my.toml:2"),
            "{entries:?}"
        );
        let host = entries.iter().find(|e| e.key == "robots.hosts.a.example.fresh").unwrap();
        assert_eq!(host.segments, ["robots", "hosts", "a.example", "fresh"]);
    }

    #[test]
    fn a_bad_value_from_a_file_names_its_line() {
        let e = from_layers(&[file("# comment\n[cache]\nmax_size = \"lots\"\n")]).unwrap_err().0;
        assert!(e.starts_with("my.toml:3: bad value for key `cache.max_size`"), "{e}");
        let e = from_layers(&[file("[cache]\nheuristic_fraction = 2.0\n")]).unwrap_err().0;
        assert!(e.starts_with("my.toml:2: bad value for key `cache.heuristic_fraction`"), "{e}");
    }
}
