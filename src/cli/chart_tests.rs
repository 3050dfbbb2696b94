//! The Helm chart (`charts/stowage`) stays in step with the code: its CRDs are the ones `stowage crds`
//! generates, its RBAC rule files parse (the e2e tests run the controller under exactly them), and every
//! flag its Deployment passes is a flag of `stowage controller`.

use std::collections::BTreeSet;
use std::path::PathBuf;

use clap::CommandFactory;
use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

fn chart(path: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("charts/stowage").join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn the_chart_ships_the_crds_stowage_generates() {
    let text = chart("crds/karpenter-crds.yaml");
    let mut shipped: Vec<serde_json::Value> = Vec::new();
    for doc in text.split("\n---\n").map(str::trim).filter(|d| d.contains("kind: CustomResourceDefinition")) {
        let crd: CustomResourceDefinition = serde_saphyr::from_str(doc).unwrap();
        shipped.push(serde_json::to_value(crd).unwrap());
    }
    let generated: Vec<serde_json::Value> = stowage_input::api::crds().into_iter().map(|c| serde_json::to_value(c).unwrap()).collect();
    assert_eq!(shipped, generated, "regenerate: stowage crds >> charts/stowage/crds/karpenter-crds.yaml (keep the header)");
}

#[test]
fn rbac_rules_parse_and_name_only_known_verbs() {
    for f in ["files/clusterrole-rules.yaml", "files/role-rules.yaml"] {
        let rules: Vec<PolicyRule> = serde_saphyr::from_str(&chart(f)).unwrap();
        assert!(!rules.is_empty(), "{f}");
        for r in &rules {
            for v in &r.verbs {
                assert!(["get", "list", "watch", "create", "update", "patch", "delete"].contains(&v.as_str()), "{f}: verb {v}");
            }
            assert!(!r.verbs.iter().any(|v| v == "*") && !r.resources.iter().flatten().any(|x| x == "*"), "{f}: no wildcards");
        }
    }
    let rbac = chart("templates/rbac.yaml");
    assert!(rbac.contains(".Files.Get \"files/clusterrole-rules.yaml\"") && rbac.contains(".Files.Get \"files/role-rules.yaml\""));
}

#[test]
fn every_flag_the_deployment_passes_exists() {
    let cmd = super::Cli::command();
    let controller = cmd.find_subcommand("controller").expect("stowage controller");
    let known: BTreeSet<String> = controller.get_arguments().filter_map(|a| a.get_long().map(str::to_string)).collect();
    let deployment = chart("templates/deployment.yaml");
    let mut used = BTreeSet::new();
    for line in deployment.lines() {
        let l = line.trim();
        if let Some(flag) = l.strip_prefix("- --") {
            used.insert(flag.split(['=', ' ']).next().unwrap_or_default().to_string());
        }
    }
    assert!(used.len() > 10, "{used:?}");
    for f in &used {
        assert!(known.contains(f), "the chart passes --{f}, which stowage controller does not have (has {known:?})");
    }
}

/// The Deployment's `args:` block rendered as Helm would for `values` (the few template forms it uses:
/// `{{ .Values.x.y }}`, `with`/`if`/`range` ... `end` on their own lines, `{{ . }}` and `{{ join "," . }}`
/// inside them). Any other form fails the test, so the renderer cannot silently skip a line.
fn render_args(deployment: &str, values: &serde_json::Value) -> Vec<String> {
    fn lookup<'a>(values: &'a serde_json::Value, path: &str) -> &'a serde_json::Value {
        let path = path.strip_prefix(".Values.").unwrap_or_else(|| panic!("unsupported expression {path}"));
        path.split('.').fold(values, |v, k| v.get(k).unwrap_or_else(|| panic!("values.yaml has no {path}")))
    }
    fn truthy(v: &serde_json::Value) -> bool {
        match v {
            serde_json::Value::Null => false,
            serde_json::Value::Bool(b) => *b,
            serde_json::Value::String(s) => !s.is_empty(),
            serde_json::Value::Array(a) => !a.is_empty(),
            serde_json::Value::Object(o) => !o.is_empty(),
            serde_json::Value::Number(n) => n.as_f64() != Some(0.0),
        }
    }
    fn scalar(v: &serde_json::Value) -> String {
        match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(_) | serde_json::Value::Bool(_) => v.to_string(),
            other => panic!("not a scalar: {other}"),
        }
    }
    fn expand(line: &str, dot: Option<&serde_json::Value>, values: &serde_json::Value) -> String {
        let mut out = String::new();
        let mut rest = line;
        while let Some(i) = rest.find("{{") {
            out += &rest[..i];
            let j = rest[i..].find("}}").map(|j| i + j).unwrap_or_else(|| panic!("unclosed {{{{ in {line}"));
            let expr = rest[i + 2..j].trim();
            out += &match (expr, dot) {
                (".", Some(d)) => scalar(d),
                ("join \",\" .", Some(serde_json::Value::Array(a))) => a.iter().map(scalar).collect::<Vec<_>>().join(","),
                (e, _) => scalar(lookup(values, e)),
            };
            rest = &rest[j + 2..];
        }
        out + rest
    }

    let lines: Vec<&str> = deployment.lines().skip_while(|l| l.trim() != "args:").skip(1).take_while(|l| l.trim() != "env:").collect();
    assert!(!lines.is_empty(), "no args: ... env: block in the Deployment");
    // Open blocks: (whether their body renders, the value `.` stands for in it, whether it is a range).
    let mut out = Vec::new();
    let mut stack: Vec<(bool, Option<serde_json::Value>, bool)> = Vec::new();
    for raw in lines {
        let l = raw.trim();
        let active = stack.iter().all(|(a, _, _)| *a);
        let dot = stack.iter().rev().find_map(|(_, d, _)| d.clone());
        if let Some(block) = l.strip_prefix("{{-").and_then(|b| b.strip_suffix("}}")).map(str::trim) {
            if block == "end" {
                stack.pop().expect("end without a block");
            } else if let Some(e) = block.strip_prefix("with ").or_else(|| block.strip_prefix("if ")) {
                let v = lookup(values, e.trim()).clone();
                stack.push((truthy(&v), block.starts_with("with ").then_some(v), false));
            } else if let Some(e) = block.strip_prefix("range ") {
                // A range over a list of scalars whose body is `- {{ . }}`: each item is one argument.
                let items = lookup(values, e.trim()).as_array().cloned().unwrap_or_else(|| panic!("{e} is not a list"));
                if active {
                    out.extend(items.iter().map(scalar));
                }
                stack.push((false, None, true));
            } else {
                panic!("unsupported block {block}");
            }
            continue;
        }
        if stack.last().is_some_and(|(_, _, range)| *range) {
            assert_eq!(l, "- {{ . }}", "unsupported range body");
            continue;
        }
        if !active {
            continue;
        }
        let arg = l.strip_prefix("- ").unwrap_or_else(|| panic!("not a list item: {raw}"));
        out.push(expand(arg, dot.as_ref(), values));
    }
    assert!(stack.is_empty(), "unclosed block in the Deployment's args");
    out
}

