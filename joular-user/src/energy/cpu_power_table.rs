//! The utilisation model's coefficients: watts per vCPU at 0% and at 100% utilisation by CPU
//! microarchitecture. The table is data, `joular-user/data/cpu-power-coefficients.csv`, whose
//! header cites where the figures come from and under which licence; this module parses it
//! and matches this machine's CPU (from /proc/cpuinfo) to one of its rows.

use std::fmt;
use std::sync::OnceLock;

use super::cpuinfo::CpuInfo;

/// The table as shipped, compiled in so a VM without the source tree still has it.
const COEFFICIENTS_CSV: &str = include_str!("../../data/cpu-power-coefficients.csv");
const HEADER: &str = "family,vendor,cpu_family,models,steppings,min_w_per_vcpu,max_w_per_vcpu";

/// What every output that shows a modelled figure names as its source.
pub const COEFFICIENTS_SOURCE: &str =
    "Cloud Carbon Footprint's SPECpower_ssj2008 coefficients (Apache-2.0, data/cpu-power-coefficients.csv)";

/// Which CPUs a row stands for.
#[derive(Debug, Clone, PartialEq)]
enum Vendor {
    /// `vendor_id` of x86 CPUs (`GenuineIntel`, `AuthenticAMD`), with the CPUID family.
    X86 { vendor_id: String, cpu_family: u32 },
    /// `CPU implementer` of ARM CPUs; the row's models are `CPU part` values.
    Arm { implementer: u32 },
    /// The fallback for a CPU no other row matches.
    Any,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CpuPowerRow {
    /// The microarchitecture, as printed ("AMD EPYC 3rd Gen (Zen 3)").
    pub family: String,
    vendor: Vendor,
    models: Vec<u32>,
    /// `None`: any stepping.
    steppings: Option<Vec<u32>>,
    pub min_w_per_vcpu: f64,
    pub max_w_per_vcpu: f64,
}

impl CpuPowerRow {
    fn matches(&self, info: &CpuInfo) -> bool {
        match &self.vendor {
            Vendor::X86 { vendor_id, cpu_family } => {
                info.vendor.as_deref() == Some(vendor_id.as_str())
                    && info.cpu_family == Some(*cpu_family)
                    && info.model.is_some_and(|m| self.models.contains(&m))
                    && self.steppings.as_ref().is_none_or(|s| info.stepping.is_some_and(|x| s.contains(&x)))
            }
            Vendor::Arm { implementer } => {
                info.arm_implementer == Some(*implementer) && info.arm_part.is_some_and(|p| self.models.contains(&p))
            }
            Vendor::Any => false,
        }
    }

    /// True for the fallback row (a CPU the table does not know).
    pub fn is_fallback(&self) -> bool {
        self.vendor == Vendor::Any
    }
}

/// The parsed table: rows in file order, the fallback last.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuPowerTable {
    rows: Vec<CpuPowerRow>,
    fallback: CpuPowerRow,
}

/// One CPU matched to its row: what the start-up line and every output print.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuMatch {
    /// What /proc/cpuinfo calls the CPU (its model name, else its CPUID or ARM part).
    pub cpu: String,
    pub row: CpuPowerRow,
}

impl fmt::Display for CpuMatch {
    /// `AMD EPYC → AMD EPYC 3rd Gen (Zen 3), 0.45–2.02 W/vCPU`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} → {}, {:.2}–{:.2} W/vCPU",
            self.cpu, self.row.family, self.row.min_w_per_vcpu, self.row.max_w_per_vcpu
        )
    }
}

impl CpuPowerTable {
    /// The table compiled into the binary (its tests check that it parses).
    pub fn builtin() -> &'static Self {
        static TABLE: OnceLock<CpuPowerTable> = OnceLock::new();
        TABLE.get_or_init(|| Self::parse(COEFFICIENTS_CSV).expect("the built-in coefficient table parses (unit test)"))
    }

    /// Parses the CSV: `#` comments, the header, then one row per line.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'));
        match lines.next() {
            Some((_, header)) if header.trim() == HEADER => {}
            other => return Err(format!("expected the header {HEADER:?}, got {:?}", other.map(|(_, l)| l))),
        }
        let mut rows = Vec::new();
        let mut fallback = None;
        for (n, line) in lines {
            let row = parse_row(line).map_err(|e| format!("line {}: {e}: {line:?}", n + 1))?;
            if row.is_fallback() {
                fallback = Some(row);
            } else {
                rows.push(row);
            }
        }
        let fallback = fallback.ok_or("no fallback row (vendor `*`)")?;
        Ok(Self { rows, fallback })
    }

    /// The row of this CPU, or the fallback.
    pub fn lookup(&self, info: &CpuInfo) -> CpuMatch {
        let row = self.rows.iter().find(|r| r.matches(info)).unwrap_or(&self.fallback).clone();
        CpuMatch { cpu: cpu_name(info), row }
    }
}

fn cpu_name(info: &CpuInfo) -> String {
    if let Some(name) = &info.model_name {
        return format!("{name:?}");
    }
    match (info.arm_implementer, info.arm_part, &info.vendor, info.cpu_family, info.model) {
        (Some(imp), Some(part), ..) => format!("ARM implementer {imp:#x} part {part:#x}"),
        (_, _, Some(vendor), Some(family), Some(model)) => format!("{vendor} family {family} model {model}"),
        _ => "an unidentified CPU".to_owned(),
    }
}

