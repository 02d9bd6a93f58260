//! The terminal table of the top methods by energy (J, W, % of the processes' energy, and
//! grams of CO₂e when the run was given a carbon intensity). With `--devices network,disk`, a
//! column per device whose energy is not zero (its joules, estimated by its model); methods
//! are then ranked by CPU + devices, and J, W and % stay the CPU's.

use std::collections::HashMap;
use std::fmt::Write;

use crate::attribution::stacks::aggregate::{method_totals, Scope};
use crate::attribution::stacks::methods::{is_unnamed_code, MethodFilter, UNNAMED_CODE};
use crate::attribution::stacks::profile::{ProcessProfile, Share};
use crate::attribution::stacks::RunEnd;
use crate::device_reports::Device;

/// Longest method name shown; longer ones keep their end (the method, not the package).
const MAX_NAME_CHARS: usize = 90;

struct Row {
    pid: u32,
    name: String,
    energy_j: f64,
    power_w: f64,
    carbon_g: f64,
    samples: u64,
    /// Joules per device, in `Device::ALL` order.
    device_j: [f64; 2],
}

impl Row {
    fn total_j(&self) -> f64 {
        self.energy_j + self.device_j.iter().sum::<f64>()
    }
}

/// The devices with energy in any of `profiles`, in `Device::ALL` order.
fn devices_shown(profiles: &[ProcessProfile]) -> Vec<usize> {
    (0..Device::ALL.len())
        .filter(|&i| profiles.iter().flat_map(|p| &p.devices).any(|d| d.device == Device::ALL[i] && d.energy_uj > 0.0))
        .collect()
}

/// The end-of-run table of the top `top_n` methods of every process of the run.
pub fn table(run: &RunEnd, top_n: usize) -> String {
    top_methods_table(&run.profiles, None, top_n)
}

/// One table for "all" and, where a process has filters (or `filter` overrides them), one
/// for "app". Several processes get a pid column and one ranking across them.
pub fn top_methods_table(profiles: &[ProcessProfile], filter: Option<&MethodFilter>, top_n: usize) -> String {
    let mut out = String::new();
    let filters: Vec<MethodFilter> = profiles
        .iter()
        .map(|p| filter.cloned().unwrap_or_else(|| MethodFilter::new(p.summary.filters.iter().cloned())))
        .collect();
    render(&mut out, "all", profiles, top_n, |_| Some(Scope::All));
    jvm_shares(&mut out, profiles);
    carbon_lines(&mut out, profiles);
    if filters.iter().any(|f| !f.is_empty()) {
        let mut prefixes: Vec<&str> = filters.iter().flat_map(|f| f.prefixes()).map(String::as_str).collect();
        prefixes.sort_unstable();
        prefixes.dedup();
        out.push('\n');
        render(&mut out, &format!("app: {}", prefixes.join(",")), profiles, top_n, |i| {
            (!filters[i].is_empty()).then(|| Scope::App(&filters[i]))
        });
    }
    out
}