fn parse_controller(args: &[String]) -> super::controller::ControllerArgs {
    use clap::Parser;
    let cli = super::Cli::try_parse_from(std::iter::once("stowage".to_string()).chain(args.iter().cloned())).unwrap_or_else(|e| panic!("stowage {}: {e}", args.join(" ")));
    match cli.command {
        super::Command::Controller(a) => *a,
        _ => panic!("the Deployment does not run `stowage controller`: {args:?}"),
    }
}

#[test]
fn the_deployments_args_parse_as_stowage_controller_with_the_charts_values() {
    let deployment = chart("templates/deployment.yaml");
    let mut values: serde_json::Value = serde_saphyr::from_str(&chart("values.yaml")).unwrap();

    // The defaults (settings.clusterName is required).
    values["settings"]["clusterName"] = "my-cluster".into();
    let args = render_args(&deployment, &values);
    let a = parse_controller(&args);
    assert_eq!(a.connect.cluster_name.as_deref(), Some("my-cluster"));
    assert_eq!(a.metrics_addr.port(), 8080, "the Service and the probes use metrics.port");
    assert!(a.leader_elect, "two replicas need leader election");
    assert_eq!(a.log_format, super::controller::LogFormat::Json);
    assert!(a.weights.is_none(), "no weights ConfigMap by default");
    assert!(a.connect.kubeconfig.is_none(), "in-cluster config");
    assert!(a.connect.service_cidr.is_none() && a.connect.kubernetes_version.is_none(), "from eks:DescribeCluster by default");
    let c = super::controller::config(&a).unwrap();
    assert_eq!((c.batch.idle, c.batch.max), (std::time::Duration::from_secs(1), std::time::Duration::from_secs(10)));
    assert_eq!((c.gc_interval, c.gc_grace), (std::time::Duration::from_secs(10), std::time::Duration::from_secs(30)));
    assert_eq!((c.timeouts.launch, c.timeouts.registration), (std::time::Duration::from_secs(300), std::time::Duration::from_secs(900)));
    assert!(!c.consolidation.spot_to_spot, "Karpenter's SpotToSpotConsolidation gate is off by default");
    assert_eq!(a.spot_to_spot_consolidation, None, "the gate decides");
    assert_eq!(c.consolidation_validation, std::time::Duration::from_secs(15));
    assert_eq!(a.min_values_policy, Some(stowage_core::weights::MinValuesPolicy::Strict), "Karpenter's default, passed as a flag");
    assert_eq!(c.weights.min_values_policy, stowage_core::weights::MinValuesPolicy::Strict);
    assert!(a.interruption_queue.is_none(), "no interruption queue unless settings.interruptionQueue names one");

    // Every optional value set.
    values["settings"]["clusterEndpoint"] = "https://ABC.gr7.us-east-1.eks.amazonaws.com".into();
    values["settings"]["clusterCABundle"] = "Q0EK".into();
    values["settings"]["batchIdleDuration"] = "2s".into();
    values["settings"]["batchMaxDuration"] = "1m30s".into();
    values["settings"]["featureGates"]["spotToSpotConsolidation"] = true.into();
    values["settings"]["preferencePolicy"] = "Ignore".into();
    values["serviceCIDR"] = "172.20.0.0/16".into();
    values["kubernetesVersion"] = "1.31".into();
    values["clusterDNS"] = serde_json::json!(["172.20.0.10", "169.254.20.10"]);
    values["controller"]["weights"] = "apiVersion: stowage.dev/weights/v1\n".into();
    values["controller"]["solver"] = "greedy".into();
    values["controller"]["extraArgs"] = serde_json::json!(["--threads=2"]);
    values["metrics"]["port"] = 9090.into();
    values["settings"]["minValuesPolicy"] = "BestEffort".into();
    values["settings"]["interruptionQueue"] = "my-cluster-interruptions".into();
    let a = parse_controller(&render_args(&deployment, &values));
    assert_eq!(a.min_values_policy, Some(stowage_core::weights::MinValuesPolicy::BestEffort));
    assert_eq!(a.interruption_queue.as_deref(), Some("my-cluster-interruptions"));
    assert_eq!(a.connect.cluster_endpoint, "https://ABC.gr7.us-east-1.eks.amazonaws.com");
    assert_eq!(a.connect.cluster_ca_bundle, "Q0EK");
    assert_eq!(a.connect.service_cidr.as_deref(), Some("172.20.0.0/16"));
    assert_eq!(a.connect.kubernetes_version.as_deref(), Some("1.31"));
    assert_eq!(a.connect.cluster_dns, vec!["172.20.0.10", "169.254.20.10"]);
    assert_eq!(a.weights.as_deref(), Some(std::path::Path::new("/etc/stowage/weights.yaml")), "where the ConfigMap is mounted");
    assert_eq!(a.solve.solver, super::SolverArg::Greedy);
    assert_eq!(a.solve.milp.threads, 2);
    assert_eq!(a.metrics_addr.port(), 9090);
    assert_eq!(a.preference_policy, Some(stowage_core::weights::PreferencePolicy::Ignore));
    assert!(deployment.contains("mountPath: /etc/stowage") && chart("templates/weights.yaml").contains("weights.yaml: |"));

    // An empty minValuesPolicy passes no flag: the weights file decides.
    values["settings"]["minValuesPolicy"] = "".into();
    values["controller"]["weights"] = "".into();
    let a = parse_controller(&render_args(&deployment, &values));
    assert_eq!(a.min_values_policy, None);
    let c = super::controller::config(&a).unwrap();
    assert_eq!((c.batch.idle, c.batch.max), (std::time::Duration::from_secs(2), std::time::Duration::from_secs(90)));
    assert!(c.consolidation.spot_to_spot, "settings.featureGates.spotToSpotConsolidation");
    assert!(!a.connect.isolated_vpc);
    values["settings"]["isolatedVPC"] = true.into();
    assert!(parse_controller(&render_args(&deployment, &values)).connect.isolated_vpc, "settings.isolatedVPC");
}

