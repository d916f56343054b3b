"""Whose code each stack is (``analyzers.stacks.label_stacks``): the stage a sample counts
for without spans. Frames declared here, as the sampler writes them."""

from __future__ import annotations

import pandas as pd

from probe.analyzers.stacks import callers_of, label_stacks

TORCH = "/usr/lib/python3/site-packages/torch/nn/modules/module.py"
FRAMES = [  # (function, file): the service's own files are relative, torch's installed
    ("main", "service.py"),
    ("infer", "service.py"),
    ("Module.__call__", TORCH),  # placeholder: not on the stacks below
    ("Module._wrapped_call_impl", TORCH),  # as the sampler writes them: qualified
    ("Module._call_impl", TORCH),
    ("Encoder.forward", "model.py"),
    ("Block.forward", "model.py"),
    ("Attention.forward", "model.py"),
    ("handle", "/usr/lib/python3/site-packages/server/app.py"),
    ("<module>", "service.py"),  # 9
    ("_find_and_load", "<frozen importlib._bootstrap>"),  # 10
    ("_LoaderBasics.exec_module", "<frozen importlib._bootstrap_external>"),  # 11
    ("<module>", "/usr/lib/python3/site-packages/torch/__init__.py"),  # 12
    ("<module>", "weights.py"),  # 13: a module of the service's, run as it is imported
    ("import_module", "/usr/lib/python3.11/importlib/__init__.py"),  # 14
]


def user_functions(*stacks: list[int], column: str = "user_function") -> list[str]:
    frames = pd.DataFrame(
        {"frame_id": range(len(FRAMES)), "function": [f for f, _ in FRAMES],
         "filename": [p for _, p in FRAMES], "first_line": 1}
    )  # fmt: skip
    table = pd.DataFrame(
        {"stack_id": range(len(stacks)), "frame_ids": [";".join(map(str, s)) for s in stacks],
         "leaf_line": 1, "leaf_call": "torch.matmul"}
    )  # fmt: skip
    return list(label_stacks(table, frames)[column])


def test_a_model_s_modules_count_for_the_service_function_that_runs_it():
    # main -> infer -> model(x) -> Encoder.forward -> block(x) -> Block.forward -> ...
    deep = [0, 1, 3, 4, 5, 3, 4, 6, 3, 4, 7]
    assert user_functions(deep, [0, 1, 3, 4, 5]) == ["infer (service.py)"] * 2


def test_a_model_called_from_library_code_alone_counts_for_its_top_module():
    # a server's handler calls the model: no frame of the service's above the module call
    assert user_functions([8, 3, 4, 5, 3, 4, 6]) == ["Encoder.forward (model.py)"]


def test_outside_a_model_the_deepest_frame_of_the_service_s_code_stands():
    assert user_functions([0, 1], [0, 8]) == ["infer (service.py)", "main (service.py)"]


def test_a_library_module_being_imported_is_start_up_not_the_importing_function():
    # `import torch` at the top of service.py: its <module> is not where the time goes
    assert user_functions([9, 10, 11, 12]) == ["<imports>"]
    # an import a library makes for itself (a server importing the app's dependencies)
    assert user_functions([14, 10, 11, 12]) == ["<imports>"]


def test_a_module_of_the_service_s_own_running_as_it_is_imported_is_its_own_code():
    # weights.py loads a model at module level: code the service wrote, not start-up's
    assert user_functions([9, 10, 11, 13]) == ["<module> (weights.py)"]
    # ... until it imports a library in turn: that library is what is loading
    assert user_functions([9, 10, 11, 13, 10, 11, 12]) == ["<imports>"]
    assert user_functions([9, 10, 11, 13, 10, 11, 12], [9, 10, 11, 12], [0, 1],
                          column="imported") == ["torch", "torch", ""]  # fmt: skip


def callers(stage: str, *stacks: list[int], frames: list[tuple[str, str]]) -> frozenset[str]:
    table = pd.DataFrame(
        {"frame_id": range(len(frames)), "function": [f for f, _ in frames],
         "filename": [p for _, p in frames], "first_line": 1}
    )  # fmt: skip
    stack_table = pd.DataFrame(
        {"stack_id": range(len(stacks)), "frame_ids": [";".join(map(str, s)) for s in stacks]}
    )
    return callers_of(stack_table, table, stage)


LOOP = [
    ("<module>", "job.py"),  # 0
    ("serve", "job.py"),  # 1
    ("<listcomp>", "job.py"),  # 2
    ("score", "job.py"),  # 3
    ("stack", "/usr/lib/python3/site-packages/numpy/_core/shape_base.py"),  # 4
    ("wrapper", "/usr/lib/python3/site-packages/retry/api.py"),  # 5
    ("other", "job.py"),  # 6
]


def test_a_stage_s_caller_is_the_next_frame_of_the_service_s_code_outward():
    # serve -> score; serve -> <listcomp> -> score (the comprehension is serve's);
    # serve -> a library's wrapper -> score (the library is not the caller)
    assert callers("score (job.py)", [0, 1, 3], [0, 1, 2, 3], [0, 1, 5, 3], frames=LOOP) == {
        "serve (job.py)"
    }
    # a recursive stage is its own callee; its caller is outside the recursion
    assert callers("score (job.py)", [0, 6, 3, 3, 3, 4], frames=LOOP) == {"other (job.py)"}


def test_a_stage_called_only_from_library_code_or_never_has_no_caller():
    assert callers("score (job.py)", [5, 3], frames=LOOP) == frozenset()
    assert callers("score (job.py)", [0, 1, 4], frames=LOOP) == frozenset()


def test_a_stack_whose_own_deepest_frame_is_a_comprehension_is_told_apart():
    table = pd.DataFrame(
        {"frame_id": range(len(LOOP)), "function": [f for f, _ in LOOP],
         "filename": [p for _, p in LOOP], "first_line": 1}
    )  # fmt: skip
    stacks = pd.DataFrame(
        {"stack_id": [0, 1, 2, 3], "frame_ids": ["0;1;2", "0;1;2;4", "0;1;4", "0;1;2;6"],
         "leaf_line": 1, "leaf_call": ""}
    )  # fmt: skip
    labels = label_stacks(stacks, table)
    # in serve's comprehension, itself or in a library under it: yes, and still serve's;
    # serve calling numpy, or a function the comprehension called: no
    assert list(labels["comprehension"]) == [True, True, False, False]
    assert list(labels["user_function"])[:3] == ["serve (job.py)"] * 3
