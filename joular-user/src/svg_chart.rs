//! What every SVG chart of ours shares (report.html, calmness.html, sweep.html, diff.html): how
//! a plotters error reads, and the legend's look.

use plotters::coord::CoordTranslate;
use plotters::prelude::*;

/// A plotters drawing error as our outputs report it.
pub fn chart_error(e: impl std::fmt::Display) -> String {
    format!("chart: {e}")
}

/// Draws the chart's legend at `position`, in the one style of our reports.
pub fn draw_legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(position)
        .label_font(("sans-serif", 13))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .draw()
        .map_err(chart_error)
}
