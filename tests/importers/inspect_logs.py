"""inspect_ai eval logs written by inspect_ai itself (its mockllm model returning scripted
tool calls), for the inspect tests."""

from __future__ import annotations

from pathlib import Path

GOLD = {
    "add": [{"name": "add_numbers", "args": {"a": 3, "b": 2}}],
    "mul": [{"name": "multiply_numbers", "args": {"a": 4, "b": 2.5}}],
}
QUESTIONS = {"add": "What is 2 plus 3?", "mul": "What is 4 times 2.5?"}


def write_log(
    log_dir: Path, *, epochs: int = 2, fmt: str = "eval", name: str | None = None
) -> Path:
    """An eval of two samples over ``epochs`` epochs by inspect_ai: the scripted model calls
    the gold tool, except in the second epoch of 'mul', where it passes a wrong value."""
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.solver import generate, use_tools
    from inspect_ai.tool import tool

    @tool
    def add_numbers():
        async def execute(a: float, b: float) -> float:
            """Add two numbers.

            Args:
                a: The larger number.
                b: The other number.
            """
            return a + b

        return execute

    @tool
    def multiply_numbers():
        async def execute(a: float, b: float) -> float:
            """Multiply two numbers.

            Args:
                a: The larger number.
                b: The other number.
            """
            return a * b

        return execute

    epoch_of: dict[str, int] = {}

    def script(messages, tools, tool_choice, config) -> ModelOutput:
        question = next(m.text for m in messages if m.role == "user")
        sid = next(k for k, q in QUESTIONS.items() if q == question)
        if messages[-1].role == "tool":
            output = ModelOutput.from_content("mockllm/model", "done")
        else:
            epoch_of[sid] = epoch_of.get(sid, 0) + 1
            call = GOLD[sid][0]
            args = dict(call["args"])
            if sid == "mul" and epoch_of[sid] == 2:
                args["b"] = 3.5
            output = ModelOutput.for_tool_call("mockllm/model", call["name"], args)
        # usage given: mockllm would count tokens with tiktoken, which downloads its tables
        output.usage = ModelUsage(input_tokens=10, output_tokens=2, total_tokens=12)
        return output

    samples = [
        Sample(id=sid, input=QUESTIONS[sid], target="ok",
               metadata={"target": GOLD[sid], "difficulty": k})
        for k, sid in enumerate(QUESTIONS)
    ]  # fmt: skip
    task = Task(
        dataset=samples,
        solver=[use_tools(add_numbers(), multiply_numbers()), generate()],
        epochs=epochs,
        name=name,
    )
    model = get_model("mockllm/model", custom_outputs=script)
    (log,) = eval(task, model=model, log_dir=str(log_dir), log_format=fmt, display="none",
                  max_samples=1)  # fmt: skip
    assert log.status == "success", log.error
    return Path(log.location)
