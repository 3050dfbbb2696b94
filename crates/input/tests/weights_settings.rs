//! Planning settings in weights files as `stowage plan` and the controller read them from disk:
//! `minValuesPolicy` (issue 15, behaviour 5). A bad value names the file and the field.

use std::path::PathBuf;

use stowage_core::weights::{DEFAULT_YAML, MinValuesPolicy};

struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("stowage-weights-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn min_values_policy_is_read_from_the_weights_file() {
    let s = Scratch::new("mvp");
    let cases = [("Strict", Some(MinValuesPolicy::Strict)), ("BestEffort", Some(MinValuesPolicy::BestEffort)), ("bestEffort", None), ("Relaxed", None)];
    for (value, want) in cases {
        let f = s.0.join(format!("w-{value}.yaml"));
        std::fs::write(&f, DEFAULT_YAML.replace("minValuesPolicy: Strict", &format!("minValuesPolicy: {value}"))).unwrap();
        match (stowage_input::weights::load(&f), want) {
            (Ok(w), Some(p)) => assert_eq!(w.min_values_policy, p, "{value}"),
            (Err(e), None) => {
                let msg = e.to_string();
                assert!(msg.contains(&f.display().to_string()) && msg.contains("minValuesPolicy"), "{value}: {msg}");
            }
            (got, want) => panic!("{value}: got {:?}, wanted {want:?}", got.map(|w| w.min_values_policy)),
        }
    }
    // A file written before the setting existed gets Karpenter's default.
    let old = s.0.join("old.yaml");
    std::fs::write(&old, DEFAULT_YAML.lines().filter(|l| !l.starts_with("minValuesPolicy:")).map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    assert_eq!(stowage_input::weights::load(&old).unwrap().min_values_policy, MinValuesPolicy::Strict);
}

/// `topologySpreadDefaults` (issue 15, behaviour 6): kube-scheduler's PodTopologySpread args, System
/// unless the file says otherwise; every mistake names the file and the field.
#[test]
fn topology_spread_defaults_are_read_from_the_weights_file() {
    use stowage_core::semantics::spread_defaults::{Action, DefaultingType};
    let s = Scratch::new("tsd");
    let write = |name: &str, setting: &str| {
        let f = s.0.join(name);
        std::fs::write(&f, DEFAULT_YAML.replace("topologySpreadDefaults:\n  defaultingType: System\n", setting)).unwrap();
        f
    };
    let d = stowage_input::weights::load(&write("default.yaml", "topologySpreadDefaults:\n  defaultingType: System\n")).unwrap();
    assert_eq!(d.topology_spread_defaults.defaulting_type, DefaultingType::System);
    let old = write("old.yaml", "");
    assert_eq!(stowage_input::weights::load(&old).unwrap().topology_spread_defaults, d.topology_spread_defaults, "a file without the setting gets System");

    let list = "topologySpreadDefaults:\n  defaultingType: List\n  defaultConstraints:\n  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, minDomains: 2, nodeTaintsPolicy: Honor}\n  - {maxSkew: 3, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway}\n";
    let w = stowage_input::weights::load(&write("list.yaml", list)).unwrap();
    let t = &w.topology_spread_defaults;
    assert_eq!(t.defaulting_type, DefaultingType::List);
    assert_eq!(t.default_constraints.len(), 2);
    assert_eq!((t.default_constraints[0].when_unsatisfiable, t.default_constraints[0].min_domains), (Action::DoNotSchedule, Some(2)));
    let off = stowage_input::weights::load(&write("off.yaml", "topologySpreadDefaults: {defaultingType: List}\n")).unwrap();
    assert!(off.topology_spread_defaults.constraints().is_empty(), "List without constraints turns defaulting off");

    let bad = [
        (
            "system-list",
            "topologySpreadDefaults:\n  defaultingType: System\n  defaultConstraints: [{maxSkew: 1, topologyKey: a, whenUnsatisfiable: DoNotSchedule}]\n",
            "topologySpreadDefaults.defaultingType",
        ),
        ("type", "topologySpreadDefaults: {defaultingType: Custom}\n", "topologySpreadDefaults.defaultingType"),
        (
            "skew",
            "topologySpreadDefaults: {defaultingType: List, defaultConstraints: [{maxSkew: 0, topologyKey: a, whenUnsatisfiable: DoNotSchedule}]}\n",
            "topologySpreadDefaults.defaultConstraints[0].maxSkew",
        ),
        ("when", "topologySpreadDefaults: {defaultingType: List, defaultConstraints: [{maxSkew: 1, topologyKey: a, whenUnsatisfiable: Never}]}\n", "whenUnsatisfiable"),
        ("no-when", "topologySpreadDefaults: {defaultingType: List, defaultConstraints: [{maxSkew: 1, topologyKey: a}]}\n", "whenUnsatisfiable"),
        (
            "key",
            "topologySpreadDefaults: {defaultingType: List, defaultConstraints: [{maxSkew: 1, topologyKey: '', whenUnsatisfiable: DoNotSchedule}]}\n",
            "topologySpreadDefaults.defaultConstraints[0].topologyKey",
        ),
        (
            "selector",
            "topologySpreadDefaults: {defaultingType: List, defaultConstraints: [{maxSkew: 1, topologyKey: a, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}]}\n",
            "topologySpreadDefaults.defaultConstraints[0].labelSelector",
        ),
        (
            "policy",
            "topologySpreadDefaults: {defaultingType: List, defaultConstraints: [{maxSkew: 1, topologyKey: a, whenUnsatisfiable: DoNotSchedule, nodeAffinityPolicy: honor}]}\n",
            "nodeAffinityPolicy",
        ),
        (
            "dup",
            "topologySpreadDefaults: {defaultingType: List, defaultConstraints: [{maxSkew: 1, topologyKey: a, whenUnsatisfiable: DoNotSchedule}, {maxSkew: 2, topologyKey: a, whenUnsatisfiable: DoNotSchedule}]}\n",
            "topologySpreadDefaults.defaultConstraints[1]",
        ),
        ("unknown", "topologySpreadDefaults: {defaultingType: List, defaultConstraints: [{maxSkew: 1, topologyKey: a, whenUnsatisfiable: DoNotSchedule, maxskew: 2}]}\n", "maxskew"),
    ];
    for (name, setting, field) in bad {
        let f = write(&format!("{name}.yaml"), setting);
        let e = stowage_input::weights::load(&f).expect_err(name).to_string();
        assert!(e.contains(&f.display().to_string()) && e.contains(field), "{name}: {e}");
    }
}
