//! `report.html`: one self-contained page per process (no network, every asset inline) with
//! the run's header, the top methods (all/app, sortable), inferno's interactive flame graph,
//! power over time for the process and its top methods, per-thread power stacked, the call
//! trees, what no method stands for, and the run's drops and degradations.
//!
//! The flame graph is inlined as inferno wrote it, so its own search and zoom work; it is the
//! page's only inline SVG (its script takes the document's first `<svg>`, its style sets every
//! `text`), and the page's ids and classes stay out of its way (`jr-` prefixes). Charts are SVG
//! images (`data:` URLs) for the same reason.

mod charts;
mod devices;
mod evolution;

pub(crate) use evolution::method_series;

use crate::printable::{printable, printable_text};
use crate::safe_write::OutDir;

use maud::{html, Markup, PreEscaped, DOCTYPE};

use self::charts::{Series, TOP_SERIES};
use crate::attribution::stacks::aggregate::{method_call_trees, method_totals, NamedTotal, Scope};
use crate::attribution::stacks::methods::{is_method_name, MethodFilter};
use crate::attribution::stacks::profile::{ProcessProfile, Share};

pub const HTML_FILE: &str = "report.html";
/// Rows of the method table per view; the JoularJX CSVs hold them all.
const MAX_METHOD_ROWS: usize = 500;
/// Rows of the call-tree table per view.
const MAX_TREE_ROWS: usize = 100;

const CSS: &str = include_str!("report.css");
const JS: &str = include_str!("report.js");

/// What the page is made of.
pub struct HtmlInput<'a> {
    pub profile: &'a ProcessProfile,
    pub filter: &'a MethodFilter,
    /// inferno's SVG of the "all" view.
    pub flamegraph_svg: &'a [u8],
    /// The `<pid>-<epochms>` directory whose `all/evolution` files hold per-method power.
    pub evolution_dir: Option<&'a OutDir>,
}

/// One view's rows.
struct View<'a> {
    name: &'static str,
    label: String,
    methods: Vec<NamedTotal>,
    trees: Vec<(String, f64)>,
    unattributed: &'a std::collections::BTreeMap<String, Share>,
}

pub fn render(input: &HtmlInput) -> Result<String, String> {
    let profile = input.profile;
    let summary = &profile.summary;
    let rules = profile.rules();
    let mut views = Vec::new();
    let all_methods = method_totals(&profile.stacks, Scope::All, rules);
    for scope in [Scope::All, Scope::App(input.filter)] {
        let (name, label, methods, unattributed) = match scope {
            Scope::All => ("all", "all methods".to_owned(), all_methods.clone(), &summary.unattributed.all),
            Scope::App(f) if !f.is_empty() => (
                "app",
                format!("app ({})", f.prefixes().join(", ")),
                method_totals(&profile.stacks, scope, rules),
                &summary.unattributed.app,
            ),
            Scope::App(_) => continue,
        };
        let mut trees = method_call_trees(&profile.stacks, scope, rules);
        trees.truncate(MAX_TREE_ROWS);
        views.push(View {
            name,
            label,
            methods: methods.into_iter().filter(|m| is_method_name(&m.name)).collect(),
            trees,
            unattributed,
        });
    }
    let power_chart = power_chart(input, &all_methods)?;
    let threads_chart = threads_chart(profile)?;
    let flamegraph = std::str::from_utf8(input.flamegraph_svg).map_err(|e| format!("flame graph: {e}"))?;
    // The XML prolog and doctype are not HTML.
    let flamegraph = flamegraph.find("<svg").map_or(flamegraph, |at| &flamegraph[at..]);
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "Energy of " (printable(&summary.comm)) " (pid " (summary.pid) ")" }
                style { (PreEscaped(CSS)) }
            }
            body {
                (header(profile))
                h2 { "Methods" }
                (view_buttons(&views))
                @for view in &views { (method_table(profile, view)) }
                (devices::device_bars(profile, &all_methods))
                h2 { "Flame graph (all methods)" }
                p.jr-note { "Click a frame to zoom, Ctrl-F to search. Widths are energy." }
                div.jr-flame #jr-flamegraph { (PreEscaped(flamegraph)) }
                h2 { "Power over time" }
                @if profile.timeline.covered_s.is_empty() {
                    p.jr-note { "This profile has no timeline (written by an older version): no chart." }
                } @else {
                    (chart("power", "Power over time of the process and its top methods", &power_chart.0))
                    @if let Some(note) = &power_chart.1 { p.jr-note { (note) } }
                    h2 { "Power by thread" }
                    (chart("threads", "Per-thread power over time, stacked", &threads_chart))
                }
                h2 { "Call trees" }
                (view_buttons(&views))
                @for view in &views { (tree_table(profile, view)) }
                h2 { "Energy no method stands for" }
                @for view in &views { (unattributed_table(view)) }
                (losses(profile))
                script { (PreEscaped(JS)) }
            }
        }
    };
    Ok(visible_controls(page.into_string()))
}

