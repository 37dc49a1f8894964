//! Who is calling, on whose behalf, and where.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The caller of a tool call: actor, roles, tenant, environment, task and trace ids, the user's
/// original request, and typed extensions for application data.
///
/// The dispatcher hands it to every gate and, by reference, to the tool itself (declare a
/// parameter of type `&CallContext`). It is cheap to clone: the contents are shared.
///
/// ```
/// use portcullis_core::CallContext;
///
/// let ctx = CallContext::new("alice")
///     .with_roles(["admin"])
///     .with_tenant("t_001")
///     .with_environment("production")
///     .with_request("Delete my test account.");
/// assert!(ctx.has_role("admin"));
/// assert_eq!(ctx.tenant(), Some("t_001"));
/// assert!(!ctx.task_id().is_empty());
/// ```
///
/// A context serializes without its extensions (they are whatever the application put there),
/// so that a call waiting in a durable store can be run later as the caller who made it.
#[derive(Clone)]
pub struct CallContext {
    inner: Arc<Inner>,
}

/// The part of a context that is stored: all but the extensions.
#[derive(Serialize, Deserialize)]
struct Stored {
    actor: String,
    #[serde(default)]
    roles: Vec<String>,
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    environment: Option<String>,
    task_id: String,
    trace_id: String,
    #[serde(default)]
    request: Option<String>,
    #[serde(default)]
    tool_choice: ToolChoice,
}

impl Serialize for CallContext {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let inner = &*self.inner;
        Stored {
            actor: inner.actor.clone(),
            roles: inner.roles.clone(),
            tenant: inner.tenant.clone(),
            environment: inner.environment.clone(),
            task_id: inner.task_id.clone(),
            trace_id: inner.trace_id.clone(),
            request: inner.request.clone(),
            tool_choice: inner.tool_choice.clone(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for CallContext {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let stored = Stored::deserialize(deserializer)?;
        Ok(CallContext {
            inner: Arc::new(Inner {
                actor: stored.actor,
                roles: stored.roles,
                tenant: stored.tenant,
                environment: stored.environment,
                task_id: stored.task_id,
                trace_id: stored.trace_id,
                request: stored.request,
                tool_choice: stored.tool_choice,
                extensions: HashMap::new(),
            }),
        })
    }
}

#[derive(Clone)]
struct Inner {
    actor: String,
    roles: Vec<String>,
    tenant: Option<String>,
    environment: Option<String>,
    task_id: String,
    trace_id: String,
    request: Option<String>,
    tool_choice: ToolChoice,
    extensions: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl CallContext {
    /// A context for `actor`, with no roles, tenant or environment, and fresh task and trace ids.
    pub fn new(actor: impl Into<String>) -> Self {
        CallContext {
            inner: Arc::new(Inner {
                actor: actor.into(),
                roles: Vec::new(),
                tenant: None,
                environment: None,
                task_id: fresh_id("task"),
                trace_id: fresh_id("trace"),
                request: None,
                tool_choice: ToolChoice::Auto,
                extensions: HashMap::new(),
            }),
        }
    }

    fn edit(mut self, change: impl FnOnce(&mut Inner)) -> Self {
        change(Arc::make_mut(&mut self.inner));
        self
    }

    /// Replaces the actor's roles.
    pub fn with_roles<I, S>(self, roles: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.edit(|inner| inner.roles = roles.into_iter().map(Into::into).collect())
    }

    /// Sets the tenant the actor belongs to.
    pub fn with_tenant(self, tenant: impl Into<String>) -> Self {
        self.edit(|inner| inner.tenant = Some(tenant.into()))
    }

    /// Sets the environment the call runs in (for example `production`).
    pub fn with_environment(self, environment: impl Into<String>) -> Self {
        self.edit(|inner| inner.environment = Some(environment.into()))
    }

    /// Sets the task id (calls of one task share budgets and transactions).
    pub fn with_task_id(self, task_id: impl Into<String>) -> Self {
        self.edit(|inner| inner.task_id = task_id.into())
    }

    /// Gives the context a task id of its own, as [`new`](Self::new) does: for a context cloned
    /// from a template (a caller's identity) that starts a task, such as an MCP session.
    ///
    /// ```
    /// use portcullis_core::CallContext;
    ///
    /// let identity = CallContext::new("sam");
    /// let session = identity.clone().with_fresh_task_id();
    /// assert_ne!(session.task_id(), identity.task_id());
    /// ```
    pub fn with_fresh_task_id(self) -> Self {
        self.with_task_id(fresh_id("task"))
    }

    /// Sets the trace id that ties the call to the caller's logs.
    pub fn with_trace_id(self, trace_id: impl Into<String>) -> Self {
        self.edit(|inner| inner.trace_id = trace_id.into())
    }

    /// Records the user's original request, as the user wrote it.
    pub fn with_request(self, request: impl Into<String>) -> Self {
        self.edit(|inner| inner.request = Some(request.into()))
    }

    /// Restricts the calls of this step to the tools `choice` allows, as the `tool_choice` sent
    /// to the model did: the resolve gate refuses any other tool with `tool_not_allowed`.
    /// The default, [`ToolChoice::Auto`], allows every tool.
    ///
    /// ```
    /// use portcullis_core::CallContext;
    /// use portcullis_core::wire::ToolChoice;
    ///
    /// let step = CallContext::new("alice").with_tool_choice(ToolChoice::Tool("search".into()));
    /// assert!(step.tool_choice().allows("search"));
    /// assert!(!step.tool_choice().allows("delete_record"));
    /// ```
    pub fn with_tool_choice(self, choice: ToolChoice) -> Self {
        self.edit(|inner| inner.tool_choice = choice)
    }

    /// Attaches a value of application data, one per type; a later value of the same type
    /// replaces the earlier one.
    pub fn with_extension<T: Any + Send + Sync>(self, value: T) -> Self {
        self.edit(|inner| {
            inner.extensions.insert(TypeId::of::<T>(), Arc::new(value));
        })
    }

    /// The actor's id.
    pub fn actor(&self) -> &str {
        &self.inner.actor
    }

    /// The actor's roles.
    pub fn roles(&self) -> &[String] {
        &self.inner.roles
    }

    /// Whether the actor holds `role`.
    pub fn has_role(&self, role: &str) -> bool {
        self.inner.roles.iter().any(|held| held == role)
    }

    /// The actor's tenant, if any.
    pub fn tenant(&self) -> Option<&str> {
        self.inner.tenant.as_deref()
    }

    /// The environment the call runs in, if set.
    pub fn environment(&self) -> Option<&str> {
        self.inner.environment.as_deref()
    }

    /// The task id, generated when not set.
    pub fn task_id(&self) -> &str {
        &self.inner.task_id
    }

    /// The trace id, generated when not set.
    pub fn trace_id(&self) -> &str {
        &self.inner.trace_id
    }

    /// The user's original request, if recorded.
    pub fn request(&self) -> Option<&str> {
        self.inner.request.as_deref()
    }

    /// The tools this step may call; [`ToolChoice::Auto`] unless restricted.
    pub fn tool_choice(&self) -> &ToolChoice {
        &self.inner.tool_choice
    }

    /// The application data of type `T`, if attached.
    pub fn extension<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.inner
            .extensions
            .get(&TypeId::of::<T>())
            .and_then(|value| value.downcast_ref())
    }
}

impl fmt::Debug for CallContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallContext")
            .field("actor", &self.inner.actor)
            .field("roles", &self.inner.roles)
            .field("tenant", &self.inner.tenant)
            .field("environment", &self.inner.environment)
            .field("task_id", &self.inner.task_id)
            .field("trace_id", &self.inner.trace_id)
            .field("request", &self.inner.request)
            .field("tool_choice", &self.inner.tool_choice)
            .field("extensions", &self.inner.extensions.len())
            .finish()
    }
}

