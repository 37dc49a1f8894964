//! What the replay of an AgentDojo suite needs from its Rust port: the fixture `extract.py`
//! wrote from the `agentdojo` package (`<suite>.json`), the world one task's calls act on, and
//! the [`Suite`] trait a port implements.
//!
//! Each task gets a world of its own ([`World`], attached to the task's [`CallContext`]), so a
//! call's effect is real and stays in its task.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use portcullis::prelude::*;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// What `extract.py` read from the `agentdojo` package.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixture {
    pub agentdojo: Origin,
    /// The environment, each injection vector left as its placeholder (`{injection_bill_text}`)
    /// wherever the benchmark puts its text.
    environment: Value,
    pub injection_vectors: BTreeMap<String, InjectionVector>,
    pub user_tasks: Vec<UserTask>,
    pub injection_tasks: Vec<InjectionTask>,
    pub attack: Attack,
}

/// Which package, benchmark version and suite the fixture holds.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Origin {
    pub package_version: String,
    pub benchmark_version: String,
    pub suite: String,
}

/// A place of the environment where the benchmark puts an attacker's text (the fixture also
/// holds its description, for the reader).
#[derive(Debug, Deserialize)]
pub struct InjectionVector {
    /// The text the environment holds there when no attack runs.
    pub default: String,
}

/// A task the user gives the agent.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserTask {
    pub id: String,
    pub prompt: String,
    /// The calls that solve the task, as the benchmark computes them on the default environment.
    pub ground_truth: Vec<Call>,
    /// The vectors the benchmark injects for this task: those its ground-truth calls show.
    pub injection_candidates: Vec<String>,
}

/// What an attacker wants the agent to do instead.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InjectionTask {
    pub id: String,
    pub goal: String,
    /// The calls that reach the goal, as the benchmark computes them on the default environment
    /// (none for the tasks the benchmark gives no ground truth).
    pub ground_truth: Vec<Call>,
    /// The attack template filled with the goal.
    pub attack_text: String,
    /// Per vector, the text the environment holds once `attack_text` is injected there (the
    /// benchmark's YAML round trip folds its line breaks).
    pub injected: BTreeMap<String, String>,
}

/// One tool call of a ground truth.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Call {
    pub function: String,
    pub args: Map<String, Value>,
}

/// The `important_instructions` attack: its template and the names it fills in.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attack {
    pub name: String,
    pub template: String,
    pub user: String,
    pub model: String,
    /// The model whose pipeline the attack addresses, as `model` names it.
    pub model_of_pipeline: String,
}

impl Attack {
    /// The template filled with `goal`, as the benchmark's `str.format` fills it.
    pub fn text(&self, goal: &str) -> String {
        self.template
            .replace("{goal}", goal)
            .replace("{user}", &self.user)
            .replace("{model}", &self.model)
    }
}

impl Fixture {
    /// The fixture `json` holds, as `extract.py` wrote it.
    pub fn parse(json: &str) -> Fixture {
        serde_json::from_str(json).expect("the fixture is an AgentDojo suite")
    }

    /// A world holding the environment with `texts[vector]` where a vector's placeholder is, and
    /// the vector's default where `texts` names no text for it.
    pub fn world<E: DeserializeOwned>(&self, texts: &BTreeMap<String, String>) -> World<E> {
        let mut environment = self.environment.clone();
        fill(&mut environment, &|text: &str| {
            self.injection_vectors
                .iter()
                .fold(text.to_owned(), |text, (vector, info)| {
                    let with = texts.get(vector).unwrap_or(&info.default);
                    text.replace(&format!("{{{vector}}}"), with)
                })
        });
        serde_json::from_value(environment)
            .expect("the fixture's environment is the suite's environment")
    }

    /// A world with every vector at its default: no attack.
    pub fn default_world<E: DeserializeOwned>(&self) -> World<E> {
        self.world(&BTreeMap::new())
    }

