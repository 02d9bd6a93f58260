//! `diff.html`: one self-contained page with what the table says (every compared method,
//! sortable) and the differential flame graph inline, in `report.html`'s style and script.

use maud::{html, Markup, PreEscaped, DOCTYPE};

use super::compare::{Change, Diff, Row};
use super::table::{change_label, describe_side, header, pct};
use crate::printable::{printable, printable_text};

pub const DIFF_HTML_FILE: &str = "diff.html";

const CSS: &str = include_str!("../output/html/report.css");
const JS: &str = include_str!("../output/html/report.js");
const DIFF_CSS: &str = "tr.jr-increase td { background: #fde0dc; } tr.jr-decrease td { background: #dcebfd; }";

pub fn render(diff: &Diff, flamegraph_svg: &[u8]) -> Result<String, String> {
    let flamegraph = std::str::from_utf8(flamegraph_svg).map_err(|e| format!("flame graph: {e}"))?;
    // The XML prolog and doctype are not HTML.
    let flamegraph = flamegraph.find("<svg").map_or(flamegraph, |at| &flamegraph[at..]);
    let unit = diff.unit;
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "Energy diff" }
                style { (PreEscaped(CSS)) (PreEscaped(DIFF_CSS)) }
            }
            body {
                h1 { "Energy diff: NEW against BASE" }
                @if diff.estimated {
                    p.jr-estimated #jr-estimated {
                        "ESTIMATED: a side was profiled without an energy meter (RAPL); its energy comes from a model."
                    }
                }
                dl.jr-facts {
                    dt { "BASE" } dd { (describe_side(diff.base_runs.len(), diff.base_spread)) ": " (runs(&diff.base_runs)) }
                    dt { "NEW" } dd { (describe_side(diff.new_runs.len(), diff.new_spread)) ": " (runs(&diff.new_runs)) }
                    dt { "process" } dd.jr-big #jr-total data-change=(change_label(diff.total.change)) {
                        (format!("{:.4} → {:.4} {unit} ({})", diff.total.base, diff.total.new, pct(diff.total.delta_pct)))
                        " " (uncertainty(&diff.total)) " " (change_label(diff.total.change))
                    }
                }
                p.jr-note #jr-diff-header {
                    @for line in header(diff).lines() { (printable(line)) br; }
                }
                h2 { "Methods" }
                div.jr-scroll {
                    table.jr-table #jr-diff-methods {
                        thead { tr {
                            th.jr-name data-jr-key="text" { "method" }
                            th data-jr-key="num" { "BASE " (unit) }
                            th data-jr-key="num" { "NEW " (unit) }
                            th data-jr-key="num" { "Δ " (unit) }
                            th data-jr-key="num" { "Δ %" }
                            th data-jr-key="num" { "± " (unit) }
                            th data-jr-key="num" { "BASE %" }
                            th data-jr-key="num" { "NEW %" }
                            th data-jr-key="text" { "change" }
                        } }
                        tbody {
                            @for r in &diff.methods { (row(r)) }
                        }
                    }
                }
                h2 { "Differential flame graph" }
                p.jr-note {
                    "Widths are NEW's energy; red frames took more energy than in BASE, blue less. "
                    "Paths NEW no longer runs have no width: the table lists them. Click to zoom, Ctrl-F to search."
                }
                div.jr-flame #jr-flamegraph { (PreEscaped(flamegraph)) }
                script { (PreEscaped(JS)) }
            }
        }
    };
    let page = page.into_string();
    // maud escapes markup, not control characters a target's method names may hold.
    Ok(printable_text(&page).into_owned())
}

fn runs(paths: &[String]) -> String {
    printable(&paths.join(", ")).into_owned()
}

fn uncertainty(r: &Row) -> String {
    r.uncertainty.map_or_else(|| "(± unknown)".to_owned(), |u| format!("(± {u:.4})"))
}

fn row(r: &Row) -> Markup {
    let class = match r.change {
        Change::Increase => "jr-increase",
        Change::Decrease => "jr-decrease",
        Change::Same | Change::Unknown => "",
    };
    html! {
        tr class=(class) data-change=(change_label(r.change)) {
            td.jr-name { (printable(&r.name)) }
            td data-v=(r.base) { (format!("{:.4}", r.base)) }
            td data-v=(r.new) { (format!("{:.4}", r.new)) }
            td data-v=(r.delta) { (format!("{:+.4}", r.delta)) }
            td data-v=(r.delta_pct.unwrap_or(f64::MAX)) { (pct(r.delta_pct)) }
            td data-v=(r.uncertainty.unwrap_or(f64::MAX)) { (r.uncertainty.map_or_else(|| "?".to_owned(), |u| format!("{u:.4}"))) }
            td data-v=(r.base_share_pct) { (format!("{:.1}", r.base_share_pct)) }
            td data-v=(r.new_share_pct) { (format!("{:.1}", r.new_share_pct)) }
            td { (change_label(r.change)) }
        }
    }
}