/// maud escapes markup, not control characters: a thread or method name the target chose may
/// hold any, and HTML allows none but whitespace.
fn visible_controls(page: String) -> String {
    match printable_text(&page) {
        std::borrow::Cow::Borrowed(_) => page,
        std::borrow::Cow::Owned(shown) => shown,
    }
}

fn header(profile: &ProcessProfile) -> Markup {
    let s = &profile.summary;
    html! {
        h1 { "Energy of " (printable(&s.comm)) " (pid " (s.pid) ")" }
        @if s.estimated {
            p.jr-estimated #jr-estimated {
                "ESTIMATED: no energy meter (RAPL) was readable, so energy comes from the "
                (s.energy_source) " source: a model of the CPU's power, not a measurement."
            }
        }
        dl.jr-facts {
            dt { "total energy" } dd.jr-big #jr-total-energy data-uj=(s.energy_uj.round()) { (joules(s.energy_uj)) " J" }
            dt { "average power" } dd.jr-big { (format!("{:.3}", s.power_w(s.energy_uj))) " W" }
            dt { "duration" } dd { (format!("{:.1}", s.duration_s)) " s, " (s.cycles) " cycles, from " (utc(s.start_epoch_ms)) " UTC" }
            dt { "energy source" } dd #jr-energy-source {
                (s.energy_source) @if s.estimated { " (estimated)" }
                @if !s.energy_detail.is_empty() { ": " (printable(&s.energy_detail)) }
            }
            @if let Some(c) = &s.carbon {
                dt { "carbon" }
                dd #jr-carbon data-g=(c.grams) {
                    (format!("{:.6}", c.grams)) " gCO2e (machine " (format!("{:.6}", c.host_grams)) " g; mean "
                    (format!("{:.1}", c.mean_g_per_kwh)) " gCO2e/kWh; " (printable(&c.intensity)) ")"
                }
            }
            dt { "samples" } dd { (s.samples) }
            dt { "machine energy" } dd { (joules(s.socket_energy_uj)) " J, of which no profiled thread took " (joules(s.unattributed_uj)) " J" }
            @if let Some(jvm) = &s.jvm {
                dt { "JVM outside Java code" }
                dd {
                    "JIT compiler " (joules(jvm.jit_compiler.energy_uj)) " J (" (format!("{:.1}", jvm.jit_compiler.percent)) "%), "
                    "GC " (joules(jvm.gc.energy_uj)) " J (" (format!("{:.1}", jvm.gc.percent)) "%), "
                    "other JVM threads " (joules(jvm.jvm_other.energy_uj)) " J (" (format!("{:.1}", jvm.jvm_other.percent)) "%), "
                    "native without a Java caller " (joules(jvm.native.energy_uj)) " J (" (format!("{:.1}", jvm.native.percent)) "%)"
                }
            }
            @if let Some(share) = s.java_unwinder.as_ref().and_then(|u| u.inlining_approximate_share).filter(|&s| s > 0.0) {
                dt { "inlined methods" }
                dd #jr-inlining-approximate data-share=(format!("{share:.4}")) {
                    "at safepoint granularity: " (format!("{:.1}", share * 100.0)) "% of the Java samples are in compiled code "
                    "without an exact debug record (the JVM runs without -XX:+DebugNonSafepoints), so a method inlined "
                    "there is charged to its caller. Run the JVM with "
                    code { "-XX:+UnlockDiagnosticVMOptions -XX:+DebugNonSafepoints" } " to make them exact."
                }
            }
        }
    }
}

