//! The rounds of one chat turn as a pure state machine: given each model answer, [`Turn::next`]
//! says what happens next (run the agent's tools, or finish with the answer and, when the turn
//! stopped early, a note saying why), and it keeps the turn's token counts and charge. The
//! driver (`answer`) does the I/O around it: the model calls, the tools, the credit hold.

use super::chat::{Completion, FinishReason, ModelError, ToolCall};
use crate::billing::chat_cost;

/// What happens after a model answered.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Next {
    /// Run these calls of the agent's own tools, then ask the model again with their results.
    /// `content` is what the model said along with the calls.
    CallTools {
        /// The model's text beside the calls.
        content: String,
        /// The calls, in the model's order.
        calls: Vec<ToolCall>,
    },
    /// The turn ends with `last` (a client's tool calls in it, if any, for the client to run),
    /// and `note` when it stopped before the model was done.
    Finish {
        /// The last answer.
        last: Completion,
        /// Why the turn stopped early.
        note: Option<String>,
    },
}

/// One chat turn's rounds so far.
#[derive(Debug, Clone)]
pub(super) struct Turn {
    /// Most rounds of tool calls.
    max_rounds: u8,
    /// Tools the client runs itself (OpenAI's protocol): a call of one ends the turn.
    client_tools: Vec<String>,
    /// Rounds of tool calls run.
    rounds: u8,
    /// Tokens of every model call.
    pub(super) prompt_tokens: u64,
    pub(super) completion_tokens: u64,
    /// The charge of every model call, each counted as a chat is.
    pub(super) cost: i64,
}

impl Turn {
    /// A turn that may run `max_rounds` rounds of tool calls; calls of `client_tools` are the
    /// client's to run.
    pub(super) fn new(max_rounds: u8, client_tools: Vec<String>) -> Self {
        Self { max_rounds, client_tools, rounds: 0, prompt_tokens: 0, completion_tokens: 0, cost: 0 }
    }

    /// What follows the model's answer (or failure).
    ///
    /// # Errors
    /// The model's failure when nothing has answered yet: nothing is charged or stored then.
    pub(super) fn next(&mut self, answered: Result<Completion, ModelError>) -> Result<Next, ModelError> {
        let completion = match answered {
            Ok(completion) => completion,
            Err(e) if self.cost == 0 => return Err(e),
            // The calls before it answered, and the tools ran: those calls are charged and the
            // rounds kept, with the failure said in the reply.
            Err(e) => {
                let note = format!("I stopped before answering: the model failed after the tools ran ({e}).");
                return Ok(Next::Finish {
                    last: Completion::nothing(FinishReason::Length),
                    note: Some(note),
                });
            }
        };
        self.prompt_tokens += completion.prompt_tokens;
        self.completion_tokens += completion.completion_tokens;
        self.cost += chat_cost(completion.prompt_tokens + completion.completion_tokens);
        if completion.tool_calls.is_empty() || completion.finish == FinishReason::Cancelled {
            return Ok(Next::Finish {
                last: Completion { tool_calls: Vec::new(), ..completion },
                note: None,
            });
        }
        // A call of a tool the client runs ends the answer: the client runs it and asks again
        // with its result (OpenAI's protocol). A call of a tool nobody offered is the agent's to
        // answer (with an error the model reads).
        let (clients, own): (Vec<ToolCall>, Vec<ToolCall>) =
            completion.tool_calls.iter().cloned().partition(|c| self.client_tools.contains(&c.name));
        if !clients.is_empty() {
            let last = Completion { tool_calls: clients, finish: FinishReason::ToolCalls, ..completion };
            return Ok(Next::Finish { last, note: None });
        }
        if self.rounds >= self.max_rounds {
            let note = format!(
                "I stopped before answering: I had used {} rounds of tool calls, the most this agent \
                 allows (config.max_tool_rounds).",
                self.max_rounds
            );
            let last = Completion { tool_calls: Vec::new(), finish: FinishReason::Length, ..completion };
            return Ok(Next::Finish { last, note: Some(note) });
        }
        self.rounds += 1;
        Ok(Next::CallTools { content: completion.content, calls: own })
    }

