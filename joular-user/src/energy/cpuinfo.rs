//! The few /proc/cpuinfo fields the energy sources need: vendor (which MSRs), model name
//! (which TDP), and `physical id` (socket fallback when sysfs topology is absent).

use std::path::Path;

use super::error::EnergyError;
use super::files::read_trimmed;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuInfo {
    pub vendor: Option<String>,
    pub model_name: Option<String>,
    /// `(processor, physical id)` for every processor that has a `physical id` line.
    pub physical_ids: Vec<(u32, u32)>,
}

impl CpuInfo {
    pub fn read(proc_root: &Path) -> Result<Self, EnergyError> {
        Ok(parse_cpuinfo(&read_trimmed(&proc_root.join("cpuinfo"), "")?))
    }
}

/// Pure parser: `key<tabs>: value` lines, processors separated by blank lines.
pub fn parse_cpuinfo(text: &str) -> CpuInfo {
    let mut info = CpuInfo::default();
    let mut processor = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else { continue };
        let (key, value) = (key.trim(), value.trim());
        match key {
            "processor" => processor = value.parse().ok(),
            "vendor_id" if info.vendor.is_none() => info.vendor = Some(value.to_owned()),
            "model name" if info.model_name.is_none() => info.model_name = Some(value.to_owned()),
            "physical id" => {
                if let (Some(cpu), Ok(socket)) = (processor, value.parse()) {
                    info.physical_ids.push((cpu, socket));
                }
            }
            _ => {}
        }
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_vendor_model_and_sockets() {
        let text = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7763 64-Core Processor\nphysical id\t: 0\n\n\
                    processor\t: 1\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7763 64-Core Processor\nphysical id\t: 1\n";
        let info = parse_cpuinfo(text);
        assert_eq!(info.vendor.as_deref(), Some("AuthenticAMD"));
        assert_eq!(info.model_name.as_deref(), Some("AMD EPYC 7763 64-Core Processor"));
        assert_eq!(info.physical_ids, vec![(0, 0), (1, 1)]);
    }

    #[test]
    fn missing_physical_id_gives_no_socket_entries() {
        let info = parse_cpuinfo("processor : 0\nvendor_id : GenuineIntel\n");
        assert!(info.physical_ids.is_empty());
        assert_eq!(info.model_name, None);
    }
}
