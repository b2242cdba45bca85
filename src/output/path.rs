//! How `-o PATH` is written: a file is replaced whole after every point; a FIFO, a character
//! device or this process's own stdout (`/dev/stdout`) is written to directly, as a stream,
//! since a rename over it would replace it instead of writing to it.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// How a path named by `-o` is written.
#[derive(Debug)]
pub enum Opened {
    /// Replaced whole after every point (`netsweep_atomic::write_atomic`).
    Replace,
    /// Written to as the run goes, through this open descriptor.
    Stream(File),
}

/// How `-o PATH` is written. A regular file, a path not there yet, or a symlink to neither a
/// stream nor this process's stdout/stderr: replaced whole (a symlink itself is replaced, not
/// followed). A FIFO, a character device, or this process's own stdout/stderr (as
/// `/dev/stdout` reaches it): written to directly, as a stream. Anything else is refused.
pub fn open(path: &Path) -> io::Result<Opened> {
    let link = match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Opened::Replace),
        Err(e) => return Err(e),
        Ok(m) if m.is_file() => return Ok(Opened::Replace),
        Ok(m) => m,
    };
    let target = match fs::metadata(path) {
        // A dangling symlink: replaced, as a missing file is created.
        Err(e) if e.kind() == io::ErrorKind::NotFound && link.is_symlink() => {
            return Ok(Opened::Replace)
        }
        Err(e) => return Err(e),
        Ok(t) => t,
    };
    let kind = target.file_type();
    if kind.is_char_device() || kind.is_fifo() || is_own_stream(&target) {
        return open_stream(path);
    }
    if target.is_file() {
        return Ok(Opened::Replace);
    }
    let what = if kind.is_dir() {
        "a directory"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "a socket"
    };
    Err(io::Error::other(format!(
        "it is {what}; -o takes a file, a FIFO or a character device"
    )))
}

/// True when `path` leads to this process's stdout or stderr (`-o /dev/stdout`).
pub fn names_own_stdout(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| same_file(&m, io::stdout().as_fd()))
}

fn is_own_stream(m: &fs::Metadata) -> bool {
    same_file(m, io::stdout().as_fd()) || same_file(m, io::stderr().as_fd())
}

fn same_file(m: &fs::Metadata, fd: std::os::fd::BorrowedFd<'_>) -> bool {
    fd.try_clone_to_owned()
        .map(File::from)
        .and_then(|f| f.metadata())
        .is_ok_and(|s| (s.dev(), s.ino()) == (m.dev(), m.ino()))
}

/// Opens a FIFO or device for writing, appending (a stdout redirected with `>>` keeps what it
/// had). A FIFO without a reader fails at once (ENXIO) instead of waiting for one forever.
fn open_stream(path: &Path) -> io::Result<Opened> {
    let f = OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    // Writes block as usual once it is open: a slow reader slows the writes, never fails them.
    let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
    // SAFETY: `fd` is a descriptor `f` owns and keeps open across both calls; F_GETFL and
    // F_SETFL take and return plain flag integers.
    let r = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 {
            flags
        } else {
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK)
        }
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Opened::Stream(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn o_writes_files_whole_and_streams_to_fifos_and_devices() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let kind = |p: &Path| match open(p) {
            Ok(Opened::Replace) => "replace".to_string(),
            Ok(Opened::Stream(_)) => "stream".to_string(),
            Err(e) => format!("error {}", e.raw_os_error().unwrap_or(0)),
        };
        fs::write(d.join("file"), "x").unwrap();
        std::os::unix::fs::symlink(d.join("file"), d.join("link")).unwrap();
        std::os::unix::fs::symlink(d.join("nowhere"), d.join("dangling")).unwrap();
        assert_eq!(kind(&d.join("file")), "replace");
        assert_eq!(kind(&d.join("new")), "replace");
        assert_eq!(kind(&d.join("link")), "replace");
        assert_eq!(kind(&d.join("dangling")), "replace");
        assert_eq!(kind(Path::new("/dev/null")), "stream");
        assert_eq!(kind(d), "error 0");
        let fifo = d.join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // No reader: refused at once, never a hang.
        assert_eq!(kind(&fifo), format!("error {}", libc::ENXIO));
        let _reader = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        assert_eq!(kind(&fifo), "stream");
    }
}
