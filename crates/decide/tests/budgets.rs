//! Disruption budgets as Karpenter v1.14 evaluates them (`NodePool.GetAllowedDisruptionsByReason`,
//! `Budget.GetAllowedDisruptions`, `Budget.IsActive`): a table per rule, on NodePools read from JSON
//! as a file or the API server gives them.

use serde_json::{Value, json};
use stowage_decide::disruption::{allowed_disruptions, budget_active, next_budget_change, reason_budgets};
use stowage_input::api::NodePool;
use stowage_input::api::nodepool::Budget;

fn pool(disruption: Value) -> NodePool {
    serde_json::from_value(json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "np"},
        "spec": {"disruption": disruption,
                 "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}}}))
    .unwrap()
}

/// Unix seconds of 2027-01-15 (a Friday) at `h:m` UTC.
fn at(h: i64, m: i64) -> i64 {
    1_800_000_000 - 1_800_000_000 % 86_400 + h * 3600 + m * 60
}

/// Nodes of a pool of `total` that may be disrupting at once for `reason` at `now`.
fn allowed(p: &NodePool, reason: &str, total: usize, now: Option<i64>) -> usize {
    allowed_disruptions(&reason_budgets(Some(p), reason, now), total)
}

#[test]
fn an_absent_budgets_field_is_ten_percent_and_an_empty_list_is_no_limit() {
    // (disruption, nodes in the pool, allowed)
    let table: [(Value, usize, usize); 8] = [
        (json!({}), 10, 1),
        (json!({}), 3, 1),
        (json!({"consolidateAfter": "1m"}), 25, 3),
        (json!({"budgets": []}), 10, usize::MAX),
        (json!({"budgets": []}), 0, usize::MAX),
        (json!({"budgets": [{}]}), 30, 3),
        (json!({"budgets": [{"nodes": "0"}]}), 10, 0),
        (json!({"budgets": [{"nodes": "100%"}]}), 10, 10),
    ];
    for (d, total, want) in table {
        assert_eq!(allowed(&pool(d.clone()), "Empty", total, None), want, "{d} with {total} nodes");
    }
    assert_eq!(reason_budgets(None, "Drifted", None), vec!["10%".to_string()], "no NodePool object: Karpenter's default");
    let mut no_disruption = pool(json!({}));
    no_disruption.spec.disruption = None;
    assert_eq!(allowed(&no_disruption, "Underutilized", 20, None), 2, "no disruption block: the CRD defaults it, budgets 10%");
}

#[test]
fn percentages_round_up_in_integers_as_intstr_does() {
    // (nodes, total, allowed): ⌈p · total / 100⌉ in integers; counts as they are; bad values allow nothing.
    let table: [(&str, usize, usize); 12] =
        [("10%", 0, 0), ("10%", 1, 1), ("10%", 10, 1), ("10%", 11, 2), ("7%", 100, 7), ("29%", 100, 29), ("33%", 10, 4), ("0%", 50, 0), ("100%", 7, 7), ("3", 1, 3), ("10.5%", 10, 0), ("two", 10, 0)];
    for (nodes, total, want) in table {
        assert_eq!(allowed_disruptions(&[nodes.to_string()], total), want, "{nodes} of {total}");
    }
    assert_eq!(allowed_disruptions(&["50%".into(), "3".into(), "40%".into()], 10), 3, "the most restrictive budget wins");
}

#[test]
fn reasons_select_the_budgets_that_apply() {
    let p = pool(json!({"budgets": [
        {"nodes": "0", "reasons": ["Drifted"]},
        {"nodes": "2", "reasons": ["Empty", "Underutilized"]},
        {"nodes": "50%"},
        {"nodes": "0", "reasons": []}
    ]}));
    // (reason, total, allowed)
    for (reason, total, want) in [("Drifted", 10, 0), ("Empty", 10, 2), ("Underutilized", 10, 2), ("Empty", 2, 1), ("Underutilized", 3, 2)] {
        assert_eq!(allowed(&p, reason, total, None), want, "{reason} of {total}");
    }
    let only_drift = pool(json!({"budgets": [{"nodes": "1", "reasons": ["Drifted"]}]}));
    assert_eq!(allowed(&only_drift, "Empty", 10, None), usize::MAX, "budgets exist but none names Empty: no limit");
    assert_eq!(allowed(&only_drift, "Drifted", 10, None), 1);
}

#[test]
fn schedules_apply_from_each_hit_for_their_duration() {
    let b = |schedule: Option<&str>, duration: Option<&str>| Budget { nodes: Some("0".into()), schedule: schedule.map(str::to_string), duration: duration.map(str::to_string), reasons: None };
    let weekdays = b(Some("0 9 * * 1-5"), Some("8h"));
    let saturday = at(9, 30) + 86_400;
    // (budget, now, active)
    let table: [(&Budget, i64, Result<bool, ()>); 10] = [
        (&weekdays, at(8, 59), Ok(false)),
        (&weekdays, at(9, 0), Ok(true)),
        (&weekdays, at(12, 0), Ok(true)),
        (&weekdays, at(16, 59), Ok(true)),
        (&weekdays, at(17, 0), Ok(false)),
        (&weekdays, saturday, Ok(false)),
        (&b(Some("@hourly"), Some("10m")), at(13, 9), Ok(true)),
        (&b(Some("@hourly"), Some("10m")), at(13, 10), Ok(false)),
        (&b(Some("0 9 * * *"), None), at(9, 0), Ok(false)),
        (&b(Some("not a cron"), Some("1h")), at(9, 0), Err(())),
    ];
    for (budget, now, want) in table {
        assert_eq!(budget_active(budget, Some(now)).map_err(|_| ()), want, "{budget:?} at {now}");
    }
    // A scheduled budget limits only inside its window; outside it, nothing else applies: no limit.
    let p = pool(json!({"budgets": [{"nodes": "0", "schedule": "0 9 * * 1-5", "duration": "8h"}]}));
    assert_eq!(allowed(&p, "Underutilized", 10, Some(at(10, 0))), 0);
    assert_eq!(allowed(&p, "Underutilized", 10, Some(at(18, 0))), usize::MAX);
    assert_eq!(allowed(&p, "Underutilized", 10, None), 0, "no calendar: the budget applies");
    // Karpenter fails closed on a schedule it cannot parse (the API server refuses those).
    let broken = pool(json!({"budgets": [{"nodes": "5", "schedule": "61 * * * *", "duration": "1h"}, {"nodes": "100%"}]}));
    assert_eq!(allowed(&broken, "Empty", 10, Some(at(10, 0))), 0);
}

#[test]
fn the_next_budget_change_is_a_window_opening_or_closing() {
    let p = pool(json!({"budgets": [{"nodes": "0", "schedule": "0 9 * * 1-5", "duration": "8h"}, {"nodes": "10%"}]}));
    // (now, next change)
    let monday = at(9, 0) + 3 * 86_400;
    for (now, want) in [(at(8, 0), Some(at(9, 0))), (at(9, 0), Some(at(17, 0))), (at(12, 0), Some(at(17, 0))), (at(17, 0), Some(monday)), (at(20, 0), Some(monday))] {
        assert_eq!(next_budget_change(&p, now), want, "at {now}");
    }
    assert_eq!(next_budget_change(&pool(json!({"budgets": [{"nodes": "1"}]})), at(8, 0)), None, "no schedule: nothing changes");
    assert_eq!(next_budget_change(&pool(json!({})), at(8, 0)), None);
}
