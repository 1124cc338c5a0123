//! One approval flow for every host: which calls wait for a person, what the person may answer
//! (once, for the rest of the session, deny), what a session grant covers, and how a request
//! to leave the sandbox is asked. Only the asking differs between hosts — a terminal prompt, an
//! editor's permission dialog — and that is the [`AskPerson`] a host implements.
//!
//! [`ApprovalFlow::install`] makes the calls of the tools named with
//! [`ApprovalFlow::ask_before`] ask (a call another listener denies stays denied) and answers
//! every question of the registry, those other policies raise included (an MCP tool marked
//! destructive, a request to leave the sandbox), through the person:
//!
//! - a tool allowed for the session is granted without asking again, and only that tool;
//! - a request to leave the sandbox (its reason starts with [`ESCALATION_PREFIX`]) is asked
//!   every time, so it offers no session grant, and one answered anyway grants this call only;
//! - a call whose caller gives up while the person thinks is withdrawn ([`Approval::Cancel`]).
//!
//! ```
//! use dsh_tools::ToolRegistry;
//! use dsh_tools::approval::{Answer, ApprovalFlow, AskPerson, Question};
//! use futures::future::BoxFuture;
//!
//! /// Says yes once to everything (a real host asks someone).
//! struct Yes;
//!
//! impl AskPerson for Yes {
//!     fn ask(&self, _question: Question) -> BoxFuture<'static, Answer> {
//!         Box::pin(async { Answer::Once })
//!     }
//! }
//!
//! let registry = ToolRegistry::new();
//! ApprovalFlow::new(Yes)
//!     .ask_before("bash", "bash runs commands on this machine")
//!     .install(&registry)?;
//! # Ok::<(), dsh_tools::ScopeError>(())
//! ```

use crate::{
    Approval, ApprovalRequest, Approver, PreDecision, ScopeError, ToolCallView, ToolRegistry,
    WeakToolRegistry,
};
use futures::future::BoxFuture;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use tokio_util::sync::CancellationToken;

/// How the reason of a request to leave the sandbox begins (the shell tool's escalation):
/// such a request is asked every time, with the reason shown.
pub const ESCALATION_PREFIX: &str = "leave the sandbox: ";

/// What the person is asked about one call.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Question {
    /// The tool called.
    pub tool: String,
    /// The call's id.
    pub call_id: String,
    /// The session the call runs in, when it runs in one.
    pub session_id: Option<String>,
    /// The call's card, when its arguments and its registry are at hand.
    pub card: Option<ToolCallView>,
    /// The request to leave the sandbox, when it is one: its whole reason, to show.
    pub escalation: Option<String>,
}

impl Question {
    /// A question about a call of `tool` with id `call_id`, with no card and no escalation.
    pub fn new(tool: impl Into<String>, call_id: impl Into<String>) -> Question {
        Question {
            tool: tool.into(),
            call_id: call_id.into(),
            session_id: None,
            card: None,
            escalation: None,
        }
    }

    /// The same question as a request to leave the sandbox, `reason` its whole text.
    pub fn escalation(mut self, reason: impl Into<String>) -> Question {
        self.escalation = Some(reason.into());
        self
    }

    /// Whether a session grant may be offered: never for a request to leave the sandbox.
    pub fn offers_session(&self) -> bool {
        self.escalation.is_none()
    }
}

/// The person's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Answer {
    /// Allow this call.
    Once,
    /// Allow this tool for the rest of the session (for a request to leave the sandbox, which
    /// offers no such grant: this call only).
    ForSession,
    /// Refuse the call; the model reads `reason`. Also what a host answers when it cannot ask
    /// (no terminal, the editor unreachable), saying why.
    Deny {
        /// What the model reads.
        reason: String,
    },
    /// The question was withdrawn without an answer.
    Withdrawn,
}

/// Asks the person one question: the one part of the flow each host writes.
pub trait AskPerson: Send + Sync + 'static {
    /// Puts `question` to the person and returns the answer. The future is dropped when the
    /// call is cancelled first.
    fn ask(&self, question: Question) -> BoxFuture<'static, Answer>;
}

/// The approval flow of one registry: see the [module documentation](self).
#[derive(Debug)]
pub struct ApprovalFlow<A> {
    asker: A,
    /// The tools whose every call asks, with the reason given.
    asked: Vec<(String, String)>,
    /// Whether questions wait for each other (a terminal shows one at a time).
    one_at_a_time: bool,
}

impl<A: AskPerson> ApprovalFlow<A> {
    /// A flow asking through `asker`, asking before no tool's calls yet.
    pub fn new(asker: A) -> ApprovalFlow<A> {
        ApprovalFlow {
            asker,
            asked: Vec::new(),
            one_at_a_time: false,
        }
    }

    /// Asks before every call of `tool` that the other listeners allow, with `reason`.
    pub fn ask_before(mut self, tool: impl Into<String>, reason: impl Into<String>) -> Self {
        self.asked.push((tool.into(), reason.into()));
        self
    }

