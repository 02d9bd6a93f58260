//! The few /proc/cpuinfo fields the energy sources need: vendor (which MSRs), the CPU's
//! identity (which power coefficients: CPUID family/model/stepping on x86, implementer and
//! part on ARM, and the model name to print), and `physical id` (socket fallback when sysfs
//! topology is absent).

use std::path::Path;

use super::error::EnergyError;
use super::files::read_trimmed;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuInfo {
    pub vendor: Option<String>,
    pub model_name: Option<String>,
    /// x86 CPUID family, model and stepping (decimal in /proc/cpuinfo).
    pub cpu_family: Option<u32>,
    pub model: Option<u32>,
    pub stepping: Option<u32>,
    /// ARM: `CPU implementer` (0x41 is Arm Ltd) and `CPU part` (0xd0c is Neoverse N1), hex.
    pub arm_implementer: Option<u32>,
    pub arm_part: Option<u32>,
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
            "cpu family" if info.cpu_family.is_none() => info.cpu_family = value.parse().ok(),
            "model" if info.model.is_none() => info.model = value.parse().ok(),
            "stepping" if info.stepping.is_none() => info.stepping = value.parse().ok(),
            "CPU implementer" if info.arm_implementer.is_none() => info.arm_implementer = parse_hex(value),
            "CPU part" if info.arm_part.is_none() => info.arm_part = parse_hex(value),
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

fn parse_hex(value: &str) -> Option<u32> {
    u32::from_str_radix(value.strip_prefix("0x")?, 16).ok()
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
    fn parses_x86_cpuid_and_arm_part() {
        let x86 =
            parse_cpuinfo("processor : 0\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\nstepping\t: 1\n");
        assert_eq!((x86.cpu_family, x86.model, x86.stepping), (Some(25), Some(1), Some(1)));
        let arm = parse_cpuinfo("processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n");
        assert_eq!((arm.arm_implementer, arm.arm_part, arm.model), (Some(0x41), Some(0xd0c), None));
    }

    #[test]
    fn missing_physical_id_gives_no_socket_entries() {
        let info = parse_cpuinfo("processor : 0\nvendor_id : GenuineIntel\n");
        assert!(info.physical_ids.is_empty());
        assert_eq!(info.model_name, None);
    }
}
