//! Small readers for one-value sysfs files, with errors that name the file.

use std::fs;
use std::path::Path;
use std::str::FromStr;

use super::error::{read_error, EnergyError};

pub(crate) fn read_trimmed(path: &Path, hint: &'static str) -> Result<String, EnergyError> {
    fs::read_to_string(path).map(|s| s.trim().to_owned()).map_err(|e| read_error(path, e, hint))
}

pub(crate) fn read_parsed<T: FromStr>(
    path: &Path,
    hint: &'static str,
    expected: &'static str,
) -> Result<T, EnergyError> {
    let content = read_trimmed(path, hint)?;
    content.parse().map_err(|_| EnergyError::Parse { path: path.to_owned(), content, expected })
}
