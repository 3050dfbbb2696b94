//! TaintToleration and NodeUnschedulable (`tainttoleration/taint_toleration.go`,
//! `v1.Toleration.ToleratesTaint`).
//!
//! ```text
//! tolerates(t, taint) = (t.effect empty ∨ t.effect == taint.effect)
//!                     ∧ (t.key empty ∨ t.key == taint.key)          empty key needs Exists
//!                     ∧ (t.op == Exists ∨ t.value == taint.value)
//! filter: every NoSchedule and NoExecute taint is tolerated; PreferNoSchedule only scores:
//! score(node) = −#{PreferNoSchedule taints not tolerated}, the units of `soft.preferNoSchedule`.
//! spec.unschedulable acts as node.kubernetes.io/unschedulable:NoSchedule.
//! ```

use crate::domain::taints::{Effect, Taint, Toleration, TolerationOp, well_known};

use super::{Plugin, Reject};

pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if t.effect.is_some_and(|e| e != taint.effect) {
        return false;
    }
    if !t.key.is_empty() && t.key != taint.key {
        return false;
    }
    match t.op {
        TolerationOp::Exists => true,
        TolerationOp::Equal => t.value == taint.value,
    }
}

pub fn tolerated(tols: &[Toleration], taint: &Taint) -> bool {
    tols.iter().any(|t| tolerates(t, taint))
}

/// The first NoSchedule/NoExecute taint the tolerations do not tolerate.
pub(crate) fn first_untolerated<'a>(taints: &'a [Taint], tols: &[Toleration]) -> Option<&'a Taint> {
    taints.iter().filter(|t| matches!(t.effect, Effect::NoSchedule | Effect::NoExecute)).find(|t| !tolerated(tols, t))
}

/// PreferNoSchedule taints the tolerations do not tolerate (kube-scheduler's TaintToleration score,
/// `countIntolerableTaintsPreferNoSchedule`: only tolerations with no effect or PreferNoSchedule
/// count, which `tolerates` checks). Each costs a pod on the node `soft.preferNoSchedule`.
pub fn untolerated_prefer_no_schedule(taints: &[Taint], tols: &[Toleration]) -> usize {
    taints.iter().filter(|t| t.effect == Effect::PreferNoSchedule && !tolerated(tols, t)).count()
}

/// TaintToleration filter (and NodeUnschedulable for cordoned nodes). `prefer_no_schedule_filters`:
/// untolerated PreferNoSchedule taints filter too (a pod under `preferencePolicy: Respect` that has not
/// relaxed them, `semantics::preferences`; never kube-scheduler's own rule).
pub fn filter(taints: &[Taint], unschedulable: bool, tols: &[Toleration], prefer_no_schedule_filters: bool) -> Result<(), Reject> {
    if unschedulable {
        let t = Taint::new(well_known::UNSCHEDULABLE, "", Effect::NoSchedule);
        if !tolerated(tols, &t) {
            return Err(Reject::unresolvable(Plugin::NodeUnschedulable, "node(s) were unschedulable"));
        }
    }
    match first_untolerated(taints, tols) {
        Some(t) => Err(Reject::unresolvable(Plugin::TaintToleration, format!("node(s) had untolerated taint {{{}: {}}}", t.key, t.value))),
        None if prefer_no_schedule_filters => match taints.iter().find(|t| t.effect == Effect::PreferNoSchedule && !tolerated(tols, t)) {
            Some(t) => Err(Reject::unresolvable(Plugin::TaintToleration, format!("node(s) had untolerated PreferNoSchedule taint {{{}: {}}} (preferencePolicy Respect)", t.key, t.value))),
            None => Ok(()),
        },
        None => Ok(()),
    }
}

/// Tolerations the DaemonSet controller adds to every DaemonSet pod
/// (`pkg/controller/daemon/util` `AddOrUpdateDaemonPodTolerations`).
/// Built once: [`super::daemonsets::runs_on`] asks for every DaemonSet on every candidate configuration.
pub(crate) fn daemonset_tolerations() -> &'static [Toleration] {
    static AUTO: std::sync::LazyLock<Vec<Toleration>> = std::sync::LazyLock::new(build_daemonset_tolerations);
    &AUTO
}