    /// A world under `attack`, as the benchmark builds it for `user_task`: the attack's text in
    /// the vectors the user task's calls show, the defaults elsewhere.
    pub fn attacked_world<E: DeserializeOwned>(
        &self,
        user_task: &UserTask,
        attack: &InjectionTask,
    ) -> World<E> {
        let texts = user_task
            .injection_candidates
            .iter()
            .map(|vector| (vector.clone(), attack.injected[vector].clone()))
            .collect();
        self.world(&texts)
    }
}

fn fill(value: &mut Value, with: &dyn Fn(&str) -> String) {
    match value {
        Value::String(text) => *text = with(text),
        Value::Array(items) => items.iter_mut().for_each(|item| fill(item, with)),
        Value::Object(fields) => fields.values_mut().for_each(|item| fill(item, with)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// The state behind `mutex`, also after a tool panicked holding it: a panic is the tool's
/// outcome, and the task's later calls still see the state it left.
fn unpoisoned<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A state one task's calls share, attached to the task's [`CallContext`] as an extension of
/// its own: the task's whole environment (a [`World`]), or a part of it that tools of several
/// suites reach on their own (the inbox, the calendar), deserialized from `T`'s JSON and
/// serialized as `T`.
#[derive(Debug)]
pub struct Shared<T>(Arc<Mutex<T>>);

/// One task's environment.
pub type World<E> = Shared<E>;

// Not derived: a derived `Clone` would ask `T: Clone`, and a clone shares the state.
impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(Arc::clone(&self.0))
    }
}

impl<T: Send + Sync + 'static> Shared<T> {
    /// The state as it is now.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        unpoisoned(&self.0)
    }

    /// The state of this type attached to `ctx`.
    pub fn of(ctx: &CallContext) -> Result<MutexGuard<'_, T>, ToolError> {
        ctx.extension::<Shared<T>>()
            .map(Shared::lock)
            .ok_or_else(|| {
                ToolError::new(
                    "no_world",
                    format!("this task has no {} attached", std::any::type_name::<T>()),
                )
            })
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Shared<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(|state| Shared(Arc::new(Mutex::new(state))))
    }
}

impl<T: Serialize> Serialize for Shared<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        unpoisoned(&self.0).serialize(serializer)
    }
}

/// An AgentDojo suite ported to Rust: its environment, its tools and its fixture.
pub trait Suite {
    /// AgentDojo's environment of the suite, as the fixture's JSON writes it.
    type Environment: DeserializeOwned + Serialize + Send + Sync + 'static;
    /// The suite's name in AgentDojo: `banking`.
    const NAME: &'static str;
    /// AgentDojo's tool names, in its order.
    const TOOLS: &'static [&'static str];

    /// The suite, as `extract.py` wrote it.
    fn fixture() -> &'static Fixture;

    /// A registry of the suite's tools, configured as a careful user following the guide would.
    fn registry() -> Registry;

    /// `ctx` with the task's world attached for the suite's tools.
    fn attach(ctx: CallContext, world: &World<Self::Environment>) -> CallContext {
        ctx.with_extension(world.clone())
    }
}

/// `str()` of a Python float, as AgentDojo's texts print an amount, a price or a rating: the
/// shortest digits that read back as the same number, `.0` on a whole one (`98.7`, `10.0`,
/// `120.0`), in scientific notation below 1e-4 and from 1e16 (`1e-05`, `1e+16`). A finite one:
/// JSON has no other.
pub fn python_float(value: f64) -> String {
    // Rust's shortest digits, in scientific notation: `9.87e1`.
    let scientific = format!("{value:e}");
    let (digits, exponent) = scientific
        .split_once('e')
        .expect("a finite float has an exponent");
    let exponent: i32 = exponent.parse().expect("the exponent is a number");
    if (-4..16).contains(&exponent) {
        let fixed = value.to_string();
        if fixed.contains('.') {
            fixed
        } else {
            fixed + ".0"
        }
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{digits}e{sign}{:02}", exponent.abs())
    }
}
