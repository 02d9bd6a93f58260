//! `sweep.html`: per parameter, the process's and the top methods' energy against the value:
//! every run as a point, the mean with the runs' min–max, and the chosen model's curve; log
//! axes where the values span a factor 10 or more.

use crate::svg_chart::{chart_error, draw_legend};
use maud::{html, Markup, PreEscaped, DOCTYPE};
use plotters::prelude::*;

use super::analysis::{Analysis, Model};
use super::summary::Sweep;
use crate::printable::{printable, printable_text};

const CSS: &str = include_str!("../output/html/report.css");
const WIDTH: u32 = 760;
const HEIGHT: u32 = 400;
/// Points of the fitted curve drawn.
const CURVE_POINTS: usize = 200;

pub fn render(s: &Sweep, top: usize) -> Result<String, String> {
    let mut sections = Vec::new();
    for a in s.analyses {
        sections.push(section(a, top)?);
    }
    let failed: Vec<String> = s
        .failed()
        .map(|m| {
            format!(
                "{} run {}: {}",
                s.points[m.point].label(s.params),
                m.run,
                m.outcome.clone().err().unwrap_or_default()
            )
        })
        .collect();
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "Energy sweep" }
                style { (PreEscaped(CSS)) }
            }
            body {
                h1 { "Energy sweep" }
                dl.jr-facts {
                    dt { "command" } dd { code { (printable(&s.command.join(" "))) } }
                    dt { "runs" } dd { (s.measured.len()) " (" (s.runs) " per value, " (s.warmup) " warm-up each, not profiled)" }
                    dt { "failed" } dd #jr-failed { (failed.len()) }
                }
                @if !failed.is_empty() {
                    ul.jr-note { @for f in &failed { li { (printable(f)) } } }
                }
                p.jr-note {
                    "Each model is fitted to every successful run by least squares in joules and chosen by AICc \
                     (the power law and the exponential need 6 AICc over a fixed-shape family). \
                     A method a run did not sample counts 0 J there."
                }
                @for s in &sections { (s) }
            }
        }
    };
    Ok(printable_text(&page.into_string()).into_owned())
}

fn section(a: &Analysis, top: usize) -> Result<Markup, String> {
    let mut charts = Vec::new();
    for m in std::iter::once(&a.process).chain(a.methods.iter().take(top)) {
        charts.push((m, chart(m, &a.param)?));
    }
    Ok(html! {
        h2 { "Energy over " (a.param) }
        table.jr-table {
            thead { tr {
                th.jr-name { "method" } th { "model" } th { "fit (J)" } th { "R²" } th { "AICc" }
                th { "runner-up" } th { "Δ J, smallest to largest value" } th { "share of the process's Δ" }
            } }
            tbody {
                @for m in std::iter::once(&a.process).chain(&a.methods) {
                    tr {
                        td.jr-name { (printable(&m.name)) }
                        @if let Some(c) = &m.model {
                            td { (c.best.family.name()) } td { (c.best.equation()) }
                            td { (format!("{:.4}", c.best.r2)) } td { (format!("{:.1}", c.best.aicc)) }
                            td { (c.runner_up.map_or_else(|| "-".to_owned(), |r| format!("{} ({}, ΔAICc {:+.1})", r.family.name(), r.equation(), r.aicc - c.best.aicc))) }
                        } @else {
                            td colspan="5" { "too few successful runs to fit" }
                        }
                        td { (format!("{:+.4}", m.increase_j)) }
                        td { (m.share_of_increase_pct.map_or_else(|| "-".to_owned(), |p| format!("{p:.1}%"))) }
                    }
                }
            }
        }
        @for (m, svg) in &charts {
            h3 { (printable(&m.name)) }
            div.jr-chart { (PreEscaped(svg)) }
        }
    })
}

/// Per distinct x: the mean, the smallest and the largest of its runs.
fn spread(m: &Model) -> Vec<(f64, f64, f64, f64)> {
    let mut xs: Vec<f64> = m.xs.clone();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    xs.into_iter()
        .map(|x| {
            let ys: Vec<f64> = m.xs.iter().zip(&m.ys).filter(|(px, _)| **px == x).map(|(_, y)| *y).collect();
            let mean = ys.iter().sum::<f64>() / ys.len() as f64;
            let lo = ys.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = ys.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (x, mean, lo, hi)
        })
        .collect()
}