fn view_buttons(views: &[View]) -> Markup {
    html! {
        @if views.len() > 1 {
            p.jr-views {
                @for view in views {
                    button type="button" data-jr-view-button=(view.name) { (view.label) }
                }
            }
        }
    }
}

fn method_table(profile: &ProcessProfile, view: &View) -> Markup {
    let s = &profile.summary;
    let shown = view.methods.len().min(MAX_METHOD_ROWS);
    html! {
        div data-jr-view=(view.name) {
            p.jr-note {
                (shown) " of " (view.methods.len()) " methods (" (view.label) "), highest energy first; click a heading to sort."
            }
            div.jr-scroll {
                table.jr-table #{"jr-methods-" (view.name)} {
                    thead { tr {
                        th data-jr-key="num" { "#" }
                        th.jr-name data-jr-key="text" { "method" }
                        th data-jr-key="num" { "J" }
                        th data-jr-key="num" { "W" }
                        th data-jr-key="num" { "%" }
                        @if s.carbon.is_some() { th data-jr-key="num" { "gCO2e" } }
                        th data-jr-key="num" { "samples" }
                    } }
                    tbody {
                        @for (rank, m) in view.methods.iter().take(shown).enumerate() {
                            tr data-uj=(m.energy_uj.round()) {
                                td data-v=(rank + 1) { (rank + 1) }
                                td.jr-name { (m.name) }
                                td data-v=(m.energy_uj) { (joules(m.energy_uj)) }
                                td data-v=(s.power_w(m.energy_uj)) { (format!("{:.3}", s.power_w(m.energy_uj))) }
                                td data-v=(percent(m.energy_uj, s.energy_uj)) { (format!("{:.1}", percent(m.energy_uj, s.energy_uj))) }
                                @if s.carbon.is_some() { td data-v=(m.carbon_g) { (format!("{:.6}", m.carbon_g)) } }
                                td data-v=(m.samples) { (m.samples) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn tree_table(profile: &ProcessProfile, view: &View) -> Markup {
    let total_uj = profile.summary.energy_uj;
    html! {
        div data-jr-view=(view.name) {
            p.jr-note { "Top " (view.trees.len()) " call trees (" (view.label) "), root first, as the JoularJX call-tree files hold them." }
            div.jr-scroll {
                table.jr-table #{"jr-trees-" (view.name)} {
                    thead { tr {
                        th.jr-name data-jr-key="text" { "call tree" }
                        th data-jr-key="num" { "J" }
                        th data-jr-key="num" { "%" }
                    } }
                    tbody {
                        @for (tree, energy_uj) in &view.trees {
                            tr {
                                td.jr-name {
                                    @for (i, frame) in tree.split(';').enumerate() {
                                        @if i > 0 { span.jr-tree-sep { " › " } }
                                        (frame)
                                    }
                                }
                                td data-v=(energy_uj) { (joules(*energy_uj)) }
                                td data-v=(percent(*energy_uj, total_uj)) { (format!("{:.1}", percent(*energy_uj, total_uj))) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn unattributed_table(view: &View) -> Markup {
    html! {
        div data-jr-view=(view.name) {
            @if view.unattributed.is_empty() {
                p.jr-note { "Every sample of this view has a method." }
            } @else {
                p.jr-note {
                    "Samples whose energy no method of the program stands for (" (view.label) "): "
                    "the JIT compiler's and the collector's threads, the JVM's others, native code no "
                    "Java method called, unreadable stacks, threads that ran between samples, "
                    "and frames nobody could name. The JoularJX files leave them out."
                }
                table.jr-table #{"jr-unattributed-" (view.name)} {
                    thead { tr { th.jr-name { "bucket" } th { "J" } th { "%" } th { "samples" } } }
                    tbody {
                        @for (name, share) in view.unattributed {
                            tr data-uj=(share.energy_uj.round()) {
                                td.jr-name { (name) }
                                td data-v=(share.energy_uj) { (joules(share.energy_uj)) }
                                td data-v=(share.percent) { (format!("{:.1}", share.percent)) }
                                td data-v=(share.samples) { (share.samples) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn losses(profile: &ProcessProfile) -> Markup {
    let s = &profile.summary;
    let rows: Vec<(&String, &u64)> = s.drops.iter().chain(&s.degraded).filter(|(_, &n)| n > 0).collect();
    html! {
        @if !rows.is_empty() {
            h2 #jr-losses { "Drops and degradations" }
            p.jr-note { "Counted over the whole run (drops machine-wide). Nothing is dropped silently." }
            table.jr-table {
                thead { tr { th.jr-name { "cause" } th { "count" } } }
                tbody { @for (cause, n) in rows { tr { td.jr-name { (cause) } td { (n) } } } }
            }
        }
    }
}

fn chart(id: &str, alt: &str, svg: &str) -> Markup {
    use base64::Engine;
    let data = base64::engine::general_purpose::STANDARD.encode(svg);
    html! {
        div.jr-chart {
            img #{"jr-chart-" (id)} data-jr-chart=(id) alt=(alt) src={"data:image/svg+xml;base64," (data)};
        }
    }
}

/// The process's power and its top methods' ("all" view, from the evolution files), with a
/// note when the methods could not be drawn.
fn power_chart(input: &HtmlInput, all: &[NamedTotal]) -> Result<(String, Option<String>), String> {
    let timeline = &input.profile.timeline;
    let total = Series {
        name: format!("{} (process)", input.profile.summary.comm),
        values: timeline.power_w(&timeline.energy_uj),
    };
    let top: Vec<&str> = all.iter().filter(|m| is_method_name(&m.name)).take(TOP_SERIES).map(|m| &*m.name).collect();
    let (methods, note) = match input.evolution_dir {
        Some(dir) => {
            let methods = evolution::method_series(dir, input.profile.summary.pid, timeline, &top);
            let note = (methods.len() < top.len()).then(|| {
                format!(
                    "{} of the top {} methods have no evolution file (--no-evolution, or serve mode).",
                    top.len() - methods.len(),
                    top.len()
                )
            });
            (methods, note)
        }
        None => (Vec::new(), Some("No evolution files next to this profile: only the process is drawn.".to_owned())),
    };
    Ok((charts::power_over_time(timeline, &total, &methods)?, note))
}

/// The top threads by energy and the rest as "other threads".
fn threads_chart(profile: &ProcessProfile) -> Result<String, String> {
    let timeline = &profile.timeline;
    let mut threads: Vec<_> = timeline.threads.iter().collect();
    threads.sort_by(|a, b| b.total_uj().total_cmp(&a.total_uj()).then(a.tid.cmp(&b.tid)));
    let mut series: Vec<Series> = threads
        .iter()
        .take(TOP_SERIES - 1)
        .map(|t| Series { name: format!("{} ({})", t.comm, t.tid), values: timeline.power_w(&t.energy_uj) })
        .collect();
    // Past the top ones, the rest and the threads the timeline folded away are one area.
    let rest_threads = threads.len().saturating_sub(TOP_SERIES - 1);
    let others = rest_threads + timeline.other_thread_count as usize;
    if rest_threads > 1 || others > rest_threads {
        let mut rest = vec![0.0; timeline.covered_s.len()];
        let folded = timeline.other_threads.iter();
        for t in threads.iter().skip(TOP_SERIES - 1).copied().chain(folded) {
            for (sum, e) in rest.iter_mut().zip(&t.energy_uj) {
                *sum += e;
            }
        }
        series.push(Series { name: format!("{others} other threads"), values: timeline.power_w(&rest) });
    } else if rest_threads == 1 {
        let t = threads[TOP_SERIES - 1];
        series.push(Series { name: format!("{} ({})", t.comm, t.tid), values: timeline.power_w(&t.energy_uj) });
    }
    charts::stacked_threads(timeline, &series)
}

/// Joules with JoularJX's precision.
fn joules(energy_uj: f64) -> String {
    format!("{:.4}", energy_uj / 1e6)
}

fn percent(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

/// `2023-11-14 22:13:20` from ms since the epoch (UTC).
fn utc(epoch_ms: u64) -> String {
    match i64::try_from(epoch_ms).ok().and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok()) {
        Some(at) => at.strftime("%Y-%m-%d %H:%M:%S").to_string(),
        None => format!("{epoch_ms} ms since the epoch"),
    }
}

#[cfg(test)]
mod tests;
