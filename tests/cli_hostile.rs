//! The command line against hostile flags and readers (issue 20): every numeric flag is checked before
//! anything starts, a closed pipe ends the process quietly, output files are replaced atomically.

use std::io::Read;
use std::process::{Command, Stdio};

fn stowage() -> Command {
    Command::new(env!("CARGO_BIN_EXE_stowage"))
}

const WORKLOAD: &str = "tests/fixtures/seed-1-rescale";

/// Flags clap must refuse (exit 2, the flag named, no panic) before the workload is even read.
#[test]
fn numeric_flags_are_checked_before_anything_starts() {
    let cases: [(&[&str], &str); 8] = [
        (&["--threads", "2147483648"], "--threads"),
        (&["--threads", "100000"], "--threads"),
        (&["--threads", "0"], "--threads"),
        (&["--gap", "NaN"], "--gap"),
        (&["--gap", "-0.5"], "--gap"),
        (&["--gap", "inf"], "--gap"),
        (&["--time-budget", "100y"], "--time-budget"),
        (&["--max-pods", "0"], "--max-pods"),
    ];
    for (flags, name) in cases {
        // A workload that does not exist: the flag must fail first.
        let out = stowage().args(["plan", "/nonexistent/workload.yaml"]).args(flags).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        assert!(err.contains(name) && !err.contains("panicked") && !err.contains("nonexistent"), "{flags:?}: {err}");
    }
}

/// `stowage ... | head -c1`: the reader goes away; the process ends quietly with 141 (128 + SIGPIPE),
/// not with a panic from `println!`.
#[test]
fn a_closed_pipe_ends_the_process_quietly() {
    for args in [&["crds", "-o", "json"][..], &["export", WORKLOAD, "-o", "json"][..]] {
        let mut child = stowage().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        drop(child.stdout.take());
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(141), "{args:?}: {status:?} {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// `catalog generate --out` writes through a temporary file: the result is complete, nothing is left
/// beside it, and a folder that does not exist is an error naming the file.
#[test]
fn output_files_are_written_atomically() {
    let dir = std::env::temp_dir().join(format!("stowage-cli-atomic-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("catalog.json");
    let r = stowage().args(["catalog", "generate", "--karpenter-benchmark", "4", "--out"]).arg(&out).output().unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(stowage_input::catalog::load(&out).is_ok());
    let names: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["catalog.json"], "no temporary file left");
    let bad = dir.join("missing").join("c.json");
    let r = stowage().args(["catalog", "generate", "--karpenter-benchmark", "4", "--out"]).arg(&bad).output().unwrap();
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("missing/c.json"));
    std::fs::remove_dir_all(&dir).unwrap();
}
