//! The benchmark corpus: `benches/workloads/index.yaml` (`stowage.dev/bench-corpus/v1`) names every
//! recorded batch, its catalog and a one-line description, and every trace replay. Workload files may
//! be gzip-compressed (`*.json.gz`, `*.yaml.gz`); they are decompressed in memory and read with the
//! ordinary workload loader, so a corpus file is an ordinary workload once unpacked.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use stowage_core::domain::catalog::Catalog;
use stowage_input::catalog;
use stowage_input::{self, Workload};

pub const SCHEMA: &str = "stowage.dev/bench-corpus/v1";

/// The standard corpus index, relative to the repository root.
pub const STANDARD_INDEX: &str = "benches/workloads/index.yaml";

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IndexFile {
    schema: String,
    #[serde(default)]
    workloads: Vec<EntryFile>,
    #[serde(default)]
    replays: Vec<ReplayFile>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EntryFile {
    name: String,
    group: String,
    description: String,
    files: Vec<String>,
    #[serde(default = "default_catalog_ref")]
    catalog: String,
    #[serde(default)]
    peer_args: Vec<String>,
    #[serde(default = "yes")]
    standard: bool,
    /// How the files were made (a command), for people.
    #[serde(default)]
    generator: Option<String>,
}

fn default_catalog_ref() -> String {
    "default".into()
}

fn yes() -> bool {
    true
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReplayFile {
    name: String,
    description: String,
    /// The trace CSV (Alibaba openb columns), maybe gzip-compressed.
    trace: String,
    /// Workload files holding the NodePools (and EC2NodeClass) the replayed pods are planned into.
    nodepools: Vec<String>,
    #[serde(default = "default_catalog_ref")]
    catalog: String,
    /// Trace seconds: replay the pods created in [start, start + span).
    start: u64,
    span: u64,
    /// Batch window in seconds: pods arriving in one window are planned together at its end.
    window: u64,
    #[serde(default = "yes")]
    standard: bool,
}

/// Where a workload's instance types come from.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CatalogRef {
    /// The embedded us-east-1 catalog.
    Default,
    /// `catalog::generate::karpenter_benchmark(n)`, made in memory.
    KarpenterBenchmark(usize),
    File(PathBuf),
}

impl CatalogRef {
    fn parse(base: &Path, s: &str) -> Result<CatalogRef, String> {
        if s == "default" {
            return Ok(CatalogRef::Default);
        }
        if let Some(n) = s.strip_prefix("karpenter-benchmark:") {
            let n: usize = n.parse().map_err(|_| format!("catalog {s:?}: expected karpenter-benchmark:<number of types>"))?;
            if n == 0 {
                return Err(format!("catalog {s:?}: at least one type"));
            }
            return Ok(CatalogRef::KarpenterBenchmark(n));
        }
        Ok(CatalogRef::File(base.join(s)))
    }

    pub fn describe(&self) -> String {
        match self {
            CatalogRef::Default => "aws-us-east-1 (embedded)".into(),
            CatalogRef::KarpenterBenchmark(n) => format!("karpenter-benchmark-{n}"),
            CatalogRef::File(p) => p.display().to_string(),
        }
    }

    pub fn load(&self) -> Result<Arc<Catalog>, String> {
        match self {
            CatalogRef::Default => Ok(Arc::new(catalog::default_catalog().clone())),
            CatalogRef::KarpenterBenchmark(n) => {
                let text = catalog::generate::to_json(&catalog::generate::karpenter_benchmark(*n));
                catalog::parse(&self.describe(), &text).map(Arc::new).map_err(|e| e.to_string())
            }
            CatalogRef::File(p) => {
                let text = read_text(p)?;
                catalog::parse(&p.display().to_string(), &text).map(Arc::new).map_err(|e| e.to_string())
            }
        }
    }

    /// The catalog as a JSON or YAML text (for the Karpenter peer, which reads files).
    pub fn text(&self) -> Result<String, String> {
        match self {
            CatalogRef::Default => Ok(catalog::DEFAULT_JSON.to_string()),
            CatalogRef::KarpenterBenchmark(n) => Ok(catalog::generate::to_json(&catalog::generate::karpenter_benchmark(*n))),
            CatalogRef::File(p) => read_text(p),
        }
    }
}

/// One recorded batch of the corpus (or a workload named on the command line).
#[derive(Clone, Debug)]
pub struct Entry {
    pub name: String,
    pub group: String,
    pub description: String,
    pub files: Vec<PathBuf>,
    pub catalog: CatalogRef,
    /// Extra arguments for the Karpenter peer (the benchmark's `--concurrency 5`).
    pub peer_args: Vec<String>,
    pub standard: bool,
    pub generator: Option<String>,
}

/// A trace replay of the corpus.
#[derive(Clone, Debug)]
pub struct Replay {
    pub name: String,
    pub description: String,
    pub trace: PathBuf,
    pub nodepools: Vec<PathBuf>,
    pub catalog: CatalogRef,
    pub start: u64,
    pub span: u64,
    pub window: u64,
    pub standard: bool,
}

#[derive(Clone, Debug, Default)]
pub struct Corpus {
    pub workloads: Vec<Entry>,
    pub replays: Vec<Replay>,
}

/// Reads a corpus index. Paths in it are relative to the index's folder.
pub fn load_index(path: &Path) -> Result<Corpus, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    parse_index(path, &text)
}