fn build_daemonset_tolerations() -> Vec<Toleration> {
    let mut v = vec![
        Toleration::exists(well_known::NOT_READY, Some(Effect::NoExecute)),
        Toleration::exists(well_known::UNREACHABLE, Some(Effect::NoExecute)),
        Toleration::exists(well_known::DISK_PRESSURE, Some(Effect::NoSchedule)),
        Toleration::exists(well_known::MEMORY_PRESSURE, Some(Effect::NoSchedule)),
        Toleration::exists(well_known::PID_PRESSURE, Some(Effect::NoSchedule)),
        Toleration::exists(well_known::UNSCHEDULABLE, Some(Effect::NoSchedule)),
    ];
    // hostNetwork DaemonSets also get network-unavailable; it only matters on nodes that carry that
    // taint, which new nodes never do.
    v.push(Toleration::exists(well_known::NETWORK_UNAVAILABLE, Some(Effect::NoSchedule)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefer_no_schedule_counts_untolerated_soft_taints_only() {
        let taints = [Taint::new("soft", "", Effect::PreferNoSchedule), Taint::new("other", "x", Effect::PreferNoSchedule), Taint::new("hard", "", Effect::NoSchedule)];
        assert_eq!(untolerated_prefer_no_schedule(&taints, &[]), 2);
        assert_eq!(untolerated_prefer_no_schedule(&taints, &[Toleration::exists("soft", None)]), 1);
        assert_eq!(untolerated_prefer_no_schedule(&taints, &[Toleration::exists("soft", Some(Effect::NoSchedule))]), 2, "a toleration of another effect does not count");
        assert_eq!(untolerated_prefer_no_schedule(&taints, &[Toleration::exists("", None)]), 0);
    }

    #[test]
    fn toleration_rules() {
        let taint = Taint::new("dedicated", "gpu", Effect::NoSchedule);
        assert!(tolerates(&Toleration::equal("dedicated", "gpu", None), &taint));
        assert!(!tolerates(&Toleration::equal("dedicated", "cpu", None), &taint));
        assert!(tolerates(&Toleration::exists("dedicated", Some(Effect::NoSchedule)), &taint));
        assert!(!tolerates(&Toleration::exists("dedicated", Some(Effect::NoExecute)), &taint));
        assert!(tolerates(&Toleration::exists("", None), &taint), "empty key + Exists tolerates everything");
    }

    #[test]
    fn prefer_no_schedule_never_filters() {
        let taints = [Taint::new("soft", "", Effect::PreferNoSchedule)];
        assert!(filter(&taints, false, &[], false).is_ok());
        let hard = [Taint::new("hard", "x", Effect::NoExecute)];
        let e = filter(&hard, false, &[], false).unwrap_err();
        assert_eq!(e.plugin, Plugin::TaintToleration);
        assert_eq!(e.reason, "node(s) had untolerated taint {hard: x}");
    }

    #[test]
    fn a_respected_prefer_no_schedule_filters_unless_tolerated() {
        let taints = [Taint::new("soft", "", Effect::PreferNoSchedule)];
        assert_eq!(filter(&taints, false, &[], true).unwrap_err().plugin, Plugin::TaintToleration);
        assert!(filter(&taints, false, &[Toleration::exists("soft", Some(Effect::PreferNoSchedule))], true).is_ok());
        assert!(filter(&taints, false, &[Toleration::exists("soft", Some(Effect::NoSchedule))], true).is_err(), "a toleration of another effect does not count");
    }

    #[test]
    fn cordoned_nodes() {
        assert_eq!(filter(&[], true, &[], false).unwrap_err().plugin, Plugin::NodeUnschedulable);
        let tol = Toleration::exists(well_known::UNSCHEDULABLE, Some(Effect::NoSchedule));
        assert!(filter(&[], true, &[tol], false).is_ok());
    }
}
