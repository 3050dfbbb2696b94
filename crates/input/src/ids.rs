//! Deterministic names and UIDs for the objects stowage makes up (pods a controller would create,
//! claims, NodeClaims, instances). Shared by the converter, the controller expansion, the catalog
//! generator and the simulator, so it depends on nothing else of this crate.

use std::hash::{Hash, Hasher};

/// A stable 64-bit hash (FxHash is deterministic across runs).
pub fn stable_hash(parts: &[&str]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    for p in parts {
        p.hash(&mut h);
    }
    h.finish()
}

/// A deterministic UID shaped like a Kubernetes one.
pub fn stable_uid(parts: &[&str]) -> String {
    let a = stable_hash(parts);
    let b = stable_hash(&[&a.to_string(), "uid"]);
    format!("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xffff, a & 0xffff, b >> 48, b & 0xffff_ffff_ffff)
}
