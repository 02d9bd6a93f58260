//! `serve`: a Prometheus registry fed once per cycle, scraped over HTTP by a task on the
//! session's runtime.

use std::path::Path;
use std::sync::{Arc, Mutex};

use joular_user::fleet::{MetricsRegistry, MetricsServer, ProcFs, RegistryConfig};
use joular_user::model::CycleReport;

use super::FleetOptions;

pub struct Exporter {
    registry: Arc<Mutex<MetricsRegistry>>,
    procs: ProcFs,
}

impl Exporter {
    pub async fn start(opts: &FleetOptions, proc_root: &Path) -> anyhow::Result<Self> {
        let server = MetricsServer::bind(opts.listen).await?;
        errln!("joular-ebpf: serving Prometheus metrics on http://{}/metrics", server.local_addr());
        let registry = Arc::new(Mutex::new(MetricsRegistry::new(RegistryConfig {
            top_methods: opts.top_methods,
            retain_exited: opts.retain_exited,
            ..RegistryConfig::default()
        })));
        // The server ends with the runtime, when the session returns.
        tokio::spawn(server.run(Arc::clone(&registry), std::future::pending()));
        Ok(Self { registry, procs: ProcFs::new(proc_root.to_path_buf()) })
    }

    pub fn on_cycle(&self, report: &CycleReport) {
        // A poisoned lock means a scrape panicked mid-render; the counters are still whole.
        let mut registry = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        registry.on_cycle(report, &self.procs);
    }
}