    /// The end of a turn whose credits do not pay for another model call with the tools'
    /// results: the last answer (nothing) and the note.
    pub(super) fn out_of_credits(&self) -> (Completion, Option<String>) {
        let note = "I stopped before answering: the credits left do not pay for another model call with \
                    the tools' results."
            .to_owned();
        (Completion::nothing(FinishReason::Length), Some(note))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(content: &str, calls: &[&str], prompt_tokens: u64) -> Completion {
        Completion {
            content: content.into(),
            prompt_tokens,
            completion_tokens: 10,
            finish: if calls.is_empty() { FinishReason::Stop } else { FinishReason::ToolCalls },
            tool_calls: calls
                .iter()
                .enumerate()
                .map(|(i, name)| ToolCall {
                    id: format!("call_{i}"),
                    name: (*name).into(),
                    arguments: "{}".into(),
                })
                .collect(),
        }
    }

    fn upstream() -> ModelError {
        ModelError::Upstream("busy".into())
    }

    #[test]
    fn an_answer_without_calls_finishes_and_is_counted() {
        let mut turn = Turn::new(5, Vec::new());
        let next = turn.next(Ok(answer("Hi.", &[], 990))).unwrap();
        assert_eq!(next, Next::Finish { last: answer("Hi.", &[], 990), note: None });
        assert_eq!((turn.prompt_tokens, turn.completion_tokens, turn.cost), (990, 10, 1));
    }

    #[test]
    fn own_calls_run_until_the_most_rounds_then_the_turn_says_it_stopped() {
        let mut turn = Turn::new(2, Vec::new());
        for round in 0..2 {
            match turn.next(Ok(answer("Looking.", &["search"], 100))).unwrap() {
                Next::CallTools { content, calls } => {
                    assert_eq!((content.as_str(), calls.len()), ("Looking.", 1), "round {round}");
                }
                other => panic!("{other:?}"),
            }
        }
        let Next::Finish { last, note } = turn.next(Ok(answer("Again.", &["search"], 100))).unwrap() else {
            panic!("a third round")
        };
        assert_eq!(
            (last.finish, last.tool_calls.len(), last.content.as_str()),
            (FinishReason::Length, 0, "Again.")
        );
        assert!(note.unwrap().contains("2 rounds of tool calls"));
        assert_eq!(turn.cost, 3, "every call counted: 110 tokens cost 1 credit each");
    }

    #[test]
    fn a_call_of_a_clients_tool_ends_the_turn_with_only_the_clients_calls() {
        let mut turn = Turn::new(5, vec!["weather".into()]);
        let Next::Finish { last, note } = turn.next(Ok(answer("", &["search", "weather"], 10))).unwrap()
        else {
            panic!("the client runs its tool")
        };
        assert_eq!(note, None);
        assert_eq!(last.finish, FinishReason::ToolCalls);
        assert_eq!(last.tool_calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["weather"]);
    }

    #[test]
    fn no_rounds_allowed_finishes_at_the_first_call() {
        let mut turn = Turn::new(0, Vec::new());
        assert!(matches!(turn.next(Ok(answer("", &["search"], 10))), Ok(Next::Finish { note: Some(_), .. })));
    }

    #[test]
    fn a_cancelled_answer_finishes_without_its_calls() {
        let mut turn = Turn::new(5, Vec::new());
        let mut cut = answer("Half", &["search"], 10);
        cut.finish = FinishReason::Cancelled;
        let Next::Finish { last, note: None } = turn.next(Ok(cut)).unwrap() else { panic!("cancelled") };
        assert!(last.tool_calls.is_empty());
        assert_eq!(last.finish, FinishReason::Cancelled);
    }

    #[test]
    fn a_model_failure_fails_the_turn_before_any_answer_and_ends_it_after() {
        let mut turn = Turn::new(5, Vec::new());
        assert!(turn.next(Err(upstream())).is_err(), "nothing answered: nothing to charge");
        assert!(matches!(turn.next(Ok(answer("", &["search"], 10))), Ok(Next::CallTools { .. })));
        let Next::Finish { last, note } = turn.next(Err(upstream())).unwrap() else { panic!("after tools") };
        assert_eq!(last.finish, FinishReason::Length);
        assert!(note.unwrap().contains("the model failed after the tools ran"));
        assert!(turn.out_of_credits().1.unwrap().contains("credits left"));
    }
}