fn render<'a>(
    out: &mut String,
    view: &str,
    profiles: &'a [ProcessProfile],
    top_n: usize,
    scope_of: impl Fn(usize) -> Option<Scope<'a>>,
) {
    let mut rows = Vec::new();
    let mut total_j = 0.0;
    let mut unnamed_j = 0.0;
    for (i, profile) in profiles.iter().enumerate() {
        let Some(scope) = scope_of(i) else { continue };
        total_j += profile.summary.energy_uj / 1e6;
        let (unnamed, methods): (Vec<_>, Vec<_>) =
            method_totals(&profile.stacks, scope, profile.rules()).into_iter().partition(|m| is_unnamed_code(&m.name));
        unnamed_j += unnamed.iter().map(|m| m.energy_uj / 1e6).sum::<f64>();
        // Each device's methods by the same rules; a method with device energy only gets a row.
        let mut on_devices: HashMap<std::sync::Arc<str>, [f64; 2]> = HashMap::new();
        for d in &profile.devices {
            let slot = Device::ALL.iter().position(|x| *x == d.device).expect("every device is in ALL");
            for m in method_totals(&d.stacks, scope, profile.rules()) {
                if !is_unnamed_code(&m.name) {
                    on_devices.entry(m.name).or_default()[slot] += m.energy_uj / 1e6;
                }
            }
        }
        let row = |name: &str, energy_uj: f64, carbon_g: f64, samples: u64, device_j: [f64; 2]| Row {
            pid: profile.summary.pid,
            name: shorten(name),
            energy_j: energy_uj / 1e6,
            power_w: profile.summary.power_w(energy_uj),
            carbon_g,
            samples,
            device_j,
        };
        for m in &methods {
            rows.push(row(&m.name, m.energy_uj, m.carbon_g, m.samples, on_devices.remove(&m.name).unwrap_or_default()));
        }
        for (name, device_j) in on_devices {
            rows.push(row(&name, 0.0, 0.0, 0, device_j));
        }
    }
    rows.sort_by(|a, b| b.total_j().total_cmp(&a.total_j()).then_with(|| a.name.cmp(&b.name)));
    let devices = devices_shown(profiles);
    let shown = rows.len().min(top_n);
    let show_pid = profiles.len() > 1;
    let _ = writeln!(out, "Top {shown} of {} methods by energy ({view}), {total_j:.3} J in total", rows.len());
    let width = rows[..shown].iter().map(|r| r.name.chars().count()).max().unwrap_or(6).max(6);
    let pid_head = if show_pid { format!("{:>8} ", "pid") } else { String::new() };
    let carbon = profiles.iter().any(|p| p.summary.carbon.is_some());
    let carbon_head = if carbon { format!(" {:>12}", "gCO2e") } else { String::new() };
    let device_head: String =
        devices.iter().map(|&i| format!(" {:>12}", format!("{} J", Device::ALL[i].name()))).collect();
    let _ = writeln!(
        out,
        "{:>4} {pid_head}{:<width$} {:>12}{device_head} {:>10} {:>7}{carbon_head} {:>9}",
        "#", "method", "J", "W", "%", "samples"
    );
    for (rank, row) in rows[..shown].iter().enumerate() {
        let pid = if show_pid { format!("{:>8} ", row.pid) } else { String::new() };
        let percent = if total_j > 0.0 { 100.0 * row.energy_j / total_j } else { 0.0 };
        let grams = if carbon { format!(" {:>12.6}", row.carbon_g) } else { String::new() };
        let on_devices: String = devices.iter().map(|&i| format!(" {:>12.3}", row.device_j[i])).collect();
        let _ = writeln!(
            out,
            "{:>4} {pid}{:<width$} {:>12.3}{on_devices} {:>10.3} {:>6.1}%{grams} {:>9}",
            rank + 1,
            row.name,
            row.energy_j,
            row.power_w,
            percent,
            row.samples
        );
    }
    if !devices.is_empty() {
        let said: Vec<String> = devices
            .iter()
            .map(|&i| {
                let device = Device::ALL[i];
                let uj: f64 =
                    profiles.iter().flat_map(|p| &p.devices).filter(|d| d.device == device).map(|d| d.energy_uj).sum();
                format!("{} {:.3} J", device.name(), uj / 1e6)
            })
            .collect();
        let _ = writeln!(
            out,
            "devices (estimated by their models, ranked with the CPU; J, W and % are the CPU's): {}",
            said.join(", ")
        );
    }
    if unnamed_j > 0.0 {
        let percent = if total_j > 0.0 { 100.0 * unnamed_j / total_j } else { 0.0 };
        let _ = writeln!(
            out,
            "not ranked: code no method could be named for ({}), {unnamed_j:.3} J ({percent:.1}%)",
            UNNAMED_CODE.join(", ")
        );
    }
}

/// The JIT compiler's and the collector's share of each JVM (JFR leaves them out).
fn jvm_shares(out: &mut String, profiles: &[ProcessProfile]) {
    for profile in profiles {
        let Some(jvm) = &profile.summary.jvm else {
            continue;
        };
        let pid = if profiles.len() > 1 { format!("pid {}: ", profile.summary.pid) } else { String::new() };
        let share = |name: &str, s: &Share| format!("{name} {:.3} J ({:.1}%)", s.energy_uj / 1e6, s.percent);
        let _ = writeln!(
            out,
            "{pid}JVM outside Java code: {}, {}, {}, {}",
            share("JIT compiler", &jvm.jit_compiler),
            share("GC", &jvm.gc),
            share("other JVM threads", &jvm.jvm_other),
            share("native without a Java caller", &jvm.native),
        );
    }
}

/// Each process's and the machine's grams of CO₂e, and the intensity they were computed with.
fn carbon_lines(out: &mut String, profiles: &[ProcessProfile]) {
    for profile in profiles {
        let Some(c) = &profile.summary.carbon else { continue };
        let _ = writeln!(
            out,
            "carbon: pid {} {:.6} gCO2e, machine {:.6} gCO2e (mean {:.1} gCO2e/kWh; {})",
            profile.summary.pid, c.grams, c.host_grams, c.mean_g_per_kwh, c.intensity
        );
    }
}

