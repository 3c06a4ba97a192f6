"""The user: the one party outside the model who may approve a side effect, and who answers its questions.

`SimulatedUser` stands in for a person in tests, the benchmark and the notebooks: it confirms the agent's
reading of the instruction only when it matches the task's own fields, approves exactly the order its task
asked for, once, and refuses everything else. `ConsoleUser` is a real person at the
keyboard. Either way the harness asks, in its own words, about the effect the app describes; what the
model wrote never reaches `approve`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from helpers.world.effects import Effect
from helpers.runtime.concealer import concealing
from helpers.world.store import CampusStore
from helpers.world.tasks import Task, instruction, same_goal, task_goal, wanted


@concealing
@dataclass
class SimulatedUser:
    """A scripted stand-in for a person, labelled as such: it knows what its task asked for and nothing else."""

    task: Task
    app: CampusStore
    questions: list[str] = field(default_factory=list)  # what the harness and the agent asked, in order
    _approved: set[tuple] = field(default_factory=set)

    def approve(self, effect: Effect) -> bool:
        self.questions.append(f"approve? {effect.describe()}")
        if effect.key in self._approved or not wanted(self.task, self.app, effect):
            return False
        self._approved.add(effect.key)
        return True

    def confirm(self, goal: dict, description: str) -> bool:
        """Whether the agent's reading of the instruction is what the task asked for."""
        self.questions.append(f"confirm goal? {description}")
        return same_goal(goal, task_goal(self.task, self.app))

    def reply(self, question: str) -> str:
        self.questions.append(f"asked: {question}")
        return f"Please do just what I asked: {instruction(self.task, self.app)}"


class ConsoleUser:
    """A real person, asked with `input()`: in a notebook the question appears under the cell."""

    def approve(self, effect: Effect) -> bool:
        return input(f"The agent wants to {effect.describe()}. This cannot be undone. Allow it? [y/N] ") \
            .strip().lower() in ("y", "yes")

    def confirm(self, goal: dict, description: str) -> bool:
        return input(f"The agent read your instruction as: {description}. Is that right? [y/N] ") \
            .strip().lower() in ("y", "yes")

    def reply(self, question: str) -> str:
        return input(f"The agent asks: {question}\nYour answer: ").strip()