#[test]
fn the_min_values_policy_flag_overrides_the_weights_and_refuses_other_spellings() {
    use clap::Parser;
    let parse = |extra: &[&str]| super::Cli::try_parse_from(["stowage", "controller", "--cluster-name=c"].iter().chain(extra).copied());
    let Ok(super::Cli { command: super::Command::Controller(a), .. }) = parse(&["--min-values-policy=BestEffort"]) else { panic!("parses") };
    assert_eq!(super::controller::config(&a).unwrap().weights.min_values_policy, stowage_core::weights::MinValuesPolicy::BestEffort);
    let e = parse(&["--min-values-policy=bestEffort"]).err().expect("refused").to_string();
    assert!(e.contains("--min-values-policy") && e.contains("Strict or BestEffort"), "{e}");
}

#[test]
fn karpenters_feature_gates_parse_as_karpenter_reads_them_and_unimplemented_ones_are_refused() {
    use super::controller::FeatureGates;
    let g = FeatureGates::parse("").unwrap();
    assert!(!g.spot_to_spot_consolidation && g.unknown.is_empty());
    // Karpenter's own default string, as its chart writes it.
    let g = FeatureGates::parse("NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false").unwrap();
    assert!(!g.spot_to_spot_consolidation && g.unknown.is_empty());
    // Go's ParseBool spellings; an old gate (Drift, removed in v1) is kept aside, not refused.
    let g = FeatureGates::parse(" SpotToSpotConsolidation=T , Drift=true").unwrap();
    assert!(g.spot_to_spot_consolidation);
    assert_eq!(g.unknown, vec!["Drift".to_string()]);
    for gate in ["NodeRepair", "NodeOverlay", "StaticCapacity", "CapacityBuffer"] {
        let e = FeatureGates::parse(&format!("{gate}=true")).unwrap_err();
        assert!(e.contains(gate) && e.contains("does not implement") && e.contains("false"), "{e}");
        assert!(FeatureGates::parse(&format!("{gate}=false")).is_ok());
    }
    for bad in ["SpotToSpotConsolidation", "SpotToSpotConsolidation=yes"] {
        let e = FeatureGates::parse(bad).unwrap_err();
        assert!(e.contains("--feature-gates") && e.contains("SpotToSpotConsolidation"), "{e}");
    }

    // On the command line: the explicit --spot-to-spot-consolidation wins over the gate; a refused gate
    // stops the controller's configuration with the message.
    use clap::Parser;
    let parse = |extra: &[&str]| match super::Cli::try_parse_from(["stowage", "controller", "--cluster-name=c"].iter().chain(extra).copied()) {
        Ok(super::Cli { command: super::Command::Controller(a), .. }) => *a,
        _ => panic!("parses: {extra:?}"),
    };
    let c = |extra: &[&str]| super::controller::config(&parse(extra));
    assert!(c(&["--feature-gates=SpotToSpotConsolidation=true"]).unwrap().consolidation.spot_to_spot);
    assert!(!c(&["--feature-gates=SpotToSpotConsolidation=true", "--spot-to-spot-consolidation=false"]).unwrap().consolidation.spot_to_spot);
    let e = c(&["--feature-gates=NodeRepair=true"]).unwrap_err();
    assert!(e.contains("NodeRepair"), "{e}");
    // Karpenter's flag names, and stowage's earlier ones as aliases.
    let a = parse(&["--batch-idle-duration=3s", "--batch-max=20s"]);
    assert_eq!((a.batch_idle, a.batch_max), (std::time::Duration::from_secs(3), std::time::Duration::from_secs(20)));
}

