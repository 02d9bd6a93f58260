//! The network interface model (E-Surgeon eq. 9): an interface draws its idle power all cycle
//! long and a fixed power per Gbit/s it moves, so a cycle of `d` seconds that moved `bits`
//! costs `idle_w·d + w_per_gbps·bits/1e9` joules. Figures per card, chosen by the PCI ids of
//! `/sys/class/net/IFACE/device/{vendor,device}`; sources in docs/devices.md.

use std::path::{Path, PathBuf};

use super::figures::UnitFigures;

/// What the model takes for one interface.
#[derive(Debug, Clone, PartialEq)]
pub struct NicPower {
    /// `intel-i350`, `generic`, `--nic-power`.
    pub model: &'static str,
    pub idle_w: f64,
    pub w_per_gbps: f64,
}

/// Intel Ethernet Controller I350 datasheet (333171-002, rev. 2.4): 2.8 W max in dual-port
/// mode, so 1.4 W a port at full load (both directions, 2 Gbit/s moved); idle taken as half
/// of it (Intel's I210 brief: EEE low-power idle ~50% of normal power). docs/devices.md.
const INTEL_1GBE: (f64, f64) = (0.7, 0.35);

/// Known cards: (PCI vendor, device, model, idle W, W per Gbit/s).
const CARDS: &[(u16, u16, &str, (f64, f64))] = &[
    (0x8086, 0x1521, "intel-i350", INTEL_1GBE),
    (0x8086, 0x1522, "intel-i350", INTEL_1GBE),
    (0x8086, 0x1523, "intel-i350", INTEL_1GBE),
    (0x8086, 0x1524, "intel-i350", INTEL_1GBE),
    (0x8086, 0x1533, "intel-i210", INTEL_1GBE),
    (0x8086, 0x1536, "intel-i210", INTEL_1GBE),
    (0x8086, 0x1537, "intel-i210", INTEL_1GBE),
    (0x8086, 0x1538, "intel-i210", INTEL_1GBE),
];

/// Any other interface (virtio, veth, a bridge, unknown ids): a 1 GbE port with the Intel
/// figures above. An assumption, not a measurement of that interface (docs/devices.md).
pub const GENERIC: NicPower = NicPower { model: "generic-1gbe", idle_w: INTEL_1GBE.0, w_per_gbps: INTEL_1GBE.1 };

/// The figures for a card with these PCI ids.
pub fn power_of(ids: Option<(u16, u16)>) -> NicPower {
    ids.and_then(|(v, d)| CARDS.iter().find(|c| c.0 == v && c.1 == d))
        .map(|c| NicPower { model: c.2, idle_w: c.3 .0, w_per_gbps: c.3 .1 })
        .unwrap_or(GENERIC)
}

/// Joules of a cycle of `d_s` seconds that moved `bytes`.
pub fn energy_j(p: &NicPower, d_s: f64, bytes: u64) -> f64 {
    p.idle_w * d_s + p.w_per_gbps * (bytes as f64 * 8.0) / 1e9
}

fn read_hex(path: &Path) -> Option<u16> {
    let text = std::fs::read_to_string(path).ok()?;
    u16::from_str_radix(text.trim().trim_start_matches("0x"), 16).ok()
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// One interface found under `<sysfs>/class/net`.
#[derive(Debug, Clone)]
pub struct Interface {
    pub name: String,
    pub power: NicPower,
    dir: PathBuf,
}

impl Interface {
    /// Its index in the network namespace the profiler runs in (`None` when unreadable: its
    /// bytes are then told apart from no other interface's).
    pub fn ifindex(&self) -> Option<u32> {
        read_u64(&self.dir.join("ifindex")).and_then(|i| u32::try_from(i).ok()).filter(|&i| i > 0)
    }

    /// Bytes sent plus received since boot, or `None` when unreadable (gone).
    pub fn bytes(&self) -> Option<u64> {
        let stats = self.dir.join("statistics");
        Some(read_u64(&stats.join("tx_bytes"))?.saturating_add(read_u64(&stats.join("rx_bytes"))?))
    }
}

/// Every interface of `<sysfs>/class/net` but `lo` (loopback costs CPU, never NIC, energy),
/// by name, with its figures (`overrides` first).
pub fn interfaces(sysfs: &Path, overrides: &[UnitFigures]) -> Vec<Interface> {
    let Ok(entries) = std::fs::read_dir(sysfs.join("class/net")) else { return Vec::new() };
    let mut found: Vec<Interface> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_owned();
            if name == "lo" {
                return None;
            }
            let dir = e.path();
            let power = match overrides.iter().find(|o| o.name == name) {
                Some(o) => NicPower { model: "--nic-power", idle_w: o.a_w, w_per_gbps: o.b_w },
                None => {
                    let ids = read_hex(&dir.join("device/vendor")).zip(read_hex(&dir.join("device/device")));
                    power_of(ids)
                }
            };
            Some(Interface { name, power, dir })
        })
        .collect();
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub fn fake_iface(root: &Path, name: &str, ids: Option<(&str, &str)>, tx: u64, rx: u64) {
        let dir = root.join("class/net").join(name);
        std::fs::create_dir_all(dir.join("statistics")).unwrap();
        std::fs::write(dir.join("statistics/tx_bytes"), format!("{tx}\n")).unwrap();
        std::fs::write(dir.join("statistics/rx_bytes"), format!("{rx}\n")).unwrap();
        if let Some((v, d)) = ids {
            std::fs::create_dir_all(dir.join("device")).unwrap();
            std::fs::write(dir.join("device/vendor"), format!("{v}\n")).unwrap();
            std::fs::write(dir.join("device/device"), format!("{d}\n")).unwrap();
        }
    }

    #[test]
    fn cards_are_chosen_by_pci_ids_lo_is_skipped_and_overrides_win() {
        let root = tempfile::tempdir().unwrap();
        fake_iface(root.path(), "lo", None, 5, 5);
        fake_iface(root.path(), "eth0", Some(("0x8086", "0x1521")), 100, 50);
        fake_iface(root.path(), "eth1", Some(("0x1af4", "0x0001")), 0, 0);
        fake_iface(root.path(), "veth0", None, 1, 2);
        fake_iface(root.path(), "eth2", Some(("0x8086", "0x1533")), 0, 0);
        let over = [UnitFigures { name: "veth0".into(), a_w: 2.0, b_w: 1.0 }];
        let found = interfaces(root.path(), &over);
        let names: Vec<(&str, &str)> = found.iter().map(|i| (i.name.as_str(), i.power.model)).collect();
        assert_eq!(
            names,
            [("eth0", "intel-i350"), ("eth1", "generic-1gbe"), ("eth2", "intel-i210"), ("veth0", "--nic-power")]
        );
        assert_eq!(found[0].bytes(), Some(150));
        assert_eq!(found[3].power.idle_w, 2.0);
        // 0.7 W for 2 s, and 1 Gbit (125 MB) at 0.35 W per Gbit/s: 1.4 + 0.35 J.
        assert!((energy_j(&found[0].power, 2.0, 125_000_000) - 1.75).abs() < 1e-12);
        assert!(interfaces(&root.path().join("none"), &[]).is_empty());
    }
}
