//! Provider profiles: the tool list in the exact format each provider accepts.