pub(crate) fn parse_index(path: &Path, text: &str) -> Result<Corpus, String> {
    let f: IndexFile = serde_saphyr::from_str(text).map_err(|e| format!("{}: {e}", path.display()))?;
    if f.schema != SCHEMA {
        return Err(format!("{}: schema: expected {SCHEMA:?}, got {:?}", path.display(), f.schema));
    }
    let base = path.parent().unwrap_or(Path::new("."));
    let mut c = Corpus::default();
    let mut names = std::collections::BTreeSet::new();
    for (i, e) in f.workloads.into_iter().enumerate() {
        let at = |m: String| format!("{}: workloads[{i}] ({}): {m}", path.display(), e.name);
        if !names.insert(e.name.clone()) {
            return Err(at("duplicate name".into()));
        }
        if e.files.is_empty() {
            return Err(at("files: at least one file".into()));
        }
        c.workloads.push(Entry {
            name: e.name.clone(),
            group: e.group.clone(),
            description: e.description.clone(),
            files: e.files.iter().map(|f| base.join(f)).collect(),
            catalog: CatalogRef::parse(base, &e.catalog).map_err(at)?,
            peer_args: e.peer_args.clone(),
            standard: e.standard,
            generator: e.generator.clone(),
        });
    }
    for (i, r) in f.replays.into_iter().enumerate() {
        let at = |m: String| format!("{}: replays[{i}] ({}): {m}", path.display(), r.name);
        if !names.insert(r.name.clone()) {
            return Err(at("duplicate name".into()));
        }
        if r.window == 0 || r.span == 0 {
            return Err(at("window and span must be positive".into()));
        }
        c.replays.push(Replay {
            name: r.name.clone(),
            description: r.description.clone(),
            trace: base.join(&r.trace),
            nodepools: r.nodepools.iter().map(|f| base.join(f)).collect(),
            catalog: CatalogRef::parse(base, &r.catalog).map_err(at)?,
            start: r.start,
            span: r.span,
            window: r.window,
            standard: r.standard,
        });
    }
    Ok(c)
}

/// Reads a file as text, gunzipping names ending in `.gz`.
pub fn read_text(path: &Path) -> Result<String, String> {
    stowage_input::read::read_text(path).map_err(|e| e.to_string())
}

/// Writes `text` gzip-compressed (best compression; the header carries no name and no time, so the
/// bytes depend only on the text).
pub fn write_gz(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut enc = flate2::GzBuilder::new().mtime(0).write(Vec::new(), flate2::Compression::best());
    enc.write_all(text.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))?;
    let bytes = enc.finish().map_err(|e| format!("{}: {e}", path.display()))?;
    stowage_input::output::write_atomic(path, &bytes)
}

