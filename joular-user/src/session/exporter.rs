//! `serve`: a Prometheus registry fed once per cycle, scraped over HTTP on a thread (and
//! runtime) of its own, so a scrape is answered whatever the session loop or the symbol
//! worker is doing.

use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::Context as _;
use joular_user::attribution::stacks::AttributedCycle;
use joular_user::fleet::{MetricsRegistry, MetricsServer, ProcFs, RegistryConfig};
use joular_user::output::{Sink, SinkError};
use tokio::sync::oneshot;

use super::FleetOptions;

pub struct Exporter {
    registry: Arc<Mutex<MetricsRegistry>>,
    procs: ProcFs,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Exporter {
    /// Binds the endpoint (a taken port fails here, before anything is loaded) and serves it.
    pub fn start(opts: &FleetOptions, proc_root: &Path) -> anyhow::Result<Self> {
        let registry = Arc::new(Mutex::new(MetricsRegistry::new(RegistryConfig {
            top_methods: opts.top_methods,
            retain_exited: opts.retain_exited,
            ..RegistryConfig::default()
        })));
        let (bound_tx, bound_rx) = mpsc::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let (listen, served) = (opts.listen, Arc::clone(&registry));
        let thread = std::thread::Builder::new()
            .name("metrics-http".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = bound_tx.send(Err(anyhow::Error::from(e)));
                        return;
                    }
                };
                runtime.block_on(async move {
                    match MetricsServer::bind(listen).await {
                        Ok(server) => {
                            let _ = bound_tx.send(Ok(server.local_addr()));
                            server.run(served, async { drop(stopped.await) }).await;
                        }
                        Err(e) => {
                            let _ = bound_tx.send(Err(e.into()));
                        }
                    }
                });
            })
            .context("starting the metrics endpoint's thread")?;
        let addr = bound_rx.recv().context("the metrics endpoint's thread ended")??;
        errln!("joular-ebpf: serving Prometheus metrics on http://{addr}/metrics");
        Ok(Self { registry, procs: ProcFs::new(proc_root.to_path_buf()), stop: Some(stop), thread: Some(thread) })
    }
}

impl Exporter {
    /// The registry, for series fed from outside the cycle's sinks (`--vm-energy-dir`).
    pub fn registry(&self) -> Arc<Mutex<MetricsRegistry>> {
        Arc::clone(&self.registry)
    }

    /// See `MetricsRegistry::set_energy_source`.
    pub fn set_energy_source(&self, source: &str, detail: &str) {
        self.registry.lock().unwrap_or_else(|e| e.into_inner()).set_energy_source(source, detail);
    }
}

impl Sink for Exporter {
    fn on_cycle(&mut self, cycle: &AttributedCycle) -> Result<(), SinkError> {
        // A poisoned lock means a scrape panicked mid-render; the counters are still whole.
        let mut registry = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        registry.on_cycle(cycle, &self.procs);
        Ok(())
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
