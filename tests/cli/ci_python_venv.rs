//! `.ci/python-venv.sh`, which `.ci/run` calls before `python3 -m venv`: on a machine where
//! python3 cannot create virtualenvs (a fresh Debian without `python3-venv`), it installs
//! `python3-venv` with apt; where it can, it installs nothing; when apt fails, it stops with a
//! message saying what to install.
//!
//! A fresh Debian is not at hand (and the tests do not change the system's packages), so
//! `apt-get` and python3 are played by two scripts first on PATH: `apt-get` records its
//! arguments (and, for an install of python3-venv, makes the venv support appear), `python3`
//! reports `import ensurepip` missing until then and present after. What is tested is the
//! script's own logic, with the real bash, whatever the machine's own python3 can do.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A directory of fake `apt-get` and `python3` for a machine without venv support; `apt_ok`
/// says whether `apt-get install` succeeds.
fn fake_machine(apt_ok: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let write = |name: &str, body: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, body).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    write(
        "apt-get",
        format!(
            "#!/bin/sh\necho \"$*\" >> {d}/apt.log\ncase \"$*\" in *install*python3-venv*) {};; esac\n",
            if apt_ok {
                format!("touch {d}/venv-installed")
            } else {
                "exit 100".to_owned()
            }
        ),
    );
    write(
        "python3",
        format!(
            "#!/bin/sh\nif [ \"$1\" = -c ] && echo \"$2\" | grep -q ensurepip; then\n  [ -e {d}/venv-installed ] && exit 0\n  echo \"ModuleNotFoundError: No module named 'ensurepip'\" >&2; exit 1\nfi\necho \"the fake python3 was run as: $*\" >&2; exit 2\n"
        ),
    );
    dir
}

fn run_script(path_first: Option<&Path>) -> std::process::Output {
    let path = std::env::var_os("PATH").unwrap();
    let path = match path_first {
        Some(dir) => std::env::join_paths(
            std::iter::once(dir.to_path_buf()).chain(std::env::split_paths(&path)),
        )
        .unwrap(),
        None => path,
    };
    Command::new("bash")
        .arg(root().join(".ci/python-venv.sh"))
        .env("PATH", path)
        .output()
        .unwrap()
}

#[test]
fn ci_installs_python3_venv_when_python_cannot_create_virtualenvs() {
    // .ci/run calls the script before it creates the virtualenv.
    let run = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    let check = run
        .find(".ci/python-venv.sh")
        .expect(".ci/run calls .ci/python-venv.sh");
    let venv = run
        .find("python3 -m venv")
        .expect(".ci/run creates a virtualenv");
    assert!(check < venv, "python-venv.sh runs before python3 -m venv");

    let machine = fake_machine(true);
    let out = run_script(Some(machine.path()));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = std::fs::read_to_string(machine.path().join("apt.log")).unwrap();
    assert_eq!(log, "update -qq\ninstall -y -qq python3 python3-venv\n");

    // apt cannot install it: a failure saying what to install.
    let machine = fake_machine(false);
    let out = run_script(Some(machine.path()));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("apt-get install python3-venv"), "{err}");
}

#[test]
fn ci_installs_nothing_when_python_can_create_virtualenvs() {
    let machine = fake_machine(true);
    std::fs::write(machine.path().join("venv-installed"), "").unwrap();
    let out = run_script(Some(machine.path()));
    assert!(out.status.success());
    assert!(
        !machine.path().join("apt.log").exists(),
        "apt-get was called"
    );
}
