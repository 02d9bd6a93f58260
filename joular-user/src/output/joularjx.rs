//! The JoularJX result tree, so existing JoularJX readers work unchanged:
//!
//! ```text
//! joularjx-result/<pid>-<start epoch ms>/{all,app}/
//!   total/methods/joularJX-<pid>-{all,filtered}-methods-energy.csv       name,joules
//!   total/calltrees/joularJX-<pid>-{all,filtered}-call-trees-energy.csv  a;b;c,joules
//!   runtime/methods/joularJX-<pid>-{all,filtered}-methods-power.csv      name,watts (last cycle)
//!   runtime/calltrees/joularJX-<pid>-{all,filtered}-call-trees-power.csv a;b;c,watts (last cycle)
//!   evolution/joularJX-<pid>-<method>-evolution.csv                      unix seconds,watts
//! ```
//!
//! Rows are JoularJX's `%s,%.4f`. Runtime files are rewritten each cycle, as JoularJX does
//! with `overwrite-runtime-data=true`: a per-cycle file would grow the tree without bound.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::aggregate::{NamedTotal, Scope};
use super::OutputError;

/// Name of the directory that holds one `<pid>-<epochms>` directory per process.
pub const RESULT_DIR_NAME: &str = "joularjx-result";

/// Longest method part of an evolution file name: file names stop at 255 bytes.
const MAX_FILE_METHOD_BYTES: usize = 200;

#[derive(Debug, Clone, Copy)]
pub enum Period {
    Runtime,
    Total,
}

#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Methods,
    CallTrees,
}

/// One process's `<pid>-<epochms>` directory.
#[derive(Debug, Clone)]
pub struct RunDir {
    path: PathBuf,
    pid: u32,
}

impl RunDir {
    /// `results_root` is the `joularjx-result` directory itself.
    pub fn create(results_root: &Path, pid: u32, start_epoch_ms: u64) -> Result<Self, OutputError> {
        Self::create_at(results_root.join(format!("{pid}-{start_epoch_ms}")), pid)
    }

    /// The tree at `path` itself (`report --output DIR`).
    pub fn create_at(path: PathBuf, pid: u32) -> Result<Self, OutputError> {
        let dir = Self { path, pid };
        for scope in ["all", "app"] {
            for sub in [
                "runtime/methods",
                "runtime/calltrees",
                "total/methods",
                "total/calltrees",
                "evolution",
            ] {
                let path = dir.path.join(scope).join(sub);
                fs::create_dir_all(&path).map_err(|e| OutputError::io(&path, e))?;
            }
        }
        Ok(dir)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file(&self, scope: Scope, period: Period, kind: Kind) -> PathBuf {
        let (period_dir, suffix) = match period {
            Period::Runtime => ("runtime", "power"),
            Period::Total => ("total", "energy"),
        };
        let (kind_dir, kind_name) = match kind {
            Kind::Methods => ("methods", "methods"),
            Kind::CallTrees => ("calltrees", "call-trees"),
        };
        self.path
            .join(scope.dir())
            .join(period_dir)
            .join(kind_dir)
            .join(format!(
                "joularJX-{}-{}-{kind_name}-{suffix}.csv",
                self.pid,
                scope.file_infix()
            ))
    }

    pub fn evolution_file(&self, scope: Scope, method: &str) -> PathBuf {
        evolution_file(&self.path, self.pid, scope, method)
    }

    /// Writes run totals in joules; rows are `(name, µJ)`.
    pub fn write_total<N: AsRef<str>>(
        &self,
        scope: Scope,
        kind: Kind,
        rows: impl IntoIterator<Item = (N, f64)>,
    ) -> Result<(), OutputError> {
        write_rows(&self.file(scope, Period::Total, kind), rows, 1e-6)
    }

    /// Replaces the runtime file with this cycle's power in watts.
    pub fn write_runtime(
        &self,
        scope: Scope,
        kind: Kind,
        totals: &[NamedTotal],
        duration_s: f64,
    ) -> Result<(), OutputError> {
        let path = self.file(scope, Period::Runtime, kind);
        let tmp = path.with_extension("csv.tmp");
        let rows = totals.iter().map(|t| (&*t.name, t.energy_uj));
        write_rows(&tmp, rows, watts_per_uj(duration_s))?;
        // A reader polling the runtime file never sees a half-written one.
        fs::rename(&tmp, &path).map_err(|e| OutputError::io(&path, e))
    }

    /// Appends one `unix seconds,watts` row per method active in this cycle.
    pub fn append_evolution(
        &self,
        scope: Scope,
        methods: &[NamedTotal],
        end_epoch_s: u64,
        duration_s: f64,
    ) -> Result<(), OutputError> {
        let per_uj = watts_per_uj(duration_s);
        for method in methods {
            let path = self.evolution_file(scope, &method.name);
            let mut file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| OutputError::io(&path, e))?;
            // One write call per row keeps appends whole.
            file.write_all(format!("{end_epoch_s},{:.4}\n", method.energy_uj * per_uj).as_bytes())
                .map_err(|e| OutputError::io(&path, e))?;
        }
        Ok(())
    }
}

