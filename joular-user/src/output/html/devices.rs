//! `--devices network,disk`: a stacked bar per method (CPU / network / disk), top methods by
//! CPU + devices, from `summary.json` `device_energy` (so `joular-ebpf report` draws it from a
//! profile too). Plain HTML bars: no script, no image. Absent without device energy.

use std::collections::HashSet;

use maud::{html, Markup};

use super::joules;
use crate::attribution::stacks::aggregate::NamedTotal;
use crate::attribution::stacks::methods::is_method_name;
use crate::attribution::stacks::profile::ProcessProfile;

/// Methods drawn.
const MAX_BARS: usize = 25;

/// One method's joules: CPU, network, disk.
struct Bar {
    name: String,
    parts_j: [f64; 3],
}

const PARTS: [&str; 3] = ["cpu", "network", "disk"];

/// The section, or nothing when the run had no device energy. `all` is the CPU's "all" view.
pub fn device_bars(profile: &ProcessProfile, all: &[NamedTotal]) -> Markup {
    let Some(devices) = &profile.summary.device_energy else { return html! {} };
    // Every method with device energy, then the CPU's own methods with none.
    let mut bars: Vec<Bar> = devices
        .total
        .methods
        .all
        .iter()
        .filter(|m| is_method_name(&m.name))
        .map(|m| Bar { name: m.name.clone(), parts_j: [m.cpu_j, m.network_j.unwrap_or(0.0), m.disk_j.unwrap_or(0.0)] })
        .collect();
    let seen: HashSet<String> = bars.iter().map(|b| b.name.clone()).collect();
    bars.extend(
        all.iter()
            .filter(|m| is_method_name(&m.name) && !seen.contains(&*m.name))
            .map(|m| Bar { name: m.name.to_string(), parts_j: [m.energy_uj / 1e6, 0.0, 0.0] }),
    );
    let total = |b: &Bar| b.parts_j.iter().sum::<f64>();
    bars.sort_by(|a, b| total(b).total_cmp(&total(a)).then_with(|| a.name.cmp(&b.name)));
    bars.truncate(MAX_BARS);
    let widest = bars.first().map(total).unwrap_or(0.0);
    let device = |name: &str, d: Option<&crate::attribution::stacks::device_run::DeviceSummary>| {
        d.map(|d| format!("{name} {:.4} J ({})", d.energy_j, if d.estimated { "estimated" } else { "measured" }))
    };
    let said: Vec<String> = [device("network", devices.network.as_ref()), device("disk", devices.disk.as_ref())]
        .into_iter()
        .flatten()
        .collect();
    html! {
        h2 #jr-devices { "Energy by device" }
        p.jr-note {
            "Top " (bars.len()) " methods by CPU + devices (all methods): CPU " (format!("{:.4}", devices.total.cpu_j)) " J, "
            (said.join(", ")) ". Network and disk energy come from device models, split by the bytes each "
            "call path moved."
        }
        p.jr-legend { @for part in PARTS { span class={"jr-bar-" (part)} { (part) } " " } }
        table.jr-table #jr-device-bars {
            thead { tr { th.jr-name { "method" } th { "CPU J" } th { "network J" } th { "disk J" } th.jr-bar-cell { "" } } }
            tbody {
                @for bar in &bars {
                    tr data-uj=((total(bar) * 1e6).round()) {
                        td.jr-name { (bar.name) }
                        @for j in bar.parts_j { td { (joules(j * 1e6)) } }
                        td.jr-bar-cell {
                            @for (part, j) in PARTS.iter().zip(bar.parts_j) {
                                @if j > 0.0 && widest > 0.0 {
                                    span class={"jr-bar jr-bar-" (part)} style={"width:" (format!("{:.2}", 100.0 * j / widest)) "%"}
                                        title={(part) " " (format!("{j:.4}")) " J"} {}
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
