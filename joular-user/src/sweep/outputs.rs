//! What a sweep leaves in its directory: `sweep.csv` (every run's energies, failed runs
//! included), `sweep.json` (the models) and `sweep.html` (the charts).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

use serde::Serialize;

use super::analysis::{Analysis, PROCESS};
use super::summary::Sweep;
use super::SweepError;
use crate::printable::printable;
use crate::safe_write::OutDir;

pub const SWEEP_CSV_FILE: &str = "sweep.csv";
pub const SWEEP_JSON_FILE: &str = "sweep.json";
pub const SWEEP_HTML_FILE: &str = "sweep.html";

/// One row per run and method (and one for the process); a failed run has one row, its
/// `status` `failed` and its `error` why.
pub fn csv(s: &Sweep) -> String {
    let mut out = String::from("swept");
    for p in s.params {
        let _ = write!(out, ",{}", p.name);
    }
    out.push_str(",run,status,method,joules,error\n");
    for m in s.measured {
        let point = &s.points[m.point];
        let mut prefix = field(s.swept(point));
        for (p, &v) in s.params.iter().zip(&point.values) {
            let _ = write!(prefix, ",{}", field(&p.values[v].text));
        }
        let _ = write!(prefix, ",{}", m.run);
        match &m.outcome {
            Ok(e) => {
                let _ = writeln!(out, "{prefix},ok,{PROCESS},{},", e.process_j);
                for (name, j) in &e.methods {
                    let _ = writeln!(out, "{prefix},ok,{},{j},", field(&printable(name)));
                }
            }
            Err(why) => {
                let _ = writeln!(out, "{prefix},failed,,,{}", field(why));
            }
        }
    }
    out
}

/// RFC 4180: quoted when it holds a comma, a quote or a line break.
fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

#[derive(Serialize)]
struct Json<'a> {
    command: &'a [String],
    params: Vec<JsonParam<'a>>,
    grid: bool,
    runs_per_value: usize,
    warmup_runs: usize,
    runs: usize,
    failed_runs: Vec<JsonFailure>,
    sweeps: &'a [Analysis],
}

#[derive(Serialize)]
struct JsonParam<'a> {
    name: &'a str,
    values: Vec<&'a str>,
    default: &'a str,
}

#[derive(Serialize)]
struct JsonFailure {
    setting: String,
    run: usize,
    error: String,
}

pub fn json(s: &Sweep) -> serde_json::Result<Vec<u8>> {
    let doc = Json {
        command: s.command,
        params: s
            .params
            .iter()
            .map(|p| JsonParam {
                name: &p.name,
                values: p.values.iter().map(|v| &*v.text).collect(),
                default: &p.values[0].text,
            })
            .collect(),
        grid: s.grid,
        runs_per_value: s.runs,
        warmup_runs: s.warmup,
        runs: s.measured.len(),
        failed_runs: s
            .failed()
            .map(|m| JsonFailure {
                setting: s.points[m.point].label(s.params),
                run: m.run,
                error: m.outcome.clone().err().unwrap_or_default(),
            })
            .collect(),
        sweeps: s.analyses,
    };
    serde_json::to_vec_pretty(&doc)
}

/// Writes `sweep.csv`, `sweep.json` and `sweep.html` into `dir`.
pub fn write_outputs(dir: &OutDir, s: &Sweep, top: usize) -> Result<Vec<PathBuf>, SweepError> {
    let json = json(s).map_err(|e| SweepError::Render(format!("{SWEEP_JSON_FILE}: {e}")))?;
    let page = super::html::render(s, top).map_err(SweepError::Render)?;
    let csv = csv(s);
    let mut written = Vec::new();
    for (name, bytes) in
        [(SWEEP_CSV_FILE, csv.as_bytes()), (SWEEP_JSON_FILE, &json), (SWEEP_HTML_FILE, page.as_bytes())]
    {
        let path = dir.join(name);
        let write = || -> std::io::Result<()> {
            let mut file = dir.replace(name)?;
            file.write_all(bytes)?;
            file.commit()
        };
        write().map_err(|source| SweepError::Write { path: path.clone(), source })?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::analysis::{analyse, Energies, Measurement};
    use crate::sweep::params::{parse_list, plan};

    #[test]
    fn the_csv_has_every_run_and_the_json_every_failure() {
        let params = [parse_list("n=1,2,3,4,5,6").unwrap()];
        let points = plan(&params, false);
        let mut measured = Vec::new();
        for p in 0..6 {
            let outcome = if p == 2 {
                Err("exit status 3".to_owned())
            } else {
                let methods = [("A.run".to_owned(), p as f64), ("B,\"odd\"".to_owned(), 1.0)].into_iter().collect();
                Ok(Energies { process_j: 10.0 + p as f64, methods })
            };
            measured.push(Measurement { point: p, run: 1, seconds: 1.0, outcome });
        }
        let analyses = analyse(&params, &points, &measured, 1.0);
        let command = vec!["app".to_owned(), "{n}".to_owned()];
        let s = Sweep {
            command: &command,
            params: &params,
            points: &points,
            measured: &measured,
            analyses: &analyses,
            runs: 1,
            warmup: 0,
            grid: false,
        };
        let text = csv(&s);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "swept,n,run,status,method,joules,error");
        assert_eq!(lines[1], "n,1,1,ok,[process],10,");
        assert!(lines.contains(&"n,2,1,ok,\"B,\"\"odd\"\"\",1,"), "{text}");
        assert!(lines.contains(&"n,3,1,failed,,,exit status 3"), "{text}");
        assert_eq!(lines.len(), 1 + 5 * 3 + 1);
        let doc: serde_json::Value = serde_json::from_slice(&json(&s).unwrap()).unwrap();
        assert_eq!(doc["failed_runs"][0]["setting"], "n=3");
        assert_eq!(doc["runs"], 6);
        assert_eq!(doc["sweeps"][0]["param"], "n");
        assert_eq!(doc["sweeps"][0]["process"]["model"]["best"]["family"], "linear");
        assert_eq!(doc["sweeps"][0]["methods"][0]["name"], "A.run");
    }
}