/// Where a `<pid>-<epochms>` directory keeps `method`'s power over time.
pub fn evolution_file(run_dir: &Path, pid: u32, scope: Scope, method: &str) -> PathBuf {
    run_dir
        .join(scope.dir())
        .join("evolution")
        .join(format!("joularJX-{pid}-{}-evolution.csv", file_safe(method)))
}

fn watts_per_uj(duration_s: f64) -> f64 {
    if duration_s > 0.0 {
        1e-6 / duration_s
    } else {
        0.0
    }
}

fn write_rows<N: AsRef<str>>(
    path: &Path,
    rows: impl IntoIterator<Item = (N, f64)>,
    scale: f64,
) -> Result<(), OutputError> {
    let file = File::create(path).map_err(|e| OutputError::io(path, e))?;
    let mut out = BufWriter::new(file);
    for (name, energy_uj) in rows {
        write_row(&mut out, name.as_ref(), energy_uj * scale)
            .map_err(|e| OutputError::io(path, e))?;
    }
    out.flush().map_err(|e| OutputError::io(path, e))
}

/// JoularJX's `%s,%.4f`; a comma or newline in a name would break the row.
fn write_row(out: &mut impl Write, name: &str, value: f64) -> std::io::Result<()> {
    if name.contains([',', '\n', '\r']) {
        let clean: String = name
            .chars()
            .map(|c| {
                if matches!(c, ',' | '\n' | '\r') {
                    ' '
                } else {
                    c
                }
            })
            .collect();
        writeln!(out, "{clean},{value:.4}")
    } else {
        writeln!(out, "{name},{value:.4}")
    }
}

/// JoularJX replaces `<` and `>`; `/` and NUL cannot be in a file name at all.
fn file_safe(method: &str) -> String {
    let mut end = method.len().min(MAX_FILE_METHOD_BYTES);
    while !method.is_char_boundary(end) {
        end -= 1;
    }
    method[..end]
        .chars()
        .map(|c| {
            if matches!(c, '<' | '>' | '/' | '\0') {
                '_'
            } else {
                c
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::methods::MethodFilter;
    use std::sync::Arc;

    fn total(name: &str, energy_uj: f64) -> NamedTotal {
        NamedTotal {
            name: Arc::from(name),
            energy_uj,
            samples: 1,
        }
    }

    #[test]
    fn file_names_follow_joularjx() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RunDir::create(tmp.path(), 42, 1700000000000).unwrap();
        let filter = MethodFilter::parse("com.acme");
        let rel = |p: PathBuf| {
            p.strip_prefix(tmp.path())
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(
            rel(dir.file(Scope::All, Period::Total, Kind::Methods)),
            "42-1700000000000/all/total/methods/joularJX-42-all-methods-energy.csv"
        );
        assert_eq!(
            rel(dir.file(Scope::App(&filter), Period::Runtime, Kind::CallTrees)),
            "42-1700000000000/app/runtime/calltrees/joularJX-42-filtered-call-trees-power.csv"
        );
        assert_eq!(
            rel(dir.evolution_file(Scope::All, "com.acme.Foo.<init>")),
            "42-1700000000000/all/evolution/joularJX-42-com.acme.Foo._init_-evolution.csv"
        );
        assert!(tmp.path().join("42-1700000000000/app/evolution").is_dir());
    }

    #[test]
    fn totals_are_joules_runtime_and_evolution_are_watts() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RunDir::create(tmp.path(), 7, 1).unwrap();
        let rows = [total("com.acme.A.f", 2_500_000.0), total("x,y", 500_000.0)];
        dir.write_total(
            Scope::All,
            Kind::Methods,
            rows.iter().map(|t| (&*t.name, t.energy_uj)),
        )
        .unwrap();
        let text = fs::read_to_string(dir.file(Scope::All, Period::Total, Kind::Methods)).unwrap();
        assert_eq!(text, "com.acme.A.f,2.5000\nx y,0.5000\n");

        dir.write_runtime(Scope::All, Kind::Methods, &rows, 0.5)
            .unwrap();
        dir.write_runtime(Scope::All, Kind::Methods, &rows[..1], 0.5)
            .unwrap();
        let text =
            fs::read_to_string(dir.file(Scope::All, Period::Runtime, Kind::Methods)).unwrap();
        assert_eq!(text, "com.acme.A.f,5.0000\n");

        dir.append_evolution(Scope::All, &rows[..1], 100, 1.0)
            .unwrap();
        dir.append_evolution(Scope::All, &rows[..1], 101, 2.0)
            .unwrap();
        let text = fs::read_to_string(dir.evolution_file(Scope::All, "com.acme.A.f")).unwrap();
        assert_eq!(text, "100,2.5000\n101,1.2500\n");
    }

    #[test]
    fn long_method_names_are_cut_on_a_char_boundary() {
        let name = "é".repeat(150);
        let safe = file_safe(&name);
        assert!(safe.len() <= MAX_FILE_METHOD_BYTES && !safe.is_empty());
    }
}
