//! The crate graph is the architecture (ARCHITECTURE.md, "Crates"). The compiler refuses a `use` of a
//! crate that is not a dependency; this test pins the dependencies themselves, transitively, from
//! `cargo metadata` and `cargo tree`: the core reaches no Kubernetes types, no client, no AWS SDK, no async runtime and
//! no CLI parser; only the binary parses arguments; the e2e harness and the lifetime benchmark are dev-dependencies only; and the
//! arrows between stowage's own crates are the ones drawn in ARCHITECTURE.md.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// stowage's crates and the stowage crates each may depend on (normal dependencies).
const ARROWS: &[(&str, &[&str])] = &[
    ("stowage-core", &[]),
    ("stowage-input", &["stowage-core"]),
    ("stowage-decide", &["stowage-core", "stowage-input"]),
    ("stowage-aws", &["stowage-core", "stowage-input", "stowage-decide"]),
    ("stowage-controller", &["stowage-core", "stowage-input", "stowage-decide"]),
    ("stowage-sim", &["stowage-core", "stowage-input", "stowage-decide"]),
    ("stowage-bench", &["stowage-core", "stowage-input", "stowage-decide", "stowage-sim"]),
    ("stowage-e2e", &["stowage-core", "stowage-input"]),
    ("stowage-lifetime", &["stowage-core", "stowage-input", "stowage-decide", "stowage-controller", "stowage-bench", "stowage-e2e"]),
    ("stowage", &["stowage-core", "stowage-input", "stowage-decide", "stowage-aws", "stowage-controller", "stowage-sim", "stowage-bench"]),
];

/// Third-party crates a stowage crate may not reach, even transitively.
const FORBIDDEN: &[(&str, &[&str])] = &[
    (
        "stowage-core",
        &[
            "k8s-openapi",
            "kube",
            "kube-client",
            "kube-runtime",
            "kube-core",
            "tokio",
            "aws-sdk-ec2",
            "aws-sdk-iam",
            "aws-sdk-eks",
            "aws-sdk-sqs",
            "aws-sdk-ssm",
            "aws-sdk-pricing",
            "aws-config",
            "clap",
            "hyper",
            "reqwest",
        ],
    ),
    ("stowage-input", &["kube-client", "kube-runtime", "tokio", "aws-sdk-ec2", "aws-sdk-iam", "aws-sdk-eks", "aws-sdk-sqs", "aws-sdk-ssm", "aws-sdk-pricing", "aws-config", "clap", "hyper"]),
    ("stowage-decide", &["kube-client", "kube-runtime", "tokio", "aws-sdk-ec2", "aws-sdk-iam", "aws-sdk-eks", "aws-sdk-sqs", "aws-sdk-ssm", "aws-sdk-pricing", "aws-config", "clap", "hyper"]),
    ("stowage-sim", &["kube-client", "kube-runtime", "tokio", "aws-sdk-ec2", "aws-sdk-iam", "aws-sdk-eks", "aws-sdk-sqs", "aws-sdk-ssm", "aws-sdk-pricing", "aws-config", "clap", "hyper"]),
    ("stowage-bench", &["kube-client", "kube-runtime", "tokio", "aws-sdk-ec2", "aws-sdk-iam", "aws-sdk-eks", "aws-sdk-sqs", "aws-sdk-ssm", "aws-sdk-pricing", "aws-config", "clap", "hyper"]),
    ("stowage-controller", &["aws-sdk-ec2", "aws-sdk-iam", "aws-sdk-eks", "aws-sdk-sqs", "aws-sdk-ssm", "aws-sdk-pricing", "aws-config", "clap"]),
    ("stowage-aws", &["kube-client", "kube-runtime", "clap"]),
    ("stowage-e2e", &["clap"]),
    ("stowage-lifetime", &["clap"]),
];

struct Graph {
    /// package id → name
    names: BTreeMap<String, String>,
    /// package id → ids of its normal (non-dev, non-build) dependencies
    normal: BTreeMap<String, Vec<String>>,
}

