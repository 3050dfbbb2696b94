//! The pure core never touches Kubernetes clients, the AWS SDK or the async runtime (ARCHITECTURE.md,
//! "The core is pure"). This test reads the source and fails on any such use.

use std::path::{Path, PathBuf};

/// Modules of the pure core, and the crate paths they may not name.
const CORE: &[&str] = &["src/domain", "src/semantics", "src/solve", "src/check", "src/plan", "src/weights.rs", "src/catalog"];
const FORBIDDEN: &[&str] = &["kube::", "kube_runtime", "kube_client", "k8s_openapi", "aws_sdk", "aws_config", "aws_smithy", "tokio", "crate::e2e", "crate::cli", "crate::api", "reqwest::", "hyper::", "hyper_util"];

fn rust_files(p: &Path, out: &mut Vec<PathBuf>) {
    if p.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(p).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for e in entries {
            rust_files(&e, out);
        }
    } else if p.extension().is_some_and(|e| e == "rs") {
        out.push(p.to_path_buf());
    }
}

#[test]
fn the_core_does_not_depend_on_clients_sdks_or_tokio() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for m in CORE {
        rust_files(&root.join(m), &mut files);
    }
    assert!(files.len() > 20, "the core modules were not found: {files:?}");
    let mut hits = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for bad in FORBIDDEN {
                if code.contains(bad) {
                    hits.push(format!("{}:{}: {}", f.strip_prefix(root).unwrap().display(), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(hits.is_empty(), "the pure core names forbidden crates:\n{}", hits.join("\n"));
}

#[test]
fn the_input_layer_uses_no_clients_either() {
    // input/ may use k8s-openapi types (it parses manifests) but never a client, the SDK or tokio.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src/input"), &mut files);
    let forbidden = ["kube::Client", "kube::Api", "kube_runtime", "aws_sdk", "aws_config", "tokio"];
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for bad in forbidden {
            assert!(!text.contains(bad), "{} uses {bad}", f.display());
        }
    }
}