fn parse_row(line: &str) -> Result<CpuPowerRow, String> {
    let fields: Vec<&str> = line.split(',').map(str::trim).collect();
    let [family, vendor, cpu_family, models, steppings, min_w, max_w] = fields[..] else {
        return Err(format!("{} fields, expected 7", fields.len()));
    };
    let number = |s: &str| s.parse::<u32>().map_err(|_| format!("{s:?} is not a number"));
    let list = |s: &str| s.split(';').map(number).collect::<Result<Vec<u32>, String>>();
    let watts = |s: &str| match s.parse::<f64>() {
        Ok(w) if w.is_finite() && w >= 0.0 => Ok(w),
        _ => Err(format!("{s:?} is not a number of watts")),
    };
    let vendor = match vendor {
        "*" => Vendor::Any,
        v => match v.strip_prefix("arm:0x") {
            Some(hex) => Vendor::Arm {
                implementer: u32::from_str_radix(hex, 16).map_err(|_| format!("{v:?} is not arm:0x<hex>"))?,
            },
            None => Vendor::X86 { vendor_id: v.to_owned(), cpu_family: number(cpu_family)? },
        },
    };
    let (min_w_per_vcpu, max_w_per_vcpu) = (watts(min_w)?, watts(max_w)?);
    if min_w_per_vcpu >= max_w_per_vcpu {
        return Err("min_w_per_vcpu must be below max_w_per_vcpu".into());
    }
    Ok(CpuPowerRow {
        family: family.to_owned(),
        vendor,
        models: list(models)?,
        steppings: if steppings == "*" { None } else { Some(list(steppings)?) },
        min_w_per_vcpu,
        max_w_per_vcpu,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::energy::cpuinfo::parse_cpuinfo;

    fn lookup(cpuinfo: &str) -> CpuMatch {
        CpuPowerTable::builtin().lookup(&parse_cpuinfo(cpuinfo))
    }

    /// Recorded /proc/cpuinfo files (first processor), from machines of each kind
    /// (`tests/data/cpuinfo/README.md` says where each was recorded).
    const INTEL_CASCADE_LAKE: &str = include_str!("../../tests/data/cpuinfo/intel-xeon-8259cl.txt");
    const AMD_ZEN3_VM: &str = include_str!("../../tests/data/cpuinfo/amd-epyc-vm.txt");
    const ARM_NEOVERSE_N1: &str = include_str!("../../tests/data/cpuinfo/arm-neoverse-n1.txt");
    const INTEL_ICE_LAKE: &str = include_str!("../../tests/data/cpuinfo/intel-xeon-8380.txt");

    #[test]
    fn the_builtin_table_parses_and_has_its_fallback() {
        let table = CpuPowerTable::builtin();
        assert!(table.rows.len() >= 10, "{table:?}");
        assert!(table.fallback.is_fallback());
        assert_eq!((table.fallback.min_w_per_vcpu, table.fallback.max_w_per_vcpu), (0.74, 3.5));
        assert!(COEFFICIENTS_CSV.contains("Apache-2.0") && COEFFICIENTS_CSV.contains("cloud-carbon-footprint"));
    }

    #[test]
    fn intel_cascade_lake_is_told_from_skylake_by_its_stepping() {
        let cascade = lookup(INTEL_CASCADE_LAKE);
        assert_eq!(cascade.row.family, "Intel Cascade Lake");
        assert_eq!((cascade.row.min_w_per_vcpu, cascade.row.max_w_per_vcpu), (0.64, 3.97));
        // The same CPUID model at stepping 4 is Skylake-SP.
        let skylake = lookup(&INTEL_CASCADE_LAKE.replace("stepping\t: 7", "stepping\t: 4"));
        assert_eq!(skylake.row.family, "Intel Skylake");
        assert_eq!((skylake.row.min_w_per_vcpu, skylake.row.max_w_per_vcpu), (0.65, 4.26));
    }

    #[test]
    fn amd_is_matched_by_cpuid_when_a_vm_hides_the_model_number() {
        let zen3 = lookup(AMD_ZEN3_VM);
        assert_eq!(zen3.to_string(), "\"AMD EPYC\" → AMD EPYC 3rd Gen (Zen 3), 0.45–2.02 W/vCPU");
        let rome =
            lookup(&AMD_ZEN3_VM.replace("cpu family\t: 25\nmodel\t\t: 1\n", "cpu family\t: 23\nmodel\t\t: 49\n"));
        assert_eq!(rome.row.family, "AMD EPYC 2nd Gen (Zen 2)");
    }

    #[test]
    fn arm_neoverse_n1_is_matched_by_its_part() {
        let n1 = lookup(ARM_NEOVERSE_N1);
        assert_eq!(n1.row.family, "Arm Neoverse N1 (AWS Graviton2)");
        assert_eq!(n1.cpu, "ARM implementer 0x41 part 0xd0c");
        assert_eq!((n1.row.min_w_per_vcpu, n1.row.max_w_per_vcpu), (0.47, 1.69));
    }

    #[test]
    fn an_unknown_cpu_gets_the_fallback_and_says_so() {
        let ice_lake = lookup(INTEL_ICE_LAKE);
        assert!(ice_lake.row.is_fallback(), "{ice_lake:?}");
        let line = ice_lake.to_string();
        assert!(line.contains("8380") && line.contains("unknown CPU") && line.contains("0.74–3.50"), "{line}");
        assert!(lookup("").row.is_fallback());
        assert_eq!(lookup("").cpu, "an unidentified CPU");
    }

    #[test]
    fn a_malformed_table_names_the_line() {
        let bad = format!("# c\n{HEADER}\nX,GenuineIntel,6,1,*,2.0,1.0\n");
        assert!(CpuPowerTable::parse(&bad).unwrap_err().contains("line 3"));
        assert!(CpuPowerTable::parse("family,x\n").unwrap_err().contains("header"));
        let no_fallback = format!("{HEADER}\nX,GenuineIntel,6,1,*,1.0,2.0\n");
        assert!(CpuPowerTable::parse(&no_fallback).unwrap_err().contains("fallback"));
    }
}
