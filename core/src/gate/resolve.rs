//! The resolve gate: the tool exists for this caller, and the step's tool choice allows it. A
//! tool the caller may not use is refused exactly as one that does not exist, so that a model
//! cannot learn which tools exist by probing.

use crate::context::{CallContext, ToolChoice};
use crate::rejection::{Rejection, RejectionCode};
use crate::suggest;

/// Looks `name` up exactly in `tools` (sorted by name): no case folding, no Unicode
/// normalization, so a look-alike or a name with an invisible character never reaches a real
/// tool. A tool `known` refuses is missing to this caller: its refusal is that of a name no
/// tool has. The hint for an unknown name draws only on the tools `visible` keeps, so that it
/// never reveals a tool the caller may not use.
pub(crate) fn resolve<'a, T>(
    tools: &'a [(String, T)],
    name: &str,
    known: impl Fn(&T) -> bool,
    visible: impl Fn(&T) -> bool,
) -> Result<&'a T, Rejection> {
    let found = tools
        .binary_search_by(|(candidate, _)| candidate.as_str().cmp(name))
        .ok()
        .map(|index| &tools[index].1)
        .filter(|tool| known(tool));
    found.ok_or_else(|| {
        let names = || {
            tools
                .iter()
                .filter(|(_, tool)| visible(tool))
                .map(|(candidate, _)| candidate.as_str())
        };
        // Debug formatting shows invisible and control characters as escapes.
        let shown: String = name.chars().take(64).collect();
        let hint = suggest::did_you_mean(name, names()).unwrap_or_else(|| {
            let names: Vec<&str> = names().collect();
            format!("the available tools are {}", names.join(", "))
        });
        Rejection::new(
            RejectionCode::UnknownTool,
            format!("there is no tool named {shown:?}"),
        )
        .with_hint(hint)
    })
}

/// The tool choice of the step allows the tool named `name`: a model told to call one tool, or
/// none, may still call another, and only code can hold it to the choice.
pub(crate) fn check_choice(name: &str, ctx: &CallContext) -> Result<(), Rejection> {
    let choice = ctx.tool_choice();
    if choice.allows(name) {
        return Ok(());
    }
    Err(match choice {
        ToolChoice::Tool(allowed) => Rejection::new(
            RejectionCode::ToolNotAllowed,
            format!("this step allows only the tool `{allowed}`"),
        )
        .with_hint(format!("call `{allowed}` instead")),
        _ => Rejection::new(
            RejectionCode::ToolNotAllowed,
            "this step allows no tool call",
        )
        .with_hint("answer without calling a tool")
        .with_retryable(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_names_only() {
        let tools = [("delete_record".to_string(), 1)];
        assert_eq!(resolve(&tools, "delete_record", |_| true, |_| true), Ok(&1));
        for name in [
            "Delete_Record",
            "delete_record ",
            "dеlete_record",
            "delete\u{200b}_record",
        ] {
            let rejection = resolve(&tools, name, |_| true, |_| true).unwrap_err();
            assert_eq!(rejection.code(), RejectionCode::UnknownTool);
            assert_eq!(
                rejection.hint(),
                Some("did you mean `delete_record`?"),
                "{name:?}"
            );
        }
    }

    #[test]
    fn strangers_get_the_list() {
        let tools = [("a".to_string(), 2), ("b".to_string(), 1)];
        let rejection = resolve(&tools, "transfer_funds", |_| true, |_| true).unwrap_err();
        assert_eq!(rejection.hint(), Some("the available tools are a, b"));
        let rejection = resolve(&tools, "transfer_funds", |_| true, |tool| *tool == 2).unwrap_err();
        assert_eq!(rejection.hint(), Some("the available tools are a"));
        let rejection = resolve(&tools, "bb", |_| true, |tool| *tool == 2).unwrap_err();
        assert_eq!(
            rejection.hint(),
            Some("the available tools are a"),
            "no hint toward `b`"
        );
    }

    #[test]
    fn a_tool_the_caller_may_not_know_of_is_missing() {
        let tools = [("a".to_string(), 2), ("b".to_string(), 1)];
        let hidden = resolve(&tools, "b", |tool| *tool == 2, |tool| *tool == 2).unwrap_err();
        let missing = resolve(&tools, "c", |tool| *tool == 2, |tool| *tool == 2).unwrap_err();
        assert_eq!(hidden.code(), RejectionCode::UnknownTool);
        assert_eq!(hidden.hint(), missing.hint());
        assert_eq!(
            hidden.message().replace("\"b\"", "\"c\""),
            missing.message()
        );
    }

    #[test]
    fn the_tool_choice_allows_its_tools_only() {
        let ctx = CallContext::new("a");
        let code = |choice| {
            check_choice("t", &ctx.clone().with_tool_choice(choice))
                .err()
                .map(|rejection| rejection.code())
        };
        assert_eq!(code(ToolChoice::Auto), None);
        assert_eq!(code(ToolChoice::Required), None);
        assert_eq!(code(ToolChoice::Tool("t".into())), None);
        assert_eq!(
            code(ToolChoice::Tool("other".into())),
            Some(RejectionCode::ToolNotAllowed)
        );
        assert_eq!(code(ToolChoice::None), Some(RejectionCode::ToolNotAllowed));
    }
}
