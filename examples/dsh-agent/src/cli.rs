//! Command-line parsing: four subcommands and a handful of flags, with clear errors.

/// The usage text.
pub(crate) const USAGE: &str = "usage:
  dsh-agent run [--script FILE|-] [--log FILE] [--cwd DIR] [--json] [--no-background] [PROMPT…]
  dsh-agent replay LOG [--json]
  dsh-agent schemas [--strict]
  dsh-agent sdk

run       run a session with the bash and job tools against a scripted model (the embedded
          demo without --script); cards on a terminal, or JSONL session events with --json
replay    print the cards of a session log (--json: one card JSON per line)
schemas   print the model-facing tool schemas (--strict: the strict projection)
sdk       print the Code Mode TypeScript declarations of the tools";

/// The options of `run`.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct RunOptions {
    pub(crate) script: Option<String>,
    pub(crate) log: Option<String>,
    pub(crate) cwd: Option<String>,
    pub(crate) json: bool,
    pub(crate) no_background: bool,
    pub(crate) prompt: Vec<String>,
}

/// A parsed command line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Command {
    Run(RunOptions),
    Replay { log: String, json: bool },
    Schemas { strict: bool },
    Sdk,
    Help,
}

/// Parses the arguments after the program name.
pub(crate) fn parse(args: &[String]) -> Result<Command, String> {
    let Some((command, rest)) = args.split_first() else {
        return Ok(Command::Help);
    };
    match command.as_str() {
        "-h" | "--help" | "help" => Ok(Command::Help),
        "run" => parse_run(rest).map(Command::Run),
        "replay" => {
            let mut log = None;
            let mut json = false;
            for arg in rest {
                match arg.as_str() {
                    "--json" => json = true,
                    flag if flag.starts_with("--") => {
                        return Err(format!("replay: unknown option `{flag}`"));
                    }
                    path if log.is_none() => log = Some(path.to_owned()),
                    extra => return Err(format!("replay: unexpected argument `{extra}`")),
                }
            }
            let log = log.ok_or("replay: which log? (dsh-agent replay LOG)")?;
            Ok(Command::Replay { log, json })
        }
        "schemas" => match rest {
            [] => Ok(Command::Schemas { strict: false }),
            [flag] if flag == "--strict" => Ok(Command::Schemas { strict: true }),
            _ => Err(format!(
                "schemas: unexpected arguments `{}`",
                rest.join(" ")
            )),
        },
        "sdk" => match rest {
            [] => Ok(Command::Sdk),
            _ => Err(format!("sdk: unexpected arguments `{}`", rest.join(" "))),
        },
        other => Err(format!("unknown command `{other}`")),
    }
}

fn parse_run(args: &[String]) -> Result<RunOptions, String> {
    let mut options = RunOptions::default();
    let mut rest = args.iter();
    let value = |flag: &str, rest: &mut std::slice::Iter<'_, String>| {
        rest.next()
            .cloned()
            .ok_or_else(|| format!("run: {flag} needs a value"))
    };
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--script" => options.script = Some(value("--script", &mut rest)?),
            "--log" => options.log = Some(value("--log", &mut rest)?),
            "--cwd" => options.cwd = Some(value("--cwd", &mut rest)?),
            "--json" => options.json = true,
            "--no-background" => options.no_background = true,
            "--" => {
                options.prompt.extend(rest.by_ref().cloned());
            }
            flag if flag.starts_with("--") => return Err(format!("run: unknown option `{flag}`")),
            word => options.prompt.push(word.to_owned()),
        }
    }
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_words(line: &str) -> Result<Command, String> {
        let args: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        parse(&args)
    }

    #[test]
    fn commands_and_flags_parse() {
        assert_eq!(parse_words(""), Ok(Command::Help));
        assert_eq!(parse_words("sdk"), Ok(Command::Sdk));
        assert_eq!(
            parse_words("schemas --strict"),
            Ok(Command::Schemas { strict: true })
        );
        assert_eq!(
            parse_words("replay s.jsonl --json"),
            Ok(Command::Replay {
                log: "s.jsonl".into(),
                json: true
            })
        );
        assert_eq!(
            parse_words("run --script - --log l.jsonl --json list the files"),
            Ok(Command::Run(RunOptions {
                script: Some("-".into()),
                log: Some("l.jsonl".into()),
                json: true,
                prompt: vec!["list".into(), "the".into(), "files".into()],
                ..RunOptions::default()
            }))
        );
    }

    #[test]
    fn mistakes_are_named() {
        assert_eq!(parse_words("fly"), Err("unknown command `fly`".into()));
        assert_eq!(
            parse_words("run --script"),
            Err("run: --script needs a value".into())
        );
        assert_eq!(
            parse_words("run --fast"),
            Err("run: unknown option `--fast`".into())
        );
        assert_eq!(
            parse_words("replay"),
            Err("replay: which log? (dsh-agent replay LOG)".into())
        );
        assert_eq!(
            parse_words("sdk now"),
            Err("sdk: unexpected arguments `now`".into())
        );
    }
}
