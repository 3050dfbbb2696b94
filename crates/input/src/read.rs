//! Reading workload files: folders recursively, YAML (several documents) or JSON, `v1 List`s flattened.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;
use stowage_core::json::Stopped;

use super::InputError;
use crate::limits::Limits;

/// Where an object came from, for error messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    pub file: PathBuf,
    /// 1-based document number within a multi-document YAML file.
    pub doc: usize,
    /// 0-based index within a `List`.
    pub item: Option<usize>,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if self.doc > 1 {
            write!(f, " (document {})", self.doc)?;
        }
        if let Some(i) = self.item {
            write!(f, " items[{i}]")?;
        }
        Ok(())
    }
}

/// One Kubernetes object as read, before typing.
#[derive(Clone, Debug)]
pub struct RawObject {
    pub source: Source,
    pub api_version: String,
    pub kind: String,
    pub value: Value,
}

impl RawObject {
    pub fn name(&self) -> String {
        let md = &self.value["metadata"];
        let name = md["name"].as_str().or_else(|| md["generateName"].as_str()).unwrap_or("<unnamed>");
        match md["namespace"].as_str() {
            Some(ns) => format!("{ns}/{name}"),
            None => name.to_string(),
        }
    }

    pub fn describe(&self) -> String {
        format!("{} {}", self.kind, self.name())
    }
}

/// Expands folders (recursively, in name order) into files ending in .yaml, .yml or .json. Scenario files
/// of `stowage simulate` (docs/formats.md §4) found in a folder are skipped: they live beside the
/// manifests they drive.
pub fn expand_paths(paths: &[PathBuf]) -> Result<Vec<PathBuf>, InputError> {
    let mut out = Vec::new();
    for p in paths {
        collect(p, &mut out, true)?;
    }
    // A file named twice (directly, or also through its folder) would double its objects.
    let mut seen = std::collections::HashMap::new();
    for f in &out {
        let key = std::fs::canonicalize(f).unwrap_or_else(|_| f.clone());
        if let Some(first) = seen.insert(key, f) {
            return Err(InputError::file(f, format!("named twice (also as {}); name each file once", first.display())));
        }
    }
    Ok(out)
}

fn collect(p: &Path, out: &mut Vec<PathBuf>, explicit: bool) -> Result<(), InputError> {
    let meta = std::fs::metadata(p).map_err(|e| InputError::file(p, format!("cannot read: {e}")))?;
    if meta.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(p).map_err(|e| InputError::file(p, format!("cannot list folder: {e}")))?.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for e in entries {
            collect(&e, out, false)?;
        }
    } else if explicit || is_manifest_name(p) && !is_scenario(p) {
        out.push(p.to_path_buf());
    }
    Ok(())
}

/// Names a folder contributes: `.yaml`, `.yml`, `.json`, each maybe gzip-compressed (`.json.gz`).
fn is_manifest_name(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let name = name.strip_suffix(".gz").unwrap_or(name);
    [".yaml", ".yml", ".json"].iter().any(|x| name.ends_with(x))
}

/// Reads a file as text, gunzipping names ending in `.gz` (the benchmark corpus stores its workloads
/// so), with the default [`Limits`].
pub fn read_text(path: &Path) -> Result<String, InputError> {
    read_text_limited(path, Limits::default().max_input_bytes)
}

/// Reads a file as text of at most `max_bytes` bytes (after decompression: every member of a
/// multi-member gzip file, as `gunzip` reads it). A larger file is an error that names the limit, read
/// no further than one byte past it, so a gzip bomb costs `max_bytes` of memory, not its expansion.
pub fn read_text_limited(path: &Path, max_bytes: u64) -> Result<String, InputError> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| InputError::file(path, format!("cannot read: {e}")))?;
    let gz = path.extension().and_then(|e| e.to_str()) == Some("gz");
    let reader: Box<dyn Read> = if gz { Box::new(flate2::read::MultiGzDecoder::new(std::io::BufReader::new(f))) } else { Box::new(f) };
    let mut bytes = Vec::new();
    reader.take(max_bytes.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| InputError::file(path, if gz { format!("cannot decompress: {e}") } else { format!("cannot read: {e}") }))?;
    if bytes.len() as u64 > max_bytes {
        let what = if gz { "decompressed, " } else { "" };
        return Err(InputError::file(
            path,
            format!("larger than the input limit of {max_bytes} bytes ({what}all files of the run together); split the workload, or raise the limit with --max-input-bytes if the file is genuine"),
        ));
    }
    String::from_utf8(bytes).map_err(|e| InputError::file(path, format!("not UTF-8 text: {e}")))
}

/// Whether a file is a stowage scenario (a top-level `schema: stowage.dev/scenario/...` line).
/// Only the head of a plain YAML file is read: the key is written first (docs/formats.md §4), and a
/// folder's manifests are read in full once more when they load.
fn is_scenario(p: &Path) -> bool {
    use std::io::BufRead;
    if p.extension().is_some_and(|e| e == "gz" || e == "json") {
        return false;
    }
    let Ok(f) = std::fs::File::open(p) else { return false };
    std::io::BufReader::new(f).lines().take(64).map_while(Result::ok).any(|l| l.starts_with("schema: stowage.dev/scenario/"))
}

/// Parses one file's text into raw objects, with the default [`Limits`].
pub fn parse_text(file: &Path, text: &str) -> Result<Vec<RawObject>, InputError> {
    parse_text_with(file, text, &Limits::default())
}

/// Parses one file's text into raw objects. JSON is one document with no key twice
/// (`stowage_core::json`); YAML runs under the parser budget of `limits` (aliases, anchors, nesting).
pub fn parse_text_with(file: &Path, text: &str, limits: &Limits) -> Result<Vec<RawObject>, InputError> {
    let mut out = Vec::new();
    for_each_object(file, text, limits, &mut |raw| out.push(raw))?;
    Ok(out)
}