fn shorten(name: &str) -> String {
    let chars = name.chars().count();
    if chars <= MAX_NAME_CHARS {
        return name.to_owned();
    }
    let tail: String = name.chars().skip(chars - (MAX_NAME_CHARS - 1)).collect();
    format!("…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::stacks::aggregate::StackTotal;
    use crate::attribution::stacks::methods::tests::java;
    use crate::attribution::stacks::profile::RunSummary;
    use std::sync::Arc;

    fn profile(pid: u32, filters: &[&str], methods: &[(&str, f64)]) -> ProcessProfile {
        ProcessProfile {
            summary: RunSummary {
                pid,
                duration_s: 2.0,
                filters: filters.iter().map(|f| f.to_string()).collect(),
                energy_uj: methods.iter().map(|m| m.1).sum(),
                ..RunSummary::default()
            },
            stacks: methods
                .iter()
                .map(|(name, energy_uj)| StackTotal {
                    carbon_g: 0.0,
                    thread: crate::attribution::stacks::thread_kind::ThreadKind::Application,
                    stack: Arc::from(vec![java("com.acme.Main.main"), java(name)]),
                    energy_uj: *energy_uj,
                    samples: 1,
                })
                .collect(),
            ..ProcessProfile::default()
        }
    }

    #[test]
    fn table_ranks_methods_with_joules_watts_and_percent() {
        let p = profile(1, &["com.acme"], &[("java.util.HashMap.get", 1_000_000.0), ("com.acme.A.f", 3_000_000.0)]);
        let table = top_methods_table(std::slice::from_ref(&p), None, 1);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("Top 1 of 2 methods by energy (all), 4.000 J"), "{table}");
        assert!(
            lines[2].contains("com.acme.A.f") && lines[2].contains("3.000") && lines[2].contains("1.500"),
            "{table}"
        );
        assert!(lines[2].contains("75.0%"), "{table}");
        let app_head = lines.iter().position(|l| l.contains("(app: com.acme)")).expect(&table);
        assert!(lines[app_head + 2].contains("com.acme.A.f"), "{table}");
        // In the app view, the JDK's HashMap.get is charged to the app method that called it.
        let app = top_methods_table(std::slice::from_ref(&p), None, 2);
        let caller = app.lines().skip_while(|l| !l.contains("(app:")).find(|l| l.contains("com.acme.Main.main"));
        assert!(caller.expect(&app).contains("25.0%"), "{app}");
        assert!(!table.contains("pid"), "single process has no pid column");
    }

    #[test]
    fn several_processes_get_a_pid_column_and_no_app_table_without_filters() {
        let a = profile(11, &[], &[("a.A.f", 1.0)]);
        let b = profile(22, &[], &[("b.B.g", 3.0)]);
        let table = top_methods_table(&[a, b], None, 10);
        assert!(table.contains("pid") && !table.contains("app:"), "{table}");
        let first = table.lines().nth(2).unwrap();
        assert!(first.contains("22") && first.contains("b.B.g"), "{table}");
    }

    #[test]
    fn unnamed_code_is_not_ranked_but_its_energy_is_said() {
        let p = profile(1, &[], &[("a.A.f", 3_000_000.0), ("Interpreter", 1_000_000.0)]);
        let table = top_methods_table(std::slice::from_ref(&p), None, 10);
        assert!(table.starts_with("Top 1 of 1 methods by energy (all), 4.000 J"), "{table}");
        assert!(!table.lines().any(|l| l.trim_start().starts_with("2 ")), "{table}");
        let line = table.lines().find(|l| l.starts_with("not ranked:")).expect(&table);
        assert!(line.contains("1.000 J (25.0%)"), "{table}");
    }

    #[test]
    fn a_device_with_energy_gets_a_column_and_ranks_with_the_cpu() {
        use crate::attribution::stacks::device_run::DeviceProfile;
        let mut p = profile(1, &[], &[("a.A.cpu", 3_000_000.0), ("a.A.send", 1_000_000.0)]);
        let device = |device, energy: &[(&str, f64)]| DeviceProfile {
            device,
            estimated: true,
            source: "model".into(),
            energy_uj: energy.iter().map(|e| e.1).sum(),
            threads: vec![],
            stacks: profile(1, &[], energy).stacks,
        };
        let cpu_only = top_methods_table(std::slice::from_ref(&p), None, 10);
        p.devices =
            vec![device(Device::Disk, &[]), device(Device::Network, &[("a.A.send", 2_500_000.0), ("a.A.recv", 0.5e6)])];
        let table = top_methods_table(std::slice::from_ref(&p), None, 10);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[1].contains("network J") && !lines[1].contains("disk"), "a zero device has no column: {table}");
        // send: 1 J CPU + 2.5 J network outranks cpu's 3 J; recv has network energy only.
        let cells = |line: &str| line.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(cells(lines[2])[1..4], ["a.A.send", "1.000", "2.500"], "{table}");
        assert_eq!(cells(lines[3])[1..4], ["a.A.cpu", "3.000", "0.000"], "{table}");
        assert_eq!(cells(lines[4])[1..4], ["a.A.recv", "0.000", "0.500"], "{table}");
        assert!(table.contains("network 3.000 J"), "{table}");
        // Without device energy the table is the CPU's, unchanged.
        p.devices = vec![device(Device::Network, &[])];
        assert_eq!(top_methods_table(std::slice::from_ref(&p), None, 10), cpu_only);
        assert!(!cpu_only.contains("network"));
    }

    #[test]
    fn long_names_keep_their_end() {
        let long = format!("{}.method", "x".repeat(200));
        let short = shorten(&long);
        assert_eq!(short.chars().count(), MAX_NAME_CHARS);
        assert!(short.ends_with(".method"));
    }
}