/// Which tools the model may call in one step: the `tool_choice` of the request, rendered for
/// each provider, and enforced on the calls that come back with
/// [`CallContext::with_tool_choice`](crate::CallContext::with_tool_choice).
///
/// ```
/// use portcullis_core::wire::ToolChoice;
/// use serde_json::json;
///
/// let choice = ToolChoice::Tool("search".into());
/// assert_eq!(choice.openai_chat(), json!({"type": "function", "function": {"name": "search"}}));
/// assert_eq!(choice.anthropic(), json!({"type": "tool", "name": "search"}));
/// assert_eq!(ToolChoice::Required.openai_chat(), json!("required"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolChoice {
    /// No tool: the model answers in text.
    None,
    /// The model decides whether to call tools, and which.
    #[default]
    Auto,
    /// The model must call at least one tool, any of them. (That it calls one at all cannot be
    /// checked on the calls; dispatch allows every tool.)
    Required,
    /// The model must call this tool, and no other.
    Tool(String),
}

impl ToolChoice {
    /// Whether a call of `tool` fits the choice.
    pub fn allows(&self, tool: &str) -> bool {
        match self {
            ToolChoice::None => false,
            ToolChoice::Auto | ToolChoice::Required => true,
            ToolChoice::Tool(name) => name == tool,
        }
    }
}

/// An id unique within the process and unlikely to repeat across processes: the current time in
/// nanoseconds, the process id and a counter, in hex. Ids name tasks and traces; they grant
/// nothing, so they need no cryptographic randomness.
pub(crate) fn fresh_id(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or_default();
    format!("{prefix}_{nanos:x}-{:x}-{count:x}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_differ() {
        let a = CallContext::new("a");
        let b = CallContext::new("a");
        assert_ne!(a.task_id(), b.task_id());
        assert_ne!(a.trace_id(), b.trace_id());
    }

    #[test]
    fn clones_share_until_edited() {
        let base = CallContext::new("alice").with_roles(["viewer"]);
        let admin = base.clone().with_roles(["admin"]);
        assert!(base.has_role("viewer") && !base.has_role("admin"));
        assert!(admin.has_role("admin") && !admin.has_role("viewer"));
        assert_eq!(base.task_id(), admin.task_id());
    }

    #[test]
    fn extensions_are_typed() {
        #[derive(Debug, PartialEq)]
        struct Locale(&'static str);
        let ctx = CallContext::new("alice").with_extension(Locale("zh-CN"));
        assert_eq!(ctx.extension::<Locale>(), Some(&Locale("zh-CN")));
        assert_eq!(ctx.extension::<u32>(), None);
    }
}
