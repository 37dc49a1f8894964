"""Writes <suite>.json, one AgentDojo suite that tests/agentdojo.rs replays: banking, workspace or
travel.

Run it from the repository root, in a virtual environment that holds the agentdojo package:

    python3 -m venv target/agentdojo-venv
    target/agentdojo-venv/bin/pip install agentdojo==0.1.35
    target/agentdojo-venv/bin/python tests/agentdojo/extract.py banking   # or workspace, travel

It reads agentdojo 0.1.35 (PyPI), benchmark version v1.2.2 (the newest that package knows), the
suite named, attack `important_instructions`, and refuses to run on another package version: a
new fixture is a reviewed change, not a side effect. The tests read only the JSON; nothing is
downloaded when they run.

What the JSON holds (keys sorted, tasks in the benchmark's numeric order):

- `environment`: the suite's environment as the benchmark loads it, in pydantic's JSON form
  (a datetime is `"2024-05-15T10:00:00"`, a date `"2024-05-15"`, an enum its value), each
  injection vector left as its placeholder (`{injection_bill_text}`, ...) inside every string
  that carries it. A vector may be in several places: the workspace's models keep each email,
  event and file both in the list they were read from (`initial_emails`, ...) and in a dict by
  id (`emails`, ...), and the inbox adds its computed `received`, `sent` and `drafts` lists;
  travel puts one review on two hotels.
- `injection_vectors`: each vector's description and default text.
- `user_tasks`: id, prompt, the ground-truth calls ({function, args}, computed by the task's own
  `ground_truth` on the default environment), and `injection_candidates`: the vectors the
  benchmark injects for this task (those whose text the ground-truth calls' outputs show).
- `injection_tasks`: id, goal, ground-truth calls likewise (the benchmark gives some injection
  tasks none: they are empty), `attack_text` (the attack template filled with the goal) and `injected`: per vector, the text the environment holds once that
  attack text is injected there.
- `attack`: the `important_instructions` template and the names the benchmark fills in.

Why `injected` and not only `attack_text`: the benchmark formats the injections into the YAML
text of the environment and parses it again, so YAML folds the attack's raw line breaks ("\\n\\n"
becomes "\\n") and reads backslash escapes in a default ("\\t" becomes a tab). A tool returns the
folded text, and so must the Rust port. Folding may also drop text around a placeholder (the
space before it, when the attack starts with a line break): the placeholder then takes that
text in, and the default and the injected texts start with what each injection leaves of it
(a workspace default may start with a space). The script checks, for the defaults and for every
(user task, injection task) pair, that putting these texts in place of the placeholders gives
exactly the environment the benchmark loads, once the environment's own validation has
recomputed what it derives from a text: the only such field is a cloud-drive file's `size`, the
length of its content in code points, which the Rust port computes likewise. For every pair it
also checks that the user task's ground-truth calls, run by the benchmark on the attacked
environment, return some of the injected text: each pair tests the injection.
"""

import importlib.metadata
import json
import os
import sys
from pathlib import Path

import yaml

from agentdojo.attacks.important_instructions_attacks import ImportantInstructionsAttack
from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime
from agentdojo.task_suite.load_suites import get_suite
from agentdojo.task_suite.task_suite import read_suite_file

PACKAGE_VERSION = "0.1.35"
BENCHMARK_VERSION = "v1.2.2"
SUITES = ("banking", "workspace", "travel")
# The attack names the model it addresses from the pipeline's model; this is the model of the
# benchmark's headline runs, which the attack calls "GPT-4".
MODEL = "gpt-4o-2024-05-13"
# The fields an environment's validation computes from a text an attack may change.
DERIVED_FIELDS = {"size"}


class NamedPipeline:
    """All the attack reads of a pipeline: its name, which names the model it addresses."""

    name = MODEL


def numeric_order(ids):
    return sorted(ids, key=lambda task_id: int(task_id.rsplit("_", 1)[1]))


def calls(function_calls: list[FunctionCall]) -> list[dict]:
    return [{"function": call.function, "args": dict(call.args)} for call in function_calls]


def placeholder(vector: str) -> str:
    return "{" + vector + "}"


def dump(environment) -> dict:
    return environment.model_dump(mode="json")


def find_placeholder(value, text: str, path=()):
    """The paths to the strings of `value` that hold `text`, and those strings."""
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


def differences(left, right, path=()):
    """The paths at which `left` and `right` differ."""
    if isinstance(left, dict) and isinstance(right, dict) and left.keys() == right.keys():
        return [found for key in left for found in differences(left[key], right[key], (*path, key))]
    if isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        return [
            found
            for index, (one, other) in enumerate(zip(left, right))
            for found in differences(one, other, (*path, index))
        ]
    return [] if left == right else [path]


def shows(value, text: str) -> bool:
    """Whether a string of a tool's result holds `text`."""
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    if isinstance(value, str):
        return text in value
    if isinstance(value, dict):
        return any(shows(item, text) for item in value.values())
    if isinstance(value, (list, tuple)):
        return any(shows(item, text) for item in value)
    return False


def at(value, path):
    for step in path:
        value = value[step]
    return value


