//! SVG figures of a bench run (plotters, SVG backend; no fonts needed, the viewer renders the text).
//!
//! * `cost-vs-bound.svg`: per workload, each planner's cost per hour divided by the best lower bound
//!   on it (`Row::bound_per_hour`: the resource-volume bound, or the MILP's proven bound when the
//!   objective is the price). 1.0 = proven optimal; plans leaving pods pending are not drawn.
//! * `time-vs-pods.svg`: planner time against pending pods, log–log.

use plotters::prelude::*;

use super::Results;

const W: u32 = 1000;
const H: u32 = 600;

fn color(planner: &str) -> RGBColor {
    match planner {
        "greedy" => RGBColor(31, 119, 180),
        "milp" => RGBColor(214, 39, 40),
        "karpenter" => RGBColor(44, 160, 44),
        _ => RGBColor(80, 80, 80),
    }
}

/// The series of a figure: one per (planner, weights) that has points, in row order.
fn series(res: &Results) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for r in &res.rows {
        if r.planner == "load" {
            continue;
        }
        let k = (r.planner.clone(), r.weights.clone());
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

fn label(planner: &str, weights: &str, profiles: usize) -> String {
    if profiles > 1 && weights != "-" { format!("{planner} ({weights})") } else { planner.to_string() }
}

fn err<E: std::fmt::Display>(e: E) -> String {
    format!("cannot draw the figure: {e}")
}

pub(crate) fn cost_vs_bound(res: &Results) -> Result<String, String> {
    let mut workloads: Vec<String> = Vec::new();
    for r in &res.rows {
        if r.vs_bound.is_some() && !workloads.contains(&r.workload) {
            workloads.push(r.workload.clone());
        }
    }
    let profiles = res.settings.weights.len();
    let points: Vec<(String, String, usize, f64)> = res
        .rows
        .iter()
        .filter_map(|r| {
            let x = workloads.iter().position(|w| *w == r.workload)?;
            Some((r.planner.clone(), r.weights.clone(), x, r.vs_bound?))
        })
        .collect();
    let ymax = points.iter().map(|p| p.3).fold(1.05_f64, f64::max).min(10.0) * 1.02;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let n = workloads.len().max(1);
        let mut chart = ChartBuilder::on(&root)
            .caption("Cost per hour / lower bound per workload (1 = proven optimal)", ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(170)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5_f64..(n as f64 - 0.5), 0.98_f64..ymax)
            .map_err(err)?;
        let names = workloads.clone();
        chart
            .configure_mesh()
            .x_labels(n)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 { names.get(i as usize).cloned().unwrap_or_default() } else { String::new() }
            })
            .x_label_style(("sans-serif", 12).into_font().transform(FontTransform::Rotate90))
            .y_desc("cost / lower bound")
            .disable_x_mesh()
            .draw()
            .map_err(err)?;
        chart.draw_series(LineSeries::new([(-0.5, 1.0), (n as f64 - 0.5, 1.0)], BLACK.mix(0.4))).map_err(err)?;
        let all = series(res);
        for (k, (planner, weights)) in all.iter().enumerate() {
            // Spread the series a little along x so that equal values stay visible.
            let dx = (k as f64 - (all.len() as f64 - 1.0) / 2.0) * 0.12;
            let c = color(planner);
            let pts: Vec<(f64, f64)> = points.iter().filter(|p| &p.0 == planner && &p.1 == weights).map(|p| (p.2 as f64 + dx, p.3.min(ymax))).collect();
            if pts.is_empty() {
                continue;
            }
            let shape = k % 3;
            chart
                .draw_series(pts.into_iter().map(move |(x, y)| -> DynElement<'static, SVGBackend, (f64, f64)> {
                    match shape {
                        0 => Circle::new((x, y), 5, c.filled()).into_dyn(),
                        1 => TriangleMarker::new((x, y), 6, c.filled()).into_dyn(),
                        _ => Cross::new((x, y), 5, c.stroke_width(2)).into_dyn(),
                    }
                }))
                .map_err(err)?
                .label(label(planner, weights, profiles))
                .legend(move |(x, y)| Circle::new((x, y), 5, c.filled()));
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.9)).border_style(BLACK).draw().map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

pub(crate) fn time_vs_pods(res: &Results) -> Result<String, String> {
    let profiles = res.settings.weights.len();
    let pts: Vec<(&str, &str, f64, f64)> =
        res.rows.iter().filter(|r| r.error.is_none() && r.pods > 0).filter_map(|r| Some((r.planner.as_str(), r.weights.as_str(), r.pods as f64, r.time_ms?.max(0.01)))).collect();
    let xmax = pts.iter().map(|p| p.2).fold(10.0_f64, f64::max) * 1.5;
    let ymin = pts.iter().map(|p| p.3).fold(f64::INFINITY, f64::min).min(1.0) / 1.5;
    let ymax = pts.iter().map(|p| p.3).fold(10.0_f64, f64::max) * 1.5;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("Planner time against pending pods", ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d((0.8_f64..xmax).log_scale(), (ymin..ymax).log_scale())
            .map_err(err)?;
        chart.configure_mesh().x_desc("pending pods").y_desc("time (ms)").draw().map_err(err)?;
        for (planner, weights) in series(res) {
            let c = color(&planner);
            let mut p: Vec<(f64, f64)> = pts.iter().filter(|x| x.0 == planner && x.1 == weights).map(|x| (x.2, x.3)).collect();
            if p.is_empty() {
                continue;
            }
            p.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
            chart
                .draw_series(p.iter().map(|&(x, y)| Circle::new((x, y), 4, c.filled())))
                .map_err(err)?
                .label(label(&planner, &weights, profiles))
                .legend(move |(x, y)| Circle::new((x, y), 4, c.filled()));
        }
        chart.configure_series_labels().position(SeriesLabelPosition::UpperLeft).background_style(WHITE.mix(0.9)).border_style(BLACK).draw().map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}