fn metadata() -> Graph {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out =
        Command::new(cargo).args(["metadata", "--format-version", "1", "--locked", "--manifest-path"]).arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).output().expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let names = v["packages"].as_array().unwrap().iter().map(|p| (p["id"].as_str().unwrap().to_string(), p["name"].as_str().unwrap().to_string())).collect();
    let mut normal = BTreeMap::new();
    for n in v["resolve"]["nodes"].as_array().unwrap() {
        let deps = n["deps"].as_array().unwrap().iter().filter(|d| d["dep_kinds"].as_array().unwrap().iter().any(|k| k["kind"].is_null())).map(|d| d["pkg"].as_str().unwrap().to_string()).collect();
        normal.insert(n["id"].as_str().unwrap().to_string(), deps);
    }
    Graph { names, normal }
}

impl Graph {
    fn id(&self, name: &str) -> &str {
        let ids: Vec<&String> = self.names.iter().filter(|(_, n)| *n == name).map(|(id, _)| id).collect();
        assert_eq!(ids.len(), 1, "one package named {name}: {ids:?}");
        ids[0]
    }

    fn direct(&self, name: &str) -> BTreeSet<String> {
        self.normal[self.id(name)].iter().map(|d| self.names[d].clone()).collect()
    }
}

/// Every package `krate` reaches through normal dependencies, with the features a build of `krate`
/// alone enables. (`cargo metadata`'s resolve unifies features across the whole workspace, so through
/// it every crate that uses `kube` would seem to reach kube's client, which only the controller enables.)
fn reach(krate: &str) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["tree", "--locked", "-e", "normal", "--prefix", "none", "--format", "{p}", "-p", krate, "--manifest-path"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .output()
        .expect("cargo tree runs");
    assert!(out.status.success(), "cargo tree -p {krate}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    // Lines are `name vX.Y.Z (path)`; the first is the crate itself.
    text.lines().skip(1).filter_map(|l| l.split_whitespace().next()).map(str::to_string).collect()
}

#[test]
fn stowage_crates_depend_only_along_the_drawn_arrows() {
    let g = metadata();
    let ours: BTreeSet<&str> = ARROWS.iter().map(|(c, _)| *c).collect();
    let found: BTreeSet<&str> = g.names.values().filter(|n| n.starts_with("stowage")).map(String::as_str).collect();
    assert_eq!(found, ours, "every stowage crate has a row in ARROWS (and ARCHITECTURE.md)");
    let mut wrong = Vec::new();
    for (krate, allowed) in ARROWS {
        for d in g.direct(krate) {
            if d.starts_with("stowage") && !allowed.contains(&d.as_str()) {
                wrong.push(format!("{krate} -> {d}"));
            }
        }
    }
    assert!(wrong.is_empty(), "arrows not in the architecture: {wrong:?}");
}

#[test]
fn the_core_and_the_pure_layers_reach_no_client_sdk_runtime_or_cli() {
    let mut hits = Vec::new();
    for (krate, banned) in FORBIDDEN {
        let reach = reach(krate);
        for b in *banned {
            if reach.contains(*b) {
                hits.push(format!("{krate} reaches {b}"));
            }
        }
    }
    assert!(hits.is_empty(), "{hits:?}");
}

/// Crates that exist for tests and benchmarks only: the e2e harness and the lifetime benchmark built on
/// it. The binary and the libraries it ships reach neither.
const DEV_ONLY: &[&str] = &["stowage-e2e", "stowage-lifetime"];

#[test]
fn the_e2e_harness_is_a_dev_dependency_only() {
    for (krate, _) in ARROWS.iter().filter(|(k, _)| !DEV_ONLY.contains(k)) {
        let reach = reach(krate);
        for d in DEV_ONLY {
            assert!(!reach.contains(*d), "{krate} depends on {d} outside its tests");
        }
    }
}

#[test]
fn this_test_can_fail() {
    // The checks above see through the dependency graph: the core reaches highs, and the binary
    // reaches kube's client through the controller.
    assert!(reach("stowage-core").contains("highs"));
    assert!(reach("stowage").contains("kube-client"));
    assert!(reach("stowage-controller").contains("stowage-core"));
    assert!(!reach("stowage-sim").contains("kube-client"), "kube without features is its core only");
}