    /// Puts one question at a time to the person: parallel calls wait, and a call whose tool
    /// was allowed for the session while it waited is then granted without asking.
    pub fn one_question_at_a_time(mut self) -> Self {
        self.one_at_a_time = true;
        self
    }

    /// Installs the flow on `registry`'s global scope: the asking listener and the approver.
    /// The approver holds the registry weakly, so the registry's tools do not outlive it.
    pub fn install(self, registry: &ToolRegistry) -> Result<(), ScopeError> {
        let scope = registry.global_scope();
        let asked: Arc<[(String, String)]> = self.asked.into();
        scope.on_pre_execute(move |execution, next| {
            let asked = Arc::clone(&asked);
            async move {
                let verdict = next.run().await;
                match asked.iter().find(|(tool, _)| tool == execution.name()) {
                    Some((_, reason)) if verdict == PreDecision::Allow => {
                        PreDecision::ask(reason.clone())
                    }
                    _ => verdict,
                }
            }
        })?;
        scope.set_approver(Arc::new(FlowApprover {
            state: Arc::new(State {
                asker: self.asker,
                registry: registry.downgrade(),
                grants: SessionGrants::default(),
                asking: self.one_at_a_time.then(|| tokio::sync::Mutex::new(())),
            }),
        }))?;
        Ok(())
    }
}

/// The tools the person allowed for the rest of the session: an answer about one tool never
/// grants another, and a request to leave the sandbox is never granted by them.
#[derive(Debug, Default)]
pub struct SessionGrants(Mutex<HashSet<String>>);

impl SessionGrants {
    /// Whether `question` is granted without asking.
    pub fn grants(&self, question: &Question) -> bool {
        question.offers_session()
            && self
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(&question.tool)
    }

    /// Records the answer to `question` and says what it decides.
    pub fn record(&self, question: &Question, answer: Answer) -> Approval {
        match answer {
            Answer::Once => Approval::Grant,
            Answer::ForSession => {
                if question.offers_session() {
                    self.0
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(question.tool.clone());
                }
                Approval::Grant
            }
            Answer::Deny { reason } => Approval::Refuse {
                reason: Some(reason),
            },
            Answer::Withdrawn => Approval::Cancel,
        }
    }
}

struct State<A> {
    asker: A,
    /// Weak: the registry holds this approver, so a strong handle would keep both, and the
    /// tools in the registry (a shell executor with its sandbox's temporary directory), alive
    /// after the host is done with them.
    registry: WeakToolRegistry,
    grants: SessionGrants,
    asking: Option<tokio::sync::Mutex<()>>,
}

impl<A: AskPerson> State<A> {
    /// Answers `question`: from the session's grants, else from the person, unless `signal`
    /// withdraws it first.
    async fn answer(&self, question: Question, signal: CancellationToken) -> Approval {
        if self.grants.grants(&question) {
            return Approval::Grant;
        }
        let _turn = match &self.asking {
            Some(asking) => tokio::select! {
                turn = asking.lock() => Some(turn),
                () = signal.cancelled() => return Approval::Cancel,
            },
            None => None,
        };
        // A grant given while this question waited its turn.
        if self.grants.grants(&question) {
            return Approval::Grant;
        }
        let answer = tokio::select! {
            answer = self.asker.ask(question.clone()) => answer,
            () = signal.cancelled() => return Approval::Cancel,
        };
        self.grants.record(&question, answer)
    }
}

struct FlowApprover<A> {
    state: Arc<State<A>>,
}

impl<A: AskPerson> Approver for FlowApprover<A> {
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Approval> {
        let execution = &request.execution;
        let card = match (execution.args(), self.state.registry.upgrade()) {
            (Some(args), Some(registry)) => {
                Some(registry.present_call(execution.name(), args, execution.session_id()))
            }
            _ => None,
        };
        let question = Question {
            tool: execution.name().to_owned(),
            call_id: execution.call_id().to_owned(),
            session_id: execution.session_id().map(str::to_owned),
            card,
            escalation: request
                .reason
                .filter(|reason| reason.starts_with(ESCALATION_PREFIX)),
        };
        let state = Arc::clone(&self.state);
        Box::pin(async move { state.answer(question, request.signal).await })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Answers from a script, counting the questions.
    struct Scripted {
        answers: Mutex<Vec<Answer>>,
        asked: Arc<AtomicUsize>,
    }

    impl AskPerson for Scripted {
        fn ask(&self, _question: Question) -> BoxFuture<'static, Answer> {
            self.asked.fetch_add(1, Ordering::SeqCst);
            let answer = self.answers.lock().unwrap().remove(0);
            Box::pin(async move { answer })
        }
    }

    /// Never answers.
    struct Silent;

