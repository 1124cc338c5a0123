//! The default system prompt of a host's agent ([`default_system_prompt`]).

use dsh_tools::ToolRegistry;
use std::path::Path;

/// A system prompt for the agent `name` that names the tools `registry` shows every agent, the
/// working directory and the operating system, and says how the shell and the job tools are
/// meant to be used. A host with a prompt of its own passes that instead.
pub fn default_system_prompt(name: &str, registry: &ToolRegistry, cwd: &Path) -> String {
    let tools = registry
        .schemas(None)
        .into_iter()
        .map(|tool| tool.name)
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "You are {name}, an agent that works on the user's machine through tools.\n\
         Tools: {tools}. Run shell commands with bash; long-running commands can run in the \
         background, and the job tools list, read and stop them.\n\
         Working directory: {cwd}\n\
         Operating system: {os} ({arch})\n\
         Prefer reading before changing; say plainly what you did and what you found.",
        cwd = cwd.display(),
        os = std::env::consts::OS,
        arch = std::env::consts::ARCH,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_tools::{ToolDefinition, ToolOutput, ValueSchema};
    use pretty_assertions::assert_eq;

    fn tool(name: &str) -> ToolDefinition {
        ToolDefinition::builder(name, "Does nothing.")
            .parameters(ValueSchema::closed_object())
            .output(ToolOutput::new(ValueSchema::string(), |_, _| Vec::new()))
            .execute(|_, _| async { Ok(serde_json::Value::from("")) })
            .build()
            .unwrap()
    }

    #[test]
    fn the_default_prompt_names_the_agent_its_tools_the_directory_and_the_system() {
        let registry = ToolRegistry::new();
        for name in ["bash", "job_list"] {
            registry.register(tool(name)).unwrap();
        }
        assert_eq!(
            default_system_prompt("dsh-agent", &registry, Path::new("/work/project")),
            format!(
                "You are dsh-agent, an agent that works on the user's machine through tools.\n\
                 Tools: bash, job_list. Run shell commands with bash; long-running commands \
                 can run in the background, and the job tools list, read and stop them.\n\
                 Working directory: /work/project\n\
                 Operating system: {} ({})\n\
                 Prefer reading before changing; say plainly what you did and what you found.",
                std::env::consts::OS,
                std::env::consts::ARCH
            )
        );
    }
}
