//! Credentials in the harness's environment never reach a command. This file holds one test on
//! purpose: it plants a variable in the process environment, which is only sound while no other
//! thread reads the environment.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use tool_bash::local::LocalExecutor;
use tool_bash::shell::{ManagedEnv, ShellExecutor, ShellRequest};

#[test]
fn planted_credentials_are_invisible_and_managed_facts_cannot_be_overridden() {
    // SAFETY: this binary runs this single test, and the runtime (the only other thread user)
    // is created after the variables are set.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("FOO_API_KEY", "sk-planted-secret");
        std::env::set_var("DSH_CALL_ID", "stale-ambient-value");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let executor = LocalExecutor::default();
        let mut request = ShellRequest::new(
            "echo \"key=${FOO_API_KEY:-unset} session=$DSH_SESSION_ID call=${DSH_CALL_ID:-unset} term=$TERM pager=$PAGER extra=$EXTRA\"",
        );
        request.env = BTreeMap::from([
            ("DSH_SESSION_ID".to_owned(), "forged".to_owned()),
            ("EXTRA".to_owned(), "yes".to_owned()),
        ]);
        request.managed = ManagedEnv {
            session_id: Some("s1".into()),
            call_id: None,
        };
        let spec = executor.resolve(request, None).unwrap();
        let result = executor.run(spec).await.unwrap();
        assert_eq!(result.stdout.text, "key=unset session=s1 call=unset term=dumb pager=cat extra=yes\n");
    });
}