def place_placeholders(suite, environment, vectors: dict[str, str], attack_texts: list[str]):
    """Per vector, the text the environment holds where the vector is once each of its texts (its
    default, each attack text) is injected there; moves the placeholders of `environment` so that
    the text around each stays the same whatever is injected.

    YAML may fold the text around a placeholder too (a space before it is dropped when the
    injected text starts with a line break): the placeholder then takes in that text, and each
    injected text starts with what the injection left of it.
    """
    injected = {}
    for vector, default in vectors.items():
        texts = [default, *attack_texts]
        environments = [dump(suite.load_and_inject_default_environment({vector: text})) for text in texts]
        homes = find_placeholder(environment, placeholder(vector))
        if not homes:
            raise SystemExit(f"{vector} is nowhere in the environment")
        injected[vector] = {}
        for path, template in homes:
            before, after = template.split(placeholder(vector))
            values = [at(loaded, path) for loaded in environments]
            kept_before = len(os.path.commonprefix([before, *values]))
            kept_after = len(os.path.commonprefix([after[::-1], *(value[::-1] for value in values)]))
            at(environment, path[:-1])[path[-1]] = (
                before[:kept_before] + placeholder(vector) + after[len(after) - kept_after :]
            )
            for text, value in zip(texts, values):
                if kept_before + kept_after > len(value):
                    raise SystemExit(f"the text around {vector} is shorter once {text!r} is injected")
                held = value[kept_before : len(value) - kept_after]
                if injected[vector].setdefault(text, held) != held:
                    raise SystemExit(f"{vector} holds different texts in its places once {text!r} is injected")
    return injected


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
    if len(sys.argv) != 2 or sys.argv[1] not in SUITES:
        raise SystemExit(f"usage: extract.py {'|'.join(SUITES)}")
    suite_name = sys.argv[1]
    output = Path(__file__).with_name(f"{suite_name}.json")
    installed = importlib.metadata.version("agentdojo")
    if installed != PACKAGE_VERSION:
        raise SystemExit(f"agentdojo {installed} is installed; this script reads {PACKAGE_VERSION}")

    suite = get_suite(BENCHMARK_VERSION, suite_name)
    vectors = suite.get_injection_vector_defaults()
    environment = dump(
        suite.load_and_inject_default_environment({vector: placeholder(vector) for vector in vectors})
    )

    attack = ImportantInstructionsAttack(suite, NamedPipeline())
    attack_texts = {
        task_id: attack.jailbreak.format(
            goal=suite.injection_tasks[task_id].GOAL,
            user=attack.user_name,
            model=attack.model_name,
            task="",
        )
        for task_id in numeric_order(suite.injection_tasks)
    }
    injected = place_placeholders(suite, environment, vectors, list(attack_texts.values()))

    default_environment = suite.load_and_inject_default_environment({})

    def check(injections: dict[str, str], texts: dict[str, str]) -> None:
        loaded = dump(suite.load_and_inject_default_environment(injections))
        filled = fill(environment, texts)
        derived = {path[-1] for path in differences(filled, loaded)}
        validated = dump(type(default_environment).model_validate(filled))
        if not derived <= DERIVED_FIELDS or validated != loaded:
            raise SystemExit(f"filling the placeholders does not give the environment of {injections}")

    defaults = {vector: injected[vector][text] for vector, text in vectors.items()}
    check({}, defaults)
    vector_info = yaml.safe_load(read_suite_file(suite_name, "injection_vectors.yaml", suite.data_path))

    runtime = FunctionsRuntime(suite.tools)

    injection_tasks = []
    for task_id, attack_text in attack_texts.items():
        task = suite.injection_tasks[task_id]
        injection_tasks.append(
            {
                "id": task_id,
                "goal": task.GOAL,
                "ground_truth": calls(task.ground_truth(default_environment)),
                "attack_text": attack_text,
                "injected": {vector: injected[vector][attack_text] for vector in vectors},
            }
        )

    user_tasks = []
    for task_id in numeric_order(suite.user_tasks):
        task = suite.user_tasks[task_id]
        ground_truth = task.ground_truth(default_environment)
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
            attacked = suite.load_and_inject_default_environment(injections)
            outputs = [
                runtime.run_function(attacked, call.function, call.args, raise_on_error=True)[0]
                for call in ground_truth
            ]
            if not any(shows(outputs, injection_task["injected"][vector]) for vector in injections):
                raise SystemExit(f"{task_id} reads nothing of {injection_task['id']}'s attack")
        user_tasks.append(
            {
                "id": task_id,
                "prompt": task.PROMPT,
                "ground_truth": calls(ground_truth),
                "injection_candidates": candidates,
            }
        )

    fixture = {
        "agentdojo": {
            "package_version": PACKAGE_VERSION,
            "benchmark_version": BENCHMARK_VERSION,
            "suite": suite_name,
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
    output.write_text(json.dumps(fixture, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    ground_truth_calls = sum(len(task["ground_truth"]) for task in user_tasks + injection_tasks)
    print(
        f"wrote {output}: {len(user_tasks)} user tasks, {len(injection_tasks)} injection tasks, "
        f"{len(vectors)} injection vectors, {ground_truth_calls} ground-truth calls"
    )


if __name__ == "__main__":
    main()
