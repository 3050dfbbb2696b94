//! The lifecycle benchmark (`stowage_bench::lifecycle`) on a short history: the first three hours of the
//! day curve (load falling from 40 % to 22 % of the peak), with consolidation on and off, every plan of
//! both runs (batches and consolidations) judged by the checker. Times are reported by the example,
//! never asserted here.

use std::time::Duration;

use stowage_bench::lifecycle::{Config, History, bound, day_curve, run};

#[test]
fn the_day_curve_runs_from_a_fifth_to_the_peak() {
    assert!((day_curve(4 * 3600) - 0.2).abs() < 1e-9);
    assert!((day_curve(16 * 3600) - 1.0).abs() < 1e-9);
    assert!((day_curve(4 * 3600 + 86_400) - 0.2).abs() < 1e-9, "one day after the other");
    assert!(day_curve(0) > day_curve(3600) && day_curve(3600) > day_curve(2 * 3600), "falling after midnight");
}

#[test]
fn consolidation_removes_underutilised_nodes_as_load_falls_and_the_bound_stays_below() {
    let mut cfg = Config::new(History::Diurnal { hours: 3, seed: 1 });
    cfg.consolidate_after = Duration::from_secs(120);
    let (on, report_on) = run(&cfg, true).unwrap();
    let (off, report_off) = run(&cfg, false).unwrap();
    for (row, report) in [(&on, &report_on), (&off, &report_off)] {
        assert_eq!(row.invalid_plans, 0, "{}: the checker rejected a plan: {:?}", row.run, report.invalid_plans);
        assert!(report.pending.is_empty(), "{}: pods left pending: {:?}", row.run, report.pending);
        assert!(row.nodes_launched > 0 && row.cost_usd > 0.0 && row.node_hours > 0.0);
    }
    assert!(on.consolidations_done >= 1 && on.nodes_removed_by_consolidation >= 1, "{on:?}");
    assert!(on.pod_moves > 0, "a consolidation of non-empty nodes moves pods: {on:?}");
    assert_eq!((off.consolidations_decided, off.nodes_removed_by_consolidation, off.pod_moves), (0, 0, 0), "{off:?}");
    let (curve, integral) = bound(&cfg).unwrap();
    assert_eq!(curve.len(), 6, "the day curve's six half-hour steps in three hours are the demand's change points");
    assert!(curve.iter().all(|(_, b)| b.is_some()), "{curve:?}");
    assert!(integral > 0.0 && integral <= on.cost_usd && integral <= off.cost_usd, "bound {integral} against {} and {}", on.cost_usd, off.cost_usd);
}
