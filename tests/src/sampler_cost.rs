//! The line `--sampler-cost` ends a run with, read back: the root test of the flag and
//! `cargo xtask bench --overhead` both take their figures from it.

/// `joular-ebpf: sampler cost: N samples of profiled threads, median A-B ns, p90 C-D ns, p99
/// E-F ns (...)`, each quantile the low end of its 100 ns bucket (`>= E ns` for the last one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplerCostLine {
    pub samples: u64,
    pub median_ns: f64,
    pub p90_ns: f64,
    pub p99_ns: f64,
}

const PREFIX: &str = "joular-ebpf: sampler cost: ";

impl SamplerCostLine {
    /// None for any other line, and for a run that timed no sample (its quantiles read `-`).
    pub fn parse(line: &str) -> Option<Self> {
        let rest = line.strip_prefix(PREFIX)?;
        let number_after = |label: &str| -> Option<&str> {
            let after = &rest[rest.find(label)? + label.len()..];
            let after = after.strip_prefix(">= ").unwrap_or(after);
            Some(&after[..after.find(|c: char| !c.is_ascii_digit()).unwrap_or(after.len())])
        };
        Some(SamplerCostLine {
            samples: number_after("")?.parse().ok()?,
            median_ns: number_after("median ")?.parse().ok()?,
            p90_ns: number_after("p90 ")?.parse().ok()?,
            p99_ns: number_after("p99 ")?.parse().ok()?,
        })
    }

    /// The first such line of a run's stderr.
    pub fn find(stderr: &str) -> Option<Self> {
        stderr.lines().find_map(Self::parse)
    }
}

#[cfg(test)]
mod tests {
    use super::SamplerCostLine;

    #[test]
    fn each_quantile_is_its_bucket_low_end() {
        let line = "joular-ebpf: sampler cost: 1234 samples of profiled threads, median 1900-2000 ns, \
                    p90 4100-4200 ns, p99 >= 25500 ns (ns a sample, from the sampler's first clock read to its last store)";
        assert_eq!(
            SamplerCostLine::parse(line),
            Some(SamplerCostLine { samples: 1234, median_ns: 1900.0, p90_ns: 4100.0, p99_ns: 25500.0 })
        );
        let stderr = format!("joular-ebpf: stopping (target exited)\n{line}\n");
        assert_eq!(SamplerCostLine::find(&stderr).map(|c| c.samples), Some(1234));
    }

    #[test]
    fn other_lines_and_empty_runs_give_nothing() {
        let empty = "joular-ebpf: sampler cost: 0 samples of profiled threads, median -, p90 -, p99 -";
        assert_eq!(SamplerCostLine::parse(empty), None);
        assert_eq!(SamplerCostLine::parse("joular-ebpf: stopping (target exited)"), None);
        assert_eq!(SamplerCostLine::find("no such line\n"), None);
    }
}
