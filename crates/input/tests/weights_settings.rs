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
