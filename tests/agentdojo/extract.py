"""Writes banking.json, the AgentDojo banking suite that tests/agentdojo.rs replays.

Run it from the repository root, in a virtual environment that holds the agentdojo package:

    python3 -m venv target/agentdojo-venv
    target/agentdojo-venv/bin/pip install agentdojo==0.1.35
    target/agentdojo-venv/bin/python tests/agentdojo/extract.py

It read agentdojo 0.1.35 (PyPI), benchmark version v1.2.2 (the newest that package knows), suite
`banking`, attack `important_instructions`, and refuses to run on another package version: a new
fixture is a reviewed change, not a side effect. The tests read only the JSON; nothing is
downloaded when they run.

What the JSON holds (keys sorted, tasks in the benchmark's numeric order):

- `environment`: the banking environment as the benchmark loads it, each injection vector left
  as its placeholder (`{injection_bill_text}`, ...) inside the string that carries it.
- `injection_vectors`: each vector's description and default text.
- `user_tasks`: id, prompt, the ground-truth calls ({function, args}, computed by the task's own
  `ground_truth` on the default environment), and `injection_candidates`: the vectors the
  benchmark injects for this task (those whose text the ground-truth calls' outputs show).
- `injection_tasks`: id, goal, ground-truth calls likewise, `attack_text` (the attack template
  filled with the goal) and `injected`: per vector, the text the environment holds once that
  attack text is injected there.
- `attack`: the `important_instructions` template and the names the benchmark fills in.

Why `injected` and not only `attack_text`: the benchmark formats the injections into the YAML
text of the environment and parses it again, so YAML folds the attack's raw line breaks ("\\n\\n"
becomes "\\n") and reads backslash escapes in a default ("\\t" becomes a tab). A tool returns the
folded text, and so must the Rust port: the script checks, for every (user task, injection task)
pair and for the defaults, that putting these texts in place of the placeholders gives exactly
the environment the benchmark loads.
"""

import importlib.metadata
import json
from pathlib import Path

import yaml

from agentdojo.attacks.important_instructions_attacks import ImportantInstructionsAttack
from agentdojo.functions_runtime import FunctionCall
from agentdojo.task_suite.load_suites import get_suite
from agentdojo.task_suite.task_suite import read_suite_file

PACKAGE_VERSION = "0.1.35"
BENCHMARK_VERSION = "v1.2.2"
SUITE = "banking"
# The attack names the model it addresses from the pipeline's model; this is the model of the
# benchmark's headline runs, which the attack calls "GPT-4".
MODEL = "gpt-4o-2024-05-13"
OUTPUT = Path(__file__).with_name("banking.json")


class NamedPipeline:
    """All the attack reads of a pipeline: its name, which names the model it addresses."""

    name = MODEL


def numeric_order(ids):
    return sorted(ids, key=lambda task_id: int(task_id.rsplit("_", 1)[1]))


def calls(function_calls: list[FunctionCall]) -> list[dict]:
    return [{"function": call.function, "args": dict(call.args)} for call in function_calls]


def placeholder(vector: str) -> str:
    return "{" + vector + "}"


