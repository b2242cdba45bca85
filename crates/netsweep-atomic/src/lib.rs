//! netsweep-atomic: replacing a file so that nothing half-written ever takes its place — an
//! exclusive temporary file beside it, flushed to disk, renamed over it, and the directory
//! flushed too. Every file netsweep writes for someone else to read (results, pages, lab
//! state, emulator reports, iperf3 records) is written through [`replace_with`].

#![warn(missing_docs)]

use std::fs::{self, File, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Replaces `path` with `text`; see [`replace_with`].
pub fn write_atomic(path: &Path, text: &str) -> io::Result<()> {
    replace_with(path, |f| f.write_all(text.as_bytes()))
}

/// Replaces `path` with what `fill` writes, so that a reader, a crash or a power loss finds
/// either the old file whole or the new one whole, never a part of it:
///
/// - the temporary file is created exclusively (O_CREAT|O_EXCL) under an unpredictable name
///   beside `path` (`NAME.XXXXXX.partial`), so a symlink or file planted at a name anyone
///   could guess is never followed or reused;
/// - it is filled, flushed to the disk (fsync), renamed over `path`, and then the directory
///   is flushed, so the rename itself survives a power loss;
/// - on any failure the temporary file is removed and `path` is left as it was;
/// - an existing `path` keeps its permission bits; a new one gets the umask's default (0666
///   less the umask). When `path` is a symlink, the link is replaced, not followed.
///
/// Missing directories above `path` are created, and said so on stderr (one line).
pub fn replace_with(path: &Path, fill: impl FnOnce(&mut File) -> io::Result<()>) -> io::Result<()> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path names no file (it ends in `/` or `..`)",
        )
    })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.exists() {
        // Said, not silent: a mistyped -o, --html or --png path would otherwise build a
        // tree of directories unnoticed (as root, anywhere).
        eprintln!(
            "netsweep: creating directory {} for {}",
            dir.display(),
            name.to_string_lossy()
        );
        fs::create_dir_all(dir)?;
    } else if !dir.is_dir() {
        // A file where the directory should be: the error the kernel gives, not tempfile's.
        return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
    }
    let kept_mode = match fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => Some(m.permissions().mode() & 0o7777),
        _ => None,
    };
    let mut tmp = temp_beside(dir, name)?;
    // From here every `?` drops `tmp`, which removes the temporary file.
    fill(tmp.as_file_mut())?;
    if let Some(mode) = kept_mode {
        tmp.as_file()
            .set_permissions(Permissions::from_mode(mode))?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    sync_dir(dir)
}

/// Replaces `path` with what `fill` writes, whole, for a reader on this host only: the same
/// exclusive temporary file and rename as [`replace_with`], without the two fsyncs, and
/// without creating missing directories (the path emulator's report, rewritten four times a
/// second while it carries frames: a power loss loses nothing a reader still needs, and disk
/// flushes beside a real-time thread are what a lab must not add).
pub fn replace_visible(
    path: &Path,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = temp_beside(dir, name)?;
    fill(tmp.as_file_mut())?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// An exclusive temporary file `NAME.XXXXXX.partial` in `dir`, created with 0666 less the
/// umask, as a plain create would be; removed when dropped unless persisted.
fn temp_beside(dir: &Path, name: &std::ffi::OsStr) -> io::Result<tempfile::NamedTempFile> {
    let mut prefix = name.to_os_string();
    prefix.push(".");
    tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".partial")
        .permissions(Permissions::from_mode(0o666))
        .tempfile_in(dir)
}

/// Flushes a directory's entries (a rename in it) to the disk.
fn sync_dir(dir: &Path) -> io::Result<()> {
    match File::open(dir)?.sync_all() {
        // A few filesystems cannot fsync a directory (EINVAL): nothing more can be done there.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(()),
        r => r,
    }
}

/// The names in `dir`, sorted (tests use it to see that no temporary file is left).
#[doc(hidden)]
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn umask() -> u32 {
        let status = fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("Umask:")).unwrap();
        u32::from_str_radix(line["Umask:".len()..].trim(), 8).unwrap()
    }

    #[test]
    fn a_new_file_gets_the_umask_default_and_an_old_one_keeps_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/run.json");
        write_atomic(&p, "one").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "one");
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&p), 0o666 & !umask());
        fs::set_permissions(&p, Permissions::from_mode(0o640)).unwrap();
        write_atomic(&p, "two").unwrap();
        assert_eq!(
            (fs::read_to_string(&p).unwrap().as_str(), mode(&p)),
            ("two", 0o640)
        );
        assert_eq!(names(&dir.path().join("sub")), ["run.json"]);
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_byte_identical_and_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("run.json");
        let good = "{\"points\": [1, 2]}\n".repeat(1000);
        write_atomic(&p, &good).unwrap();
        // The disk fills up half-way through the next write.
        let err = replace_with(&p, |f| {
            f.write_all(&good.as_bytes()[..good.len() / 2])?;
            Err(io::Error::from(io::ErrorKind::StorageFull))
        })
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        assert_eq!(fs::read(&p).unwrap(), good.as_bytes());
        assert_eq!(names(dir.path()), ["run.json"]);
    }

    #[test]
    fn a_symlink_planted_at_the_old_temporary_name_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "precious").unwrap();
        let p = dir.path().join("run.json");
        std::os::unix::fs::symlink(&victim, dir.path().join("run.json.partial")).unwrap();
        write_atomic(&p, "results").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(fs::read_to_string(&p).unwrap(), "results");
        assert_eq!(
            names(dir.path()),
            ["run.json", "run.json.partial", "victim"]
        );
    }

    #[test]
    fn a_symlink_at_the_path_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "precious").unwrap();
        let p = dir.path().join("run.json");
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        write_atomic(&p, "results").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        assert!(fs::symlink_metadata(&p).unwrap().is_file());
    }

    #[test]
    fn an_unsynced_replace_is_whole_and_creates_no_directory() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("emu.json");
        replace_visible(&p, |f| f.write_all(b"one")).unwrap();
        replace_visible(&p, |f| f.write_all(b"two")).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(names(dir.path()), ["emu.json"]);
        let gone = dir.path().join("gone/emu.json");
        assert!(replace_visible(&gone, |f| f.write_all(b"x")).is_err());
        assert_eq!(names(dir.path()), ["emu.json"]);
    }

    #[test]
    fn a_path_under_a_file_fails_and_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("file"), "x").unwrap();
        let e = write_atomic(&dir.path().join("file/run.json"), "results").unwrap_err();
        assert!(
            e.raw_os_error() == Some(libc::ENOTDIR) || e.kind() == io::ErrorKind::AlreadyExists,
            "{e}"
        );
        assert_eq!(names(dir.path()), ["file"]);
        assert!(write_atomic(Path::new("/"), "x").is_err());
    }
}