fn is_workload_file(p: &Path) -> bool {
    let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let n = n.strip_suffix(".gz").unwrap_or(n);
    n.ends_with(".yaml") || n.ends_with(".yml") || n.ends_with(".json")
}

fn collect(p: &Path, out: &mut Vec<PathBuf>, explicit: bool) -> Result<(), String> {
    let meta = std::fs::metadata(p).map_err(|e| format!("{}: cannot read: {e}", p.display()))?;
    if meta.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(p).map_err(|e| format!("{}: cannot list folder: {e}", p.display()))?.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for e in entries {
            collect(&e, out, false)?;
        }
    } else if explicit || is_workload_file(p) {
        out.push(p.to_path_buf());
    }
    Ok(())
}

/// Loads workload files and folders like `stowage plan` does, and also reads gzip-compressed files.
pub fn load_workload(paths: &[PathBuf]) -> Result<Workload, String> {
    let mut files = Vec::new();
    for p in paths {
        collect(p, &mut files, true)?;
    }
    let mut texts = Vec::new();
    for f in files {
        let text = read_text(&f)?;
        // The loader tells JSON from YAML by the name; report the file under its name without `.gz`.
        let shown = match f.to_str().and_then(|s| s.strip_suffix(".gz")) {
            Some(s) => PathBuf::from(s),
            None => f.clone(),
        };
        texts.push((shown, text));
    }
    // Strict: a corpus entry with a pod that cannot be scheduled as written is a broken entry, not a
    // batch with pods left pending (the benchmark measures planning, not input repair).
    stowage_input::load_texts(texts.iter().map(|(f, t)| (f.as_path(), t.as_str()))).and_then(stowage_input::Workload::strict).map_err(|e| e.to_string())
}

/// A `v1 List` of `items`, one item per line.
pub(crate) fn list_text(items: &[serde_json::Value]) -> Result<String, crate::BenchError> {
    let mut out = String::from("{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[\n");
    for (i, it) in items.iter().enumerate() {
        out.push_str(&serde_json::to_string(it).map_err(crate::BenchError::Json)?);
        out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
    }
    out.push_str("]}\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_errors_name_the_entry() {
        let p = Path::new("x/index.yaml");
        let bad = format!("schema: {SCHEMA}\nworkloads:\n- {{name: a, group: g, description: d, files: []}}\n");
        let e = parse_index(p, &bad).unwrap_err();
        assert!(e.contains("workloads[0] (a)") && e.contains("at least one file"), "{e}");
        let dup = format!("schema: {SCHEMA}\nworkloads:\n- {{name: a, group: g, description: d, files: [f]}}\n- {{name: a, group: g, description: d, files: [f]}}\n");
        assert!(parse_index(p, &dup).unwrap_err().contains("duplicate"));
        let cat = format!("schema: {SCHEMA}\nworkloads:\n- {{name: a, group: g, description: d, files: [f], catalog: 'karpenter-benchmark:x'}}\n");
        assert!(parse_index(p, &cat).unwrap_err().contains("karpenter-benchmark"));
        assert!(parse_index(p, "schema: other/v1\n").unwrap_err().contains("schema"));
        assert!(parse_index(p, "schema: [").is_err());
    }

    #[test]
    fn gz_round_trip() {
        let dir = std::env::temp_dir().join(format!("stowage-corpus-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("a.json.gz");
        write_gz(&f, "{\"x\": 1}").unwrap();
        assert_eq!(read_text(&f).unwrap(), "{\"x\": 1}");
        let first = std::fs::read(&f).unwrap();
        write_gz(&f, "{\"x\": 1}").unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), first, "gzip output is deterministic");
        std::fs::write(dir.join("b.gz"), b"not gzip").unwrap();
        assert!(read_text(&dir.join("b.gz")).unwrap_err().contains("decompress"));
        std::fs::remove_dir_all(&dir).ok();
    }
}
