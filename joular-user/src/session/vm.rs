//! `serve --vm-energy-dir`: the export written each cycle right after attribution (not after
//! symbols, which may wait seconds), its warnings printed, its series handed to Prometheus.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use joular_user::collect::ThreadExit;
use joular_user::fleet::MetricsRegistry;
use joular_user::model::CycleReport;
use joular_user::stages::energy::EnergyStage;
use joular_user::vm_export::VmEnergyExport;

use super::exporter::Exporter;
use crate::cli::args::CommonArgs;

pub struct VmExport {
    export: VmEnergyExport,
    registry: Option<Arc<Mutex<MetricsRegistry>>>,
}

impl VmExport {
    /// What the host's figures are (its source, whether estimated, the source's detail) is
    /// written beside each VM's counter, for the guest to say.
    pub fn open(
        dir: &Path,
        range_uj: u64,
        common: &CommonArgs,
        energy: &EnergyStage,
        exporter: Option<&Exporter>,
    ) -> anyhow::Result<Self> {
        let mut line = energy.source_label().to_owned();
        if energy.estimated() {
            line.push_str(" (ESTIMATED)");
        }
        let detail = energy.detail();
        if !detail.is_empty() {
            line.push_str(": ");
            line.push_str(&detail);
        }
        let line = line.as_str();
        let export = VmEnergyExport::open(dir, &common.proc_root, common.modes(), range_uj, line)
            .with_context(|| format!("--vm-energy-dir {}", dir.display()))?;
        errln!("joular-ebpf: writing virtual machines' energy under {}", dir.display());
        Ok(Self { export, registry: exporter.map(Exporter::registry) })
    }

    pub fn on_cycle(&mut self, report: &CycleReport, starts: &HashMap<u32, u32>, exits: &[ThreadExit]) {
        for warning in self.export.on_cycle(report, starts, exits) {
            errln!("joular-ebpf: warning: {warning}");
        }
        if let Some(registry) = &self.registry {
            registry.lock().unwrap_or_else(|e| e.into_inner()).set_vms(self.export.series());
        }
    }
}