/// The container image (`Dockerfile`) is what the chart runs: a multi-stage build whose last stage has
/// no build tools, runs as the chart's non-root user, and whose entrypoint takes the Deployment's args
/// (`controller ...`); the binary it builds has the controller. No Docker daemon runs in CI, so this is
/// a check of the file against the chart and the crate, not a build.
#[test]
fn the_image_definition_builds_the_controller_and_runs_as_the_charts_user() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).unwrap();
    let stages: Vec<&str> = dockerfile.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert!(stages.len() >= 2, "multi-stage: {stages:?}");
    let runtime = dockerfile.rsplit_once("\nFROM ").unwrap().1;
    assert!(runtime.starts_with("gcr.io/distroless/cc"), "a minimal runtime with libstdc++ (HiGHS is C++): {runtime}");
    assert!(!runtime.contains("RUN "), "nothing runs in the runtime stage");
    let user = runtime.lines().find_map(|l| l.strip_prefix("USER ")).expect("USER in the runtime stage");
    let chart_user = chart("templates/deployment.yaml").lines().find_map(|l| l.trim().strip_prefix("runAsUser: ").map(str::to_string)).expect("runAsUser");
    assert_eq!(user.split(':').next(), Some(chart_user.as_str()), "the image's user is the chart's runAsUser");
    assert_ne!(chart_user, "0");
    assert!(runtime.contains("ENTRYPOINT [\"/usr/local/bin/stowage\"]"), "the Deployment's args start with the subcommand");
    assert!(chart("templates/deployment.yaml").contains("args:\n            - controller\n"));
    let build = dockerfile.lines().find(|l| l.contains("cargo build")).expect("cargo build");
    assert!(build.contains("--locked") && build.contains("--release") && build.contains("--features controller"), "{build}");
    // The toolchain image is the workspace's rust-version.
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let rust = manifest.lines().find_map(|l| l.strip_prefix("rust-version = ")).unwrap().trim_matches('"');
    assert!(stages[0].contains(&format!("rust:{rust}-")), "{} builds with rust {rust}", stages[0]);
    let ignore = std::fs::read_to_string(root.join(".dockerignore")).unwrap();
    assert!(ignore.lines().any(|l| l.trim() == "/target"), "the build context leaves target/ out");
}
