//! `cargo xtask setup [--ci]`: installs what the tests need and cannot provision themselves,
//! when it is missing, so that `cargo xtask setup && cargo test --workspace` passes on a fresh
//! machine and CI runs the same step (`.ci/run`).
//!
//! The tests provision their npm packages themselves (into `target/`, on first use); they need
//! `node` and `npm` for that, and `bwrap` for the sandbox's bubblewrap table
//! (crates/tool-bash/tests/tool_bash/sandbox.rs). With `--ci`, also what only `.ci/run` needs: the
//! Windows and AArch64 standard libraries (rustup) for its cross checks, and the AArch64 C
//! cross compiler that builds QuickJS for `cargo check -p tool-code --target
//! aarch64-unknown-linux-gnu`. System packages come from apt-get (as root, or through `sudo`);
//! on a machine without apt-get the missing ones are named, with the command that needs them.

use anyhow::{Context, Result, bail};
use std::process::Command;

/// A program the tests or CI run, and where it comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Need {
    program: &'static str,
    /// The Debian packages that bring it (a cross compiler needs its C library's headers too).
    apt_packages: &'static [&'static str],
    why: &'static str,
    ci_only: bool,
}

/// Everything setup looks for, Linux only (the sandbox and the cross compiler are Linux's).
const NEEDS: &[Need] = &[
    Need {
        program: "bwrap",
        apt_packages: &["bubblewrap"],
        why: "the sandbox's bubblewrap table",
        ci_only: false,
    },
    Need {
        program: "node",
        apt_packages: &["nodejs"],
        why: "the npm packages the tests install into target/ (TypeScript, MCP and ACP peers)",
        ci_only: false,
    },
    Need {
        program: "npm",
        apt_packages: &["npm"],
        why: "the npm packages the tests install into target/",
        ci_only: false,
    },
    Need {
        program: "aarch64-linux-gnu-gcc",
        apt_packages: &["gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross"],
        why: "QuickJS's C code in the AArch64 check of tool-code",
        ci_only: true,
    },
];

/// The rustup targets of `.ci/run`'s cross checks.
const CI_TARGETS: &[&str] = &["x86_64-pc-windows-gnu", "aarch64-unknown-linux-gnu"];

/// Runs setup; `ci` adds what only `.ci/run` needs.
pub(crate) fn run(ci: bool) -> Result<()> {
    let linux = cfg!(target_os = "linux");
    let missing = missing(ci, linux, on_path);
    if !missing.is_empty() {
        let packages: Vec<&str> = missing
            .iter()
            .flat_map(|need| need.apt_packages.iter().copied())
            .collect();
        for need in &missing {
            println!("setup: `{}` is missing ({})", need.program, need.why);
        }
        if !on_path("apt-get") {
            bail!(
                "setup: no apt-get here; install {} with the system's package manager",
                packages.join(", ")
            );
        }
        let root = is_root()?;
        if !root && !on_path("sudo") {
            bail!(
                "setup: not root and no sudo; as root, run: apt-get install {}",
                packages.join(" ")
            );
        }
        for command in apt_commands(root, &packages) {
            run_command(&command)?;
        }
    }
    if ci {
        let installed = output("rustup", &["target", "list", "--installed"])?;
        for target in CI_TARGETS {
            if !installed.lines().any(|line| line.trim() == *target) {
                run_command(&["rustup", "target", "add", target].map(String::from))?;
            }
        }
    }
    println!(
        "setup: everything the tests{} need is installed",
        if ci { " and CI" } else { "" }
    );
    Ok(())
}

/// The needs not met, given whether a program is on `PATH`.
fn missing(ci: bool, linux: bool, found: impl Fn(&str) -> bool) -> Vec<Need> {
    NEEDS
        .iter()
        .filter(|need| linux && (ci || !need.ci_only) && !found(need.program))
        .copied()
        .collect()
}

/// The apt-get commands that install `packages`: through `sudo` unless already root, and
/// without questions (`DEBIAN_FRONTEND` survives sudo as an argument of the command).
fn apt_commands(root: bool, packages: &[&str]) -> Vec<Vec<String>> {
    let prefix: &[&str] = if root {
        &[]
    } else {
        &["sudo", "DEBIAN_FRONTEND=noninteractive"]
    };
    let update = ["apt-get", "update", "-qq"];
    let install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends"];
    [&update[..], &install[..]]
        .into_iter()
        .enumerate()
        .map(|(step, command)| {
            let mut line: Vec<String> = prefix
                .iter()
                .chain(command)
                .map(|s| s.to_string())
                .collect();
            if step == 1 {
                line.extend(packages.iter().map(|p| p.to_string()));
            }
            line
        })
        .collect()
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

fn is_root() -> Result<bool> {
    Ok(output("id", &["-u"])?.trim() == "0")
}

fn output(program: &str, args: &[&str]) -> Result<String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("cannot run {program}"))?;
    if !output.status.success() {
        bail!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn run_command(command: &[String]) -> Result<()> {
    println!("setup: {}", command.join(" "));
    let status = Command::new(&command[0])
        .args(&command[1..])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .with_context(|| format!("cannot run {}", command[0]))?;
    if !status.success() {
        bail!("setup: `{}` failed ({status})", command.join(" "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn programs(needs: &[Need]) -> Vec<&'static str> {
        needs.iter().map(|need| need.program).collect()
    }

    #[test]
    fn only_what_is_missing_is_installed_and_the_cross_compiler_only_for_ci() {
        let nothing = |_: &str| false;
        let only_node = |program: &str| program == "node";
        assert_eq!(
            programs(&missing(false, true, nothing)),
            ["bwrap", "node", "npm"]
        );
        assert_eq!(programs(&missing(false, true, only_node)), ["bwrap", "npm"]);
        assert_eq!(
            programs(&missing(true, true, only_node)),
            ["bwrap", "npm", "aarch64-linux-gnu-gcc"]
        );
        assert_eq!(programs(&missing(true, true, |_| true)), Vec::<&str>::new());
        assert_eq!(programs(&missing(true, false, nothing)), Vec::<&str>::new());
    }

    #[test]
    fn apt_get_runs_through_sudo_unless_root() {
        let line = |words: &str| words.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            apt_commands(true, &["bubblewrap"]),
            [
                line("apt-get update -qq"),
                line("apt-get install -y -qq --no-install-recommends bubblewrap"),
            ]
        );
        assert_eq!(
            apt_commands(false, &["bubblewrap", "npm"]),
            [
                line("sudo DEBIAN_FRONTEND=noninteractive apt-get update -qq"),
                line(
                    "sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap npm"
                ),
            ]
        );
    }
}
