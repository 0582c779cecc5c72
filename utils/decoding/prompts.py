"""A small built-in prompt set for the decoding benchmarks, grouped by task type (`PROMPTS`, `select_prompts`).

Task types matter: prompt lookup pays off only when the answer copies text from the prompt (summarisation,
input_grounded), a draft model when it guesses the main model's words (predictable text such as code).
"long" prompts have >= 256 tokens with SmolLM2's tokenizer.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

TASKS = ("code", "chat", "summarisation", "input_grounded")
LENGTHS = ("short", "long")
LONG_PROMPT_MIN_TOKENS = 256


@dataclass(frozen=True)
class Prompt:
    """One benchmark prompt: a stable id, its task type, the user message, and its length class."""

    id: str
    task: str
    text: str
    length: str = "short"

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"Prompt '{self.id}': unknown task '{self.task}'. Use one of: {', '.join(TASKS)}.")
        if self.length not in LENGTHS:
            raise ValueError(f"Prompt '{self.id}': length must be one of {LENGTHS}, got '{self.length}'.")
        if not self.text.strip():
            raise ValueError(f"Prompt '{self.id}' has an empty text.")


_ARTICLE = (
    "The town of Millbrook opened its first public library in 1891, funded by a local mill owner "
    "who believed that workers deserved access to books. The original building had two rooms and "
    "about four hundred volumes. In 1923 a fire destroyed most of the collection, but residents "
    "donated more than two thousand books within a year, and the library reopened in a larger brick "
    "building on Main Street. During the 1960s the library added a children's wing and began lending "
    "records and films. In 2005 it became one of the first libraries in the county to offer free "
    "internet access, and today it runs reading programmes for children, language classes for adults "
    "and a small museum about the history of the mill. The library is open six days a week and is "
    "staffed by four librarians and about twenty volunteers. Its budget comes mostly from the town, "
    "with the rest from donations and an annual book sale held every October. Last year the sale raised "
    "enough money to repair the roof and to buy a van that now carries books to three villages in the hills, "
    "where older residents cannot easily travel to town. The librarians hope to add a recording studio next "
    "year, so that local people can record the memories of the mill workers before those stories are lost."
)

_MEETING_NOTES = (
    "Meeting notes, 14 March. Present: Ana (product), Ben (engineering), Chloe (design), Dev (support). "
    "Ana said the release of version 2.4 moves from 1 April to 15 April because the payment provider "
    "changes its API on 3 April. Ben will update the payment module by 8 April and Chloe will redesign "
    "the checkout page by 5 April. Dev reported that the most common support request last month was "
    "password reset emails arriving late; Ben agreed to switch the email provider before the release. "
    "The team decided to drop the dark-mode feature from 2.4 and plan it for 2.5. Next meeting: 21 March."
)

_PYTHON_FUNCTION = '''def average_price(items):
    total = 0
    count = 0
    for item in items:
        if item["price"] is not None:
            total = total + item["price"]
            count = count + 1
    if count == 0:
        return 0
    return total / count
'''

_LONG_PYTHON_MODULE = '''import csv


def read_orders(path):
    orders = []
    with open(path) as handle:
        reader = csv.DictReader(handle)
        for row in reader:
            orders.append({"id": row["id"], "customer": row["customer"], "amount": float(row["amount"])})
    return orders


def total_by_customer(orders):
    totals = {}
    for order in orders:
        customer = order["customer"]
        if customer not in totals:
            totals[customer] = 0.0
        totals[customer] = totals[customer] + order["amount"]
    return totals


def largest_customers(orders, count):
    totals = total_by_customer(orders)
    ranked = sorted(totals.items(), key=lambda pair: pair[1], reverse=True)
    return ranked[:count]


def print_report(path, count):
    orders = read_orders(path)
    for customer, amount in largest_customers(orders, count):
        print(customer, round(amount, 2))
'''

PROMPTS: tuple[Prompt, ...] = (
    # code
    Prompt("code-fibonacci", "code", "Write a Python function that returns the first n Fibonacci numbers as a list."),
    Prompt("code-reverse", "code", "Write a Python function that reverses the words in a sentence."),
    Prompt(
        "code-extend-module",
        "code",
        "Here is a Python module. Write one more function for it, `average_order(orders)`, that returns the "
        f"average order amount, in the same style. Return only the new function.\n\n{_LONG_PYTHON_MODULE}",
        "long",
    ),
    Prompt("code-is-prime", "code", "Write a Python function that checks whether a number is prime."),
    Prompt("code-word-count", "code",
           "Write a Python function that counts how often each word occurs in a text and returns a dict."),
    # chat
    Prompt("chat-sky", "chat", "Why is the sky blue? Answer in a few sentences."),
    Prompt("chat-sleep", "chat", "Give me three tips for sleeping better."),
    Prompt("chat-tea", "chat", "What is the difference between green tea and black tea? Answer in a few sentences."),
    Prompt("chat-exercise", "chat", "Explain in a few sentences why regular exercise is good for the heart."),
    # summarisation
    Prompt("summ-library", "summarisation", f"Summarise the following text in three sentences.\n\n{_ARTICLE}", "long"),
    Prompt("summ-meeting", "summarisation", f"Summarise these meeting notes as a short list of decisions.\n\n{_MEETING_NOTES}"),
    # input-grounded: extract or rewrite what is in the prompt
    Prompt(
        "ground-dates",
        "input_grounded",
        f"List every date mentioned in the notes below, each with what happens on it.\n\n{_MEETING_NOTES}",
    ),
    Prompt(
        "ground-rename",
        "input_grounded",
        "Rewrite this Python function with the variable `total` renamed to `price_sum`. "
        f"Return only the code.\n\n{_PYTHON_FUNCTION}",
    ),
    Prompt(
        "ground-docstrings",
        "input_grounded",
        "Add a one-line docstring to every function in this Python module and return the whole module.\n\n"
        f"{_LONG_PYTHON_MODULE}",
        "long",
    ),
    Prompt(
        "ground-library-facts",
        "input_grounded",
        f"{_ARTICLE}\n\nCopy, word for word, the sentence of the text above that says what the library offers today.",
        "long",
    ),
    Prompt(
        "ground-people",
        "input_grounded",
        f"List every person named in the notes below, each with what they will do.\n\n{_MEETING_NOTES}",
    ),
    Prompt(
        "ground-type-hints",
        "input_grounded",
        f"Add type hints to this Python function and return only the code.\n\n{_PYTHON_FUNCTION}",
    ),
)


def get_prompt(prompt_id: str) -> Prompt:
    """One prompt by id; an unknown id lists the known ones."""
    for prompt in PROMPTS:
        if prompt.id == prompt_id:
            return prompt
    raise KeyError(f"Unknown prompt id '{prompt_id}'. Known ids: {', '.join(p.id for p in PROMPTS)}.")


def select_prompts(
    tasks: Iterable[str] | None = None,
    length: str | None = None,
    per_task: int | None = None,
    prompts: Sequence[Prompt] = PROMPTS,
) -> list[Prompt]:
    """Filter prompts by task types and length class, keeping at most `per_task` of each task."""
    wanted_tasks = list(tasks) if tasks is not None else list(TASKS)
    for task in wanted_tasks:
        if task not in TASKS:
            raise ValueError(f"Unknown task '{task}'. Use one of: {', '.join(TASKS)}.")
    if length is not None and length not in LENGTHS:
        raise ValueError(f"length must be one of {LENGTHS} or None, got '{length}'.")
    if per_task is not None and per_task < 1:
        raise ValueError(f"per_task must be >= 1 or None, got {per_task}.")
    chosen: list[Prompt] = []
    kept: dict[str, int] = {}
    for prompt in prompts:
        if prompt.task not in wanted_tasks or (length is not None and prompt.length != length):
            continue
        if per_task is not None and kept.get(prompt.task, 0) >= per_task:
            continue
        kept[prompt.task] = kept.get(prompt.task, 0) + 1
        chosen.append(prompt)
    if not chosen:
        raise ValueError(f"No built-in prompt matches tasks={wanted_tasks}, length={length}.")
    return chosen


def as_prompt(prompt: Prompt | str, index: int = 0) -> Prompt:
    """Accept a `Prompt` or a plain string (which becomes a 'chat' prompt with id 'custom-<index>')."""
    if isinstance(prompt, Prompt):
        return prompt
    if isinstance(prompt, str):
        return Prompt(f"custom-{index}", "chat", prompt)
    raise TypeError(f"Expected a Prompt or a str, got {type(prompt).__name__}.")