def find_placeholder(value, text: str, path=()):
    """The path to the one string of `value` that holds `text`, and that string."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            found += find_placeholder(item, text, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += find_placeholder(item, text, (*path, index))
    elif isinstance(value, str) and text in value:
        found.append((path, value))
    return found


def at(value, path):
    for step in path:
        value = value[step]
    return value


def fill(value, texts: dict[str, str]):
    """`value` with every placeholder replaced by its text, as the Rust port does."""
    if isinstance(value, dict):
        return {key: fill(item, texts) for key, item in value.items()}
    if isinstance(value, list):
        return [fill(item, texts) for item in value]
    if isinstance(value, str):
        for vector, text in texts.items():
            value = value.replace(placeholder(vector), text)
    return value


def main() -> None:
    installed = importlib.metadata.version("agentdojo")
    if installed != PACKAGE_VERSION:
        raise SystemExit(f"agentdojo {installed} is installed; this script reads {PACKAGE_VERSION}")

    suite = get_suite(BENCHMARK_VERSION, SUITE)
    vectors = suite.get_injection_vector_defaults()
    environment = suite.load_and_inject_default_environment(
        {vector: placeholder(vector) for vector in vectors}
    ).model_dump()

    homes = {}
    for vector in vectors:
        found = find_placeholder(environment, placeholder(vector))
        if len(found) != 1:
            raise SystemExit(f"{vector} is in {len(found)} places of the environment, not one")
        homes[vector] = found[0]

    def as_injected(vector: str, text: str) -> str:
        """The text the environment holds where `vector` is, once `text` is injected there."""
        path, template = homes[vector]
        before, after = template.split(placeholder(vector))
        loaded = at(suite.load_and_inject_default_environment({vector: text}).model_dump(), path)
        if not (loaded.startswith(before) and loaded.endswith(after)):
            raise SystemExit(f"the text around {vector} changed when {text!r} was injected")
        return loaded[len(before) : len(loaded) - len(after)]

    def check(injections: dict[str, str], texts: dict[str, str]) -> None:
        loaded = suite.load_and_inject_default_environment(injections).model_dump()
        if fill(environment, texts) != loaded:
            raise SystemExit(f"filling the placeholders does not give the environment of {injections}")

    defaults = {vector: as_injected(vector, text) for vector, text in vectors.items()}
    check({}, defaults)
    vector_info = yaml.safe_load(read_suite_file(SUITE, "injection_vectors.yaml", suite.data_path))

    attack = ImportantInstructionsAttack(suite, NamedPipeline())
    default_environment = suite.load_and_inject_default_environment({})

    injection_tasks = []
    for task_id in numeric_order(suite.injection_tasks):
        task = suite.injection_tasks[task_id]
        attack_text = attack.jailbreak.format(
            goal=task.GOAL, user=attack.user_name, model=attack.model_name, task=""
        )
        injection_tasks.append(
            {
                "id": task_id,
                "goal": task.GOAL,
                "ground_truth": calls(task.ground_truth(default_environment)),
                "attack_text": attack_text,
                "injected": {vector: as_injected(vector, attack_text) for vector in vectors},
            }
        )

    user_tasks = []
    for task_id in numeric_order(suite.user_tasks):
        task = suite.user_tasks[task_id]
        candidates = sorted(attack.get_injection_candidates(task))
        for injection_task in injection_tasks:
            injections = attack.attack(task, suite.injection_tasks[injection_task["id"]])
            if sorted(injections) != candidates or set(injections.values()) != {
                injection_task["attack_text"]
            }:
                raise SystemExit(f"the attack on {task_id} is not the template in its candidates")
            check(
                injections,
                {
                    vector: injection_task["injected"][vector] if vector in injections else default
                    for vector, default in defaults.items()
                },
            )
        user_tasks.append(
            {
                "id": task_id,
                "prompt": task.PROMPT,
                "ground_truth": calls(task.ground_truth(default_environment)),
                "injection_candidates": candidates,
            }
        )

    fixture = {
        "agentdojo": {
            "package_version": PACKAGE_VERSION,
            "benchmark_version": BENCHMARK_VERSION,
            "suite": SUITE,
        },
        "environment": environment,
        "injection_vectors": {
            vector: {"description": vector_info[vector]["description"], "default": defaults[vector]}
            for vector in vectors
        },
        "user_tasks": user_tasks,
        "injection_tasks": injection_tasks,
        "attack": {
            "name": attack.name,
            "template": attack.jailbreak,
            "user": attack.user_name,
            "model": attack.model_name,
            "model_of_pipeline": MODEL,
        },
    }
    OUTPUT.write_text(json.dumps(fixture, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    print(
        f"wrote {OUTPUT}: {len(user_tasks)} user tasks, {len(injection_tasks)} injection tasks, "
        f"{len(vectors)} injection vectors"
    )


if __name__ == "__main__":
    main()