/// The chart of one model as SVG.
fn chart(m: &Model, param: &str) -> Result<String, String> {
    let points: Vec<(f64, f64)> = m.xs.iter().copied().zip(m.ys.iter().copied()).collect();
    if points.is_empty() {
        return Ok(String::new());
    }
    let stats = spread(m);
    let (x_lo, x_hi) = (stats[0].0, stats[stats.len() - 1].0);
    let y_lo = m.ys.iter().copied().fold(f64::INFINITY, f64::min);
    let y_hi = m.ys.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let log_x = x_lo > 0.0 && x_hi / x_lo >= 10.0;
    let log_y = y_lo > 0.0 && y_hi / y_lo >= 10.0;
    let best = m.model.as_ref().map(|c| c.best);
    let curve: Vec<(f64, f64)> = best
        .map(|fit| {
            (0..=CURVE_POINTS)
                .map(|i| {
                    let t = i as f64 / CURVE_POINTS as f64;
                    let x = if log_x { x_lo * (x_hi / x_lo).powf(t) } else { x_lo + (x_hi - x_lo) * t };
                    (x, fit.predict(x))
                })
                .filter(|(_, y)| y.is_finite() && (!log_y || *y > 0.0))
                .collect()
        })
        .unwrap_or_default();
    let label = best.map_or_else(|| "no model".to_owned(), |f| format!("{}: {}", f.family.name(), f.equation()));
    let x_pad = if x_hi > x_lo { (x_hi - x_lo) * 0.05 } else { x_lo.abs().max(1.0) * 0.1 };
    let y_top = curve.iter().map(|p| p.1).fold(y_hi, f64::max);
    let y_bottom = curve.iter().map(|p| p.1).fold(y_lo, f64::min).min(0.0);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let x_desc = format!("{param}{}", if log_x { " (log)" } else { "" });
        let y_desc = format!("energy (J){}", if log_y { " (log)" } else { "" });
        // The same drawing over each of the four kinds of axes.
        macro_rules! draw {
            ($x_range:expr, $y_range:expr) => {{
                let mut chart = ChartBuilder::on(&root)
                    .margin(12)
                    .x_label_area_size(40)
                    .y_label_area_size(70)
                    .build_cartesian_2d($x_range, $y_range)
                    .map_err(chart_error)?;
                chart
                    .configure_mesh()
                    .x_desc(x_desc.as_str())
                    .y_desc(y_desc.as_str())
                    .label_style(("sans-serif", 13))
                    .light_line_style(RGBColor(235, 235, 235))
                    .draw()
                    .map_err(chart_error)?;
                let grey = RGBColor(150, 150, 150);
                chart
                    .draw_series(points.iter().map(|&p| Circle::new(p, 3, grey.filled())))
                    .map_err(chart_error)?
                    .label("runs")
                    .legend(move |(x, y)| Circle::new((x + 9, y), 3, grey.filled()));
                let blue = RGBColor(31, 119, 180);
                chart
                    .draw_series(
                        stats
                            .iter()
                            .map(|&(x, _, lo, hi)| PathElement::new(vec![(x, lo), (x, hi)], blue.stroke_width(2))),
                    )
                    .map_err(chart_error)?;
                chart
                    .draw_series(stats.iter().map(|&(x, mean, _, _)| Circle::new((x, mean), 5, blue.filled())))
                    .map_err(chart_error)?
                    .label("mean, min–max of the runs")
                    .legend(move |(x, y)| Circle::new((x + 9, y), 5, blue.filled()));
                if !curve.is_empty() {
                    let red = RGBColor(214, 39, 40);
                    chart
                        .draw_series(LineSeries::new(curve.iter().copied(), red.stroke_width(2)))
                        .map_err(chart_error)?
                        .label(printable(&label).into_owned())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], red.stroke_width(3)));
                }
                draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
            }};
        }
        let (xa, xb) = if log_x { (x_lo / 1.15, x_hi * 1.15) } else { (x_lo - x_pad, x_hi + x_pad) };
        let (ya, yb) = if log_y {
            (y_lo / 1.5, y_top * 2.5)
        } else {
            let top = if y_top > y_bottom { y_top } else { y_bottom + 1.0 };
            (y_bottom, top + (top - y_bottom) * 0.35)
        };
        match (log_x, log_y) {
            (false, false) => draw!(xa..xb, ya..yb),
            (true, false) => draw!((xa..xb).log_scale(), ya..yb),
            (false, true) => draw!(xa..xb, (ya..yb).log_scale()),
            (true, true) => draw!((xa..xb).log_scale(), (ya..yb).log_scale()),
        }
        root.present().map_err(chart_error)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::analysis::{analyse, Energies, Measurement};
    use crate::sweep::params::{parse_list, plan};

    #[test]
    fn the_page_draws_a_chart_per_model_with_log_axes_over_a_wide_range() {
        let params = [parse_list("keylen=512,1024,2048,4096,8192").unwrap()];
        let points = plan(&params, false);
        let measured: Vec<_> = (0..5)
            .flat_map(|p| {
                (1..=2).map(move |run| {
                    let x = 512.0 * 2f64.powi(p as i32);
                    let methods = [("Rsa.modPow".to_owned(), 1e-9 * x * x * x * (1.0 + 0.01 * run as f64))].into();
                    Measurement {
                        point: p,
                        run,
                        seconds: 1.0,
                        outcome: Ok(Energies { process_j: 1.0 + 1e-9 * x * x * x, methods }),
                    }
                })
            })
            .collect();
        let analyses = analyse(&params, &points, &measured, 1.0);
        let command = vec!["java".to_owned(), "Rsa".to_owned(), "{keylen}".to_owned()];
        let s = Sweep {
            command: &command,
            params: &params,
            points: &points,
            measured: &measured,
            analyses: &analyses,
            runs: 2,
            warmup: 0,
            grid: false,
        };
        let page = render(&s, 5).unwrap();
        assert_eq!(page.matches("<svg").count(), 2, "the process and Rsa.modPow");
        assert!(page.contains("keylen (log)") && page.contains("energy (J) (log)"), "log axes");
        assert!(page.contains("cubic: "), "the curve's legend");
        assert!(page.contains("<h3>Rsa.modPow</h3>"));
    }
}
