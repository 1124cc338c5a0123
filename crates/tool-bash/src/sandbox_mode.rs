//! What a sandboxed command may do ([`SandboxMode`]), on every platform: a host reads the mode
//! from its command line or configuration and hands it on as this one type, whether or not
//! the sandboxed executor ([`crate::sandbox`], Linux) exists where it is built.

use serde::Serialize;
use std::fmt;

/// What a sandboxed command may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum SandboxMode {
    /// Read everything; write only the private temporary directory.
    ReadOnly,
    /// Also write the workspace roots and the extra roots.
    WorkspaceWrite,
    /// No confinement.
    FullAccess,
}

impl SandboxMode {
    /// The mode's name: `read-only`, `workspace-write` or `full-access`.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::FullAccess => "full-access",
        }
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Reads a mode by its name; `off` is another name of `full-access`, the one command lines use.
///
/// ```
/// use tool_bash::SandboxMode;
///
/// assert_eq!("read-only".parse(), Ok(SandboxMode::ReadOnly));
/// assert_eq!("off".parse(), Ok(SandboxMode::FullAccess));
/// assert!("sideways".parse::<SandboxMode>().is_err());
/// ```
impl std::str::FromStr for SandboxMode {
    type Err = UnknownSandboxMode;

    fn from_str(name: &str) -> Result<SandboxMode, UnknownSandboxMode> {
        match name {
            "read-only" => Ok(SandboxMode::ReadOnly),
            "workspace-write" => Ok(SandboxMode::WorkspaceWrite),
            "full-access" | "off" => Ok(SandboxMode::FullAccess),
            _ => Err(UnknownSandboxMode(name.to_owned())),
        }
    }
}

/// A name that is no [`SandboxMode`]'s.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is no sandbox mode (read-only, workspace-write, full-access or off)")]
pub struct UnknownSandboxMode(pub String);

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn every_mode_reads_back_from_its_name() {
        for mode in [
            SandboxMode::ReadOnly,
            SandboxMode::WorkspaceWrite,
            SandboxMode::FullAccess,
        ] {
            assert_eq!(mode.as_str().parse(), Ok(mode));
            assert_eq!(
                serde_json::to_value(mode).ok(),
                Some(serde_json::json!(mode.as_str()))
            );
        }
        assert_eq!(
            "Off".parse::<SandboxMode>().map_err(|e| e.to_string()),
            Err(String::from(
                "`Off` is no sandbox mode (read-only, workspace-write, full-access or off)"
            ))
        );
    }
}
