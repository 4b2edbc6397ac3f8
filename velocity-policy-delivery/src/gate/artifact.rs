//! Built artifacts: a binary's size and the size of its code, and the files a glob matches.

use std::path::Path;

use object::{Object as _, ObjectSection as _};
use velocity_policy_lang::Compression;

use super::web::gzip_len;

/// Why an artifact could not be measured.
#[derive(Debug)]
pub(crate) enum ArtifactError {
    /// It does not exist.
    Missing,
    /// It exists but could not be read.
    Unreadable(String),
    /// It is not an executable the gate can read.
    NotABinary(String),
    /// The glob is not one.
    BadPattern(String),
    /// The glob matched nothing.
    NoMatch,
}

fn read(path: &Path) -> Result<Vec<u8>, ArtifactError> {
    std::fs::read(path).map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => ArtifactError::Missing,
        _ => ArtifactError::Unreadable(error.to_string()),
    })
}

/// The size of the file at `path`.
pub(crate) fn binary_size(path: &Path) -> Result<u64, ArtifactError> {
    match std::fs::metadata(path) {
        Ok(metadata) if metadata.is_file() => Ok(metadata.len()),
        Ok(_) => Err(ArtifactError::NotABinary("it is a folder".to_owned())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Err(ArtifactError::Missing),
        Err(error) => Err(ArtifactError::Unreadable(error.to_string())),
    }
}

/// The size of the `.text` section of the executable at `path` (`__text` on Mach-O).
pub(crate) fn code_size(path: &Path) -> Result<u64, ArtifactError> {
    let bytes = read(path)?;
    let file = object::File::parse(&*bytes)
        .map_err(|error| ArtifactError::NotABinary(error.to_string().to_lowercase()))?;
    file.section_by_name(".text")
        .map(|section| section.size())
        .ok_or_else(|| ArtifactError::NotABinary("it has no `.text` section".to_owned()))
}

/// The total size of the files `pattern` matches under `root` (stored or gzipped each), and
/// how many there are.
pub(crate) fn glob_size(
    root: &Path,
    pattern: &str,
    compression: Compression,
) -> Result<(u64, usize), ArtifactError> {
    let full = if Path::new(pattern).is_absolute() {
        pattern.to_owned()
    } else {
        format!(
            "{}/{pattern}",
            glob::Pattern::escape(&root.display().to_string())
        )
    };
    let paths =
        glob::glob(&full).map_err(|error| ArtifactError::BadPattern(error.msg.to_owned()))?;
    let mut total = 0;
    let mut count = 0;
    for path in paths {
        let path = path.map_err(|error| ArtifactError::Unreadable(error.to_string()))?;
        if !path.is_file() {
            continue;
        }
        count += 1;
        total += match compression {
            Compression::Gzip => gzip_len(&read(&path)?),
            _ => binary_size(&path)?,
        };
    }
    if count == 0 {
        return Err(ArtifactError::NoMatch);
    }
    Ok((total, count))
}