/// Parses one file's text, as [`parse_text_with`] does, and hands each object to `f` in order. A large
/// JSON List ([`PRECOUNT_BYTES`] or more; its kind is read first, in a light pass, since kubectl writes
/// `items` before `kind`) is read item by item, each item handed over before the next is read, so that
/// the whole document never exists as one tree. On an error, the objects handed over before it are of
/// no use.
pub fn for_each_object(file: &Path, text: &str, limits: &Limits, f: &mut dyn FnMut(RawObject)) -> Result<(), InputError> {
    let source = Source { file: file.to_path_buf(), doc: 1, item: None };
    if is_json(file, text) {
        if text.len() < PRECOUNT_BYTES || !kind_of(text).is_some_and(|k| k.ends_with("List")) {
            let doc = stowage_core::json::parse(text).map_err(|e| InputError::file(file, format!("invalid JSON: {e}")))?;
            return flatten(doc, source, f);
        }
        let top = stowage_core::json::parse_items(text, &mut |j, item| {
            let s = Source { item: Some(j), ..source.clone() };
            if !item.is_object() {
                return Err(InputError::at(&s, None, None, "a List item must be an object"));
            }
            flatten(item, s, f)
        });
        return match top {
            Ok(top) => flatten(top, source, f),
            Err(Stopped::Json(e)) => Err(InputError::file(file, format!("invalid JSON: {e}"))),
            Err(Stopped::Item(e)) => Err(e),
        };
    }
    let docs: Vec<Value> = serde_saphyr::from_multiple_with_options(text, limits.yaml_options()).map_err(|e| InputError::file(file, format!("invalid YAML: {e}")))?;
    for (i, doc) in docs.into_iter().enumerate() {
        let source = Source { doc: i + 1, ..source.clone() };
        flatten(doc, source, f)?;
    }
    Ok(())
}

/// Whether an object is a List whose items are its objects.
fn is_list(m: &serde_json::Map<String, Value>) -> bool {
    let kind = m.get("kind").and_then(Value::as_str).unwrap_or("");
    kind == "List" || kind.ends_with("List") && m.contains_key("items")
}

/// JSON texts at least this long get a first, light pass that counts their Pods ([`count_json_pods`])
/// before the full parse: a 1,000,000-pod List (221 MB) took 17 s and 8.7 GB to parse into a tree
/// before the pods limit refused it. Below it the full parse is cheap enough to count from.
pub const PRECOUNT_BYTES: usize = 8 << 20;

/// Just enough of an object to count Pods: its kind and, for a List, its items' kinds. serde skips
/// every other field without building it.
#[derive(serde::Deserialize)]
struct KindOnly {
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    items: Option<Vec<KindOnly>>,
}

impl KindOnly {
    fn pods(&self) -> usize {
        let own = usize::from(self.kind.as_deref() == Some("Pod"));
        own + self.items.as_ref().map_or(0, |items| items.iter().map(KindOnly::pods).sum())
    }
}

/// The top-level kind of a JSON text, read without building the document; None if it has none or the
/// text does not read as one object.
fn kind_of(text: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Kind {
        #[serde(default)]
        kind: Option<String>,
    }
    serde_json::from_str::<Kind>(text).ok().and_then(|k| k.kind)
}

/// The Pods a JSON text lists (top level or in Lists), counted without building the document; None if
/// the text does not read as one object (the full parse then says why).
pub fn count_json_pods(text: &str) -> Option<usize> {
    serde_json::from_str::<KindOnly>(text).ok().map(|k| k.pods())
}

/// Whether `file` is read as JSON (by its name, or a text that opens with `{`).
pub fn is_json(file: &Path, text: &str) -> bool {
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.ends_with(".json") || name.ends_with(".json.gz") || text.trim_start().starts_with('{')
}

/// Moves the objects of `doc` into `out`, a List's items one by one (moved, not copied: a
/// 100,000-pod List was cloned item by item and then dropped whole, about 1 s of the 15 s a greedy
/// plan of Karpenter's shapes took).
fn flatten(mut doc: Value, source: Source, out: &mut dyn FnMut(RawObject)) -> Result<(), InputError> {
    match doc {
        Value::Null => Ok(()),
        Value::Object(ref mut m) => {
            let kind = m.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
            let api_version = m.get("apiVersion").and_then(Value::as_str).unwrap_or("").to_string();
            if kind.is_empty() && m.get("schema").and_then(Value::as_str).is_some_and(|s| s.starts_with("stowage.dev/scenario/")) {
                return Err(InputError::at(&source, None, Some("schema"), "a stowage scenario, not a Kubernetes manifest: run it with `stowage simulate`"));
            }
            if kind.is_empty() {
                return Err(InputError::at(&source, None, Some("kind"), "missing kind"));
            }
            if is_list(m) {
                let Some(Value::Array(items)) = m.get_mut("items") else {
                    return Err(InputError::at(&source, None, Some("items"), "a List needs an items array"));
                };
                for (j, item) in std::mem::take(items).into_iter().enumerate() {
                    let s = Source { item: Some(j), ..source.clone() };
                    if !item.is_object() {
                        return Err(InputError::at(&s, None, None, "a List item must be an object"));
                    }
                    flatten(item, s, out)?;
                }
                return Ok(());
            }
            if api_version.is_empty() {
                return Err(InputError::at(&source, Some(kind), Some("apiVersion"), "missing apiVersion"));
            }
            out(RawObject { source, api_version, kind, value: doc });
            Ok(())
        }
        _ => Err(InputError::at(&source, None, None, "a document must be a Kubernetes object (a mapping)")),
    }
}
