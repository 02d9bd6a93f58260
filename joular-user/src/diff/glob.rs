//! BASE and NEW may be globs of repeated runs (`'base-*'`): expanded here, so a quoted
//! pattern works as well as one the shell expanded, and a pattern that matches nothing is an
//! error rather than a literal name.

use std::path::{Component, Path, PathBuf};

/// The directories `pattern` names, sorted: itself when it has no `*` or `?`.
pub fn expand(pattern: &str) -> Result<Vec<PathBuf>, String> {
    if !pattern.contains(['*', '?']) {
        return Ok(vec![PathBuf::from(pattern)]);
    }
    let path = Path::new(pattern);
    let mut found = vec![PathBuf::new()];
    for component in path.components() {
        let part = match component {
            Component::Normal(part) => part.to_string_lossy().into_owned(),
            other => {
                found.iter_mut().for_each(|p| p.push(other.as_os_str()));
                continue;
            }
        };
        if !part.contains(['*', '?']) {
            found.iter_mut().for_each(|p| p.push(&part));
            continue;
        }
        let mut next = Vec::new();
        for dir in &found {
            let listed = if dir.as_os_str().is_empty() { Path::new(".") } else { dir.as_path() };
            let Ok(entries) = std::fs::read_dir(listed) else { continue };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                // As shells do, `*` does not match a leading dot.
                if (name.starts_with('.') && !part.starts_with('.')) || !matches(part.as_bytes(), name.as_bytes()) {
                    continue;
                }
                next.push(dir.join(&name));
            }
        }
        found = next;
    }
    found.retain(|p| p.is_dir());
    found.sort();
    if found.is_empty() {
        return Err(format!("`{pattern}` matches no directory"));
    }
    Ok(found)
}

/// `*` any run of bytes, `?` one byte, anything else itself.
fn matches(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.first(), name.first()) {
        (None, None) => true,
        (Some(b'*'), _) => matches(&pattern[1..], name) || (!name.is_empty() && matches(pattern, &name[1..])),
        (Some(b'?'), Some(_)) => matches(&pattern[1..], &name[1..]),
        (Some(p), Some(n)) if p == n => matches(&pattern[1..], &name[1..]),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_expand_to_sorted_directories() {
        let tmp = tempfile::tempdir().unwrap();
        for d in ["base-2", "base-1", "new-1", ".base-hidden", "base-3/x"] {
            std::fs::create_dir_all(tmp.path().join(d)).unwrap();
        }
        std::fs::write(tmp.path().join("base-file"), "").unwrap();
        let root = tmp.path().display().to_string();
        let got = expand(&format!("{root}/base-*")).unwrap();
        let names: Vec<_> = got.iter().map(|p| p.file_name().unwrap().to_str().unwrap()).collect();
        assert_eq!(names, ["base-1", "base-2", "base-3"]);
        assert_eq!(expand(&format!("{root}/base-?/x")).unwrap(), [tmp.path().join("base-3/x")]);
        let err = expand(&format!("{root}/old-*")).unwrap_err();
        assert!(err.contains("matches no directory"), "{err}");
        assert_eq!(expand("plain/dir").unwrap(), [PathBuf::from("plain/dir")]);
    }
}