    impl AskPerson for Silent {
        fn ask(&self, _question: Question) -> BoxFuture<'static, Answer> {
            Box::pin(std::future::pending())
        }
    }

    fn state<A: AskPerson>(asker: A, one_at_a_time: bool) -> State<A> {
        State {
            asker,
            registry: ToolRegistry::new().downgrade(),
            grants: SessionGrants::default(),
            asking: one_at_a_time.then(|| tokio::sync::Mutex::new(())),
        }
    }

    fn scripted(answers: Vec<Answer>) -> (Scripted, Arc<AtomicUsize>) {
        let asked = Arc::new(AtomicUsize::new(0));
        let asker = Scripted {
            answers: Mutex::new(answers),
            asked: Arc::clone(&asked),
        };
        (asker, asked)
    }

    fn escalation() -> Question {
        Question::new("bash", "c").escalation(format!("{ESCALATION_PREFIX}run `ls`"))
    }

    #[tokio::test]
    async fn each_answer_decides_the_call_and_only_a_session_grant_is_remembered() {
        let deny = Answer::Deny {
            reason: "no".into(),
        };
        let (asker, asked) = scripted(vec![Answer::Once, deny, Answer::Withdrawn]);
        let flow = state(asker, false);
        let bash = || Question::new("bash", "c");
        let signal = CancellationToken::new;
        assert_eq!(flow.answer(bash(), signal()).await, Approval::Grant);
        assert_eq!(
            flow.answer(bash(), signal()).await,
            Approval::Refuse {
                reason: Some("no".into())
            }
        );
        assert_eq!(flow.answer(bash(), signal()).await, Approval::Cancel);
        assert_eq!(asked.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_session_grant_covers_its_tool_only_and_never_a_request_to_leave_the_sandbox() {
        let (asker, asked) = scripted(vec![Answer::ForSession, Answer::Once, Answer::Once]);
        let flow = state(asker, false);
        let signal = CancellationToken::new;
        assert_eq!(
            flow.answer(Question::new("bash", "1"), signal()).await,
            Approval::Grant
        );
        // Granted without asking.
        assert_eq!(
            flow.answer(Question::new("bash", "2"), signal()).await,
            Approval::Grant
        );
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        // Another tool, and a request to leave the sandbox, are asked.
        assert_eq!(
            flow.answer(Question::new("mcp__files__write", "3"), signal())
                .await,
            Approval::Grant
        );
        assert_eq!(flow.answer(escalation(), signal()).await, Approval::Grant);
        assert_eq!(asked.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_session_answer_to_a_request_to_leave_the_sandbox_grants_that_call_only() {
        let (asker, asked) = scripted(vec![Answer::ForSession, Answer::Once]);
        let flow = state(asker, false);
        assert!(!escalation().offers_session());
        let signal = CancellationToken::new;
        assert_eq!(flow.answer(escalation(), signal()).await, Approval::Grant);
        assert_eq!(flow.answer(escalation(), signal()).await, Approval::Grant);
        assert!(!flow.grants.grants(&Question::new("bash", "c")));
        assert_eq!(asked.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_question_is_withdrawn_when_the_call_is_cancelled_waiting_or_asked() {
        let flow = state(Silent, true);
        let signal = CancellationToken::new();
        let cancel = signal.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            cancel.cancel();
        });
        assert_eq!(
            flow.answer(Question::new("bash", "c"), signal).await,
            Approval::Cancel
        );
        // Waiting for another question's turn is withdrawn too.
        let turn = flow.asking.as_ref().unwrap().lock().await;
        let signal = CancellationToken::new();
        signal.cancel();
        assert_eq!(
            flow.answer(Question::new("bash", "d"), signal).await,
            Approval::Cancel
        );
        drop(turn);
    }

    #[tokio::test]
    async fn a_call_waiting_its_turn_is_granted_by_the_session_grant_given_meanwhile() {
        let (asker, asked) = scripted(vec![Answer::ForSession]);
        let flow = Arc::new(state(asker, true));
        let turn = flow.asking.as_ref().unwrap().lock().await;
        let waiting = tokio::spawn({
            let flow = Arc::clone(&flow);
            async move {
                flow.answer(Question::new("bash", "2"), CancellationToken::new())
                    .await
            }
        });
        tokio::task::yield_now().await;
        flow.grants
            .record(&Question::new("bash", "1"), Answer::ForSession);
        drop(turn);
        assert_eq!(waiting.await.unwrap(), Approval::Grant);
        assert_eq!(asked.load(Ordering::SeqCst), 0);
    }

    /// A registry kept alive by its own approver keeps its tools too.
    #[test]
    fn the_installed_flow_does_not_keep_its_registry_alive() {
        let registry = ToolRegistry::new();
        let weak = registry.downgrade();
        ApprovalFlow::new(Silent)
            .ask_before("bash", "bash runs commands")
            .install(&registry)
            .unwrap();
        drop(registry);
        assert!(weak.upgrade().is_none());
    }
}
