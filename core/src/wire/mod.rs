//! Tool calls and results on the wire: reading each provider's tool calls into
//! [`ToolCall`](crate::ToolCall)s, rendering each [`Outcome`](crate::Outcome) as the provider's
//! result message, and the providers' `tool_choice` values.
