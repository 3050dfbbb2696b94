//! Standard output for the commands. A reader that has gone away (`stowage plan -o json | head -c1`)
//! ends the process quietly with exit code 141, what a shell reports for a process ended by SIGPIPE
//! (Rust ignores SIGPIPE, so a write returns `BrokenPipe` instead, and `print!` would panic on it);
//! any other write error (a full disk) is an error of the command.

use std::io::Write;

/// The exit code of a command whose standard output was closed by its reader (128 + SIGPIPE).
pub(crate) const BROKEN_PIPE: i32 = 141;

/// Writes and flushes to standard output.
pub(crate) fn write(args: std::fmt::Arguments) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    match out.write_fmt(args).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(BROKEN_PIPE),
        Err(e) => Err(format!("cannot write to standard output: {e}")),
    }
}

/// `print!` that returns the write's error (see the module).
macro_rules! out {
    ($($t:tt)*) => { $crate::cli::out::write(format_args!($($t)*)) };
}

/// `println!` that returns the write's error (see the module).
macro_rules! outln {
    ($($t:tt)*) => { $crate::cli::out::write(format_args!("{}\n", format_args!($($t)*))) };
}

pub(crate) use {out, outln};
