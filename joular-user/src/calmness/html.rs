//! `calmness.html`: the two runs' frequency distributions (`C_S`, bin by bin) side by side, the
//! correlations and how the bins were chosen, in `report.html`'s style.

use crate::svg_chart::{chart_error, draw_legend};
use maud::{html, PreEscaped, DOCTYPE};
use plotters::prelude::*;

use super::method::Calmness;
use crate::printable::printable;

pub const CALMNESS_HTML_FILE: &str = "calmness.html";

const CSS: &str = include_str!("../output/html/report.css");
const WIDTH: u32 = 1100;
const HEIGHT: u32 = 420;
const COLOR_A: RGBColor = RGBColor(31, 119, 180);
const COLOR_B: RGBColor = RGBColor(255, 127, 14);

/// `r` to three decimals, or why there is none.
pub fn r_text(r: Option<f64>) -> String {
    r.map_or_else(|| "undefined".to_owned(), |r| format!("{r:.3}"))
}

/// Each bin's share of samples, run A's bar left of run B's, over the bin's frequencies (MHz).
fn distributions_svg(c: &Calmness) -> Result<String, String> {
    let edges_mhz: Vec<f64> = c.bins.edges_khz.iter().map(|k| k / 1e3).collect();
    let (lo, hi) = (edges_mhz[0], edges_mhz[edges_mhz.len() - 1]);
    // One bin of width 0 (every sample at one frequency) still gets a visible bar.
    let (lo, hi) = if hi > lo { (lo, hi) } else { (lo - 50.0, hi + 50.0) };
    let top = c.a.spatial.iter().chain(&c.b.spatial).fold(0.0f64, |m, v| m.max(*v)).max(0.01) * 1.2;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(lo..hi, 0f64..top)
            .map_err(chart_error)?;
        chart
            .configure_mesh()
            .x_desc("CPU frequency (MHz)")
            .y_desc("share of (CPU, cycle) samples, C_S")
            .label_style(("sans-serif", 14))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(chart_error)?;
        let bars = |shares: &[f64], left: bool| -> Vec<Rectangle<(f64, f64)>> {
            let color = if left { COLOR_A } else { COLOR_B };
            shares
                .iter()
                .enumerate()
                .map(|(k, share)| {
                    let (x0, x1) =
                        if edges_mhz[k + 1] > edges_mhz[k] { (edges_mhz[k], edges_mhz[k + 1]) } else { (lo, hi) };
                    let mid = (x0 + x1) / 2.0;
                    let (from, to) = if left { (x0, mid) } else { (mid, x1) };
                    Rectangle::new([(from, 0.0), (to, *share)], color.filled())
                })
                .collect()
        };
        for (run, left) in [(&c.a, true), (&c.b, false)] {
            let color = if left { COLOR_A } else { COLOR_B };
            chart
                .draw_series(bars(&run.spatial, left))
                .map_err(chart_error)?
                .label(printable(&run.name).into_owned())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        root.present().map_err(chart_error)?;
    }
    Ok(svg)
}

pub fn render(c: &Calmness) -> Result<String, String> {
    let svg = distributions_svg(c)?;
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "Calmness" }
                style { (PreEscaped(CSS)) }
            }
            body {
                h1 { "Calmness: how alike two runs' CPU frequencies are" }
                dl.jr-facts {
                    dt { "A" } dd { (printable(&c.a.name)) ": " (c.a.cycles) " cycles, " (c.a.samples) " samples, mean " (format!("{:.0}", c.a.mean_khz / 1e3)) " MHz" }
                    dt { "B" } dd { (printable(&c.b.name)) ": " (c.b.cycles) " cycles, " (c.b.samples) " samples, mean " (format!("{:.0}", c.b.mean_khz / 1e3)) " MHz" }
                    dt { "spatial r" } dd.jr-big #jr-spatial { (r_text(c.spatial_pearson)) }
                    dt { "temporal r" } dd #jr-temporal { (r_text(c.temporal_pearson)) " (first " (c.temporal_cycles) " cycles)" }
                    dt { "bins" } dd { (c.bins.count()) ", " (c.bins.rule) ": IQR " (format!("{:.0}", c.bins.iqr_khz)) " kHz over " (c.bins.samples) " samples" }
                }
                @for note in &c.notes { p.jr-note { (printable(note)) } }
                p.jr-note { (c.method) }
                (PreEscaped(svg))
            }
        }
    };
    Ok(page.into_string())
}
