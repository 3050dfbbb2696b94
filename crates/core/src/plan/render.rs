//! Human-readable plan output.

use std::fmt::Write;

use super::{Plan, Status};

fn status_word(s: Status) -> &'static str {
    match s {
        Status::Optimal => "optimal",
        Status::GapReached => "gap reached",
        Status::TimeLimit => "time limit",
        Status::Heuristic => "heuristic",
        Status::Fallback => "fallback to greedy",
        Status::Infeasible => "infeasible",
    }
}

/// Labels worth showing: everything except the instance type's own well-known labels.
fn interesting(k: &str) -> bool {
    !(k.starts_with("karpenter.k8s.aws/")
        || k.starts_with("kubernetes.io/")
        || k.starts_with("node.kubernetes.io/")
        || k.starts_with("topology.kubernetes.io/")
        || k == "karpenter.sh/capacity-type"
        || k == "karpenter.sh/nodepool")
}

pub fn table(p: &Plan) -> String {
    let mut s = String::new();
    let r = &p.solver;
    let _ = write!(s, "solver {} ({}), {:.1} ms", r.name, status_word(r.status), r.time_ms);
    if let Some(o) = r.objective {
        let _ = write!(s, ", objective {o:.6}");
    }
    if let Some(lb) = r.lower_bound {
        let _ = write!(s, ", lower bound {lb:.6}");
    }
    if let Some(g) = r.gap {
        let _ = write!(s, ", gap {:.2}%", g * 100.0);
    }
    s.push('\n');
    if !r.detail.is_empty() {
        let _ = writeln!(s, "  {}", r.detail);
    }
    let mark = |src: &str| if src == "synthetic" { "*" } else { "" };
    let _ = writeln!(s, "\nnew nodes: {}, ${:.4}/h{}", p.new_nodes.len(), p.cost_per_hour, if p.synthetic_prices { " (* synthetic spot price)" } else { "" });
    if !p.new_nodes.is_empty() {
        let _ = writeln!(s, "  {:<12} {:<16} {:<16} {:<12} {:<10} {:>10} {:>5}  labels", "NAME", "NODEPOOL", "TYPE", "ZONE", "CAPACITY", "$/H", "PODS");
        for n in &p.new_nodes {
            let labels: Vec<String> = n.labels.iter().filter(|(k, _)| interesting(k)).map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(
                s,
                "  {:<12} {:<16} {:<16} {:<12} {:<10} {:>9.4}{:1} {:>5}  {}",
                n.name,
                n.node_pool,
                n.instance_type,
                n.zone,
                n.capacity_type,
                n.price_per_hour,
                mark(&n.price_source),
                n.pods.len(),
                labels.join(",")
            );
        }
    }
    let on_existing: usize = p.existing_nodes.iter().map(|n| n.pods.len()).sum();
    let _ = writeln!(s, "\npods on existing nodes: {on_existing}");
    for n in &p.existing_nodes {
        let _ = writeln!(s, "  {:<24} {}", n.name, n.pods.join(", "));
    }
    let _ = writeln!(s, "\nunschedulable pods: {}", p.unschedulable.len());
    for u in &p.unschedulable {
        let _ = writeln!(s, "  {:<40} {}: {}", u.pod, u.plugin, u.reason);
    }
    if !p.deferred.is_empty() {
        let _ = writeln!(s, "\ndeferred to the next batch (the time budget ran out before they were planned): {}", p.deferred.len());
        for pod in &p.deferred {
            let _ = writeln!(s, "  {pod}");
        }
    }
    let _ = writeln!(s, "\nplacements (bind order):");
    for pl in &p.placements {
        let _ = writeln!(s, "  {:<40} -> {}", pl.pod, pl.node);
    }
    let deferred = if p.totals.pods_deferred > 0 { format!(", {} deferred", p.totals.pods_deferred) } else { String::new() };
    let _ =
        writeln!(s, "\ntotal: {} new node(s), {} pod(s) placed, {} unschedulable{deferred}, ${:.4}/h", p.totals.new_nodes, p.totals.pods_placed, p.totals.pods_unschedulable, p.totals.cost_per_hour);
    s
}
