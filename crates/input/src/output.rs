//! Writing files atomically: the whole new content or the old file, never a truncated one (a full disk
//! or an interrupt mid-write used to leave 0-byte plans and figures).

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` through a temporary file in the same folder, synced and then renamed over
/// `path` (a rename within one file system is atomic). On error the temporary file is removed and
/// `path` is left as it was; the error names `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| format!("{}: not a file name", path.display()))?;
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("{}: cannot write: {e}", path.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("stowage-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("out.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file left");
        let missing = dir.join("no-such-folder").join("x");
        let e = write_atomic(&missing, b"x").unwrap_err();
        assert!(e.contains("no-such-folder/x") && e.contains("cannot write"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
