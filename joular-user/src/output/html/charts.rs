//! The report's charts, drawn by plotters' SVG backend: power over time (the process and its
//! top methods) and per-thread power stacked over time (the areas are the threads' energy).

use crate::svg_chart::{chart_error, draw_legend};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::attribution::stacks::timeline::Timeline;

const WIDTH: u32 = 1100;
const HEIGHT: u32 = 420;
/// Series drawn besides the process (or "other threads").
pub const TOP_SERIES: usize = 10;

/// One line of a chart: a name and a value per timeline bucket.
pub struct Series {
    pub name: String,
    pub values: Vec<f64>,
}

/// Distinct colours, the process (or "other") last in black/grey.
fn color(i: usize) -> RGBColor {
    const COLORS: [RGBColor; TOP_SERIES] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
        RGBColor(127, 127, 127),
    ];
    COLORS[i % COLORS.len()]
}

/// Longest legend entry: the end of a long method name says the most.
fn legend_name(name: &str) -> String {
    const MAX: usize = 60;
    // plotters escapes markup, not control characters, which no XML may hold.
    let name = &*crate::printable::printable(name);
    let chars = name.chars().count();
    if chars <= MAX {
        name.to_owned()
    } else {
        let tail: String = name.chars().skip(chars - (MAX - 1)).collect();
        format!("…{tail}")
    }
}

/// Top of the y axis: room above the data for the legend's `series` lines (upper right).
fn y_max(values: impl Iterator<Item = f64>, series: usize) -> f64 {
    let max = values.fold(0.0f64, f64::max);
    if max > 0.0 {
        max * (1.08 + 0.055 * series as f64)
    } else {
        1.0
    }
}

/// The chart both pictures share: power (W) over seconds since the start, white background,
/// light mesh, the legend boxed at the upper right. `series` draws the data.
fn power_chart(
    x_max: f64,
    top: f64,
    y_desc: &str,
    series: impl FnOnce(&mut PowerChart<'_, '_>) -> Result<(), String>,
) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..x_max, 0f64..top)
            .map_err(chart_error)?;
        chart
            .configure_mesh()
            .x_desc("seconds since the start")
            .y_desc(y_desc)
            .label_style(("sans-serif", 14))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(chart_error)?;
        series(&mut chart)?;
        draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        root.present().map_err(chart_error)?;
    }
    Ok(svg)
}

type PowerChart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Power (W) over time: `total` (the process) as a thick black line, `methods` under it.
pub fn power_over_time(timeline: &Timeline, total: &Series, methods: &[Series]) -> Result<String, String> {
    let x = timeline.midpoints_s();
    let x_max = (x.len() as f64 * timeline.bucket_s).max(1.0);
    let top = y_max(total.values.iter().chain(methods.iter().flat_map(|m| &m.values)).copied(), methods.len() + 1);
    power_chart(x_max, top, "power (W)", |chart| {
        for (i, series) in methods.iter().enumerate() {
            let c = color(i);
            chart
                .draw_series(LineSeries::new(x.iter().copied().zip(series.values.iter().copied()), c.stroke_width(2)))
                .map_err(chart_error)?
                .label(legend_name(&series.name))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3)));
        }
        chart
            .draw_series(LineSeries::new(x.iter().copied().zip(total.values.iter().copied()), BLACK.stroke_width(3)))
            .map_err(chart_error)?
            .label(legend_name(&total.name))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(3)));
        Ok(())
    })
}

/// Per-thread power stacked over time: each area's size is that thread's energy.
pub fn stacked_threads(timeline: &Timeline, threads: &[Series]) -> Result<String, String> {
    let x = timeline.midpoints_s();
    let x_max = (x.len() as f64 * timeline.bucket_s).max(1.0);
    // Running sums, bottom layer first.
    let mut layers: Vec<Vec<f64>> = Vec::with_capacity(threads.len());
    for series in threads {
        let below = layers.last().cloned().unwrap_or_else(|| vec![0.0; x.len()]);
        layers.push(below.iter().zip(&series.values).map(|(b, v)| b + v).collect());
    }
    let top = y_max(layers.last().into_iter().flatten().copied(), threads.len());
    power_chart(x_max, top, "power (W), stacked", |chart| {
        // Top layer first, so each lower one is drawn over it.
        for (i, (series, layer)) in threads.iter().zip(&layers).enumerate().rev() {
            let c = color(i);
            chart
                .draw_series(AreaSeries::new(x.iter().copied().zip(layer.iter().copied()), 0.0, c.mix(0.85)))
                .map_err(chart_error)?
                .label(legend_name(&series.name))
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeline() -> Timeline {
        let mut t = Timeline::default();
        for n in 0..20u64 {
            t.add_cycle(n as f64, 1.0, 1_700_000_000 + n, [(1, "main", 1e6), (2, "worker", 2e6)]);
        }
        t
    }

    #[test]
    fn charts_are_svg_with_their_legends() {
        let t = timeline();
        let total = Series { name: "process".into(), values: t.power_w(&t.energy_uj) };
        let method =
            Series { name: format!("com.acme.{}.hot", "Very".repeat(30)), values: vec![1.5; t.covered_s.len()] };
        let svg = power_over_time(&t, &total, std::slice::from_ref(&method)).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{svg}");
        assert!(svg.contains(">\nprocess\n<") && svg.contains("VeryVery.hot\n<"), "legends: {svg}");
        assert!(svg.contains("power (W)"));
        let threads: Vec<Series> =
            t.threads.iter().map(|s| Series { name: s.comm.clone(), values: t.power_w(&s.energy_uj) }).collect();
        let svg = stacked_threads(&t, &threads).unwrap();
        assert!(svg.contains(">\nmain\n<") && svg.contains(">\nworker\n<"), "{svg}");
        assert!(svg.matches("<polygon").count() >= 2, "one area per thread: {svg}");
    }

    #[test]
    fn an_empty_timeline_still_draws() {
        let t = Timeline::default();
        let empty = Series { name: "process".into(), values: vec![] };
        assert!(power_over_time(&t, &empty, &[]).unwrap().contains("<svg"));
        assert!(stacked_threads(&t, &[]).unwrap().contains("<svg"));
    }
}
